#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""rate_source.py ADDRESS COUNT [send|sender|array]: the Python source of
the rate benchmark (contrib/py-rate-bench.py), test/peer/ifunc_rate.c's
source in Python: connects to ADDRESS, sends COUNT 8-byte payloads of 1
for counter.so by the default path, with Peer.send (default), a function
of Peer.sender, or one Peer.send_array of them all, closes the
peer (it returns once the target ran them all) and prints "rate
msgs=COUNT seconds=S" for the sends and the close."""

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
        # Timed from the settled path on, as the C source is (the sends
        # would go by active message until then).
        deadline = time.monotonic() + 10
        while peer.query().path == "auto" and time.monotonic() < deadline:
            worker.progress()
        start = time.perf_counter()
        if how == "array":
            import numpy
            peer.send_array(code, numpy.ones((count, 1), dtype=numpy.int64))
        elif how == "sender":
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
