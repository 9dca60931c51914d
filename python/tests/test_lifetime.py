#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""Closing in every order and using what was closed: each case runs in a
process of its own, since getting one wrong crashes the interpreter."""

import os
import subprocess
import sys
import textwrap
import unittest

# What every case starts from: a target worker with a listener, progressed
# by a thread of its own, and a context to make more from.
PROLOGUE = """
import gc, sys, threading, time
import numpy
import ucx_ifunc
from ucx_ifunc import UcxIfuncError
from ucx_ifunc import worker as W

def refused(call, *args):
    try:
        call(*args)
    except UcxIfuncError as err:
        assert err.name == "UCS_ERR_INVALID_PARAM", err
        return
    raise AssertionError("%r was not refused" % (call,))

def progressed(worker):
    # Progresses worker on a thread of its own until the returned
    # function is called: a connect needs its listener progressed.
    stop = threading.Event()
    def run():
        while not stop.is_set():
            worker.progress()
    thread = threading.Thread(target=run)
    thread.start()
    def end():
        stop.set()
        thread.join()
    return end

context = ucx_ifunc.Context()
counter = numpy.zeros(1, dtype=numpy.int64)
"""


def run_case(test, body, timeout=60):
    """Runs PROLOGUE + body in a new interpreter; it must print "ok" and
    exit 0 (a crash is a signal's negative exit status)."""
    env = dict(os.environ)
    env.setdefault("UCX_TLS", "tcp,self")
    code = PROLOGUE + textwrap.dedent(body) + "\nprint('ok')\n"
    run = subprocess.run([sys.executable, "-c", code], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=timeout)
    out = run.stdout.decode(errors="replace")
    test.assertEqual(0, run.returncode, out)
    test.assertIn("ok", out.split())
    return out


class Lifetime(unittest.TestCase):
    def test_close_a_failed_accepted_peer_in_on_peer(self):
        """The worker frees an accepted peer that failed after on_peer
        returns: closing it in on_peer does nothing."""
        run_case(self, """
        events = []
        def on_peer(peer, status):
            events.append(status)
            if status != 0:
                peer.close()
                assert peer.closed
        target = ucx_ifunc.Worker(context, on_peer=on_peer)
        listener = target.listen("127.0.0.1:0")
        end = progressed(target)
        source = ucx_ifunc.Worker(context)
        peer = source.connect("127.0.0.1:%d" % listener.port)
        peer.close()
        deadline = time.monotonic() + 20
        while len(events) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        end()
        assert events[0] == 0 and events[1] != 0, events
        context.close()
        """)

    def test_closed_objects_refuse_use(self):
        run_case(self, """
        worker = ucx_ifunc.Worker(context)
        listener = worker.listen("127.0.0.1:0")
        port = listener.port
        worker.close()
        assert worker.closed and listener.closed
        refused(worker.progress)
        refused(worker.listen, "127.0.0.1:0")
        refused(worker.connect, "127.0.0.1:%d" % port)
        context.close()
        refused(context.register, "counter")
        refused(context.register_images, "counter", b"\\0" * 64)
        refused(context.query)
        """)

    def test_finalizers_in_any_order(self):
        """Garbage collection may run a parent's finalizer before its
        children's: the parent releases them first, and theirs then do
        nothing."""
        run_case(self, """
        target = ucx_ifunc.Worker(context, target_args=counter)
        listener = target.listen("127.0.0.1:0")
        end = progressed(target)
        source = ucx_ifunc.Worker(context)
        peer = source.connect("127.0.0.1:%d" % listener.port)
        code = context.register("counter")
        peer.send(code, b"\\1" + b"\\0" * 7)
        source.progress_until(lambda: counter[0] == 1, timeout=20)
        end()
        source._finalizer()   # the worker first, then its peer
        peer._finalizer()
        assert peer.closed
        context._finalizer()  # the context first, then the rest
        code._finalizer()
        target._finalizer()
        listener._finalizer()
        assert code.closed and target.closed and listener.closed
        """)

    def test_cycle_collected(self):
        """Objects in a reference cycle, collected together: each C handle
        is released once, children before their parent."""
        run_case(self, """
        released = []
        release_worker, release_peer = W._release_worker, W._release_peer
        W._release_worker = lambda h: (released.append("worker"),
                                       release_worker(h))
        W._release_peer = lambda h: (released.append("peer"),
                                     release_peer(h))
        target = ucx_ifunc.Worker(context)
        listener = target.listen("127.0.0.1:0")
        end = progressed(target)
        class Client:
            def __init__(self):
                self.worker = ucx_ifunc.Worker(context, on_peer=self.on_peer)
                self.peer = self.worker.connect(
                    "127.0.0.1:%d" % listener.port)
            def on_peer(self, peer, status):
                pass
        client = Client()
        gc.disable()
        del client
        gc.collect()
        assert released == ["peer", "worker"], released
        end()
        context.close()
        """)

    def test_close_inside_callbacks_is_refused(self):
        """The C API forbids closing a peer or the worker from a callback
        (inside ucp_ifunc_worker_progress): refused, and both still work
        and close afterwards."""
        run_case(self, """
        target = ucx_ifunc.Worker(context, target_args=counter)
        listener = target.listen("127.0.0.1:0")
        end = progressed(target)
        source = ucx_ifunc.Worker(context)
        peer = source.connect("127.0.0.1:%d" % listener.port)
        code = context.register("counter")
        for close in (peer.close, source.close, context.close):
            reports = []
            def on_report(status, close=close):
                reports.append(status)
                close()
            peer.send(code, b"\\1" + b"\\0" * 7, on_report=on_report)
            try:
                source.progress_until(lambda: reports, timeout=20)
            except UcxIfuncError as err:
                assert err.name == "UCS_ERR_INVALID_PARAM", err
                assert "progresses" in err.message, err
            else:
                raise AssertionError("%r in a callback was not refused"
                                     % (close,))
            assert reports == [0] and not peer.closed
        source.progress_until(lambda: counter[0] == 3, timeout=20)
        end()
        context.close()
        assert peer.closed and source.closed
        """)

    def test_report_only_send_keeps_no_payload(self):
        """With on_report and no on_sent the library copied the payload:
        the package does not keep it until the report."""
        run_case(self, """
        import weakref
        target = ucx_ifunc.Worker(context, target_args=counter)
        listener = target.listen("127.0.0.1:0")
        end = progressed(target)
        source = ucx_ifunc.Worker(context)
        peer = source.connect("127.0.0.1:%d" % listener.port)
        end()  # no report comes until the target progresses again
        code = context.register("counter")
        payload = numpy.zeros(1, dtype=numpy.int64)
        payload[0] = 2
        reports = []
        peer.send(code, payload, on_report=reports.append)
        alive = weakref.ref(payload)
        del payload
        gc.collect()
        assert alive() is None, "the payload is still held"
        end = progressed(target)
        source.progress_until(lambda: reports, timeout=20)
        end()
        assert reports == [0] and counter[0] == 2, (reports, counter)
        context.close()
        """)


if __name__ == "__main__":
    unittest.main()
