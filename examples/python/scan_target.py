#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""A target written in Python: it holds a table of records (scan.py's
perf_scan layout) as its target_args, listens, and runs what sources
send until a scan has written the table's sum; then prints it.

    scan_target.py [-n RECORDS] [-t SECONDS] [PORT]

It has no copy of the code it runs: it trusts what is signed by a key of
UCX_IFUNC_TRUSTED_KEYS (UCX_IFUNC_TRUST, README's configuration table).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ucx_ifunc  # noqa: E402
from scan import perf_scan_sum, perf_scan_table  # noqa: E402

UNSET = 2 ** 64 - 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", nargs="?", default="13337")
    parser.add_argument("-n", "--records", type=int, default=100000)
    parser.add_argument("-t", "--timeout", type=float, default=30.0)
    args = parser.parse_args()
    table = perf_scan_table(args.records)
    table[8:16].view("u8")[0] = UNSET  # the scan overwrites it
    with ucx_ifunc.Context() as context:
        worker = ucx_ifunc.Worker(context, target_args=table)
        listener = worker.listen(args.port)  # listens while it lives
        print("scan_target: listening on port %s, %d records"
              % (args.port, args.records), flush=True)
        try:
            worker.progress_until(lambda: perf_scan_sum(table) != UNSET,
                                  timeout=args.timeout)
        except TimeoutError:
            print("scan_target: no scan ran in %g s" % args.timeout)
            return 1
        print("scan_target: sum %d" % perf_scan_sum(table), flush=True)
        listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
