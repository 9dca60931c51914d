"""--target T1[,T2...]: one library, one image per ISA.

The contract with the runtime: __ucp_ifunc_image_NAME is T1's image, and
__ucp_ifunc_image_NAME.em<e_machine> is every Ti's. An ISA's image does not
depend on the order of the list, so a target can check what it receives
against its own library."""

import concurrent.futures
import os
import shutil
import unittest

from elftools.elf.elffile import ELFFile

from tests import helpers
from tests.test_aarch64 import (HAVE_CROSS, HAVE_QEMU, NO_CROSS, NO_QEMU,
                                build_run_image, cross_target_program,
                                run_on_qemu)
from ucx_ifunc import elf_query, signing
from ucx_ifunc import image_format as fmt

X86, A64 = "x86_64-linux-gnu", "aarch64-linux-gnu"
KITCHEN_SOURCES = [os.path.join(helpers.DATA_DIR, f)
                   for f in ("kitchen.c", "kitchen_util.c")]
PLAIN = fmt.SYMBOL_PREFIX + "kitchen"


def build_kitchen(extra):
    work = helpers.scratch_dir("multi")
    output = os.path.join(work, "kitchen.so")
    proc = helpers.run_tool(extra + ["-O2", "-o", output] + KITCHEN_SOURCES +
                            ["-lz", "-lm"])
    return output, proc


def image_symbols(library):
    """name -> (type, bind, visibility) of the library's image symbols."""
    with open(library, "rb") as stream:
        elf = ELFFile(stream)
        return {sym.name: (sym["st_info"]["type"], sym["st_info"]["bind"],
                           sym["st_other"]["visibility"])
                for sym in elf.get_section_by_name(".dynsym").iter_symbols()
                if sym.name.startswith(fmt.SYMBOL_PREFIX)}, elf["e_machine"]


@unittest.skipUnless(HAVE_CROSS, NO_CROSS)
class MultiIsaTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = helpers.scratch_dir("multikeys")
        cls.key, cls.public = signing.generate(os.path.join(cls.work, "site"))
        variants = {
            "x86_first": ["--target", X86 + "," + A64],
            "a64_first": ["--target", A64 + "," + X86],
            "plain": [],
            "signed": ["--sign", cls.key, "--target", A64 + "," + X86],
        }
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            jobs = {k: pool.submit(build_kitchen, v) for k, v in variants.items()}
            cls.builds = {k: job.result() for k, job in jobs.items()}

    def library(self, key):
        output, proc = self.builds[key]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        return output

    def test_symbols_follow_the_contract(self):
        for key, machine in (("x86_first", "EM_X86_64"),
                             ("a64_first", "EM_AARCH64")):
            with self.subTest(build=key):
                library = self.library(key)
                symbols, e_machine = image_symbols(library)
                self.assertEqual(e_machine, machine)  # NAME.so is for T1
                self.assertEqual(sorted(symbols), [
                    PLAIN, PLAIN + ".em183", PLAIN + ".em62"])
                for info in symbols.values():
                    self.assertEqual(info, ("STT_OBJECT", "STB_GLOBAL",
                                            "STV_DEFAULT"))
                first = 62 if key == "x86_first" else 183
                self.assertEqual(elf_query.read_embedded_image(library)[1],
                                 elf_query.read_embedded_image(library, first)[1])
                for e_machine in (62, 183):
                    blob = elf_query.read_embedded_image(library, e_machine)[1]
                    self.assertEqual(fmt.decode(blob).machine, e_machine)

    def test_images_do_not_depend_on_the_order(self):
        for e_machine in (62, 183):
            with self.subTest(machine=e_machine):
                self.assertEqual(
                    elf_query.read_embedded_image(self.library("x86_first"),
                                                  e_machine)[1],
                    elf_query.read_embedded_image(self.library("a64_first"),
                                                  e_machine)[1])

    def test_x86_64_image_is_the_one_without_target(self):
        plain = self.library("plain")
        self.assertEqual(sorted(image_symbols(plain)[0]), [PLAIN])
        self.assertEqual(elf_query.read_embedded_image(plain)[1],
                         elf_query.read_embedded_image(
                             self.library("a64_first"), 62)[1])

    def test_needed_libraries_come_from_each_isa(self):
        for e_machine in (62, 183):
            blob = elf_query.read_embedded_image(self.library("a64_first"),
                                                 e_machine)[1]
            needed = fmt.decode(blob).needed
            self.assertEqual(needed[:2], ["libz.so.1", "libm.so.6"])

    def test_each_image_is_signed(self):
        library = self.library("signed")
        public = signing.load_public_key(self.public)
        blobs = {e: elf_query.read_embedded_image(library, e)[1]
                 for e in (62, 183)}
        for e_machine, blob in blobs.items():
            with self.subTest(machine=e_machine):
                self.assertTrue(signing.verify("kitchen", blob, public))
        self.assertNotEqual(fmt.decode(blobs[62]).signature.signature,
                            fmt.decode(blobs[183]).signature.signature)

    def test_dump_lists_every_image(self):
        proc = helpers.run_tool(["--dump", self.library("x86_first")])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = [l.split(": ", 1)[1] for l in proc.stdout.splitlines()
                 if ": image " in l]
        self.assertEqual(lines, [
            "image %s: the same bytes as %s.em62" % (PLAIN, PLAIN),
            lines[1], lines[2]])
        self.assertTrue(lines[1].startswith("image %s.em62, " % PLAIN))
        self.assertTrue(lines[2].startswith("image %s.em183, " % PLAIN))
        self.assertIn("machine 62 (x86-64)", proc.stdout)
        self.assertIn("machine 183 (aarch64)", proc.stdout)

    def test_x86_64_image_of_a_multi_isa_library_runs(self):
        preload = helpers.compile_shared(
            os.path.join(helpers.DATA_DIR, "target_program.c"),
            os.path.join(helpers.scratch_dir("target"), "libtarget.so"))
        library = self.library("x86_first")
        native = helpers.run_image(library, "hi", 2, [preload], native=True)
        shipped = helpers.run_image(library, "hi", 2, [preload])
        self.assertEqual(shipped.returncode, 0, shipped.stderr)
        self.assertEqual(shipped.stdout, native.stdout)

    @unittest.skipUnless(HAVE_QEMU, NO_QEMU)
    def test_aarch64_image_of_a_multi_isa_library_runs(self):
        work = helpers.scratch_dir("multirun")
        runner = build_run_image(work)
        preload = cross_target_program(work)
        library = self.library("a64_first")
        native = run_on_qemu(runner, library, "hi", 2, [preload], native=True)
        shipped = run_on_qemu(runner, library, "hi", 2, [preload])
        self.assertEqual(shipped.returncode, 0, shipped.stderr)
        self.assertEqual(shipped.stdout, native.stdout)
        self.assertEqual(len(shipped.stdout.splitlines()), 4)


