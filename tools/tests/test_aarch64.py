"""aarch64 images: built with aarch64-linux-gnu-gcc and really run under
qemu-aarch64 by tests/run_image.c, which links them the way the target
does. Skipped, with the reason, where the cross compiler or qemu-user is
missing."""

import concurrent.futures
import os
import re
import shutil
import struct
import subprocess
import unittest

from tests import helpers
from ucx_ifunc import image_format as fmt
from ucx_ifunc import verify

CROSS_CC = "aarch64-linux-gnu-gcc"
CROSS_CXX = "aarch64-linux-gnu-g++"
QEMU = "qemu-aarch64"
TARGET = ["--target", "aarch64-linux-gnu"]
HAVE_CROSS = shutil.which(CROSS_CC) is not None
HAVE_QEMU = shutil.which(QEMU) is not None
NO_CROSS = "needs %s (Debian: gcc-aarch64-linux-gnu)" % CROSS_CC
NO_QEMU = "needs %s (Debian: qemu-user)" % QEMU
SRC_DIR = os.path.dirname(helpers.TOOLS_DIR)

KITCHEN_SOURCES = [os.path.join(helpers.DATA_DIR, f)
                   for f in ("kitchen.c", "kitchen_util.c")]
VARIANTS = [("-O0",), ("-O2",), ("-O3",), ("-O2", "-fstack-protector-strong"),
            ("-O3", "-mbranch-protection=standard"),
            ("-O2", "-mcmodel=tiny")]


def cross_compile(args, output):
    subprocess.run([CROSS_CC] + args + ["-o", output], check=True)
    return output


def build_run_image(directory):
    """tools/tests/run_image.c for aarch64, reading the runtime's image.h."""
    return cross_compile(["-O1", "-Wall", "-Werror", "-I",
                          os.path.join(SRC_DIR, "src", "ucp", "ifunc", "format"),
                          os.path.join(helpers.TESTS_DIR, "run_image.c"),
                          "-ldl"], os.path.join(directory, "run_image"))


def cross_target_program(work):
    """The stand-in target program's exported symbols for aarch64, as a
    library to preload."""
    return cross_compile(
        ["-shared", "-fPIC",
         os.path.join(helpers.DATA_DIR, "target_program.c")],
        os.path.join(work, "libtarget.so"))


def run_on_qemu(runner, library, text, runs, preload=(), native=False,
                target_args=0):
    cmd = [QEMU, runner] + (["--native"] if native else []) + \
        (["--target-args", str(target_args)] if target_args else []) + \
        [library, text, str(runs)] + list(preload)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)


def build(flags, sources, name, link=()):
    work = helpers.scratch_dir("a64")
    output = os.path.join(work, name + ".so")
    proc = helpers.run_tool(TARGET + list(flags) + ["-o", output] +
                            list(sources) + list(link), cwd=work)
    return output, proc


@unittest.skipUnless(HAVE_CROSS, NO_CROSS)
class Aarch64KitchenTest(unittest.TestCase):
    """Every construct of kitchen.c, at each -O level, with the stack
    protector, with branch protection (BTI and PAC hints) and in the tiny
    code model (ldr :got:, adr)."""

    @classmethod
    def setUpClass(cls):
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            jobs = {variant: pool.submit(build, ["-Wall"] + list(variant),
                                         KITCHEN_SOURCES, "kitchen",
                                         ["-lz", "-lm"])
                    for variant in VARIANTS}
            cls.builds = {v: job.result() for v, job in jobs.items()}

    def library(self, variant):
        output, proc = self.builds[variant]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        return output

    @unittest.skipUnless(HAVE_QEMU, NO_QEMU)
    def test_image_runs_like_the_native_code(self):
        work = helpers.scratch_dir("a64run")
        runner = build_run_image(work)
        preload = cross_target_program(work)
        for variant in VARIANTS:
            with self.subTest(flags=variant):
                library = self.library(variant)
                native = run_on_qemu(runner, library, "hello", 3, [preload],
                                     native=True)
                shipped = run_on_qemu(runner, library, "hello", 3, [preload])
                lines = helpers.check_kitchen_runs(self, native, shipped,
                                                   "|42|-1")
                self.assertIn("|4242|", lines[0])

    def test_image_structure(self):
        for variant in VARIANTS:
            with self.subTest(flags=variant):
                name, image = helpers.image_of(self.library(variant))
                self.assertEqual((name, image.machine), ("kitchen", 183))
                self.assertTrue(verify.check_code(image))
                imports = {imp.name: imp.weak for imp in image.imports}
                for needed in ("qsort", "snprintf", "sqrt", "exp",
                               "__errno_location", "stdout", "crc32",
                               "some_target_var", "fputs", "printf"):
                    self.assertFalse(imports[needed], needed)
                self.assertTrue(imports["optional_hook"])
                self.assertNotIn("getenv", imports)
                for own in ("util_tail", "util_say", "util_counter"):
                    self.assertNotIn(own, imports)
                for rel in image.relocs:
                    self.assertIn(image.segment_of(rel.vaddr, 8),
                                  (fmt.SEG_RELRO, fmt.SEG_DATA))
                if "-fstack-protector-strong" in variant:
                    # aarch64 glibc keeps the canary in a global
                    self.assertIn("__stack_chk_guard", imports)
                self.assertEqual(image.segments[fmt.SEG_TEXT].vaddr, 0)
                self.assertEqual(image.segments[fmt.SEG_RELRO].vaddr % 4096, 0)

    def test_branch_protection_hints_are_kept(self):
        _, image = helpers.image_of(
            self.library(("-O3", "-mbranch-protection=standard")))
        text = image.segments[fmt.SEG_TEXT].data
        words = {int.from_bytes(text[i:i + 4], "little")
                 for i in range(0, len(text) - 3, 4)}
        self.assertIn(0xd503233f, words)  # paciasp
        self.assertIn(0xd503245f, words)  # bti c

    def test_dump(self):
        proc = helpers.run_tool(["--dump", self.library(("-O2",))])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("image __ucp_ifunc_image_kitchen: the same bytes as "
                      "__ucp_ifunc_image_kitchen.em183", proc.stdout)
        self.assertIn("machine 183 (aarch64)", proc.stdout)
        self.assertIn("optional_hook  weak", proc.stdout)


