"""--target powerpc64le-linux-gnu: NAME.so for ppc64el, an ISA whose
targets run bitcode only.

The payload functions are compiled by powerpc64le-linux-gnu-gcc; NAME.so
holds no native image for ppc64el (the runtime refuses ppc64el machine
code), the native images of the other ISAs listed and the bitcode images
asked for, each the same bytes as an x86-64 build's. Skipped, with the
reason, where the cross compiler, LLVM or qemu-user is missing."""

import concurrent.futures
import os
import shutil
import subprocess
import unittest

from elftools.elf.elffile import ELFFile

from tests import helpers, test_bitcode
from tests.test_bitcode import (HAVE_LLVM, KITCHEN_SOURCES, NO_LLVM,
                                _refused, bitcode_images, image_symbols,
                                run_bitcode)
from ucx_ifunc import elf_query
from ucx_ifunc import image_format as fmt

PPC, X86, A64 = ("powerpc64le-linux-gnu", "x86_64-linux-gnu",
                 "aarch64-linux-gnu")
CROSS_CC = PPC + "-gcc"
QEMU = "qemu-ppc64le"
HAVE_CROSS = shutil.which(CROSS_CC) is not None
NO_CROSS = "needs %s (Debian: gcc-powerpc64le-linux-gnu)" % CROSS_CC
# Debian 12's zlib1g-dev:ppc64el may not install beside the amd64 one; the
# library itself (zlib1g:ppc64el, which the ppc64el UCX needs) is enough
ZLIB = "-l:libz.so.1"


def build(flags, output, sources=KITCHEN_SOURCES, link=(ZLIB, "-lm")):
    return helpers.run_tool(list(flags) + ["-O2", "-o", output] +
                            list(sources) + list(link))


def image_bytes(library):
    """{symbol: bytes} of every per-ISA image of the library."""
    found = {s: b for s, _, b in elf_query.read_embedded_bitcode(library)}
    with open(library, "rb") as stream:
        elf = ELFFile(stream)
        for sym in elf.get_section_by_name(".dynsym").iter_symbols():
            if sym.name.startswith(fmt.SYMBOL_PREFIX) and ".em" in sym.name:
                address = sym["st_value"]
                for seg in elf.iter_segments():
                    if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= \
                            address < seg["p_vaddr"] + seg["p_filesz"]:
                        stream.seek(seg["p_offset"] + address -
                                    seg["p_vaddr"])
                        found[sym.name] = stream.read(sym["st_size"])
    return found


