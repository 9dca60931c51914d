#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""A Python client of the C key-value service (examples/kv): it puts
RECORDS keys with the service's own code (kv.so's kv_main, registered by
name), then sends scan.py's kv_scan, written in Python, which sums their
values on the target and puts the sum under a key of its own, gets that
key back with kv_main (whose answer runs here, in this process's
target_args), checks it, and adds itself to the service's done key.

    kv_scan_client.py -k KEY [-n RECORDS] HOST:PORT

KEY: the secret key the target trusts (examples/kv's demo.key, built with
the tree); UCX_IFUNC_LIB_DIR: where kv.so is (build/examples/kv). The
target (kv_ifunc_target -c CLIENTS) counts this client as one of CLIENTS.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import ucx_ifunc  # noqa: E402
from scan import kv_scan  # noqa: E402

# examples/kv/kv.h and kv_app.h
KV_OP_INCR, KV_OP_PUT, KV_OP_GET, KV_OP_REPLY = 1, 2, 3, 4
KV_KEY_DONE = 0x6000
KV_WINDOW = 64
BASE = 0x7000000  # this client's keys: BASE + i; the sum at BASE - 1
MSG = np.dtype([("op", "<u4"), ("tag", "<u4"), ("key", "<u8"),
                ("value", "<u8")])
PENDING = np.dtype([("key", "<u8"), ("expect", "<u8"), ("value", "<u8"),
                    ("busy", "<i4"), ("check", "<i4"), ("found", "<i4")],
                   align=True)
CLIENT = np.dtype([("pending", PENDING, KV_WINDOW), ("in_flight", "<u4"),
                   ("replies", "<u8"), ("wrong", "<u8"), ("bad", "<u8")],
                  align=True)


def message(op, key, value=0, tag=0):
    return np.array([(op, tag, key, value)], MSG)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("-k", "--key", required=True)
    parser.add_argument("-n", "--records", type=int, default=1000)
    args = parser.parse_args()
    values = (np.arange(args.records, dtype=np.uint64) * 2654435761) % 100003
    result_key = BASE - 1
    client = np.zeros(1, CLIENT)
    # kv_side_t {table, client}: a client has no table
    side = np.array([0, client.ctypes.data], np.uint64)
    with ucx_ifunc.Context() as context:
        worker = ucx_ifunc.Worker(context, target_args=side)
        peer = worker.connect(args.address)
        kv = context.register("kv")
        scan = kv_scan.register(context, key=args.key)
        for i, value in enumerate(values):
            peer.send(kv, message(KV_OP_PUT, BASE + i, int(value)))
        peer.send(scan, np.array([BASE, BASE + args.records, result_key],
                                 np.uint64))
        pending = client["pending"][0]
        pending["key"][0], pending["busy"][0] = result_key, 1
        client["in_flight"] = 1
        peer.send(kv, message(KV_OP_GET, result_key))
        worker.progress_until(lambda: pending["busy"][0] == 0)
        got, expect = int(pending["value"][0]), int(values.sum())
        print("kv_scan_client: %d records, sum %d by kv_scan on the target, "
              "%s" % (args.records, got, "ok" if got == expect and
                      pending["found"][0] else "WRONG (expected %d)" % expect))
        peer.send(kv, message(KV_OP_INCR, KV_KEY_DONE, 1))
        peer.close()
    return 0 if got == expect else 1


if __name__ == "__main__":
    sys.exit(main())
