"""Command line: option routing, names, messages, atomic output."""

import os
import stat
import unittest

from tests import helpers
from ucx_ifunc.cli import Options, ifunc_name, parse_args
from ucx_ifunc.errors import UserError

HELLO = """\
#include <stddef.h>
#include <stdio.h>
void hello_main(void *p, size_t n, void *t) { puts("hello"); }
"""


class ParseTest(unittest.TestCase):
    def test_options_are_routed(self):
        opts = parse_args([
            "-I", "inc", "-Iinc2", "-DX=1", "-D", "Y", "-UZ", "-include", "h.h",
            "-isystem", "sys", "-O2", "-g", "-fno-omit-frame-pointer",
            "-march=native", "-std=c11", "-Wall", "-pthread", "-o", "out/x.so",
            "a.c", "b.cc", "-lz", "-L", "/opt/lib", "-Wl,-O1", "-l", "m",
            "--cc=gcc", "--cxx", "g++", "--name", "other", "--keep-temps", "t",
            "-v"])
        self.assertEqual(opts.compile_flags, [
            "-I", "inc", "-I", "inc2", "-D", "X=1", "-D", "Y", "-U", "Z",
            "-include", "h.h", "-isystem", "sys", "-O2", "-g",
            "-fno-omit-frame-pointer", "-march=native", "-std=c11", "-Wall",
            "-pthread"])
        self.assertEqual(opts.codegen_flags, [
            "-O2", "-g", "-fno-omit-frame-pointer", "-march=native", "-pthread"])
        self.assertEqual(opts.link_args, ["-lz", "-L/opt/lib", "-Wl,-O1", "-lm"])
        self.assertEqual(opts.sources, ["a.c", "b.cc"])
        self.assertEqual((opts.output, opts.cc, opts.cxx, opts.name,
                          opts.keep_temps, opts.verbose),
                         ("out/x.so", "gcc", "g++", "other", "t", True))

    def test_bad_arguments(self):
        for args, message in ((["-c"], "-c: ucx-ifunc-cc compiles and links"),
                              (["-m32"], "-m32: only x86-64"),
                              (["a.txt"], "a.txt: not a C or C++ source"),
                              (["-o"], "-o: missing argument"),
                              (["--name"], "--name: missing argument")):
            with self.subTest(args=args):
                with self.assertRaises(UserError) as ctx:
                    parse_args(args)
                self.assertTrue(ctx.exception.lines[0].startswith(message),
                                ctx.exception.lines)

    def test_options_it_does_not_interpret_go_to_the_compiler(self):
        opts = parse_args(["-w", "-pedantic", "-shared", "-fPIC",
                           "--param=max-inline-insns-single=10", "a.c"])
        self.assertEqual(opts.compile_flags,
                         ["-w", "-pedantic",
                          "--param=max-inline-insns-single=10"])
        self.assertEqual(opts.sources, ["a.c"])

    def test_ifunc_names(self):
        self.assertEqual(ifunc_name(Options(output="d/my_func.so")), "my_func")
        self.assertEqual(ifunc_name(Options(output="d/x.so", name="y")), "y")
        self.assertEqual(ifunc_name(Options(output="d/%s.so" % ("n" * 63))),
                         "n" * 63)
        for output, name in (("d/1x.so", None), ("d/a-b.so", None),
                             ("d/%s.so" % ("n" * 64), None), ("d/x.so", ""),
                             ("d/x.dylib", None)):
            with self.subTest(output=output, name=name):
                with self.assertRaises(UserError):
                    ifunc_name(Options(output=output, name=name))


