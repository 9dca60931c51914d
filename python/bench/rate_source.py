#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""rate_source.py ADDRESS COUNT [send|sender]: the Python source of the rate
benchmark (contrib/py-rate-bench.py), test/peer/ifunc_rate.c's source in
Python: connects to ADDRESS, sends COUNT 8-byte payloads of 1 for
counter.so by the default path, with Peer.send (default) or a function of
Peer.sender, closes the peer (it returns once the target ran them all) and
prints "rate msgs=COUNT seconds=S" for the sends and the close."""

import sys
import time

import ucx_ifunc


def main():
    address, count = sys.argv[1], int(sys.argv[2])
    how = sys.argv[3] if len(sys.argv) > 3 else "send"
    one = (1).to_bytes(8, "little")
    with ucx_ifunc.Context() as context:
        worker = ucx_ifunc.Worker(context)
        peer = worker.connect(address)
        code = context.register("counter")
        start = time.perf_counter()
        if how == "sender":
            send = peer.sender(code)
            for _ in range(count):
                send(one)
        else:
            send = peer.send
            for _ in range(count):
                send(code, one)
        peer.close()
        print("rate msgs=%d seconds=%.6f" % (count,
                                             time.perf_counter() - start),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
