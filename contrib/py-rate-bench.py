#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The Python package's message rate against C's (docs/benchmarks.md,
# "Python source"): the same C target (test/peer/ifunc_rate target, which
# runs counter.so's messages) receives COUNT 8-byte messages by the default
# path from the C source (test/peer/ifunc_rate source) and from the Python
# source (python/bench/rate_source.py, with Peer.send, with Peer.sender
# and with one Peer.send_array of them all), each timed, once the peer's
# path is settled, from its first send to its peer's close, which
# returns once the target ran them all. Target and source are pinned to
# CPUs of their own (taskset). Prints each run and, per transport, the
# median rates and the Python/C ratios, with /proc/loadavg before and
# after. Run from a configured build after "make check" (which builds
# ifunc_rate and the test ifunc libraries):
#
#     contrib/py-rate-bench.py [--build DIR] [--count N] [--rounds R]
#                              [--tls sm,tcp] [--cpus T,S] [--call-cost]
#
# --call-cost measures instead what one send costs from Python by binding
# (python/bench/call_cost.py: ctypes, bare cffi, Peer.send, Peer.sender)
# over shared memory, for docs/python.md.
import argparse
import os
import statistics
import subprocess
import sys

TLS = {"sm": "sm,self,tcp", "tcp": "tcp"}


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(args, env, source, count, lines=None):
    target_cpu, source_cpu = args.cpus.split(",")
    rate = os.path.join(args.build, "test/peer/ifunc_rate")
    target = subprocess.Popen(["taskset", "-c", target_cpu, rate, "target",
                               "127.0.0.1:0", str(count)],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        port = target.stdout.readline().split()[1]
        out = subprocess.run(["taskset", "-c", source_cpu] +
                             source("127.0.0.1:" + port, count),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env, check=True,
                             timeout=300).stdout
        done = target.communicate(timeout=60)[0]
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
    if "done sum=%d" % count not in done:
        sys.exit("py-rate-bench: the target did not run them all: " + done +
                 out)
    if lines is not None:
        lines.extend(l for l in out.splitlines() if l.startswith("cost "))
        return None
    line = [w for w in out.split() if w.startswith("seconds=")][0]
    return count / float(line.split("=")[1])


def environment(top, build, tls):
    return dict(os.environ, UCX_TLS=TLS[tls],
                UCX_IFUNC_LIB_DIR=os.path.join(build, "test/ifuncs/lib"),
                PY_UCX_IFUNC_LIBRARY=os.path.join(build,
                                                  ".libs/libucp_ifunc.so.0"),
                PYTHONPATH=os.path.join(top, "python"))


def call_cost(args, top, build, python):
    env = environment(top, build, "sm")
    script = os.path.join(top, "python/bench/call_cost.py")
    costs = {}
    for r in range(args.rounds):
        for how in ("ctypes", "cffi", "send", "sender"):
            out = []

            def source(address, count, how=how):
                return [python, script, address, str(count), how]
            run(args, env, source, args.count, out)
            cost = float(out[0].split("us_per_send=")[1].split()[0])
            costs.setdefault(how, []).append(cost)
        print("round %d: %s (load %s)" % (r + 1, ", ".join(
            "%s %.3f us" % (h, c[-1]) for h, c in costs.items()), loadavg()))
    for how, values in costs.items():
        print("median %-7s %.3f us a send" % (how, statistics.median(values)))


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(top, "build"))
    parser.add_argument("--count", type=int, default=500000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tls", default="sm,tcp")
    parser.add_argument("--cpus", default="1,0")
    parser.add_argument("--call-cost", action="store_true")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    python = "/usr/bin/python3"
    rate = os.path.join(build, "test/peer/ifunc_rate")
    sources = {
        "C": lambda a, n: [rate, "source", a, str(n)],
        "python send": lambda a, n: [python, os.path.join(
            top, "python/bench/rate_source.py"), a, str(n), "send"],
        "python sender": lambda a, n: [python, os.path.join(
            top, "python/bench/rate_source.py"), a, str(n), "sender"],
        "python array": lambda a, n: [python, os.path.join(
            top, "python/bench/rate_source.py"), a, str(n), "array"],
    }
    print("load before: %s" % loadavg())
    if args.call_cost:
        call_cost(args, top, build, python)
        print("load after: %s" % loadavg())
        return
    for tls in args.tls.split(","):
        env = environment(top, build, tls)
        rates = {name: [] for name in sources}
        for r in range(args.rounds):
            for name, source in sources.items():
                rates[name].append(run(args, env, source, args.count))
            print("%s round %d: %s (load %s)" % (
                tls, r + 1, ", ".join("%s %.0f/s" % (n, v[-1])
                                      for n, v in rates.items()), loadavg()))
        c = statistics.median(rates["C"])
        for name in sources:
            m = statistics.median(rates[name])
            print("%s median %-13s %9.0f msg/s  %.2fx C" % (tls, name, m,
                                                           m / c))
    print("load after: %s" % loadavg())


if __name__ == "__main__":
    main()
