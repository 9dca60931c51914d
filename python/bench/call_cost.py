#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""call_cost.py ADDRESS COUNT HOW: what one send costs from Python, by way
of binding (docs/python.md, "Why cffi, not ctypes"). Connects to ADDRESS
(test/peer/ifunc_rate target, counter.so) and sends COUNT 8-byte payloads
by ucp_ifunc_peer_send_nbx, HOW: "ctypes" (a ctypes function with
argtypes), "cffi" (the package's cffi function, called bare), "send"
(Peer.send) or "sender" (a Peer.sender function); a full queue is
progressed and retried. Prints "cost how=HOW us_per_send=T" for the loop
of sends (the peer's close after it is not counted)."""

import ctypes
import os
import sys
import time

import ucx_ifunc
from ucx_ifunc._ffi import ffi, lib

NO_RESOURCE = ucx_ifunc.STATUS["UCS_ERR_NO_RESOURCE"]


def loop(count, how, worker, peer, code, one):
    if how == "ctypes":
        path = os.environ.get("PY_UCX_IFUNC_LIBRARY") or "libucp_ifunc.so.0"
        clib = ctypes.CDLL(path)
        send = clib.ucp_ifunc_peer_send_nbx
        send.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                         ctypes.c_size_t, ctypes.c_void_p]
        send.restype = ctypes.c_int8
        progress = clib.ucp_ifunc_worker_progress
        progress.argtypes = [ctypes.c_void_p]
        handle = lambda h: int(ffi.cast("uintptr_t", h))
        p, c, w = handle(peer._h), handle(code._h), handle(worker._h)
        start = time.perf_counter()
        for _ in range(count):
            while send(p, c, one, 8, None) == NO_RESOURCE:
                progress(w)
    elif how == "cffi":
        send, p, c, null = lib.ucp_ifunc_peer_send_nbx, peer._h, code._h, \
            ffi.NULL
        start = time.perf_counter()
        for _ in range(count):
            while send(p, c, one, 8, null) == NO_RESOURCE:
                worker.progress()
    elif how == "sender":
        send = peer.sender(code)
        start = time.perf_counter()
        for _ in range(count):
            send(one)
    else:
        send = peer.send
        start = time.perf_counter()
        for _ in range(count):
            send(code, one)
    return time.perf_counter() - start


def main():
    address, count, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    one = (1).to_bytes(8, "little")
    with ucx_ifunc.Context() as context:
        worker = ucx_ifunc.Worker(context)
        peer = worker.connect(address)
        code = context.register("counter")
        seconds = loop(count, how, worker, peer, code, one)
        peer.close()
    print("cost how=%s us_per_send=%.3f" % (how, seconds / count * 1e6),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
