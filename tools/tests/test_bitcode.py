"""--bitcode and --bitcode-only: LLVM bitcode images beside (or instead of)
the native ones.

The contract with the runtime is docs/design.md's version 4 image: TEXT
holds the module, the string table starts with its triple, one symbol
(NAME_main), sorted imports; NAME.so holds it as
__ucp_ifunc_bitcode_NAME.em<e_machine>. No target of this tree compiles
bitcode yet, so the images are run here the way one would: compiled for
their ISA (llc), linked with tools/tests/run_bitcode.c, which builds the
payload with NAME.so's payload functions, and run; the output must be
what the same sources compiled by clang print."""

import concurrent.futures
import os
import shutil
import struct
import subprocess
import unittest

from elftools.elf.elffile import ELFFile

from tests import helpers
from tests.test_aarch64 import (CROSS_CC, HAVE_CROSS, HAVE_QEMU, NO_CROSS,
                                NO_QEMU, QEMU, cross_target_program)
from ucx_ifunc import elf_query, signing
from ucx_ifunc import image_format as fmt
from ucx_ifunc.bitcode import parse_module

LLC = "llc-14"
HAVE_LLVM = all(shutil.which(p) for p in ("clang-14", "llvm-link-14",
                                           "opt-14", "llvm-dis-14", LLC))
NO_LLVM = "needs clang-14 and llvm-14 (Debian: clang-14 llvm-14)"
KITCHEN_SOURCES = [os.path.join(helpers.DATA_DIR, f)
                   for f in ("kitchen.c", "kitchen_util.c")]
TRIPLES = {fmt.EM_X86_64: "x86_64-unknown-linux-gnu",
           fmt.EM_AARCH64: "aarch64-unknown-linux-gnu",
           fmt.EM_PPC64: "powerpc64le-unknown-linux-gnu"}
INFO = os.environ.get("IFUNC_TEST_INFO")


def build(flags, sources, output, link=("-lz", "-lm")):
    return helpers.run_tool(list(flags) + ["-O2", "-o", output] +
                            list(sources) + list(link))


def bitcode_images(library):
    """{e_machine: (symbol, image bytes)} of the library's bitcode images."""
    return {int(symbol.rpartition(".em")[2]): (symbol, blob)
            for symbol, _, blob in elf_query.read_embedded_bitcode(library)}


def image_symbols(library):
    with open(library, "rb") as stream:
        return sorted(sym.name for sym in ELFFile(stream).get_section_by_name(
            ".dynsym").iter_symbols() if sym.name.startswith("__ucp_ifunc_"))


