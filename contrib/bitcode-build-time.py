#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# What ucx-ifunc-cc --bitcode adds to the build of the test ifuncs
# (docs/toolchain.md, "LLVM bitcode"): each built as test/Makefile.inc builds
# it (--target x86_64-linux-gnu,aarch64-linux-gnu -Wall -Wextra -Werror
# -O2), then with --bitcode, then with --bitcode-only; median of RUNS builds
# of each, wall time and CPU time of the tool and its programs, in seconds.
# Needs a build in build/ (contrib/build.sh), clang-14 and llvm-14.
#
#     contrib/bitcode-build-time.py [RUNS]
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CC = os.path.join(os.environ.get("BUILD_DIR", os.path.join(TOP, "build")),
                  "tools", "ucx-ifunc-cc-uninstalled")
IFUNCS = os.path.join(TOP, "test", "ifuncs")
CASES = {
    "constructs_O2": ["constructs.c", "constructs_helper.c"],
    "counter": ["counter.c"], "echo": ["echo.c"],
    "imports_tcp": ["imports.c"], "stress": ["stress.c"],
    "paper": ["paper.c"],
}
MODES = {"native": ["--target", "x86_64-linux-gnu,aarch64-linux-gnu"],
         "bitcode": ["--target", "x86_64-linux-gnu,aarch64-linux-gnu",
                     "--bitcode"],
         "only": ["--bitcode-only"]}


def timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(cmd, check=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime -
                  before.ru_utime - before.ru_stime)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    out = tempfile.mkdtemp(prefix="bitcode-build-time.")
    print("%-14s %8s %8s %8s %8s | CPU %8s %8s %8s" % (
        "ifunc", "native", "bitcode", "added", "only", "native", "bitcode",
        "only"))
    for name, sources in CASES.items():
        wall, cpu = {}, {}
        for mode, flags in MODES.items():
            cmd = [CC] + flags + ["-Wall", "-Wextra", "-Werror", "-O2",
                                  "-I" + IFUNCS, "-DIFUNC_NAME=" + name,
                                  "-o", os.path.join(out, name + ".so")] + \
                [os.path.join(IFUNCS, s) for s in sources]
            times = [timed(cmd) for _ in range(runs)]
            wall[mode] = statistics.median(t[0] for t in times)
            cpu[mode] = statistics.median(t[1] for t in times)
        print("%-14s %8.2f %8.2f %8.2f %8.2f | CPU %8.2f %8.2f %8.2f" % (
            name, wall["native"], wall["bitcode"],
            wall["bitcode"] - wall["native"], wall["only"], cpu["native"],
            cpu["bitcode"], cpu["only"]))


if __name__ == "__main__":
    main()