class ToolTest(unittest.TestCase):
    def setUp(self):
        self.work = helpers.scratch_dir("cli")

    def source(self, text=HELLO, filename="hello.c"):
        path = os.path.join(self.work, filename)
        with open(path, "w") as stream:
            stream.write(text + helpers.payload_functions(filename.split(".")[0]))
        return path

    def assert_error(self, proc, start):
        self.assertEqual(proc.returncode, 1)
        self.assertNotIn("Traceback", proc.stderr)
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertTrue(lines[0].startswith("ucx-ifunc-cc: error: " + start),
                        lines[0])

    def test_help_and_version(self):
        proc = helpers.run_tool(["--help"])
        self.assertEqual(proc.returncode, 0)
        self.assertIn("usage: ucx-ifunc-cc", proc.stdout)
        self.assertIn("--keep-temps DIR", proc.stdout)
        proc = helpers.run_tool(["--version"])
        self.assertEqual((proc.returncode, proc.stdout),
                         (0, "ucx-ifunc-cc %s\n" % helpers.VERSION))

    def test_habitual_options_build(self):
        out = os.path.join(self.work, "hello.so")
        proc = helpers.run_tool(["-w", "-pedantic", "-shared", "-fPIC", "-O2",
                                 "-o", out, self.source()])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(os.path.exists(out))

    def test_usage_errors(self):
        src = self.source()
        self.assert_error(helpers.run_tool(["-c", src]),
                          "-c: ucx-ifunc-cc compiles and links")
        self.assert_error(helpers.run_tool([src]), "-o: no output file")
        self.assert_error(helpers.run_tool(["-o", "x.so"]), "x.so: no source")
        self.assert_error(helpers.run_tool(["-o", "x.so", "missing.c"]),
                          "missing.c: no such file")
        self.assert_error(helpers.run_tool(["-o", "/nonexistent/x.so", src]),
                          "/nonexistent: the output directory does not exist")
        self.assert_error(helpers.run_tool(["-o", "bad-name.so", src]),
                          "bad-name: not a valid ifunc name")
        self.assert_error(helpers.run_tool(["--dump", src]),
                          src + ": not an ELF file")

    def test_compiler_errors(self):
        src = self.source("#include <stddef.h>\nint broken(void) { return }\n",
                          "broken.c")
        proc = helpers.run_tool(["-o", os.path.join(self.work, "broken.so"), src])
        self.assertEqual(proc.returncode, 1)
        # gcc's diagnostic once (from the ordinary compile), then our line
        self.assertEqual(proc.stderr.count("expected expression"), 1)
        self.assertTrue(proc.stderr.rstrip().endswith(
            "ucx-ifunc-cc: error: %s: cc failed with exit status 1" % src))

    def test_compiler_not_found_and_wrong_target(self):
        src = self.source()
        out = os.path.join(self.work, "hello.so")
        self.assert_error(helpers.run_tool(["--cc=/nonexistent/cc", "-o", out,
                                            src]),
                          "target check: cannot run /nonexistent/cc")
        fake = os.path.join(self.work, "fake-cc")
        with open(fake, "w") as stream:
            stream.write("#!/bin/sh\necho aarch64-linux-gnu\n")
        os.chmod(fake, 0o755)
        self.assert_error(helpers.run_tool(["--cc", fake, "-o", out, src]),
                          fake + ": the compiler targets aarch64-linux-gnu")

    def test_dump_without_image(self):
        proc = helpers.run_tool(["--dump", "/usr/lib/x86_64-linux-gnu/libc.so.6"])
        self.assert_error(proc, "/usr/lib/x86_64-linux-gnu/libc.so.6: no ifunc "
                          "image")

    def test_output_is_replaced_atomically(self):
        src = self.source()
        out = os.path.join(self.work, "hello.so")
        with open(out, "w") as stream:
            stream.write("old")
        broken = self.source(HELLO.replace("puts", "undeclared_fn +"),
                             "hello2.c")
        proc = helpers.run_tool(["-o", out, broken])
        self.assertEqual(proc.returncode, 1)
        with open(out) as stream:
            self.assertEqual(stream.read(), "old")
        old_inode = os.stat(out).st_ino
        proc = helpers.run_tool(["-o", out, src])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        info = os.stat(out)
        self.assertNotEqual(info.st_ino, old_inode)  # renamed into place
        self.assertTrue(info.st_mode & stat.S_IXUSR)
        self.assertEqual(sorted(os.listdir(self.work)),
                         ["hello.c", "hello.so", "hello2.c"])
        name, image = helpers.image_of(out)
        self.assertEqual(name, "hello")
        self.assertEqual([imp.name for imp in image.imports], ["puts"])

    def test_name_option(self):
        src = self.source()
        out = os.path.join(self.work, "libhello-1.so")
        proc = helpers.run_tool(["--name", "hello", "-o", out, src])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(helpers.image_of(out)[0], "hello")


if __name__ == "__main__":
    unittest.main()