TEST_IFUNCS = os.path.join(SRC_DIR, "test", "ifuncs")
CONSTRUCTS_VARIANTS = [("-O0",), ("-O2",), ("-O3",),
                       ("-O2", "-fstack-protector-strong"),
                       ("-O2", "-mbranch-protection=standard")]


def construct_checks():
    """The names of test/ifuncs/constructs.c's checks, in enum order."""
    with open(os.path.join(TEST_IFUNCS, "test_ifunc.h")) as stream:
        body = re.search(r"enum construct_check \{(.*?)\}", stream.read(),
                         re.S).group(1)
    names = re.findall(r"\b(CHECK_\w+)", body)
    return names[:names.index("CHECK_COUNT")]


@unittest.skipUnless(HAVE_CROSS, NO_CROSS)
class Aarch64ConstructsTest(unittest.TestCase):
    """test/ifuncs/constructs.c, built as test/Makefile.inc builds it for
    x86-64, runs every check on aarch64."""

    @classmethod
    def setUpClass(cls):
        sources = [os.path.join(TEST_IFUNCS, f)
                   for f in ("constructs.c", "constructs_helper.c")]
        flags = ["-Wall", "-Wextra", "-Werror", "-I" + TEST_IFUNCS,
                 "-DIFUNC_NAME=constructs"]
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            jobs = {variant: pool.submit(build, flags + list(variant), sources,
                                         "constructs", ["-lz", "-lm"])
                    for variant in CONSTRUCTS_VARIANTS}
            cls.builds = {v: job.result() for v, job in jobs.items()}

    @unittest.skipUnless(HAVE_QEMU, NO_QEMU)
    def test_every_check_passes(self):
        work = helpers.scratch_dir("a64constructs")
        runner = build_run_image(work)
        program = os.path.join(work, "target_global.c")
        with open(program, "w") as stream:
            stream.write("long ucx_ifunc_test_target_global = 5;\n")
        preload = cross_compile(["-shared", "-fPIC", program],
                                os.path.join(work, "libglobal.so"))
        checks = construct_checks()
        size = 16 + 4 * len(checks)  # struct constructs_result
        for variant in CONSTRUCTS_VARIANTS:
            with self.subTest(flags=variant):
                library, proc = self.builds[variant]
                self.assertEqual(proc.returncode, 0, proc.stderr)
                run = run_on_qemu(runner, library, "", 2, [preload],
                                  target_args=size)
                self.assertEqual(run.returncode, 0, run.stderr)
                result = bytes.fromhex(run.stdout.split("target_args ")[1])
                calls, image_calls = struct.unpack_from("<QQ", result)
                passed = struct.unpack_from("<%di" % len(checks), result, 16)
                self.assertEqual((calls, image_calls), (2, 1))
                self.assertEqual([c for c, ok in zip(checks, passed) if not ok],
                                 [])


