"""Builds real ifunc libraries and checks their images, including running
them the way the target does (tests/run_image.py)."""

import concurrent.futures
import os
import subprocess
import sys
import unittest

from elftools.elf.elffile import ELFFile

from tests import helpers
from ucx_ifunc import image_format as fmt

KITCHEN_SOURCES = [os.path.join(helpers.DATA_DIR, f)
                   for f in ("kitchen.c", "kitchen_util.c")]
VARIANTS = [(opt, sp) for opt in ("-O0", "-O2", "-O3")
            for sp in ("", "-fstack-protector-strong")]


def dt_needed(library):
    with open(library, "rb") as stream:
        return [tag.needed for tag in ELFFile(stream).get_section_by_name(
            ".dynamic").iter_tags() if tag.entry.d_tag == "DT_NEEDED"]


def build_kitchen(directory, flags):
    output = os.path.join(directory, "kitchen.so")
    proc = helpers.run_tool(flags + ["-Wall", "-o", output] + KITCHEN_SOURCES +
                            ["-lz", "-lm"])
    return output, proc


class KitchenTest(unittest.TestCase):
    """kitchen.c uses every construct that must work in shipped code."""

    @classmethod
    def setUpClass(cls):
        cls.preload = helpers.compile_shared(
            os.path.join(helpers.DATA_DIR, "target_program.c"),
            os.path.join(helpers.scratch_dir("target"), "libtarget.so"))
        cls.builds = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            jobs = {variant: pool.submit(
                build_kitchen, helpers.scratch_dir("kitchen"),
                [f for f in variant if f]) for variant in VARIANTS}
            for variant, job in jobs.items():
                cls.builds[variant] = job.result()

    def library(self, variant):
        output, proc = self.builds[variant]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        return output

    def test_image_runs_like_the_native_code(self):
        for variant in VARIANTS:
            with self.subTest(flags=variant):
                library = self.library(variant)
                native = helpers.run_image(library, "hello", 3, [self.preload],
                                           native=True)
                shipped = helpers.run_image(library, "hello", 3, [self.preload])
                helpers.check_kitchen_runs(self, native, shipped,
                                           "|4242|18|3|42|-1")

    def test_image_structure(self):
        for variant in VARIANTS:
            with self.subTest(flags=variant):
                name, image = helpers.image_of(self.library(variant))
                self.assertEqual(name, "kitchen")
                self.check_structure(image)

    def check_structure(self, image):
        text, relro, data = image.segments
        self.assertEqual(text.vaddr, 0)
        self.assertEqual(relro.vaddr % 4096, 0)
        self.assertGreaterEqual(relro.vaddr, text.mem_size)
        self.assertGreaterEqual(data.vaddr, relro.vaddr + relro.mem_size)
        self.assertEqual(image.map_size,
                         fmt.align_up(data.vaddr + data.mem_size, 4096))
        self.assertLess(image.entry_vaddr, text.mem_size)
        self.assertEqual(image.segment_of(image.got_ptr_vaddr, 8), fmt.SEG_RELRO)
        # .data (total, util_counter) and .bss (calls) of both files
        self.assertGreaterEqual(data.mem_size, 16)
        self.assertGreater(data.mem_size, len(data.data))

        imports = {imp.name: imp.weak for imp in image.imports}
        for needed in ("qsort", "snprintf", "sqrt", "exp", "__errno_location",
                       "stdout", "crc32", "some_target_var", "fputs",
                       "printf", "memcpy", "strtol", "atoi", "puts"):
            self.assertIn(needed, imports)
            self.assertFalse(imports[needed], needed)
        self.assertTrue(imports["optional_hook"])
        # only the payload functions use these: collected away
        self.assertNotIn("getenv", imports)
        self.assertNotIn("kitchen_payload_init", imports)
        # defined in the ifunc's own sources, so never imported
        for own in ("util_tail", "util_say", "util_counter", "util_scale"):
            self.assertNotIn(own, imports)
        self.assertEqual(len(imports), len(image.imports))

        kinds = [(rel.kind, image.imports[rel.import_index].name
                  if rel.kind == fmt.RELOC_IMPORT else None)
                 for rel in image.relocs]
        self.assertIn((fmt.RELOC_IMPORT, "atoi"), kinds)
        # names[] (3 strings) and ext_fns[1] (util_say, in TEXT)
        relative = [rel for rel in image.relocs
                    if rel.kind == fmt.RELOC_RELATIVE]
        self.assertGreaterEqual(len(relative), 4)
        self.assertTrue(any(rel.addend < text.mem_size for rel in relative))
        for rel in image.relocs:
            self.assertIn(image.segment_of(rel.vaddr, 8),
                          (fmt.SEG_RELRO, fmt.SEG_DATA))
            self.assertEqual(rel.vaddr % 8, 0)
            seg = image.segments[image.segment_of(rel.vaddr, 8)]
            site = seg.data[rel.vaddr - seg.vaddr:][:8]
            self.assertEqual(site, bytes(len(site)))  # the target fills it

    def test_library_depends_on_its_libraries(self):
        library = self.library(("-O2", ""))
        with open(library, "rb") as stream:
            elf = ELFFile(stream)
            needed = [tag.needed for tag in elf.get_section_by_name(
                ".dynamic").iter_tags() if tag.entry.d_tag == "DT_NEEDED"]
            stack = [seg for seg in elf.iter_segments()
                     if seg["p_type"] == "PT_GNU_STACK"]
        self.assertIn("libz.so.1", needed)
        self.assertIn("libm.so.6", needed)
        self.assertEqual(stack[0]["p_flags"] & 1, 0)  # not executable
        # the image records what the library needs, in its order
        self.assertEqual(helpers.image_of(library)[1].needed, needed)

    def test_source_loads_the_library_without_target_symbols(self):
        library = self.library(("-O2", ""))
        with open(library, "rb") as stream:
            binds = {sym.name: sym["st_info"]["bind"] for sym in ELFFile(
                stream).get_section_by_name(".dynsym").iter_symbols()
                if sym["st_shndx"] == "SHN_UNDEF"}
        # only kitchen_main uses it; the payload functions need getenv
        self.assertEqual(binds["some_target_var"], "STB_WEAK")
        self.assertEqual(binds["getenv"], "STB_GLOBAL")
        # a source process has no some_target_var, and loads with RTLD_NOW
        load = subprocess.run(
            [sys.executable, "-c", "import ctypes, sys; "
             "ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL | 2)", library],
            stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(load.returncode, 0, load.stderr)

    def test_dump(self):
        library = self.library(("-O2", ""))
        proc = helpers.run_tool(["--dump", library])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = proc.stdout
        self.assertIn("__ucp_ifunc_image_kitchen", out)
        for needle in ("TEXT  vaddr      0x0", "RELRO vaddr   0x1000",
                       "(kitchen_main)", "got_ptr  0x1000 (RELRO)",
                       "optional_hook  weak", "IMPORT   [", "RELATIVE base + "):
            self.assertIn(needle, out)


class SmallBuildTest(unittest.TestCase):
    def test_cxx_with_templates_in_two_files(self):
        work = helpers.scratch_dir("cxx")
        library = os.path.join(work, "cx.so")
        proc = helpers.run_tool(["-O2", "-fno-exceptions", "-o", library] +
                                helpers.write_cxx_two_files(work))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        run = helpers.run_image(library, "x", 2)
        self.assertEqual(run.returncode, 0, run.stderr)
        helpers.check_cxx_two_files_output(self, run.stdout)

    def test_keep_temps_and_verbose(self):
        work = helpers.scratch_dir("keep")
        source = helpers.write_source(work, "kt.c", """\
            #include <stddef.h>
            #include <stdio.h>
            void kt_main(void *p, size_t n, void *t) { puts("kt"); }
            """)
        temps = os.path.join(work, "temps")
        proc = helpers.run_tool(["-v", "--keep-temps", temps, "-o",
                                 os.path.join(work, "kt.so"), source])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("-fno-plt", proc.stderr)
        self.assertIn("ucx-ifunc-cc: image: TEXT", proc.stderr)
        kept = os.listdir(temps)
        for name in ("0-kt.s", "0-kt.image.s", "0-kt.image.o", "0-kt.o",
                     "image.bin", "image.map", "image.o"):
            self.assertIn(name, kept)
        with open(os.path.join(temps, "0-kt.image.s")) as stream:
            self.assertIn("__ucp_ifunc_import.puts", stream.read())
        self.assertEqual([f for f in os.listdir(work) if f.endswith(".tmp")], [])

    def test_libgcc_helper_makes_libgcc_s_a_dependency(self):
        work = helpers.scratch_dir("libgcc")
        source = helpers.write_source(work, "wide.c", """\
            #include <stddef.h>
            #include <stdio.h>
            void wide_main(void *p, size_t n, void *t)
            {
                volatile __int128 a = (__int128)5 << 70, b = 3;
                printf("%d\\n", (int)((a / b) >> 64));
            }
            """)
        library = os.path.join(work, "wide.so")
        proc = helpers.run_tool(["-O2", "-o", library, source])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        _, image = helpers.image_of(library)
        self.assertIn("__divti3", [imp.name for imp in image.imports])
        needed = dt_needed(library)
        self.assertIn("libgcc_s.so.1", needed)
        self.assertEqual(image.needed, needed)
        run = helpers.run_image(library, "", 1)
        self.assertEqual((run.returncode, run.stdout), (0, "106\n"), run.stderr)

    def test_needed_libraries_of_cxx_with_libgcc_helpers(self):
        """g++ adds libgcc_s itself; -lz and -pthread add their own: the
        image lists what NAME.so needs, in its order, with or without
        helpers."""
        work = helpers.scratch_dir("needed")
        for name, flags, body in (
                ("wide_cxx.cc", ["-lz", "-pthread"], "__int128"),
                ("wide_c.c", ["-pthread", "-lz"], "__int128"),
                ("narrow_c.c", ["-lz", "-lm"], "long")):
            source = helpers.write_source(work, name, """\
                #include <stddef.h>
                #include <stdio.h>
                %svoid %s_main(void *p, size_t n, void *t)
                {
                    volatile %s a = (%s)5 << 40, b = 3;
                    printf("%%d\\n", (int)((a / b) >> 32));
                }
                """ % ('extern "C" ' if name.endswith(".cc") else "",
                       name.split(".")[0], body, body))
            library = os.path.join(work, name.split(".")[0] + ".so")
            proc = helpers.run_tool(["-O2", "-o", library, source] + flags)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            needed = dt_needed(library)
            self.assertEqual(helpers.image_of(library)[1].needed, needed)
            self.assertIn("libz.so.1", needed)
            self.assertEqual("libgcc_s.so.1" in needed,
                             name.startswith("wide") or name.endswith(".cc"),
                             (name, needed))


if __name__ == "__main__":
    unittest.main()
