#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""The package's API in one process: errors carry the UCX status and the
library's line, closed objects refuse use, lifetimes nest, a source and a
target in one process exchange messages, counters count."""

import gc
import os
import socket
import threading
import unittest

import numpy

import ucx_ifunc
from ucx_ifunc import STATUS, UcxIfuncError

from .node import library_images


def closed_port():
    """A TCP port of 127.0.0.1 where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Errors(unittest.TestCase):
    def setUp(self):
        self.context = ucx_ifunc.Context()
        self.addCleanup(self.context.close)
        self.worker = ucx_ifunc.Worker(self.context)

    def assertStatus(self, name, call, *args, **kwargs):
        with self.assertRaises(UcxIfuncError) as caught:
            call(*args, **kwargs)
        err = caught.exception
        self.assertEqual(name, err.name)
        self.assertEqual(STATUS[name], err.status)
        self.assertTrue(err.message)
        self.assertIn(name, str(err))
        return err

    def test_connect_to_a_closed_port(self):
        address = "127.0.0.1:%d" % closed_port()
        err = self.assertStatus("UCS_ERR_UNREACHABLE", self.worker.connect,
                                address, timeout_ms=300)
        self.assertIn(address, err.message)
        self.assertEqual("ucp_ifunc_peer_connect", err.call)

    def test_bad_names(self):
        for name in ("", "9lives", "../counter", "a b", "x" * 64):
            err = self.assertStatus("UCS_ERR_INVALID_PARAM",
                                    self.context.register, name)
            self.assertIn("invalid ifunc name", err.message)
            self.assertStatus("UCS_ERR_INVALID_PARAM",
                              self.context.register_images, name,
                              b"\0" * 256)

    def test_missing_library(self):
        err = self.assertStatus("UCS_ERR_NO_ELEM", self.context.register,
                                "no_such_ifunc")
        self.assertIn("no_such_ifunc", err.message)

    def test_bad_images(self):
        images = library_images(os.environ["UCX_IFUNC_LIB_DIR"] +
                                "/counter.so", "counter")
        for bad in (images[:-8], images[:100], images + b"\0" * 8,
                    b"\0" * len(images), b""):
            self.assertStatus("UCS_ERR_INVALID_PARAM",
                              self.context.register_images, "counter", bad)
        code = self.context.register_images("counter", images)
        self.assertTrue(code.from_images)
        code.close()

    def test_bad_address_and_buffers(self):
        self.assertStatus("UCS_ERR_INVALID_PARAM", self.worker.connect,
                          "not an address")
        with self.assertRaises((TypeError, BufferError)):
            ucx_ifunc.Worker(self.context, target_args=b"read-only")
        with self.assertRaises(ValueError):
            ucx_ifunc.Worker(object())


