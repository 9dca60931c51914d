#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""A source written in Python: it builds scan.py's perf_scan (a Python
function, compiled by Numba to LLVM bitcode for x86-64, aarch64 and
ppc64le, signed with KEY), connects to a target and sends it one scan:
the sum of the values of the records whose key is below KEY_BELOW.

    scan_source.py [-k KEY] [-b KEY_BELOW] HOST:PORT

The target (scan_target.py, or any program whose target_args is such a
table) compiles the bitcode of its ISA for its own CPU when it arrives.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import ucx_ifunc  # noqa: E402
from scan import perf_scan  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("-k", "--key", help="secret key file "
                        "(ucx-ifunc-keygen) to sign the code with")
    parser.add_argument("-b", "--key-below", type=int, default=500)
    args = parser.parse_args()
    start = time.perf_counter()
    images = perf_scan.images(key=args.key)
    print("scan_source: built perf_scan in %.2f s (%d bytes of images)"
          % (time.perf_counter() - start, len(images)))
    with ucx_ifunc.Context() as context:
        worker = ucx_ifunc.Worker(context)
        peer = worker.connect(args.address)
        code = context.register_images(perf_scan.name, images)
        peer.send(code, np.array([args.key_below, 0], np.uint32))
        peer.close()  # what is under way arrives first
    print("scan_source: sent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