class TargetErrorTest(unittest.TestCase):
    def setUp(self):
        self.work = helpers.scratch_dir("targeterr")
        self.source = helpers.write_source(self.work, "t.c", """\
            #include <stddef.h>
            void t_main(void *p, size_t n, void *t) { }
            """)
        self.output = os.path.join(self.work, "t.so")

    def error(self, args, env=None):
        proc = helpers.run_tool(args + ["-o", self.output, self.source],
                                env=env)
        self.assertEqual(proc.returncode, 1)
        self.assertNotIn("Traceback", proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        return lines[0]

    def test_unknown_and_duplicate_targets(self):
        self.assertEqual(self.error(["--target", "riscv64-linux-gnu"]),
                         "ucx-ifunc-cc: error: --target: unknown target "
                         "'riscv64-linux-gnu'; known: x86_64-linux-gnu, "
                         "aarch64-linux-gnu, powerpc64le-linux-gnu")
        self.assertEqual(self.error(["--target", X86 + "," + X86]),
                         "ucx-ifunc-cc: error: --target: 'x86_64-linux-gnu' "
                         "is given twice")

    def test_missing_cross_compiler_says_what_to_install(self):
        # a PATH with the native compiler only
        bin_dir = os.path.join(self.work, "bin")
        os.mkdir(bin_dir)
        os.symlink(shutil.which("cc"), os.path.join(bin_dir, "cc"))
        env = dict(os.environ, PATH=bin_dir)
        self.assertEqual(self.error(["--target", X86 + "," + A64], env),
                         "ucx-ifunc-cc: error: --target aarch64-linux-gnu: "
                         "the cross compiler aarch64-linux-gnu-gcc is not "
                         "installed (Debian: apt install "
                         "gcc-aarch64-linux-gnu)")

    def test_32_bit_flags_are_refused(self):
        self.assertTrue(self.error(["--target", A64, "-m32"]).startswith(
            "ucx-ifunc-cc: error: -m32: only x86-64 (and, with --target, "
            "aarch64 and ppc64el) code is supported"))


if __name__ == "__main__":
    unittest.main()
