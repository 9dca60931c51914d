"""The image self-check must catch what a buggy rewriter or linker would
leave behind."""

import os
import struct
import subprocess
import sys
import unittest

from ucx_ifunc import image_format as fmt
from ucx_ifunc.errors import ToolchainBug
from ucx_ifunc.verify import check_code, verify


def lea_rip(at, target):
    """lea target(%rip), %rax placed at address at."""
    return b"\x48\x8d\x05" + struct.pack("<i", target - (at + 7))


def call(at, target):
    return b"\xe8" + struct.pack("<i", target - (at + 5))


def image(code, relocs=(), got_ptr=0x1000):
    return fmt.Image(
        segments=[fmt.Segment(0, len(code), code),
                  fmt.Segment(0x1000, 0x10, bytes(0x10)),
                  fmt.Segment(0x2000, 0x8, b"")],
        entry_vaddr=0, got_ptr_vaddr=got_ptr, map_size=0x3000,
        imports=[fmt.Import("puts")], relocs=list(relocs))


GOOD_CODE = lea_rip(0, 0x1008) + call(7, 12) + b"\xc3"  # call the ret


class VerifyTest(unittest.TestCase):
    def test_good_image_passes(self):
        self.assertTrue(verify(image(GOOD_CODE, [
            fmt.Reloc(0x1008, fmt.RELOC_IMPORT, 0, 0),
            fmt.Reloc(0x2000, fmt.RELOC_RELATIVE, 0x10)])))

    def test_rip_relative_reference_outside_the_image(self):
        with self.assertRaisesRegex(ToolchainBug, "outside the image"):
            check_code(image(lea_rip(0, 0x3000) + b"\xc3"))
        with self.assertRaisesRegex(ToolchainBug, "outside the image"):
            check_code(image(lea_rip(0, -8) + b"\xc3"))

    def test_branch_outside_text(self):
        with self.assertRaisesRegex(ToolchainBug, "branches outside TEXT"):
            check_code(image(call(0, 0x1000) + b"\xc3"))

    def test_undecodable_bytes_are_skipped(self):
        code = b"\x06" + lea_rip(1, 0x5000)  # 0x06 is invalid in 64-bit mode
        with self.assertRaisesRegex(ToolchainBug, "outside the image"):
            check_code(image(code))

    def test_structure(self):
        with self.assertRaisesRegex(ToolchainBug, "got_ptr"):
            verify(image(GOOD_CODE, got_ptr=0x8))
        with self.assertRaisesRegex(ToolchainBug, "RELRO or DATA"):
            verify(image(GOOD_CODE, [fmt.Reloc(0x0, fmt.RELOC_RELATIVE, 0)]))
        with self.assertRaisesRegex(ToolchainBug, "RELRO or DATA"):
            verify(image(GOOD_CODE, [fmt.Reloc(0x1004, fmt.RELOC_RELATIVE, 0)]))
        with self.assertRaisesRegex(ToolchainBug, "names import 3"):
            verify(image(GOOD_CODE, [fmt.Reloc(0x1008, fmt.RELOC_IMPORT, 0, 3)]))
        bad_map = image(GOOD_CODE)
        bad_map.map_size = 0x4000
        with self.assertRaisesRegex(ToolchainBug, "map_size"):
            verify(bad_map)


class CapstoneImportTest(unittest.TestCase):
    @unittest.skipIf(sys.version_info >= (3, 12),
                     "no distutils in the standard library")
    def test_capstone_comes_without_setuptools(self):
        """Importing setuptools for capstone's distutils quadruples the
        import: the self-check must not, whatever the environment."""
        env = dict(os.environ)
        env.pop("SETUPTOOLS_USE_DISTUTILS", None)
        tools = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        proc = subprocess.run(
            [sys.executable, "-c",
             "import sys; sys.path.insert(0, %r)\n"
             "from ucx_ifunc import verify\n"
             "found = verify._import_capstone() is not None\n"
             "print(found, 'setuptools' in sys.modules)" % tools],
            env=env, stdout=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(proc.returncode, 0)
        found, setuptools = proc.stdout.split()
        if found == "False":
            self.skipTest("capstone is not installed")
        self.assertEqual(setuptools, "False")


if __name__ == "__main__":
    unittest.main()
