"""The two conventions of the payload functions (the paper's and the
workshop slides'): both build, a payload_init in the other convention's
argument order is a compile error that names the function and both
conventions, and how the tool finds the convention in the sources' text."""

import concurrent.futures
import os
import textwrap
import unittest

from tests import helpers
from ucx_ifunc import conventions
from ucx_ifunc.elf_query import exported_symbols

MAIN = """\
void {n}_main(void *payload, size_t payload_size, void *target_args)
{{
    (void)payload; (void)payload_size; (void)target_args;
}}
"""
PAPER_BOUND = """\
size_t {n}_payload_get_max_size(void *source_args, size_t source_args_size)
{{
    (void)source_args; return source_args_size;
}}
"""
SLIDES_BOUND = PAPER_BOUND.replace("_payload_get_max_size", "_payload_bound")
PAPER_INIT = """\
int {n}_payload_init(void *payload, size_t payload_size, void *source_args,
                     size_t source_args_size)
{{
    memcpy(payload, source_args, source_args_size < payload_size ?
                                 source_args_size : payload_size);
    return 0;
}}
"""
SLIDES_INIT = """\
int {n}_payload_init(void *source_args, size_t source_args_size,
                     void *payload, size_t *payload_size)
{{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}}
"""
HEAD = "#include <stddef.h>\n#include <string.h>\n"
CXX_HEAD = HEAD + 'extern "C" {{\n'

# name -> the files of a library: [(file name, text)]; NAME is the key.
LIBRARIES = {
    "paper_ok": [("paper_ok.c", HEAD + PAPER_BOUND + PAPER_INIT + MAIN)],
    "slides_ok": [("slides_ok.c", HEAD + SLIDES_BOUND + SLIDES_INIT + MAIN)],
    # a half-done port: renamed to the slides' bound, the paper's order kept
    "slides_paper_order": [("slides_paper_order.c",
                            HEAD + SLIDES_BOUND + PAPER_INIT + MAIN)],
    "paper_slides_order": [("paper_slides_order.c",
                            HEAD + PAPER_BOUND + SLIDES_INIT + MAIN)],
    "cxx_paper_slides_order": [("cxx_paper_slides_order.cc",
                                CXX_HEAD + PAPER_BOUND + SLIDES_INIT + MAIN +
                                "}}\n")],
    # main in one file, the payload functions in another
    "split_paper": [("split_paper.c", HEAD + MAIN),
                    ("split_paper_payload.c", HEAD + PAPER_BOUND + PAPER_INIT)],
    "split_wrong": [("split_wrong.c", HEAD + MAIN),
                    ("split_wrong_payload.c",
                     HEAD + PAPER_BOUND + SLIDES_INIT)],
    "bad_main": [("bad_main.c", HEAD + PAPER_BOUND + PAPER_INIT +
                  MAIN.replace("void *payload,", "const char *payload,"))],
    "both_bounds": [("both_bounds.c", HEAD + PAPER_BOUND + SLIDES_BOUND +
                     PAPER_INIT + MAIN)],
}


def _build(name):
    work = helpers.scratch_dir("conv")
    sources = []
    for filename, text in LIBRARIES[name]:
        path = os.path.join(work, filename)
        with open(path, "w") as stream:
            stream.write(text.format(n=name))
        sources.append(path)
    output = os.path.join(work, name + ".so")
    return output, sources, helpers.run_tool(
        ["-O2", "-Wall", "-Wextra", "-Werror", "-o", output] + sources)


class ConventionBuildTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            jobs = {name: pool.submit(_build, name) for name in LIBRARIES}
            cls.results = {name: job.result() for name, job in jobs.items()}

    def built(self, name, bound_suffix):
        output, _, proc = self.results[name]
        self.assertEqual(proc.returncode, 0, proc.stderr)
        exported = exported_symbols(output)
        self.assertIn(name + bound_suffix, exported)
        self.assertIn(name + "_payload_init", exported)

    def refused(self, name, *needles):
        output, _, proc = self.results[name]
        return helpers.assert_refused(self, output, proc, needles)

    def assert_names_both_conventions(self, line, name):
        for convention in conventions.CONVENTIONS:
            self.assertIn("%s convention (%s)" % (convention.title,
                                                  convention.bound(name)),
                          line)
            for prototype in convention.prototypes(name):
                self.assertIn(prototype, line)

    def test_both_conventions_build(self):
        self.built("paper_ok", "_payload_get_max_size")
        self.built("slides_ok", "_payload_bound")
        self.built("split_paper", "_payload_get_max_size")

    def test_slides_bound_with_the_papers_order(self):
        name = "slides_paper_order"
        lines = self.refused(
            name, "%s.c:7: %s_payload_init: its prototype is not the one of "
            "the workshop slides' convention, which this library follows "
            "because it defines %s_payload_bound" % (name, name, name))
        self.assert_names_both_conventions(lines[0], name)
        self.assertIn("cc failed", lines[1])

    def test_papers_bound_with_the_slides_order(self):
        name = "paper_slides_order"
        lines = self.refused(
            name, "%s.c:7: %s_payload_init: its prototype is not the one of "
            "the paper's convention, which this library follows because it "
            "defines %s_payload_get_max_size" % (name, name, name))
        self.assert_names_both_conventions(lines[0], name)

    def test_cxx_sources_are_checked(self):
        name = "cxx_paper_slides_order"
        lines = self.refused(name, "%s.cc:8: %s_payload_init: its prototype "
                             "is not the one of the paper's" % (name, name))
        self.assert_names_both_conventions(lines[0], name)

    def test_convention_of_a_library_split_over_files(self):
        _, sources, _ = self.results["split_wrong"]
        lines = self.refused("split_wrong", "%s:7: split_wrong_payload_init: "
                             "its prototype is not the one of the paper's"
                             % sources[1])
        self.assert_names_both_conventions(lines[0], "split_wrong")

    def test_main_is_checked(self):
        self.refused("bad_main", "bad_main.c:14: bad_main_main: its prototype "
                     "must be void bad_main_main(void *payload, size_t "
                     "payload_size, void *target_args)",
                     "bad_main_payload_get_max_size", "bad_main_payload_bound")

    def test_both_bound_functions_are_refused(self):
        self.refused("both_bounds", "both_bounds_payload_get_max_size, "
                     "both_bounds_payload_bound: both defined",
                     conventions.PAPER.prototypes("both_bounds")[1],
                     conventions.SLIDES.prototypes("both_bounds")[1])


class DetectTest(unittest.TestCase):
    def detect(self, *texts):
        work = helpers.scratch_dir("detect")
        sources = []
        for index, text in enumerate(texts):
            path = os.path.join(work, "s%d.c" % index)
            with open(path, "w") as stream:
                stream.write(textwrap.dedent(text))
            sources.append(path)
        return conventions.detect("f", sources)

    def test_the_bound_function_named_decides(self):
        self.assertIs(self.detect("size_t f_payload_get_max_size(void);"),
                      conventions.PAPER)
        self.assertIs(self.detect("void f_main(void);",
                                  "size_t f_payload_bound(void);"),
                      conventions.SLIDES)

    def test_comments_and_strings_do_not_count(self):
        self.assertIs(self.detect("""\
            /* was f_payload_bound before the port */
            // f_payload_bound
            const char *s = "f_payload_bound", c = 'f';
            size_t f_payload_get_max_size(void);
            """), conventions.PAPER)

    def test_neither_or_both_named(self):
        self.assertIsNone(self.detect("void f_main(void);"))
        self.assertIsNone(self.detect("size_t f_payload_bound(void);",
                                      "size_t f_payload_get_max_size(void);"))
        # another ifunc's bound function says nothing of this one
        self.assertIsNone(self.detect("size_t g_payload_bound(void);"))

    def test_names_made_by_macros(self):
        self.assertIs(self.detect("""\
            #define FN(suffix) CAT(IFUNC_NAME, suffix)
            size_t FN(_payload_get_max_size)(void *a, size_t n);
            """), conventions.PAPER)
        # a full name wins over a pasted suffix
        self.assertIs(self.detect("size_t f_payload_bound(void);",
                                  "x = CAT(g, _payload_get_max_size);"),
                      conventions.SLIDES)

    def test_header_declares_the_conventions_prototypes(self):
        text = conventions.header_text("f", conventions.PAPER)
        self.assertIn("int f_payload_init(void *payload, __SIZE_TYPE__ "
                      "payload_size, void *source_args, __SIZE_TYPE__ "
                      "source_args_size);", text)
        self.assertIn('extern "C" {', text)
        self.assertNotIn("f_payload_bound", text)
        self.assertNotIn("_payload_", conventions.header_text("f", None))


if __name__ == "__main__":
    unittest.main()