class InOneProcess(unittest.TestCase):
    """A target worker, progressed by a thread of its own, and a source
    worker of one context, over loopback (the C library releases the GIL
    while it progresses)."""

    def setUp(self):
        self.context = ucx_ifunc.Context()
        self.addCleanup(self.context.close)
        self.counter = numpy.zeros(1, dtype=numpy.int64)
        self.peers = []
        self.target = ucx_ifunc.Worker(
            self.context, target_args=self.counter,
            on_peer=lambda peer, status: self.peers.append((peer, status)))
        self.listener = self.target.listen("127.0.0.1:0")
        self.stop = threading.Event()
        self.errors = []
        self.thread = threading.Thread(target=self.run_target)
        self.thread.start()
        self.addCleanup(self.stop_target)
        self.source = ucx_ifunc.Worker(self.context)
        self.peer = self.source.connect("127.0.0.1:%d" % self.listener.port)
        self.code = self.context.register("counter")

    def stop_target(self):
        self.stop.set()
        self.thread.join()

    def run_target(self):
        try:
            while not self.stop.is_set() and not self.target.closed:
                self.target.progress()
        except BaseException as err:  # pragma: no cover - reported below
            self.errors.append(err)

    def progress_until(self, condition):
        self.source.progress_until(condition, timeout=20)
        self.assertEqual([], self.errors)

    def test_send_every_kind_and_count(self):
        values = [1, 10, 100, 1000, 10000]
        payloads = [
            values[0].to_bytes(8, "little"),
            bytearray(values[1].to_bytes(8, "little")),
            memoryview(values[2].to_bytes(8, "little")),
            numpy.array([values[3]], dtype=numpy.int64),
            numpy.array([0, values[4]], dtype=numpy.int64)[1:],
        ]
        for payload in payloads:
            self.assertEqual(0, self.peer.send(self.code, payload))
        self.progress_until(lambda: self.counter[0] == sum(values))
        self.assertEqual(1, len(self.peers))
        self.assertEqual(0, self.peers[0][1])
        self.assertTrue(self.peers[0][0].accepted)
        counters = self.context.query()
        self.assertEqual(len(payloads), counters.run_peer)
        self.assertGreaterEqual(counters.codes_linked, 1)
        info = self.peer.query()
        self.assertEqual(len(payloads), info.sent_with_code + info.sent_by_ref)
        self.assertIn(info.path, ("channel", "am"))
        self.assertEqual(0, info.status)

    def test_send_array(self):
        """One call for many payloads (ucp_ifunc_peer_send_array_nbx): each
        runs once; a buffer that is not whole payloads is refused."""
        rows = numpy.arange(1, 5001, dtype=numpy.int64).reshape(5000, 1)
        self.assertEqual(5000, self.peer.send_array(self.code, rows))
        flat = numpy.arange(1, 11, dtype=numpy.int64)
        self.assertEqual(10, self.peer.send_array(self.code, flat, 8))
        self.assertEqual(0, self.peer.send_array(
            self.code, numpy.zeros((0, 1), dtype=numpy.int64)))
        total = 5000 * 5001 // 2 + 55
        self.progress_until(lambda: self.counter[0] == total)
        self.assertEqual(5010, self.context.query().run_peer)
        with self.assertRaises(ValueError):
            self.peer.send_array(self.code, b"123456789", 8)
        with self.assertRaises(ValueError):
            self.peer.send_array(self.code, b"12345678")  # no length, 1-D

    def test_reports_and_callbacks(self):
        reports, sent = [], []
        payload = bytearray((5).to_bytes(8, "little"))
        self.peer.send(self.code, payload, on_sent=sent.append,
                       on_report=reports.append)
        self.peer.send(self.code, payload, with_code=True,
                       on_report=reports.append)
        self.progress_until(lambda: len(reports) == 2)
        self.assertEqual([0, 0], reports)
        self.assertEqual([0], sent)
        self.assertEqual(10, self.counter[0])

    def test_callback_errors_reach_progress(self):
        def bad(status):
            raise KeyError("from the report callback")
        self.peer.send(self.code, b"\1" + b"\0" * 7, on_report=bad)
        with self.assertRaises(KeyError):
            self.progress_until(lambda: False)

    def test_non_contiguous_payload_is_refused(self):
        strided = numpy.zeros(8, dtype=numpy.int64)[::2]
        with self.assertRaises((BufferError, ValueError, TypeError)):
            self.peer.send(self.code, strided)

    def test_sender_and_send_after_close(self):
        send = self.peer.sender(self.code)
        for _ in range(100):
            send(b"\2" + b"\0" * 7)
        self.progress_until(lambda: self.counter[0] == 200)
        self.peer.close()
        self.assertTrue(self.peer.closed)
        for call in (lambda: send(b"\0" * 8),
                     lambda: self.peer.send(self.code, b"\0" * 8),
                     self.peer.query):
            with self.assertRaises(UcxIfuncError) as caught:
                call()
            self.assertEqual("UCS_ERR_INVALID_PARAM", caught.exception.name)
        self.peer.close()  # again: nothing

    def test_closed_code_and_close_order(self):
        self.code.close()
        with self.assertRaises(UcxIfuncError) as caught:
            self.peer.send(self.code, b"\0" * 8)
        self.assertEqual("UCS_ERR_INVALID_PARAM", caught.exception.name)
        # Closing the context closes its workers with their peers.
        self.stop_target()
        self.context.close()
        self.assertTrue(self.peer.closed)
        self.assertTrue(self.target.closed and self.source.closed)
        self.context.close()

    def test_close_with_a_failing_callback(self):
        """A callback that raises while its peer closes: everything closes
        all the same, and the exception comes out of close()."""
        def bad(status):
            raise KeyError("report during close")
        self.peer.send(self.code, b"\5" + b"\0" * 7, on_report=bad)
        self.stop_target()
        with self.assertRaises(KeyError):
            self.context.close()
        self.assertTrue(self.peer.closed and self.source.closed)
        self.assertTrue(self.target.closed and self.context.closed)
        self.assertTrue(self.code.closed)

    def test_objects_dropped_without_close(self):
        peer = self.source.connect("127.0.0.1:%d" % self.listener.port)
        code = self.context.register("counter")
        peer.send(code, b"\3" + b"\0" * 7)
        del peer, code
        gc.collect()  # the peer closes: what it sent arrives first
        self.progress_until(lambda: self.counter[0] == 3)

    def test_with_blocks(self):
        with ucx_ifunc.Context() as context:
            with ucx_ifunc.Worker(context) as worker:
                with worker.connect("127.0.0.1:%d" % self.listener.port) as p:
                    with context.register("counter") as code:
                        p.send(code, b"\4" + b"\0" * 7)
                self.assertTrue(p.closed)
            self.assertTrue(worker.closed)
        self.assertTrue(context.closed)
        self.progress_until(lambda: self.counter[0] == 4)


class Version(unittest.TestCase):
    def test_version(self):
        major, minor, _ = ucx_ifunc.library_version().split(".")
        self.assertGreaterEqual((int(major), int(minor)), (0, 3))


class ImportOrder(unittest.TestCase):
    def test_after_numba(self):
        """The library loads after Numba has loaded LLVM and used
        libstdc++'s thread-locals: it reaches none of them by initial-exec
        TLS (which failed with "cannot allocate memory in static TLS
        block")."""
        import subprocess
        import sys
        try:
            import numba  # noqa: F401  (only to know it is there)
        except ImportError:
            self.skipTest("no numba (Debian: python3-numba)")
        code = ("import numba, numba.core.typing\n"
                "numba.njit(lambda x: x + 1)(1)\n"
                "import ucx_ifunc\n"
                "ucx_ifunc.Context().close()\n"
                "print('loaded')\n")
        run = subprocess.run([sys.executable, "-c", code],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=os.environ, timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout.decode())
        self.assertIn(b"loaded", run.stdout)
