"""Python-written ifuncs end to end: built by ucx_ifunc.ifunc, registered
from memory (ucp_ifunc_code_register), sent over UCX_TLS=sm and tcp under
UCX_IFUNC_TRUST=signed (signed with a trusted key they run, unsigned they
are refused), by Python sources (this file run as a program,
examples/python), to a C target
(test/python/c_target), a Python target (examples/python/scan_target.py)
and the C key-value service (examples/kv, with examples/python's client).

Needs the build (IFUNC_TEST_BUILDDIR, which "make check" sets, or build/
beside the sources); the Python sources and targets use the package's
bindings over the build's libucp_ifunc (PY_UCX_IFUNC_LIBRARY).

    pyifunc_e2e_test.py send [--key KEY] HOST:PORT   # the source of total
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

BUILD = os.path.abspath(os.environ.get("IFUNC_TEST_BUILDDIR") or
                        os.path.join(TOP, "build"))
LIBRARY = os.path.join(BUILD, ".libs", "libucp_ifunc.so.0")
EXAMPLES = os.path.join(TOP, "examples", "python")
KV = os.path.join(BUILD, "examples", "kv")
# The bindings load the build's library; the examples run find the package
if os.path.exists(LIBRARY):
    os.environ.setdefault("PY_UCX_IFUNC_LIBRARY", LIBRARY)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.join(TOP, "python")] +
    [p for p in [os.environ.get("PYTHONPATH")] if p])

# ucx_ifunc first: its C library has initial-exec TLS, which a dlopen
# after Numba's LLVM may find exhausted
import ucx_ifunc  # noqa: E402
from ucx_ifunc import _toolchain  # noqa: E402

import numpy as np  # noqa: E402
from numba import carray  # noqa: E402

C_TARGET = os.path.join(BUILD, "test", "python", "c_target")
BINDINGS = hasattr(ucx_ifunc, "Context")


@ucx_ifunc.ifunc
def total(payload, size, target_args):
    values = carray(payload, size // 8, np.int64)
    out = carray(target_args, 2, np.int64)
    s = 0
    for i in range(values.shape[0]):
        s += values[i]
    out[1] = s
    out[0] = 1


def start_target(env, seconds, log, command=None):
    """c_target (or command + [PORT]) on a free port: (process, port)."""
    for _ in range(20):
        port = random.randint(20000, 40000)
        process = subprocess.Popen(
            (command or [C_TARGET]) + [str(port)] +
            ([] if command else [str(seconds)]), stdout=log,
            stderr=subprocess.STDOUT, env=env)
        for _ in range(200):
            with open(log.name) as stream:
                if "listening on port" in stream.read():
                    return process, port
            if process.poll() is not None:
                break
            time.sleep(0.05)
        process.kill()
        process.wait()
    raise AssertionError("c_target did not listen")


def send_total(address, key=None):
    """The Python source of total: one message of TOTAL_VALUES."""
    with ucx_ifunc.Context() as context:
        worker = ucx_ifunc.Worker(context)
        peer = worker.connect(address)
        peer.send(total.register(context, key=key), TOTAL_VALUES)
        peer.close()


TOTAL_VALUES = (np.arange(1000, dtype=np.int64) * 7919) % 1013 - 500


def trust_env(tls, public):
    return dict(os.environ, UCX_TLS=tls, UCX_IFUNC_TRUST="signed",
                UCX_IFUNC_TRUSTED_KEYS=public, UCX_WARN_UNUSED_ENV_VARS="n")


@unittest.skipUnless(BINDINGS and os.path.exists(C_TARGET),
                     "the package's bindings and the build are needed")
class PythonSourceTest(unittest.TestCase):
    """Python sources, through the package's bindings."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory()
        signing = _toolchain.load("signing")
        cls.secret, cls.public = signing.generate(
            os.path.join(cls.work.name, "site"))

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def pair(self, env, target, source, seconds=30):
        """Starts target (a command, PORT appended; None: c_target), then
        source (a command, HOST:PORT appended): (source status, target
        status, what both said)."""
        with tempfile.NamedTemporaryFile("w+", dir=self.work.name) as log:
            process, port = start_target(env, seconds, log, target)
            sent = subprocess.run(source + ["localhost:%d" % port], env=env,
                                  capture_output=True, text=True,
                                  timeout=90)
            if sent.returncode:
                process.kill()
            process.wait(timeout=seconds + 30)
            with open(log.name) as stream:
                said = stream.read()
        return sent.returncode, process.returncode, \
            said + sent.stdout + sent.stderr

    def test_c_target(self):
        for tls in ("sm", "tcp"):
            with self.subTest(tls=tls):
                source, target, said = self.pair(
                    trust_env(tls, self.public), None,
                    [sys.executable, os.path.abspath(__file__), "send",
                     "--key", self.secret])
                self.assertEqual((source, target), (0, 0), said)
                self.assertIn("c_target: result %d" % TOTAL_VALUES.sum(),
                              said)

    def test_c_target_refuses_unsigned(self):
        source, target, said = self.pair(
            trust_env("tcp", self.public), None,
            [sys.executable, os.path.abspath(__file__), "send"])
        self.assertEqual((source, target), (0, 1), said)
        self.assertIn("c_target: rejected 1\n", said)
        self.assertIn("rejected under UCX_IFUNC_TRUST=signed", said)

    def test_python_target(self):
        sys.path.insert(0, EXAMPLES)
        import scan
        expect = scan.perf_scan_expected(scan.perf_scan_table(20000), 300)
        for tls in ("sm", "tcp"):
            with self.subTest(tls=tls):
                source, target, said = self.pair(
                    trust_env(tls, self.public),
                    [sys.executable, os.path.join(EXAMPLES, "scan_target.py"),
                     "-n", "20000", "-t", "30"],
                    [sys.executable, os.path.join(EXAMPLES, "scan_source.py"),
                     "-k", self.secret, "-b", "300"])
                self.assertEqual((source, target), (0, 0), said)
                self.assertIn("scan_target: sum %d\n" % expect, said)

    @unittest.skipUnless(os.path.exists(os.path.join(KV, "kv_ifunc_client")),
                         "examples/kv not built")
    def test_kv_service(self):
        """The C service, a C client and the Python client: the Python
        kv_scan's sum comes back through the service's own kv_main."""
        demo = os.path.join(KV, "demo")
        for tls in ("tcp",):
            with self.subTest(tls=tls):
                env = trust_env(tls, demo + ".pub")
                env["UCX_IFUNC_LIB_DIR"] = KV
                with tempfile.NamedTemporaryFile("w+",
                                                 dir=self.work.name) as log:
                    target = subprocess.Popen(
                        [os.path.join(KV, "kv_ifunc_target"), "-c", "2",
                         "0"], stdout=log, stderr=subprocess.STDOUT, env=env)
                    port = None
                    for _ in range(200):
                        with open(log.name) as stream:
                            found = [line.split()[-1] for line in stream
                                     if "listening on port" in line]
                        if found or target.poll() is not None:
                            port = found[0] if found else None
                            break
                        time.sleep(0.05)
                    self.assertIsNotNone(port, "the kv target did not listen")
                    address = "localhost:%s" % port
                    c_client = subprocess.Popen(
                        [os.path.join(KV, "kv_ifunc_client"), "-c", "1",
                         "-i", "0", "-n", "200", address], env=env,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True)
                    python = subprocess.run(
                        [sys.executable,
                         os.path.join(EXAMPLES, "kv_scan_client.py"), "-k",
                         demo + ".key", "-n", "200", address], env=env,
                        capture_output=True, text=True, timeout=90)
                    c_said = c_client.communicate(timeout=90)[0]
                    target.wait(timeout=60)
                    with open(log.name) as stream:
                        said = stream.read()
                said += c_said + python.stdout + python.stderr
                self.assertEqual((python.returncode, c_client.returncode,
                                  target.returncode), (0, 0, 0), said)
                self.assertRegex(python.stdout, r"sum \d+ by kv_scan on the "
                                 r"target, ok")


if __name__ == "__main__":
    if sys.argv[1:2] == ["send"]:
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("send")
        parser.add_argument("--key")
        parser.add_argument("address")
        args = parser.parse_args()
        send_total(args.address, args.key)
    else:
        unittest.main()
