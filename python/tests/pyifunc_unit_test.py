"""The builder of Python ifuncs (ucx_ifunc.ifunc): images, triples,
signatures, the refused constructs and their lines, and the shipped code
run (compiled by llc-14 as the target's JIT would, linked with a C caller).

Run by test/python-builder-tests.sh ("make check").
"""

import ctypes
import inspect
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir))
# The package's bindings load the C library when it is imported: the
# build's, where there is one
_LIBRARY = os.path.join(os.environ.get("IFUNC_TEST_BUILDDIR") or
                        os.path.join(HERE, os.pardir, os.pardir, "build"),
                        ".libs", "libucp_ifunc.so.0")
if os.path.exists(_LIBRARY):
    os.environ.setdefault("PY_UCX_IFUNC_LIBRARY", os.path.abspath(_LIBRARY))

# ucx_ifunc first: its C library has initial-exec TLS, which a dlopen
# after Numba's LLVM may find exhausted
import ucx_ifunc  # noqa: E402
from ucx_ifunc import _toolchain  # noqa: E402

import numpy as np  # noqa: E402
from numba import carray, types  # noqa: E402

fmt = _toolchain.load("image_format")
signing = _toolchain.load("signing")


def scan(payload, size, target_args):
    values = carray(payload, size // 8, np.int64)
    out = carray(target_args, 2, np.int64)
    total = 0
    for i in range(values.shape[0]):
        total += values[i]
    out[1] = total
    out[0] = 1


def maths(payload, size, target_args):
    x = carray(payload, size // 8, np.float64)
    out = carray(target_args, 2, np.float64)
    out[1] = math.sin(x[0]) + math.pow(x[1], x[3]) + x[2] % 3.0
    out[0] = 1.0


def raises(payload, size, target_args):
    values = carray(payload, size // 8, np.int64)
    if values[0] < 0:
        raise ValueError("negative")  # refused: raise
    values[0] = 0


def allocates(payload, size, target_args):
    values = carray(payload, size // 8, np.int64)
    scratch = np.empty(4, np.int64)  # refused: allocation
    scratch[0] = values[0]
    values[1] = scratch[0]


def uses_object(payload, size, target_args):
    thing = object()  # refused: object
    return thing


not_libc = types.ExternalFunction("compressBound", types.int64(types.int64))


def calls_zlib(payload, size, target_args):
    values = carray(payload, size // 8, np.int64)
    values[0] = not_libc(values[1])  # refused: not libc


_libc = ctypes.CDLL("libc.so.6")
_labs = _libc.labs
_labs.restype = ctypes.c_long
_labs.argtypes = [ctypes.c_long]


def calls_address(payload, size, target_args):
    values = carray(payload, size // 8, np.int64)
    values[0] = _labs(values[1])  # refused: address


def prints(payload, size, target_args):
    print(size)  # refused: print


HOST_ADDRESS = 0x7f0000001000


def constant_pointer(payload, size, target_args):
    values = carray(ucx_ifunc.pointer(HOST_ADDRESS), 1, np.int64)
    values[0] = size  # refused: constant pointer


def marked_line(function, marker):
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if marker in line)


def split_images(blob):
    """The images that PythonIfunc.images() put back to back."""
    found, offset = [], 0
    while offset < len(blob):
        if offset % 8:
            raise AssertionError("image at offset %d" % offset)
        image = fmt.decode(blob[offset:])
        size = fmt._DESC_HEAD.unpack_from(blob, offset)[5]
        found.append((image, blob[offset:offset + size]))
        offset += size
    return found


class ImageTest(unittest.TestCase):

    def test_default_triples(self):
        built = ucx_ifunc.ifunc(scan)
        images = split_images(built.images())
        self.assertEqual([i.machine for i, _ in images],
                         [fmt.EM_X86_64, fmt.EM_AARCH64, fmt.EM_PPC64])
        self.assertEqual([i.triple for i, _ in images],
                         ["x86_64-unknown-linux-gnu",
                          "aarch64-unknown-linux-gnu",
                          "powerpc64le-unknown-linux-gnu"])
        for image, _ in images:
            self.assertEqual(image.flags, fmt.FLAG_BITCODE)
            self.assertEqual([s.name for s in image.symbols], ["scan_main"])
            self.assertEqual(image.imports, [])
            self.assertIsNone(image.signature)
            self.assertTrue(image.segments[0].data.startswith(
                fmt.BITCODE_MAGICS))

    def test_name_and_triples(self):
        built = ucx_ifunc.ifunc(name="sum64", triples=["aarch64-linux-gnu"])(
            scan)
        images = split_images(built.images())
        self.assertEqual(len(images), 1)
        self.assertEqual(images[0][0].machine, fmt.EM_AARCH64)
        self.assertEqual(images[0][0].symbols[0].name, "sum64_main")
        one = split_images(built.images(["powerpc64le-linux-gnu"]))
        self.assertEqual(one[0][0].machine, fmt.EM_PPC64)
        with self.assertRaises(ValueError):
            ucx_ifunc.ifunc(scan, name="not a name")

    def test_unknown_triple(self):
        with self.assertRaisesRegex(ValueError, "unknown target triple"):
            ucx_ifunc.ifunc(scan).images(["mips-linux-gnu"])

    def test_host_cpu_removed(self):
        module = ucx_ifunc.ifunc(scan).module("powerpc64le-linux-gnu")
        for attribute in ("target-cpu", "target-features", "tune-cpu"):
            self.assertNotIn(attribute, module.text)
        self.assertIn('target triple = "powerpc64le-unknown-linux-gnu"',
                      module.text)
        exported = [g.name for g in module.parsed.globals.values()
                    if g.defined and g.linkage == ""]
        self.assertEqual(exported, ["scan_main"])

    def test_loops_left_to_the_target(self):
        """Not vectorised at this host's width: the target's JIT does it
        for its CPU."""
        module = ucx_ifunc.ifunc(scan).module("x86_64-linux-gnu")
        self.assertNotRegex(module.text, r"<\d+ x i64>")
        self.assertIn("br ", module.text)

    def test_libm_imports(self):
        image, _ = split_images(ucx_ifunc.ifunc(maths).images(
            ["x86_64-linux-gnu"]))[0]
        names = [i.name for i in image.imports]
        for name in ("sin", "pow", "fmod"):
            self.assertIn(name, names)
        self.assertEqual(image.needed, ["libm.so.6", "libc.so.6"])

    @unittest.skipIf(shutil.which("llc-14") is None, "llc-14 not installed")
    def test_bitcode_compiles_for_each_triple(self):
        with tempfile.TemporaryDirectory() as work:
            for image, _ in split_images(ucx_ifunc.ifunc(scan).images()):
                path = os.path.join(work, "%d.bc" % image.machine)
                with open(path, "wb") as stream:
                    stream.write(image.segments[0].data)
                subprocess.run(["llc-14", "-O2", "-filetype=obj", path, "-o",
                                path + ".o"], check=True)


class LocalRunTest(unittest.TestCase):

    def test_run_here(self):
        values = np.arange(-50, 950, dtype=np.int64)
        out = np.zeros(2, np.int64)
        ucx_ifunc.ifunc(scan).run(values, out)
        self.assertEqual(list(out), [1, values.sum()])
        with self.assertRaises(ValueError):
            ucx_ifunc.ifunc(scan).run(values, bytes(16))


class SigningTest(unittest.TestCase):

    def test_signed_images_verify(self):
        with tempfile.TemporaryDirectory() as work:
            secret, public = signing.generate(os.path.join(work, "k"))
            built = ucx_ifunc.ifunc(scan)
            images = split_images(built.images(key=secret))
            public_key = signing.load_public_key(public)
            for image, blob in images:
                self.assertEqual(image.signature.public_key, public_key)
                self.assertTrue(signing.verify("scan", blob, public_key))
                changed = bytearray(blob)
                changed[image.segments[0].file_offset + 40] ^= 1
                self.assertFalse(signing.verify("scan", bytes(changed),
                                                public_key))
                self.assertFalse(signing.verify("other", blob, public_key))

    def test_secret_key_readable_by_others(self):
        with tempfile.TemporaryDirectory() as work:
            secret, _ = signing.generate(os.path.join(work, "k"))
            os.chmod(secret, 0o644)
            with self.assertRaisesRegex(ValueError, "mode 0600"):
                ucx_ifunc.ifunc(scan).images(key=secret)


class RefusalTest(unittest.TestCase):

    def refused(self, function, marker, construct):
        with self.assertRaises(ucx_ifunc.BuildError) as caught:
            ucx_ifunc.ifunc(function).images()
        err = caught.exception
        self.assertEqual(err.line, marked_line(function, marker), str(err))
        self.assertEqual(err.filename, os.path.abspath(__file__))
        self.assertIn(construct, err.construct)
        self.assertEqual(len(str(err).splitlines()), 1)
        self.assertTrue(str(err).startswith("%s:%d: in '%s': " % (
            err.filename, err.line, function.__name__)), str(err))
        return err

    def test_raise(self):
        self.refused(raises, "refused: raise", "an exception")

    def test_allocation(self):
        self.refused(allocates, "refused: allocation", "memory allocation")

    def test_object(self):
        err = self.refused(uses_object, "refused: object",
                           "without the Python interpreter")
        self.assertIn("object", err.construct)

    def test_not_libc(self):
        self.refused(calls_zlib, "refused: not libc",
                     "'compressBound', which is not a C library function")

    def test_address(self):
        self.refused(calls_address, "refused: address",
                     "an address of this process")

    def test_print(self):
        self.refused(prints, "refused: print", "a Python object")

    def test_constant_pointer(self):
        self.refused(constant_pointer, "refused: constant pointer",
                     "an address of this process")


RUNNER = r"""
#include <stdint.h>
#include <stdio.h>
void scan_main(void *payload, size_t size, void *target_args);
int main(void)
{
    int64_t values[1000], out[2] = {0, 0}, expect = 0;
    for (int i = 0; i < 1000; ++i) {
        values[i] = (i * 7919) %% 1013 - 500;
        expect += values[i];
    }
    scan_main(values, sizeof(values), out);
    printf("%%lld %%lld %%lld\n", (long long)out[0], (long long)out[1],
           (long long)expect);
    return 0;
}
"""


@unittest.skipIf(shutil.which("llc-14") is None or
                 shutil.which("clang-14") is None, "llvm-14 not installed")
class RunTest(unittest.TestCase):
    """The x86-64 image's code, compiled for this CPU as the JIT does,
    called by C as a target calls it."""

    def test_scan_runs(self):
        import platform
        if platform.machine() != "x86_64":
            self.skipTest("an x86-64 host")
        with tempfile.TemporaryDirectory() as work:
            image, _ = split_images(ucx_ifunc.ifunc(scan).images(
                ["x86_64-linux-gnu"]))[0]
            bc = os.path.join(work, "scan.bc")
            with open(bc, "wb") as stream:
                stream.write(image.segments[0].data)
            subprocess.run(["llc-14", "-O2", "-mcpu=native",
                            "-relocation-model=pic", "-filetype=obj", bc,
                            "-o", bc + ".o"], check=True)
            runner = os.path.join(work, "runner.c")
            with open(runner, "w") as stream:
                stream.write(RUNNER % ())
            program = os.path.join(work, "runner")
            subprocess.run(["clang-14", "-O1", runner, bc + ".o", "-o",
                            program], check=True)
            done, total, expect = map(int, subprocess.run(
                [program], check=True, capture_output=True).stdout.split())
            self.assertEqual(done, 1)
            self.assertEqual(total, expect)


if __name__ == "__main__":
    unittest.main()