@unittest.skipUnless(HAVE_CROSS and HAVE_LLVM, NO_CROSS + "; " + NO_LLVM)
class Ppc64BuildTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = helpers.scratch_dir("ppc64")
        variants = {"ppc": ["--target", PPC + "," + X86, "--bitcode"],
                    "x86": ["--target", X86, "--bitcode"],
                    "only": ["--target", PPC, "--bitcode-only"]}

        def one(variant):
            output = os.path.join(cls.work, variant, "kitchen.so")
            os.makedirs(os.path.dirname(output))
            link = ("-lz", "-lm") if variant == "x86" else (ZLIB, "-lm")
            return output, build(variants[variant], output, link=link)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            cls.builds = dict(zip(variants, pool.map(one, variants)))

    def library(self, variant):
        output, proc = self.builds[variant]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return output

    def test_a_ppc64el_library_without_a_ppc64el_image(self):
        library = self.library("ppc")
        with open(library, "rb") as stream:
            self.assertEqual(ELFFile(stream)["e_machine"], "EM_PPC64")
        # no plain __ucp_ifunc_image_kitchen: it would be NAME.so's own
        # ISA's native image
        self.assertEqual(image_symbols(library), [
            "__ucp_ifunc_bitcode_kitchen.em183",
            "__ucp_ifunc_bitcode_kitchen.em21",
            "__ucp_ifunc_bitcode_kitchen.em62",
            "__ucp_ifunc_image_kitchen.em62"])
        self.assertEqual(image_symbols(self.library("only")), [
            "__ucp_ifunc_bitcode_kitchen.em183",
            "__ucp_ifunc_bitcode_kitchen.em21",
            "__ucp_ifunc_bitcode_kitchen.em62"])

    def test_the_images_are_an_x86_64_builds(self):
        """Byte for byte: a target of any ISA compares what it receives
        with its own library's images."""
        ppc = image_bytes(self.library("ppc"))
        x86 = image_bytes(self.library("x86"))
        self.assertEqual(sorted(ppc), sorted(x86))
        for symbol in ppc:
            self.assertEqual(ppc[symbol], x86[symbol], symbol)
        only = image_bytes(self.library("only"))
        for symbol in only:
            self.assertEqual(only[symbol], x86[symbol], symbol)
        image = fmt.decode(ppc["__ucp_ifunc_bitcode_kitchen.em21"])
        self.assertEqual(image.needed, ["libz.so.1", "libm.so.6",
                                        "libc.so.6"])

    @unittest.skipUnless(shutil.which(QEMU), "needs %s (Debian: qemu-user)"
                         % QEMU)
    def test_the_payload_functions_and_the_bitcode_run_on_ppc64el(self):
        """The ordinary library's payload functions (ppc64el code) build
        the payload, and the ppc64le bitcode, compiled for ppc64el, runs on
        it, under QEMU."""
        library = self.library("only")
        work = helpers.scratch_dir("ppcrun")
        preload = os.path.join(work, "libtarget.so")
        subprocess.run([CROSS_CC, "-shared", "-fPIC",
                        os.path.join(helpers.DATA_DIR, "target_program.c"),
                        "-o", preload], check=True)
        image = fmt.decode(bitcode_images(library)[fmt.EM_PPC64][1])
        out = run_bitcode(self, library, "kitchen", image, "hello", 2,
                          [preload], triple=PPC, cc=CROSS_CC,
                          runner=[QEMU], zlib=ZLIB)
        lines = out.splitlines()
        self.assertEqual(len(lines), 4, out)
        self.assertTrue(lines[0].startswith("gamma|five|34|"), lines[0])
        self.assertEqual(lines[1], "via a table of function pointers")
        self.assertEqual([line.split("|")[6] for line in lines[::2]],
                         ["1", "2"])


@unittest.skipUnless(HAVE_CROSS and HAVE_LLVM, NO_CROSS + "; " + NO_LLVM)
class Ppc64RefusalTest(unittest.TestCase):
    def test_no_native_image_for_ppc64el(self):
        output = os.path.join(helpers.scratch_dir("ppccli"), "kitchen.so")
        for flags, line in (
                (["--target", PPC + "," + X86],
                 "--target powerpc64le-linux-gnu: targets run no ppc64el "
                 "machine code, only LLVM bitcode, which they compile for "
                 "themselves; add --bitcode (or --bitcode-only)"),
                (["--target", X86 + "," + PPC],
                 "--target powerpc64le-linux-gnu: targets run no ppc64el "
                 "machine code, only LLVM bitcode, which they compile for "
                 "themselves; add --bitcode (or --bitcode-only)"),
                (["--target", PPC, "--bitcode=" + X86 + "," + A64],
                 "--target powerpc64le-linux-gnu: targets run no ppc64el "
                 "machine code, only LLVM bitcode; add powerpc64le-linux-gnu "
                 "to --bitcode=x86_64-linux-gnu,aarch64-linux-gnu"),
                (["--target", PPC, "--sandbox", "--bitcode"],
                 "--sandbox: only x86-64 code can be built for the sandbox "
                 "so far; leave other ISAs out of --target")):
            proc = build(flags, output)
            lines = helpers.assert_refused(self, output, proc, [])
            self.assertEqual(lines, ["ucx-ifunc-cc: error: " + line])

    def test_the_rules_with_the_native_message(self):
        """What the whole library may not hold, checked on NAME.so's
        ppc64el assembly and its bitcode, with the x86-64 build's lines."""
        same = test_bitcode.BitcodeRefusalTest.SAME
        cases = [(case, flags) for case in same
                 for flags in ([], ["--target", PPC, "--bitcode-only"])]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda c: _refused(c[1], same[c[0]]),
                                    cases))
        lines = {}
        for (case, flags), (output, proc) in zip(cases, results):
            lines[case, bool(flags)] = [
                line.replace(os.path.dirname(output), "D")
                for line in helpers.assert_refused(self, output, proc, [])]
        for case in same:
            self.assertEqual(lines[case, True], lines[case, False], case)


if __name__ == "__main__":
    unittest.main()