STUBS = """\
#include <stddef.h>
#include <stdio.h>
#include <stdatomic.h>
static _Atomic long counter;
static long plain;
void stubs_main(void *p, size_t n, void *t)
{
    volatile __int128 a = (__int128)5 << 70, b = 3;
    long expected = 0;
    atomic_fetch_add(&counter, 2);
    __atomic_compare_exchange_n(&plain, &expected, 7, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    long double x = (long double)n * 1.5L;
    /* bl and b to an import: CALL26 and JUMP26 through the linker's stubs */
    asm volatile("adr x0, 1f\\n\\tbl puts\\n\\tb 2f\\n"
                 "1: .asciz \\"from asm\\"\\n\\t.p2align 2\\n"
                 "2:" ::: "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7",
                 "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16",
                 "x17", "x18", "x30", "memory", "cc");
    printf("%d %ld %ld %d\\n", (int)((a / b) >> 64), (long)counter, plain,
           (int)x);
    fflush(stdout);
    asm volatile("adr x0, 1f\\n\\tb 2f\\n1: .asciz \\"tail\\"\\n"
                 "\\t.p2align 2\\n2:\\tmov x29, x29\\n\\tb 3f\\n"
                 "4:\\tb puts\\n3:\\tbl 4b" ::: "x0", "x1", "x2", "x3", "x4",
                 "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13",
                 "x14", "x15", "x16", "x17", "x18", "x30", "memory", "cc");
}
"""


@unittest.skipUnless(HAVE_CROSS, NO_CROSS)
class Aarch64StubsTest(unittest.TestCase):
    """Calls and jumps to imports, libgcc helpers, atomics, long double."""

    @classmethod
    def setUpClass(cls):
        work = helpers.scratch_dir("a64stubs")
        source = helpers.write_source(work, "stubs.c", STUBS)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            jobs = {level: pool.submit(build, [level], [source], "stubs")
                    for level in ("-O0", "-O2")}
            cls.builds = {level: job.result() for level, job in jobs.items()}

    def test_builds_without_outline_atomics(self):
        for level, (library, proc) in self.builds.items():
            with self.subTest(level=level):
                self.assertEqual(proc.returncode, 0, proc.stderr)
                _, image = helpers.image_of(library)
                names = [imp.name for imp in image.imports]
                self.assertIn("__divti3", names)
                self.assertFalse([n for n in names if n.startswith("__aarch64_")])
                self.assertIn("libgcc_s.so.1", image.needed)

    @unittest.skipUnless(HAVE_QEMU, NO_QEMU)
    def test_runs(self):
        runner = build_run_image(helpers.scratch_dir("a64stubsrun"))
        for level, (library, proc) in self.builds.items():
            with self.subTest(level=level):
                self.assertEqual(proc.returncode, 0, proc.stderr)
                native = run_on_qemu(runner, library, "abc", 2, native=True)
                shipped = run_on_qemu(runner, library, "abc", 2)
                self.assertEqual(shipped.returncode, 0, shipped.stderr)
                self.assertEqual(shipped.stdout, native.stdout)
                self.assertEqual(shipped.stdout.splitlines(), [
                    "from asm", "106 2 7 0", "tail",
                    "from asm", "106 4 7 0", "tail"])


@unittest.skipUnless(HAVE_CROSS and shutil.which(CROSS_CXX),
                     "needs %s (Debian: g++-aarch64-linux-gnu)" % CROSS_CXX)
class Aarch64CxxTest(unittest.TestCase):
    @unittest.skipUnless(HAVE_QEMU, NO_QEMU)
    def test_templates_and_inline_statics_in_two_files(self):
        work = helpers.scratch_dir("a64cxx")
        sources = helpers.write_cxx_two_files(work)
        runner = build_run_image(work)
        for level in ("-O0", "-O2"):
            with self.subTest(level=level):
                library, proc = build([level, "-fno-exceptions"], sources, "cx")
                self.assertEqual(proc.returncode, 0, proc.stderr)
                run = run_on_qemu(runner, library, "x", 2)
                self.assertEqual(run.returncode, 0, run.stderr)
                helpers.check_cxx_two_files_output(self, run.stdout)