def run_bitcode(test, library, name, image, text, runs, preload=(),
                triple="x86_64-linux-gnu", cc="cc", runner=(), sources=(),
                libs=(), zlib="-lz"):
    """Compiles image's bitcode for triple's CPU (llc), links it with
    run_bitcode.c and runs it: what NAME_main prints. With sources instead
    of an image: the reference, the sources compiled by clang into the
    same program (gcc's NAME.so is no reference where the sources leave
    something to the compiler, such as the order in which arguments are
    evaluated: kitchen.c's printf)."""
    work = helpers.scratch_dir("bcrun")
    if image is not None:
        module = os.path.join(work, "image.bc")
        with open(module, "wb") as stream:
            stream.write(image.segments[fmt.SEG_TEXT].data)
        obj = os.path.join(work, "image.o")
        subprocess.run([LLC, "-O2", "-relocation-model=pic", "-filetype=obj",
                        "-mtriple=" + triple, module, "-o", obj], check=True)
        code = [obj]
    else:
        cc, code = "clang-14 -O2 -w", list(sources)
    program = os.path.join(work, "run_bitcode")
    subprocess.run(cc.split() + ["-O1", "-DENTRY=%s_main" % name,
                                 os.path.join(helpers.TESTS_DIR,
                                              "run_bitcode.c")] +
                   code + ["-o", program] + list(preload) + list(libs) +
                   [zlib, "-lm", "-ldl"], check=True)
    proc = subprocess.run(list(runner) + [program, library, name, text,
                                          str(runs)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)
    test.assertEqual(proc.returncode, 0, proc.stderr)
    return proc.stdout


@unittest.skipUnless(HAVE_LLVM, NO_LLVM)
class BitcodeBuildTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = helpers.scratch_dir("bitcode")
        cls.key, cls.public = signing.generate(os.path.join(cls.work, "k"))
        cls.preload = helpers.compile_shared(
            os.path.join(helpers.DATA_DIR, "target_program.c"),
            os.path.join(cls.work, "libtarget.so"))
        # both signed: Ed25519 signatures are deterministic, so the native
        # images must still be the same bytes
        variants = {"native": ["--sign", cls.key],
                    "bitcode": ["--bitcode", "--sign", cls.key],
                    "only": ["--bitcode-only=x86_64-linux-gnu"]}

        def one(variant):
            output = os.path.join(cls.work, variant, "kitchen.so")
            os.makedirs(os.path.dirname(output))
            return output, build(variants[variant], KITCHEN_SOURCES, output)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            cls.builds = dict(zip(variants, pool.map(one, variants)))

    def library(self, variant):
        output, proc = self.builds[variant]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return output

    def test_one_image_per_default_triple_beside_the_same_native_one(self):
        library = self.library("bitcode")
        symbols = image_symbols(library)
        self.assertEqual(symbols, sorted(
            ["__ucp_ifunc_image_kitchen"] +
            ["__ucp_ifunc_bitcode_kitchen.em%d" % m for m in TRIPLES]))
        # the native image is the bytes a build without --bitcode makes
        self.assertEqual(elf_query.read_embedded_image(library),
                         elf_query.read_embedded_image(
                             self.library("native")))
        for machine, (symbol, blob) in bitcode_images(library).items():
            image = fmt.decode(blob)
            self.assertEqual(image.machine, machine)
            self.assertEqual(image.triple, TRIPLES[machine])
            self.assertEqual(image.flags, fmt.FLAG_BITCODE)
            self.check_layout(blob, image)
            names = [i.name for i in image.imports]
            self.assertEqual(names, sorted(names))
            # libc, libm, zlib, the target program's variable, the weak hook
            for needed in ("strtol", "sqrt", "crc32", "some_target_var",
                           "stdout", "__errno_location", "qsort"):
                self.assertIn(needed, names, symbol)
            self.assertEqual([i.name for i in image.imports if i.weak],
                             ["optional_hook"])
            # kitchen_util.c's functions are the image's own, not imports
            self.assertNotIn("util_say", names)
            self.assertEqual(image.needed,
                             ["libz.so.1", "libm.so.6", "libc.so.6"])
            # everything but NAME_main is internal; the payload functions,
            # which NAME_main does not reach, are gone
            module = parse_module(subprocess.run(
                ["llvm-dis-14", "-o", "-"],
                input=image.segments[fmt.SEG_TEXT].data, check=True,
                stdout=subprocess.PIPE).stdout.decode())
            self.assertEqual([g.name for g in module.globals.values()
                              if g.defined and g.linkage not in
                              ("internal", "private", "appending")],
                             ["kitchen_main"])
            self.assertIn("util_scale", module.globals)
            self.assertNotIn("kitchen_payload_init", module.globals)

    def check_layout(self, blob, image):
        """The descriptor's fields as docs/design.md gives them."""
        version, = struct.unpack_from("<H", blob, 4)
        self.assertEqual(version, fmt.VERSION_BITCODE)
        segs = [struct.unpack_from("<QQQQ", blob, 40 + 32 * i)
                for i in range(3)]
        text = image.segments[fmt.SEG_TEXT].data
        self.assertEqual(segs[0], (0, len(text), fmt.DESC_SIZE, len(text)))
        self.assertEqual(segs[1:], [(0, 0, 0, 0)] * 2)
        self.assertTrue(text.startswith(b"BC\xc0\xde"))
        self.assertEqual((image.page_align, image.map_size, image.entry_vaddr,
                          image.got_ptr_vaddr, image.relocs),
                         (0, 0, 0, 0, []))
        self.assertEqual(image.symbols,
                         [fmt.FunctionSymbol("kitchen_main", 0, 0)])
        tail = struct.unpack_from("<QQQQQQII", blob, 136)
        strtab = blob[tail[4]:tail[4] + tail[5]]
        self.assertEqual(strtab.split(b"\0")[0], image.triple.encode())

    def test_the_x86_64_bitcode_runs_as_the_library_does(self):
        """statics kept between runs, pointer tables, errno, imports from
        libc, libm, zlib and the target program, the weak hook unset."""
        library = self.library("bitcode")
        image = fmt.decode(bitcode_images(library)[fmt.EM_X86_64][1])
        shipped = run_bitcode(self, library, "kitchen", image, "hello", 3,
                              [self.preload])
        self.assertEqual(shipped, self.reference(library, 3))
        lines = shipped.splitlines()
        self.assertEqual(len(lines), 6)
        self.assertEqual([line.split("|")[6] for line in lines[::2]],
                         ["1", "2", "3"])  # a static, kept between runs
        self.assertTrue(lines[0].startswith("gamma|five|34|"), lines[0])
        self.assertTrue(lines[0].endswith("|4242|18|4|42|-1"), lines[0])
        self.assertEqual(lines[1], "via a table of function pointers")

    def reference(self, library, runs):
        return run_bitcode(self, library, "kitchen", None, "hello", runs,
                           [self.preload], sources=KITCHEN_SOURCES)

    def test_the_ppc64le_bitcode_compiles_for_its_isa(self):
        image = fmt.decode(
            bitcode_images(self.library("bitcode"))[fmt.EM_PPC64][1])
        work = helpers.scratch_dir("bcppc")
        module, obj = (os.path.join(work, n) for n in ("m.bc", "m.o"))
        with open(module, "wb") as stream:
            stream.write(image.segments[fmt.SEG_TEXT].data)
        subprocess.run([LLC, "-O2", "-relocation-model=pic", "-filetype=obj",
                        module, "-o", obj], check=True)
        with open(obj, "rb") as stream:
            elf = ELFFile(stream)
            self.assertEqual((elf["e_machine"], elf.little_endian),
                             ("EM_PPC64", True))

    def test_bitcode_only_has_no_native_image(self):
        library = self.library("only")
        self.assertEqual(image_symbols(library),
                         ["__ucp_ifunc_bitcode_kitchen.em62"])
        # NAME.so is still the ordinary library: its payload functions
        # build the payload, and the bitcode prints what the sources do
        image = fmt.decode(bitcode_images(library)[fmt.EM_X86_64][1])
        self.assertEqual(run_bitcode(self, library, "kitchen", image,
                                     "hello", 2, [self.preload]),
                         self.reference(library, 2))
        # the module is the same as beside native images (that build is
        # signed, this one is not)
        beside = fmt.decode(bitcode_images(self.library("bitcode"))[
            fmt.EM_X86_64][1])
        self.assertEqual(
            (image.segments[0].data, image.imports, image.needed),
            (beside.segments[0].data, beside.imports, beside.needed))

    def test_signature_covers_the_bitcode(self):
        symbol, blob = bitcode_images(self.library("bitcode"))[
            fmt.EM_X86_64]
        public = signing.load_public_key(self.public)
        self.assertTrue(signing.verify("kitchen", blob, public))
        at = fmt.DESC_SIZE + 100  # a byte of the module
        changed = blob[:at] + bytes([blob[at] ^ 1]) + blob[at + 1:]
        self.assertFalse(signing.verify("kitchen", changed, public))
        self.assertFalse(signing.verify("kitchen2", blob, public))

    def test_dump_describes_bitcode_images(self):
        proc = helpers.run_tool(["--dump", self.library("bitcode")])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = proc.stdout
        self.assertIn("kitchen.so: bitcode image "
                      "__ucp_ifunc_bitcode_kitchen.em62, ", out)
        self.assertIn(", format version 4\nmachine 62 (x86-64), triple "
                      "x86_64-unknown-linux-gnu, flags 0x2 (bitcode)\n"
                      "bitcode: ", out)
        self.assertIn("entry    kitchen_main\nimports: ", out)
        self.assertIn("] optional_hook  weak\n", out)
        self.assertIn("needed libraries: libz.so.1, libm.so.6, libc.so.6\n"
                      "signature: Ed25519, key %s"
                      % signing.load_public_key(self.public).hex(), out)
        # the native image's part is what it was
        native, both = (helpers.run_tool(["--dump", self.library(v)]).stdout
                        .replace(self.library(v), "L")
                        for v in ("native", "bitcode"))
        self.assertEqual(both.split("\nL: bitcode image")[0] + "\n", native)

    @unittest.skipUnless(INFO, "needs the build's ucx-ifunc-info (make "
                         "check sets IFUNC_TEST_INFO)")
    def test_info_lists_bitcode_images(self):
        env = dict(os.environ, UCX_IFUNC_LIB_DIR=self.work)
        for variant in ("bitcode", "only"):
            proc = subprocess.run([INFO, self.library(variant)], env=env,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE,
                                  universal_newlines=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            out = proc.stdout
            self.assertIn("#   bitcode:        " + (
                "powerpc64le-unknown-linux-gnu, x86_64-unknown-linux-gnu, "
                "aarch64-unknown-linux-gnu\n" if variant == "bitcode"
                else "x86_64-unknown-linux-gnu\n"), out)
            self.assertIn("#   bitcode image:  "
                          "__ucp_ifunc_bitcode_kitchen.em62\n"
                          "#     triple:       x86_64-unknown-linux-gnu "
                          "(x86-64)\n#     code id:      ", out)
            blob = bitcode_images(self.library(variant))[fmt.EM_X86_64][1]
            image = fmt.decode(blob)
            self.assertIn("#     sizes:        image %d, bitcode %d bytes\n"
                          % (len(blob), len(image.segments[0].data)), out)
            self.assertIn("optional_hook (weak), ", out)
            self.assertIn("#     needed:       libz.so.1, libm.so.6, "
                          "libc.so.6\n", out)
        self.assertIn("#     signed by:    key %s\n"
                      % signing.load_public_key(self.public).hex(),
                      self.info_of("bitcode"))
        only = self.info_of("only")
        self.assertIn("#   ISAs:           (none: bitcode only)\n", only)
        self.assertIn("#     signed by:    (not signed)\n", only)

    def info_of(self, variant):
        return subprocess.run([INFO, self.library(variant)],
                              stdout=subprocess.PIPE,
                              universal_newlines=True).stdout


@unittest.skipUnless(HAVE_LLVM, NO_LLVM)
class BitcodeConstructsTest(unittest.TestCase):
    """Both conventions and a 63-character name, built with
    --bitcode-only and run."""

    def build_and_run(self, name, body):
        work = helpers.scratch_dir("bcname")
        source = os.path.join(work, name + ".c")
        with open(source, "w") as stream:
            stream.write(body.replace("NAME", name))
        output = os.path.join(work, name + ".so")
        proc = build(["--bitcode-only=x86_64-linux-gnu"], [source], output,
                     link=())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        image = fmt.decode(bitcode_images(output)[fmt.EM_X86_64][1])
        self.assertEqual(image.symbols[0].name, name + "_main")
        return run_bitcode(self, output, name, image, "abc", 2)

    def test_paper_convention_and_a_long_name(self):
        name = "p" * 58
        out = self.build_and_run(name, """\
            #include <stdio.h>
            #include <string.h>
            static int runs;
            size_t NAME_payload_get_max_size(void *a, size_t n)
            { return n + 1; }
            int NAME_payload_init(void *p, size_t ps, void *a, size_t n)
            { memcpy(p, a, n); return 0; }
            void NAME_main(void *p, size_t n, void *t)
            { printf("%s %zu %d\\n", (char *)p, n, ++runs); }
            """)
        self.assertEqual(out, "abc 4 1\nabc 4 2\n")

    def test_slides_convention(self):
        out = self.build_and_run("slides", """\
            #include <stdio.h>
            #include <string.h>
            size_t NAME_payload_bound(void *a, size_t n) { return 64; }
            int NAME_payload_init(void *a, size_t n, void *p, size_t *ps)
            { memcpy(p, a, n); *ps = n; return 0; }
            void NAME_main(void *p, size_t n, void *t)
            { printf("%.*s %zu\\n", (int)n, (char *)p, n); }
            """)
        self.assertEqual(out, "abc 3\nabc 3\n")

    def test_cxx_templates_and_inline_statics_in_two_files(self):
        """One COMDAT copy of an inline function's static for both files;
        -fipa-pta, which clang does not know, is left out of its
        compiles."""
        work = helpers.scratch_dir("bccxx")
        output = os.path.join(work, "cx.so")
        proc = build(["--bitcode-only=x86_64-linux-gnu", "-fno-exceptions",
                      "-fipa-pta"], helpers.write_cxx_two_files(work),
                     output, link=())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        image = fmt.decode(bitcode_images(output)[fmt.EM_X86_64][1])
        self.assertIn("libstdc++.so.6", image.needed)
        helpers.check_cxx_two_files_output(self, run_bitcode(
            self, output, "cx", image, "", 2,
            libs=["-lstdc++"]))

    @unittest.skipUnless(HAVE_CROSS and HAVE_QEMU, NO_CROSS + "; " + NO_QEMU)
    def test_the_aarch64_bitcode_runs_on_aarch64(self):
        work = helpers.scratch_dir("bca64")
        library = os.path.join(work, "kitchen.so")
        proc = build(["--target", "aarch64-linux-gnu",
                      "--bitcode-only=aarch64-linux-gnu"],
                     KITCHEN_SOURCES, library)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        image = fmt.decode(bitcode_images(library)[fmt.EM_AARCH64][1])
        preload = cross_target_program(work)
        out = run_bitcode(self, library, "kitchen", image, "hello", 2,
                          [preload], triple="aarch64-linux-gnu",
                          cc=CROSS_CC, runner=[QEMU])
        lines = out.splitlines()
        self.assertEqual(len(lines), 4)
        self.assertTrue(lines[0].startswith("gamma|five|34|"), lines[0])
        self.assertEqual(lines[1], "via a table of function pointers")
        self.assertEqual([line.split("|")[6] for line in lines[::2]],
                         ["1", "2"])


def _refused(flags, files):
    """Builds files {name: text} (the first names the ifunc) with flags;
    returns (output, proc)."""
    work = helpers.scratch_dir("bcrefuse")
    sources = [helpers.write_source(work, name, text, with_payload=(i == 0))
               for i, (name, text) in enumerate(files.items())]
    output = os.path.join(work, next(iter(files)).split(".")[0] + ".so")
    return output, helpers.run_tool(flags + ["-O2", "-o", output] + sources,
                                    cwd=work)


@unittest.skipUnless(HAVE_LLVM, NO_LLVM)
class BitcodeRefusalTest(unittest.TestCase):
    ONLY = ["--bitcode-only=x86_64-linux-gnu"]
    # the same line as the native build's
    SAME = {
        "tls": {"tl.c": """\
            __thread int counter;
            void tl_main(void *p, unsigned long n, void *t) { counter++; }
            """},
        "no_main": {"nm.c": """\
            int nm_helper(void) { return 1; }
            """},
        "ctor": {"ct.c": """\
            static int ready;
            __attribute__((constructor)) static void setup(void)
            {
                ready = 1;
            }
            void ct_main(void *p, unsigned long n, void *t) { ready++; }
            """},
        "twice": {"tw.c": """\
            int shared = 1;
            void tw_main(void *p, unsigned long n, void *t) { shared++; }
            """, "tw2.c": "int shared = 2;\n"},
    }

    def test_refused_with_the_native_message(self):
        cases = [(case, flags) for case in self.SAME
                 for flags in ([], self.ONLY)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(
                lambda c: _refused(c[1], self.SAME[c[0]]), cases))
        lines = {}
        for (case, flags), (output, proc) in zip(cases, results):
            lines[case, bool(flags)] = [
                line.replace(os.path.dirname(output), "D")
                for line in helpers.assert_refused(self, output, proc, [])]
        for case in self.SAME:
            self.assertEqual(lines[case, True], lines[case, False], case)
        self.assertIn("tl.c:1: 'counter' is a thread-local variable "
                      "(.tbss.counter): ifunc libraries cannot define any",
                      lines["tls", True][0])
        self.assertIn("nm_main: not defined as a global function",
                      lines["no_main", True][0])
        self.assertIn("ct.c:3: 'setup' is a constructor or destructor "
                      "(.init_array)", lines["ctor", True][0])
        self.assertIn("'shared' is defined in both", lines["twice", True][0])

    def test_cxx_exceptions(self):
        work = helpers.scratch_dir("bccxxexc")
        output = os.path.join(work, "cx.so")
        proc = build(self.ONLY, helpers.write_cxx_two_files(work), output,
                     link=())
        helpers.assert_refused(self, output, proc, [
            "cx.cc:3: in 'cx_main': C++ exception handling (a personality "
            "function) is not supported in shipped code; compile with "
            "-fno-exceptions"])

    @unittest.skipIf(shutil.which("powerpc64le-linux-gnu-g++"),
                     "g++-powerpc64le-linux-gnu is installed")
    def test_missing_cross_cxx_headers_name_their_package(self):
        work = helpers.scratch_dir("bccxxhdr")
        output = os.path.join(work, "cx.so")
        proc = build(["--bitcode=powerpc64le-linux-gnu", "-fno-exceptions"],
                     helpers.write_cxx_two_files(work), output, link=())
        lines = helpers.assert_refused(self, output, proc, [])
        self.assertEqual(lines, [
            "ucx-ifunc-cc: error: --bitcode powerpc64le-linux-gnu: the C++ "
            "library headers for powerpc64le-linux-gnu are not installed "
            "(Debian: apt install g++-powerpc64le-linux-gnu)"])

    def test_thread_local_and_hidden_imports(self):
        output, proc = _refused(self.ONLY, {"et.c": """\
            extern __thread int ext;
            extern int secret __attribute__((visibility("hidden")));
            void et_main(void *p, unsigned long n, void *t)
            { ext++; secret++; }
            """})
        helpers.assert_refused(self, output, proc, [
            "et.c: in 'et_main': 'ext' is a thread-local variable: shipped "
            "code has no TLS block on the target",
            "'secret' is not defined by the ifunc's sources and cannot be "
            "imported (is it declared with hidden visibility?)"])

    def test_command_line(self):
        source = os.path.join(helpers.DATA_DIR, "kitchen.c")
        for flags, needle in (
                (["--bitcode=sparc64-linux-gnu"],
                 "--bitcode: unknown target triple 'sparc64-linux-gnu'; "
                 "known: x86_64-linux-gnu, aarch64-linux-gnu, "
                 "powerpc64le-linux-gnu, riscv64-linux-gnu"),
                (["--bitcode=x86_64-linux-gnu,x86_64-linux-gnu"],
                 "'x86_64-linux-gnu' is given twice"),
                (["--bitcode", "--sandbox"], "--sandbox: bitcode cannot")):
            output = os.path.join(helpers.scratch_dir("bccli"), "kitchen.so")
            proc = helpers.run_tool(flags + ["-o", output, source])
            helpers.assert_refused(self, output, proc, [needle])

    @unittest.skipIf(os.path.isdir("/usr/riscv64-linux-gnu/include"),
                     "riscv64's C library headers are installed")
    def test_missing_cross_headers_name_their_package(self):
        output = os.path.join(helpers.scratch_dir("bchdr"), "kitchen.so")
        proc = build(["--bitcode=riscv64-linux-gnu"], KITCHEN_SOURCES, output)
        lines = helpers.assert_refused(self, output, proc, [])
        self.assertEqual(proc.stderr.splitlines(), lines)
        self.assertEqual(lines, [
            "ucx-ifunc-cc: error: --bitcode riscv64-linux-gnu: the C library "
            "headers for riscv64-linux-gnu are not installed (Debian: apt "
            "install libc6-dev-riscv64-cross)"])


class BitcodeFormatTest(unittest.TestCase):
    def image(self):
        return fmt.Image(
            segments=[fmt.Segment(0, 8, b"BC\xc0\xde\x35\x14\0\0"),
                      fmt.Segment(), fmt.Segment()],
            entry_vaddr=0, got_ptr_vaddr=0, map_size=0,
            imports=[fmt.Import("a"), fmt.Import("b", True)],
            needed=["libc.so.6"], symbols=[fmt.FunctionSymbol("f_main", 0, 0)],
            machine=fmt.EM_RISCV, page_align=0, flags=fmt.FLAG_BITCODE,
            triple="riscv64-unknown-linux-gnu")

    def test_round_trip(self):
        blob = fmt.encode(self.image())
        self.assertEqual(blob[fmt.DESC_SIZE:fmt.DESC_SIZE + 2], b"BC")
        decoded = fmt.decode(blob)
        decoded.segments = [fmt.Segment(s.vaddr, s.mem_size, s.data)
                            for s in decoded.segments]
        self.assertEqual(decoded, self.image())
        self.assertEqual(fmt.version_of(decoded.flags), 4)

    def test_decode_refuses_what_the_kind_forbids(self):
        blob = fmt.encode(self.image())
        for form, offset, value, why in (
                ("<I", 12, 0, "do not fit version 4"),  # flags
                ("<B", fmt.DESC_SIZE, 0, "magic"),  # the module's first byte
                ("<Q", 24, 4096, "maps nothing")):  # page_align
            bad = bytearray(blob)
            struct.pack_into(form, bad, offset, value)
            with self.assertRaisesRegex(fmt.FormatError, why):
                fmt.decode(bytes(bad))


if __name__ == "__main__":
    unittest.main()
