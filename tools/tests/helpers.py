"""Shared helpers of the ucx-ifunc-cc tests.

The tool under test is $IFUNC_TEST_CC if set, else a launcher made from
tools/ucx-ifunc-cc.in for this source tree and this Python. The version it
must print is $IFUNC_TEST_VERSION, the build's (make check sets both), else
the one configure.ac of this source tree defines.
"""

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

from ucx_ifunc import elf_query
from ucx_ifunc import image_format as fmt

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
TOOLS_DIR = os.path.dirname(TESTS_DIR)
DATA_DIR = os.path.join(TESTS_DIR, "data")
RUN_IMAGE = os.path.join(TESTS_DIR, "run_image.py")

_scratch = tempfile.mkdtemp(prefix="ucx-ifunc-tests.")
atexit.register(shutil.rmtree, _scratch, True)


def _configured_version():
    """major.minor.release as configure.ac defines them."""
    with open(os.path.join(TOOLS_DIR, os.pardir, "configure.ac")) as stream:
        text = stream.read()
    parts = [re.search(r"m4_define\(\[ucx_ifunc_%s\], \[(\d+)\]\)" % part,
                       text).group(1)
             for part in ("major", "minor", "release")]
    return ".".join(parts)


VERSION = os.environ.get("IFUNC_TEST_VERSION") or _configured_version()


def _make_launcher():
    with open(os.path.join(TOOLS_DIR, "ucx-ifunc-cc.in")) as stream:
        text = stream.read()
    text = text.replace("@PYTHON@", sys.executable)
    text = text.replace("@UCX_IFUNC_PYDIR@", TOOLS_DIR)
    text = text.replace("@PACKAGE_VERSION@", VERSION)
    path = os.path.join(_scratch, "ucx-ifunc-cc")
    with open(path, "w") as stream:
        stream.write(text)
    os.chmod(path, 0o755)
    return path


LAUNCHER = os.environ.get("IFUNC_TEST_CC") or _make_launcher()


def scratch_dir(prefix):
    return tempfile.mkdtemp(prefix=prefix + ".", dir=_scratch)


def run_tool(args, cwd=None, env=None):
    """Runs ucx-ifunc-cc; returns the CompletedProcess (text output)."""
    return subprocess.run([LAUNCHER] + list(args), cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def payload_functions(name, cxx=False):
    """Trivial payload functions, for sources that test NAME_main."""
    linkage = 'extern "C" ' if cxx else ""
    return textwrap.dedent("""\
        #include <stddef.h>
        {c}size_t {n}_payload_bound(void *a, size_t n) {{ return n; }}
        {c}int {n}_payload_init(void *a, size_t n, void *p, size_t *ps)
        {{ *ps = 0; return 0; }}
        """).format(c=linkage, n=name)


def write_source(directory, filename, body, with_payload=True):
    """Writes a source of ifunc NAME (the file's stem). The body comes first,
    so its line numbers are the file's; trivial payload functions follow."""
    name = filename.split(".")[0]
    text = textwrap.dedent(body)
    if with_payload:
        text = text + "\n" + payload_functions(name, filename.endswith(".cc"))
    path = os.path.join(directory, filename)
    with open(path, "w") as stream:
        stream.write(text)
    return path


def write_cxx_two_files(directory):
    """A C++ ifunc 'cx' in two files: a template and an inline function with
    a static counter (one COMDAT group) used by both. Returns the sources."""
    write_source(directory, "common.h", """\
        #include <algorithm>
        #include <vector>
        inline int bump() { static int calls; return ++calls; }
        template <typename T> T total(const std::vector<T> &v)
        { T s = 0; for (T x : v) s += x; return s; }
        int other(int x);
        """, with_payload=False)
    main = write_source(directory, "cx.cc", """\
        #include <cstdio>
        #include "common.h"
        extern "C" void cx_main(void *p, size_t n, void *t)
        {
            std::vector<int> v = {5, 3, 9};
            std::sort(v.begin(), v.end());
            std::printf("%d %d %d %d\\n", v[0], total(v), bump(), other(2));
        }
        """)
    other = write_source(directory, "cx2.cc", """\
        #include "common.h"
        int other(int x) { return x * 100 + bump(); }
        """, with_payload=False)
    return [main, other]


def check_cxx_two_files_output(test, stdout):
    """What write_cxx_two_files' ifunc prints in two runs: one bump()
    counter for both files (the COMDAT group kept once), which persists, so
    each run bumps it twice."""
    sums = [sum(int(f) for f in line.split()[2:])
            for line in stdout.splitlines()]
    test.assertEqual(stdout.split()[:2], ["3", "17"])
    test.assertEqual(sums, [203, 207])


def check_kitchen_runs(test, native, shipped, first_line_end):
    """kitchen.c run three times as an image (@shipped) and from its library
    (@native): the same output; statics persist between runs; errno, the
    target's variable and the unresolved weak hook come through (the first
    line ends with @first_line_end)."""
    test.assertEqual(native.returncode, 0, native.stderr)
    test.assertEqual(shipped.returncode, 0, shipped.stderr)
    test.assertEqual(shipped.stdout, native.stdout)
    lines = shipped.stdout.splitlines()
    test.assertEqual(len(lines), 6)
    test.assertEqual([line.split("|")[6] for line in lines[::2]],
                     ["1", "2", "3"])
    test.assertTrue(lines[0].startswith("gamma|five|34|"), lines[0])
    test.assertTrue(lines[0].endswith(first_line_end), lines[0])
    test.assertEqual(lines[1], "via a table of function pointers")
    return lines


def assert_refused(test, output, proc, needles):
    """Asserts a build failed cleanly, naming every needle; returns the
    error lines."""
    test.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
    test.assertNotIn("Traceback", proc.stderr)
    test.assertFalse(os.path.exists(output))
    lines = [line for line in proc.stderr.splitlines()
             if line.startswith("ucx-ifunc-cc: error: ")]
    test.assertTrue(lines, proc.stderr)
    text = "\n".join(lines)
    for needle in needles:
        test.assertIn(needle, text)
    return lines


def image_of(library):
    """(ifunc name, decoded Image) embedded in a built library."""
    name, blob = elf_query.read_embedded_image(library)
    return name, fmt.decode(blob)


def run_image(library, text, runs, preload=(), native=False):
    cmd = [sys.executable, RUN_IMAGE] + (["--native"] if native else []) + \
        [library, text, str(runs)] + list(preload)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)


def compile_shared(source, output):
    subprocess.run(["cc", "-shared", "-fPIC", source, "-o", output], check=True)
    return output
