#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""The sandbox's overhead on the code it runs ("make bench-sandbox").

Builds, natively and with ucx-ifunc-cc --sandbox, csmith programs (the
differential test's wrapper, test/csmith/csmith_ifunc.c; programs whose
native runs disagree between -O0 and the level or fail are left out, as
there, and so are those whose native runs take over 0.5 s), the pointer
chase's ifunc (chase_kernel.c) and a kernel of the record insert's
(record_kernel.c), then runs overhead_bench on them:
each message through ucp_poll_ifunc, natively and in the sandbox's slot.
Prints a table, then the same as CSV.

Environment (each also an option): SANDBOX_BENCH_COUNT (csmith programs
measured, default 30), SANDBOX_BENCH_SEED (the first seed, default 7100),
SANDBOX_BENCH_LEVEL (default -O2), SANDBOX_BENCH_ROUNDS (default 31).
"""

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys

# Each program runs some 30 times on each side: slower ones would take
# minutes and tell nothing more.
MAX_NATIVE_SECONDS = 0.5

CSV_FIELDS = ["name", "messages", "native_ns", "sandboxed_ns", "ratio",
              "min_ratio", "max_ratio", "same"]


def csmith_programs(args, csmith_diff):
    """Generates and builds the csmith programs; returns their names."""
    diff_args = csmith_diff.parse_args([
        "--ifunc-cc", args.ifunc_cc, "--driver", "-", "--wrapper",
        os.path.join(args.src_dir, "test", "csmith", "csmith_ifunc.c"),
        "--work-dir", args.work_dir, "--levels", "-O0 " + args.level,
        "--timeout", "%g" % (2 * MAX_NATIVE_SECONDS)])
    cfg = csmith_diff.Config(diff_args)
    names, seed = [], args.seed - 1
    while len(names) < args.count:
        seed += 1
        work = os.path.join(args.work_dir, "seed_%d" % seed)
        os.makedirs(work, exist_ok=True)
        program = os.path.join(work, "prog.c")
        csmith_diff.generate(seed, program, diff_args.csmith)
        outcome, _, longest, notes = csmith_diff.native_checksums(
            cfg, work, program)
        if outcome is None and longest > MAX_NATIVE_SECONDS:
            outcome, notes = "slow", "a native run took %.1f s" % longest
        if outcome is not None:
            print("overhead_bench: seed %d left out: %s" %
                  (seed, notes.splitlines()[0]), flush=True)
            continue
        name = csmith_diff.ifunc_name(seed, args.level)
        for sandbox in (False, True):
            built = csmith_diff.sandboxed_name(name) if sandbox else name
            ok, out = csmith_diff.build_ifunc(cfg, args.work_dir, program,
                                              built, args.level, sandbox)
            if not ok:
                raise RuntimeError("building %s failed:\n%s" % (built, out))
        names.append(name)
    return names


def build_kernel(args, source, name):
    """Builds KERNEL.c as NAME and NAME_sbx."""
    lib = os.path.join(args.work_dir, "lib")
    for suffix, flags in (("", []), ("_sbx", ["--sandbox"])):
        subprocess.run(shlex.split(args.ifunc_cc) + flags + [
            args.level, "-Wall", "-Werror",
            "-I" + os.path.join(args.src_dir, "src"),
            "-DIFUNC_NAME=" + name + suffix,
            "-o", os.path.join(lib, name + suffix + ".so"),
            os.path.join(args.src_dir, "test", "sandbox", source)],
            check=True)


def run_bench(args, kind, names):
    """overhead_bench's CSV rows for NAMES."""
    env = dict(os.environ, UCX_IFUNC_LIB_DIR=os.path.join(args.work_dir,
                                                            "lib"))
    proc = subprocess.run([args.bench, "--rounds", str(args.rounds), kind] +
                          names, stdout=subprocess.PIPE, env=env,
                          universal_newlines=True)
    rows = [dict(zip(CSV_FIELDS, line.split(",")))
            for line in proc.stdout.splitlines()[1:]]
    if proc.returncode != 0:
        # a row with same=no, or a name that failed (overhead_bench said
        # which on stderr)
        rows.append(dict(dict.fromkeys(CSV_FIELDS, "0"),
                         name="%s-failed" % kind, same="no"))
    return rows


def print_table(rows):
    print("%-22s %9s %12s %12s %7s %15s %5s" % (
        "ifunc", "messages", "native us", "sandboxed us", "ratio",
        "rounds' ratios", "same"))
    for r in rows:
        print("%-22s %9s %12.1f %12.1f %7.3f %7.3f-%-7.3f %5s" % (
            r["name"], r["messages"], float(r["native_ns"]) / 1e3,
            float(r["sandboxed_ns"]) / 1e3, float(r["ratio"]),
            float(r["min_ratio"]), float(r["max_ratio"]), r["same"]))


def summary(rows):
    """Median and spread of the csmith programs' ratios."""
    ratios = sorted(float(r["ratio"]) for r in rows)
    n = len(ratios)
    quartiles = statistics.quantiles(ratios, n=4) if n >= 2 else ratios * 3
    return ("csmith, %d programs: median ratio %.3f (overhead %+.1f %%), "
            "quartiles %.3f-%.3f, min %.3f, max %.3f" %
            (n, statistics.median(ratios),
             (statistics.median(ratios) - 1) * 100, quartiles[0],
             quartiles[-1], ratios[0], ratios[-1]))


def parse_args(argv):
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ifunc-cc", required=True)
    p.add_argument("--bench", required=True, help="overhead_bench")
    p.add_argument("--src-dir", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--count", type=int,
                   default=int(env("SANDBOX_BENCH_COUNT", "30")),
                   help="csmith programs measured")
    p.add_argument("--seed", type=int,
                   default=int(env("SANDBOX_BENCH_SEED", "7100")),
                   help="seeds from this one up, until COUNT programs run")
    p.add_argument("--level", default=env("SANDBOX_BENCH_LEVEL", "-O2"))
    p.add_argument("--rounds", type=int,
                   default=int(env("SANDBOX_BENCH_ROUNDS", "31")))
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, os.path.join(args.src_dir, "test", "csmith"))
    import csmith_diff
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(os.path.join(args.work_dir, "lib"))
    build_kernel(args, "chase_kernel.c", "sbx_chase")
    build_kernel(args, "record_kernel.c", "sbx_record")
    names = csmith_programs(args, csmith_diff)
    rows = (run_bench(args, "chase", ["sbx_chase"]) +
            run_bench(args, "record", ["sbx_record"]))
    csmith_rows = run_bench(args, "csmith", names)
    print_table(rows + csmith_rows)
    print(summary([r for r in csmith_rows if r["same"] == "yes"]))
    print()
    print(",".join(CSV_FIELDS))
    for r in rows + csmith_rows:
        print(",".join(r[f] for f in CSV_FIELDS))
    return 0 if all(r["same"] == "yes" for r in rows + csmith_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
