"""What ucx-ifunc-cc must refuse, and the one-line messages it gives.

Each refused source is compiled for real; the message must name the place
(file:line or the symbol) and no traceback may show."""

import concurrent.futures
import os
import unittest

from tests import helpers

# name -> (file name, body, extra flags). Bodies start at line 1.
CASES = {
    "own_tls": ("own_tls.c", """\
        #include <stddef.h>
        static __thread int counter;
        void own_tls_main(void *p, size_t n, void *t) { counter++; }
        """, []),
    "cxx_throw": ("cxx_throw.cc", """\
        #include <cstddef>
        static void check(size_t n) { if (n > 3) throw 42; }
        extern "C" void cxx_throw_main(void *p, size_t n, void *t)
        {
            check(n);
        }
        """, ["-O0"]),
    "ctor": ("ctor.c", """\
        #include <stddef.h>
        int ready;
        __attribute__((constructor)) static void setup(void) { ready = 1; }
        void ctor_main(void *p, size_t n, void *t) { }
        """, []),
    "got_form": ("got_form.c", """\
        #include <stddef.h>
        extern long foo;
        void got_form_main(void *p, size_t n, void *t)
        {
            long x = (long)n;
            asm volatile("addq foo@GOTPCREL(%%rip), %0" : "+r"(x));
            *(long *)p = x;
        }
        """, []),
    "abs32": ("abs32.c", """\
        #include <stddef.h>
        extern char foo[];
        void abs32_main(void *p, size_t n, void *t)
        {
            asm volatile("movl $foo, %%eax" ::: "eax");
        }
        """, []),
    "text_reloc": ("text_reloc.c", """\
        #include <stddef.h>
        void text_reloc_main(void *p, size_t n, void *t)
        {
            asm volatile("jmp 1f\\n.quad text_reloc_main\\n1:");
        }
        """, []),
    "hidden_undefined": ("hidden_undefined.c", """\
        #include <stddef.h>
        extern int secret __attribute__((visibility("hidden")));
        void hidden_undefined_main(void *p, size_t n, void *t)
        {
            *(int *)p = secret;
        }
        """, []),
    "misaligned": ("misaligned.c", """\
        #include <stddef.h>
        #include <stdio.h>
        static struct __attribute__((packed)) { char c; const char *s; }
            packed = {1, "x"};
        void misaligned_main(void *p, size_t n, void *t) { puts(packed.s); }
        """, []),
    "indirect": ("indirect.c", """\
        #include <stddef.h>
        static int impl(void) { return 1; }
        static void *pick(void) { return (void *)impl; }
        int chosen(void) __attribute__((ifunc("pick")));
        void indirect_main(void *p, size_t n, void *t) { *(int *)p = chosen(); }
        """, []),
    "not_exported": ("not_exported.c", """\
        #include <stddef.h>
        void not_exported_main(void *p, size_t n, void *t) { }
        """, ["-fvisibility=hidden"]),
    "no_main": ("no_main.c", """\
        #include <stddef.h>
        void no_main_helper(void) { }
        """, []),
    "no_bound": ("no_bound.c", """\
        #include <stddef.h>
        int no_bound_payload_init(void *a, size_t n, void *p, size_t *ps)
        { return 0; }
        void no_bound_main(void *p, size_t n, void *t) { }
        """, []),
}

# Code that only the payload functions reach may do anything.
PAYLOAD_ONLY = ("payload_only.c", """\
    #include <stddef.h>
    extern __thread int foreign_tls;
    extern long foo;
    size_t payload_only_payload_bound(void *a, size_t n)
    {
        long x = foreign_tls;
        asm volatile("addq foo@GOTPCREL(%%rip), %0" : "+r"(x));
        return n + (size_t)x;
    }
    int payload_only_payload_init(void *a, size_t n, void *p, size_t *ps)
    {
        *ps = 0;
        return 0;
    }
    void payload_only_main(void *p, size_t n, void *t) { }
    """, [])


def _build(case):
    filename, body, flags = case
    work = helpers.scratch_dir("refuse")
    source = helpers.write_source(work, filename, body,
                                  with_payload="_payload_init" not in body)
    name = filename.split(".")[0]
    output = os.path.join(work, name + ".so")
    return output, helpers.run_tool(flags + ["-o", output, source], cwd=work)


class RefusalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            jobs = {key: pool.submit(_build, case) for key, case in CASES.items()}
            jobs["payload_only"] = pool.submit(_build, PAYLOAD_ONLY)
            cls.results = {key: job.result() for key, job in jobs.items()}

    def refused(self, key, *needles):
        """Asserts the build failed cleanly; returns its error lines."""
        output, proc = self.results[key]
        return helpers.assert_refused(self, output, proc, needles)

    def test_own_thread_local_variable(self):
        self.refused("own_tls", "own_tls.c:2: 'counter' is a thread-local "
                     "variable")

    def test_cxx_throw(self):
        self.refused("cxx_throw", "cxx_throw.cc:2: in '", "C++ throw")

    def test_constructor_anywhere(self):
        self.refused("ctor", "ctor.c:3: 'setup' is a constructor")

    def test_unknown_got_form(self):
        self.refused("got_form", "got_form.c:6: in 'got_form_main': "
                     "unsupported use of 'foo@GOTPCREL'")

    def test_absolute_32_bit_address(self):
        self.refused("abs32", "abs32.c:5: in 'abs32_main': 'foo'",
                     "compile with -fPIC")

    def test_text_relocation(self):
        self.refused("text_reloc", "text relocation against 'text_reloc_main'",
                     "compile with -fPIC")

    def test_hidden_undefined_symbol(self):
        self.refused("hidden_undefined", "hidden_undefined.c:5: in "
                     "'hidden_undefined_main': 'secret' is not defined",
                     "hidden visibility")

    def test_misaligned_pointer(self):
        # data has no line table: the line is the variable's definition
        self.refused("misaligned", "misaligned.c:4: in 'packed': pointer to "
                     'the string literal "x" at a misaligned address')

    def test_gnu_indirect_function(self):
        self.refused("indirect", "'chosen' is a GNU indirect function")

    def test_functions_must_be_exported(self):
        self.refused("not_exported", "not_exported_payload_bound: not "
                     "exported", 'visibility("default")')

    def test_missing_functions_are_named(self):
        [line] = self.refused("no_main", "error: no_main_main: not defined")
        self.assertNotIn("no_main_payload_bound:", line)
        # either convention's bound function would do: the line names both
        self.refused("no_bound", "error: no_bound_payload_get_max_size or "
                     "no_bound_payload_bound: not defined",
                     "no_bound_payload_get_max_size (the paper's convention) "
                     "or no_bound_payload_bound (the workshop slides')")

    def test_duplicate_definition(self):
        work = helpers.scratch_dir("dup")
        first = helpers.write_source(work, "dup.c", """\
            #include <stddef.h>
            int shared = 1;
            void dup_main(void *p, size_t n, void *t) { }
            """)
        second = helpers.write_source(work, "dup2.c", "int shared = 2;\n",
                                      with_payload=False)
        proc = helpers.run_tool(["-o", os.path.join(work, "dup.so"), first,
                                 second])
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stderr, "ucx-ifunc-cc: error: %s:2: 'shared' is "
                         "defined in both %s and %s\n" % (first, first, second))

    def test_anything_goes_in_payload_only_code(self):
        output, proc = self.results["payload_only"]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        _, image = helpers.image_of(output)
        self.assertEqual(image.imports, [])


if __name__ == "__main__":
    unittest.main()
