#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""The Python-written perf_scan (examples/python/scan.py) against the C one
shipped as bitcode, on the target (docs/benchmarks.md, issue 33).

    perf_scan_py.py BUILD [-n RECORDS] [-m MESSAGES] [--rounds N]

Builds WORK/perf_scan.so: the C perf_scan's payload functions (compiled by
cc, as a source needs them) with the Python perf_scan_main's bitcode image
for this host as __ucp_ifunc_bitcode_perf_scan.em62, the symbol
ucx-ifunc-cc --bitcode-only gives it. Then runs BUILD/tools/ifunc_run_time
on it and on BUILD/tools/perftest/scan-bitcode (the C scan's bitcode), in
turn, N rounds each, and prints each run's median ns/message, the medians
of the rounds, their ratio, the Python ifunc's build time and the load.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(TOP, "python"))
sys.path.insert(0, os.path.join(TOP, "examples", "python"))


def assembly(symbols):
    """An assembly file that defines each (name, bytes) as read-only data,
    64-aligned as ucx-ifunc-cc aligns images."""
    out = ['\t.section .rodata.ucp_ifunc_images,"a"']
    for name, data in symbols:
        out += ['\t.balign 64', '\t.globl "%s"' % name,
                '\t.type "%s", @object' % name, '"%s":' % name]
        out += ["\t.byte %s" % ",".join(str(b) for b in data[i:i + 32])
                for i in range(0, len(data), 32)]
        out.append('\t.size "%s", %d' % (name, len(data)))
    out.append('\t.section .note.GNU-stack,"",@progbits')
    return "\n".join(out) + "\n"


def build_library(work):
    start = time.perf_counter()
    import ucx_ifunc
    import scan
    fmt = ucx_ifunc._toolchain.load("image_format")
    built = scan.perf_scan
    blob = built.image("x86_64-linux-gnu")
    seconds = time.perf_counter() - start
    source = os.path.join(work, "images.S")
    with open(source, "w") as stream:
        stream.write(assembly([(fmt.bitcode_symbol("perf_scan",
                                                   fmt.EM_X86_64), blob)]))
    library = os.path.join(work, "perf_scan.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", library,
                    os.path.join(TOP, "tools", "perftest", "perf_scan.c"),
                    source], check=True)
    return seconds


def run(build, directory, records, messages):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, ".libs"))
    out = subprocess.run(
        ["taskset", "-c", "1", os.path.join(build, "tools", ".libs",
                                            "ifunc_run_time"),
         "-L", directory, "-n", str(records), "-m", str(messages)],
        env=env, check=True, capture_output=True, text=True).stdout
    csv = [line for line in out.splitlines() if line.startswith("csv,")][-1]
    return float(csv.split(",")[2])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("-n", type=int, default=65536)
    parser.add_argument("-m", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    # the package's bindings load the C library: this build's
    os.environ.setdefault("PY_UCX_IFUNC_LIBRARY", os.path.join(
        build, ".libs", "libucp_ifunc.so.0"))
    with tempfile.TemporaryDirectory() as work:
        build_s = build_library(work)
        c_dir = os.path.join(build, "tools", "perftest", "scan-bitcode")
        python_ns, c_ns = [], []
        for _ in range(args.rounds):
            python_ns.append(run(build, work, args.n, args.m))
            c_ns.append(run(build, c_dir, args.n, args.m))
    with open("/proc/loadavg") as stream:
        load = stream.read().split()[:3]
    print("records %d: Python scan ns/message %s, C scan (bitcode) %s"
          % (args.n, python_ns, c_ns))
    print("median Python %.0f ns, C %.0f ns, ratio %.2f; Python ifunc "
          "build %.2f s (Numba, lowering, packaging); load %s"
          % (statistics.median(python_ns), statistics.median(c_ns),
             statistics.median(python_ns) / statistics.median(c_ns),
             build_s, " ".join(load)))


if __name__ == "__main__":
    main()