# name -> (file name, body, extra flags, expected message parts)
REFUSALS = {
    "own_tls": ("own_tls.c", """\
        #include <stddef.h>
        static __thread int counter;
        void own_tls_main(void *p, size_t n, void *t) { counter++; }
        """, [], ["own_tls.c:2: 'counter' is a thread-local variable"]),
    "used_tls": ("used_tls.c", """\
        #include <stddef.h>
        extern __thread int foreign;
        void used_tls_main(void *p, size_t n, void *t)
        {
            *(int *)p = foreign;
        }
        """, ["-O2"], ["used_tls.c:5: in 'used_tls_main': 'foreign' is a "
                       "thread-local variable"]),
    "ctor": ("ctor.c", """\
        #include <stddef.h>
        int ready;
        __attribute__((constructor)) static void setup(void) { ready = 1; }
        void ctor_main(void *p, size_t n, void *t) { }
        """, [], ["ctor.c:3: 'setup' is a constructor"]),
    "got_form": ("got_form.c", """\
        #include <stddef.h>
        void got_form_main(void *p, size_t n, void *t)
        {
            long x;
            asm volatile("ldr %0, [x0, #:gotpage_lo15:foo]" : "=r"(x));
            *(long *)p = x;
        }
        """, [], ["got_form.c:5: in 'got_form_main': unsupported use of "
                  "':gotpage_lo15:foo'"]),
    "literal": ("literal.c", """\
        #include <stddef.h>
        void literal_main(void *p, size_t n, void *t)
        {
            long x;
            asm volatile("ldr %0, =literal_main" : "=r"(x));
            *(long *)p = x;
        }
        """, [], ["literal.c:5: in 'literal_main': text relocation against "
                  "'literal_main'", "compile with -fPIC"]),
    "abs32": ("abs32.c", """\
        #include <stddef.h>
        void abs32_main(void *p, size_t n, void *t)
        {
            asm volatile("movz x0, #:abs_g0:foo" ::: "x0");
        }
        """, [], ["abs32.c:4: in 'abs32_main': 'foo' is referenced by an "
                  "absolute address (R_AARCH64_MOVW_UABS_G0)",
                  "compile with -fPIC"]),
    "hidden_undefined": ("hidden_undefined.c", """\
        #include <stddef.h>
        extern int secret __attribute__((visibility("hidden")));
        void hidden_undefined_main(void *p, size_t n, void *t)
        {
            *(int *)p = secret;
        }
        """, [], ["hidden_undefined.c:5: in 'hidden_undefined_main': "
                  "'secret' is not defined", "hidden visibility"]),
    "misaligned": ("misaligned.c", """\
        #include <stddef.h>
        #include <stdio.h>
        static struct __attribute__((packed)) { char c; const char *s; }
            packed = {1, "x"};
        void misaligned_main(void *p, size_t n, void *t) { puts(packed.s); }
        """, [], ["misaligned.c:4: in 'packed': pointer to the string literal "
                  '"x" at a misaligned address']),
    "indirect": ("indirect.c", """\
        #include <stddef.h>
        static int impl(void) { return 1; }
        static void *pick(void) { return (void *)impl; }
        int chosen(void) __attribute__((ifunc("pick")));
        void indirect_main(void *p, size_t n, void *t) { *(int *)p = chosen(); }
        """, [], ["'chosen' is a GNU indirect function"]),
}

CXX_THROW = ("cxx_throw.cc", """\
    #include <cstddef>
    static void check(size_t n) { if (n > 3) throw 42; }
    extern "C" void cxx_throw_main(void *p, size_t n, void *t)
    {
        check(n);
    }
    """, ["-O0"], ["cxx_throw.cc:2: in '", "C++ throw"])


def _build_refused(case):
    filename, body, flags, _ = case
    work = helpers.scratch_dir("a64refuse")
    source = helpers.write_source(work, filename, body)
    output = os.path.join(work, filename.split(".")[0] + ".so")
    return output, helpers.run_tool(TARGET + flags + ["-o", output, source],
                                    cwd=work)


@unittest.skipUnless(HAVE_CROSS, NO_CROSS)
class Aarch64RefusalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cases = dict(REFUSALS)
        if shutil.which(CROSS_CXX):
            cases["cxx_throw"] = CXX_THROW
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            jobs = {key: pool.submit(_build_refused, case)
                    for key, case in cases.items()}
            cls.results = {key: job.result() for key, job in jobs.items()}
        cls.cases = cases

    def test_refusals(self):
        for key, (_, _, _, needles) in self.cases.items():
            with self.subTest(case=key):
                output, proc = self.results[key]
                lines = helpers.assert_refused(self, output, proc, needles)
                self.assertNotIn("internal", "\n".join(lines))

    @unittest.skipUnless(shutil.which(CROSS_CXX),
                         "needs %s (Debian: g++-aarch64-linux-gnu)" % CROSS_CXX)
    def test_cxx_throw_is_checked(self):
        self.assertIn("cxx_throw", self.results)


if __name__ == "__main__":
    unittest.main()
