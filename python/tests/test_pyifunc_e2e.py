"""Python-written ifuncs end to end: built by ucx_ifunc.ifunc, registered
from memory (ucp_ifunc_code_register), sent over UCX_TLS=sm and tcp, run by
a C target's JIT (test/python/c_target), under UCX_IFUNC_TRUST=signed:
signed with a trusted key it runs, unsigned it is refused.

Needs the build (IFUNC_TEST_BUILDDIR, which "make check" sets, or build/
beside the sources).
"""

import os
import random
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.join(HERE, os.pardir, os.pardir)
sys.path.insert(0, os.path.join(TOP, "python"))

import numpy as np  # noqa: E402
from numba import carray  # noqa: E402

import ucx_ifunc  # noqa: E402
from ucx_ifunc import _toolchain  # noqa: E402

BUILD = os.path.abspath(os.environ.get("IFUNC_TEST_BUILDDIR") or
                        os.path.join(TOP, "build"))
C_TARGET = os.path.join(BUILD, "test", "python", "c_target")
IMAGE_SOURCE = os.path.join(BUILD, "test", "python", "image_source")


@ucx_ifunc.ifunc
def total(payload, size, target_args):
    values = carray(payload, size // 8, np.int64)
    out = carray(target_args, 2, np.int64)
    s = 0
    for i in range(values.shape[0]):
        s += values[i]
    out[1] = s
    out[0] = 1


def start_target(env, seconds, log):
    """c_target on a free port: (process, port)."""
    for _ in range(20):
        port = random.randint(20000, 40000)
        process = subprocess.Popen([C_TARGET, str(port), str(seconds)],
                                   stdout=log, stderr=subprocess.STDOUT,
                                   env=env)
        for _ in range(100):
            with open(log.name) as stream:
                if "listening on port" in stream.read():
                    return process, port
            if process.poll() is not None:
                break
            time.sleep(0.05)
        process.kill()
        process.wait()
    raise AssertionError("c_target did not listen")


@unittest.skipUnless(os.path.exists(C_TARGET) and
                     os.path.exists(IMAGE_SOURCE),
                     "build the tree first (make check builds %s)" % C_TARGET)
class CTargetTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory()
        signing = _toolchain.load("signing")
        cls.secret, cls.public = signing.generate(
            os.path.join(cls.work.name, "site"))
        cls.values = (np.arange(1000, dtype=np.int64) * 7919) % 1013 - 500
        cls.payload = os.path.join(cls.work.name, "payload")
        cls.values.tofile(cls.payload)

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def run_pair(self, tls, images, seconds=30):
        """Sends images to a C target: (source status, target status,
        the target's output)."""
        path = os.path.join(self.work.name, "images-%s" % tls)
        with open(path, "wb") as stream:
            stream.write(images)
        env = dict(os.environ, UCX_TLS=tls, UCX_IFUNC_TRUST="signed",
                   UCX_IFUNC_TRUSTED_KEYS=self.public,
                   UCX_WARN_UNUSED_ENV_VARS="n")
        with tempfile.NamedTemporaryFile("w+", dir=self.work.name) as log:
            target, port = start_target(env, seconds, log)
            source = subprocess.run(
                [IMAGE_SOURCE, "localhost:%d" % port, "total", path,
                 self.payload], env=env, capture_output=True, text=True,
                timeout=60)
            target.wait(timeout=seconds + 30)
            with open(log.name) as stream:
                said = stream.read()
        return source.returncode, target.returncode, said + source.stdout + \
            source.stderr

    def test_signed_runs(self):
        images = total.images(key=self.secret)
        for tls in ("sm", "tcp"):
            with self.subTest(tls=tls):
                source, target, said = self.run_pair(tls, images)
                self.assertEqual((source, target), (0, 0), said)
                self.assertIn("c_target: result %d" % self.values.sum(),
                              said)

    def test_unsigned_refused(self):
        source, target, said = self.run_pair("tcp", total.images(), 3)
        self.assertEqual(target, 1, said)
        self.assertIn("c_target: no ifunc ran", said)
        self.assertIn("rejected", said)


if __name__ == "__main__":
    unittest.main()
