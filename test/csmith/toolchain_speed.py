#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""Build time of ucx-ifunc-cc against a plain shared-library build.

Over N csmith programs, wrapped as ifuncs the way the differential test
wraps them (csmith_ifunc.c), times `ucx-ifunc-cc -O2` and
`cc -O2 -shared -fPIC` on the same source, one build at a time, and prints
the median and the maximum of each and their ratio, as a table and as CSV.

With --profile, each ucx-ifunc-cc build also runs under cProfile, and the
time is split into its steps (the compiler runs and the Python work of each
step), summed over all programs.
"""

import argparse
import cProfile
import csv
import io
import os
import pstats
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csmith_diff  # noqa: E402  (the generator and the wrapper's options)


def timed(cmd):
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


# The steps of cli.Builder.build, in order, and what each runs.
STEPS = [
    ("check_target", "cc -dumpmachine"),
    ("compile_normal", "cc -c (ordinary objects)"),
    ("build_image", "image: cc -S, rewrite, as, link, verify"),
    ("weaken", "objcopy --weaken-symbol"),
    ("libgcc_helpers", "cc -print-file-name, read libgcc_s"),
    ("needed", "probe link without the image, read DT_NEEDED"),
    ("encode", "encode the image"),
    ("embed", "cc -c of the .incbin object"),
    ("link", "final link (and the probe's, inside needed)"),
    ("check_exports", "read the exports of NAME.so"),
]
# Inside build_image.
IMAGE_PARTS = [
    ("asm_rewrite.py", "rewrite", "rewrite assembly (Python)"),
    ("image_link.py", "link_image", "image linker (Python, pyelftools)"),
    ("verify.py", "verify", "self-check (Python, capstone)"),
]


def profile_build(launcher, argv, stats_out):
    """Runs ucx-ifunc-cc's main() in a child Python under cProfile; adds the
    child's stats file to STATS_OUT. Returns the child's wall time."""
    prof = stats_out + ".%d" % len(os.listdir(os.path.dirname(stats_out)))
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "cProfile", "-o", prof, launcher]
                   + argv, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start, prof


def summarise_profile(prof_files, walls):
    stats = pstats.Stats(prof_files[0], stream=io.StringIO())
    for f in prof_files[1:]:
        stats.add(f)
    table = stats.stats  # (file, line, name) -> (cc, nc, tt, ct, callers)

    def cumulative(file_suffix, func):
        return sum(v[3] for k, v in table.items()
                   if k[0].endswith(file_suffix) and k[2] == func)

    def run_time_from(caller):
        """Time in Builder.run (the subprocesses) called from CALLER."""
        total = 0.0
        for k, v in table.items():
            if k[0].endswith("cli.py") and k[2] == "run":
                for ck, cv in v[4].items():
                    if ck[0].endswith("cli.py") and ck[2] == caller:
                        total += cv[3]
        return total

    n = len(walls)
    rows = []
    # Builder.build and the module's build() share a name; the module's
    # includes the Builder's (and the work directory): take the larger.
    build_ct = max(v[3] for k, v in table.items()
                   if k[0].endswith("cli.py") and k[2] == "build")
    wall = sum(walls)
    rows.append(("interpreter start, imports, argument parsing",
                 wall - build_ct))
    for func, what in STEPS:
        if func == "link":
            # link's cumulative includes the probe link called by needed;
            # count only the final one here.
            t = run_time_from("link") - run_time_from_probe(table)
        elif func == "needed":
            t = cumulative("cli.py", "needed")
        else:
            t = cumulative("cli.py", func)
        rows.append(("%s: %s" % (func, what), t))
        if func == "build_image":
            sub = run_time_from("build_image")
            rows.append(("  cc -S and as (subprocesses)", sub))
            for f, fn, label in IMAGE_PARTS:
                rows.append(("  " + label, cumulative(f, fn)))
    print("\nucx-ifunc-cc -O2 profile, %d builds, %.2f s wall in all "
          "(mean per build):" % (n, wall))
    for label, t in rows:
        print("  %-58s %7.1f ms  %5.1f%%" % (label, 1000 * t / n,
                                            100 * t / wall))
    subprocess_total = sum(v[3] for k, v in table.items()
                           if k[0].endswith("cli.py") and k[2] == "run")
    print("  %-58s %7.1f ms  %5.1f%%" % (
        "all compiler/linker/objcopy runs together", 1000 * subprocess_total
        / n, 100 * subprocess_total / wall))


def run_time_from_probe(table):
    """The probe link's time: Builder.link called from Builder.needed."""
    for k, v in table.items():
        if k[0].endswith("cli.py") and k[2] == "link":
            return sum(cv[3] for ck, cv in v[4].items()
                       if ck[0].endswith("cli.py") and ck[2] == "needed")
    return 0.0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ifunc-cc", required=True,
                   help="ucx-ifunc-cc (the launcher script)")
    p.add_argument("--wrapper", required=True, help="csmith_ifunc.c")
    p.add_argument("--cc", default=os.environ.get("CC", "cc"))
    p.add_argument("--level", default="-O2")
    p.add_argument("--csv", help="also write the per-program times here")
    p.add_argument("--profile", action="store_true",
                   help="also profile each ucx-ifunc-cc build (cProfile)")
    args = p.parse_args(argv)

    include = csmith_diff.csmith_include_dir()
    if shutil.which("csmith") is None or include is None:
        print("toolchain_speed: needs csmith and libcsmith-dev",
              file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="toolchain-speed.")
    rows = []
    prof_files, prof_walls = [], []
    try:
        for seed in range(args.seed, args.seed + args.count):
            program = os.path.join(work, "prog_%d.c" % seed)
            csmith_diff.generate(seed, program)
            name = "speed_%d" % seed
            common = [args.level, "-w", "-I", include] + \
                csmith_diff.wrapper_defines(name, program)
            ifunc_cmd = shlex.split(args.ifunc_cc) + common + [
                "-o", os.path.join(work, name + ".so"), args.wrapper]
            plain_cmd = shlex.split(args.cc) + common + [
                "-shared", "-fPIC", "-o",
                os.path.join(work, name + "_plain.so"), args.wrapper]
            plain = timed(plain_cmd)
            ifunc = timed(ifunc_cmd)
            lines = sum(1 for _ in open(program))
            rows.append((seed, lines, plain, ifunc))
            if args.profile:
                wall, prof = profile_build(
                    shlex.split(args.ifunc_cc)[-1],
                    ifunc_cmd[len(shlex.split(args.ifunc_cc)):],
                    os.path.join(work, "prof"))
                prof_walls.append(wall)
                prof_files.append(prof)
    finally:
        if prof_files:
            summarise_profile(prof_files, prof_walls)
        shutil.rmtree(work, ignore_errors=True)

    plain = [r[2] for r in rows]
    ifunc = [r[3] for r in rows]
    ratios = [r[3] / r[2] for r in rows]
    print("\n%d csmith programs (seeds %d..%d, %d to %d lines), %s, "
          "one build at a time:" % (len(rows), args.seed,
                                    args.seed + args.count - 1,
                                    min(r[1] for r in rows),
                                    max(r[1] for r in rows), args.level))
    print("  %-34s %9s %9s" % ("build", "median s", "max s"))
    print("  %-34s %9.3f %9.3f" % ("cc %s -shared -fPIC" % args.level,
                                   statistics.median(plain), max(plain)))
    print("  %-34s %9.3f %9.3f" % ("ucx-ifunc-cc %s" % args.level,
                                   statistics.median(ifunc), max(ifunc)))
    print("  ratio of the medians: %.2f; per program: median %.2f, "
          "max %.2f" % (statistics.median(ifunc) / statistics.median(plain),
                        statistics.median(ratios), max(ratios)))
    out = open(args.csv, "w", newline="") if args.csv else sys.stdout
    if not args.csv:
        print("\nCSV:")
    writer = csv.writer(out)
    writer.writerow(["seed", "lines", "plain_s", "ucx_ifunc_cc_s", "ratio"])
    for seed, lines, p_s, i_s in rows:
        writer.writerow([seed, lines, "%.4f" % p_s, "%.4f" % i_s,
                         "%.2f" % (i_s / p_s)])
    if args.csv:
        out.close()
        print("per-program times written to %s" % args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
