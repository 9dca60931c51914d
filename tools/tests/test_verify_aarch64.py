"""The aarch64 self-check (capstone CS_ARCH_ARM64): direct branches must
stay in TEXT, adr/adrp and literal loads must point into the image."""

import struct
import unittest

from ucx_ifunc import image_format as fmt
from ucx_ifunc.errors import ToolchainBug
from ucx_ifunc.verify import check_code

try:
    import capstone  # noqa: F401
    HAVE_CAPSTONE = True
except ImportError:
    HAVE_CAPSTONE = False

RET = 0xd65f03c0


def b(at, target, link=False):
    return (0x94000000 if link else 0x14000000) | (((target - at) >> 2)
                                                   & 0x3ffffff)


def cbz(at, target):
    return 0xb4000000 | ((((target - at) >> 2) & 0x7ffff) << 5)


def ldr_literal(at, target):
    return 0x58000000 | ((((target - at) >> 2) & 0x7ffff) << 5)


def adrp(at, target):
    pages = ((target & ~0xfff) - (at & ~0xfff)) >> 12
    return 0x90000000 | ((pages & 3) << 29) | (((pages >> 2) & 0x7ffff) << 5)


def image(*words):
    code = b"".join(struct.pack("<I", w) for w in words)
    return fmt.Image(
        segments=[fmt.Segment(0, len(code), code),
                  fmt.Segment(0x1000, 0x10, bytes(0x10)),
                  fmt.Segment(0x2000, 0x8, b"")],
        entry_vaddr=0, got_ptr_vaddr=0x1000, map_size=0x3000,
        machine=fmt.EM_AARCH64)


@unittest.skipUnless(HAVE_CAPSTONE, "needs capstone (python3-capstone)")
class VerifyAarch64Test(unittest.TestCase):
    def test_good_code_passes(self):
        self.assertTrue(check_code(image(
            adrp(0, 0x1008), ldr_literal(4, 0x1000), b(8, 16, link=True),
            cbz(12, 16), RET)))

    def test_branch_outside_text(self):
        for word in (b(0, 0x100), b(0, -4, link=True), cbz(0, 0x1000)):
            with self.subTest(word=hex(word)):
                with self.assertRaisesRegex(ToolchainBug,
                                            "branches outside TEXT"):
                    check_code(image(word, RET))

    def test_address_outside_the_image(self):
        for word in (adrp(0, 0x5000), ldr_literal(0, 0x3000)):
            with self.subTest(word=hex(word)):
                with self.assertRaisesRegex(ToolchainBug, "outside the image"):
                    check_code(image(word, RET))

    def test_data_words_are_skipped(self):
        with self.assertRaisesRegex(ToolchainBug, "outside the image"):
            check_code(image(0, adrp(4, 0x7000), RET))


if __name__ == "__main__":
    unittest.main()
