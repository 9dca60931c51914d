#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""Run time of csmith programs shipped as machine code and as bitcode.

A benchmark, not a test (issue 32, point 4): for each seed, csmith writes a
program (csmith_diff.py's generator and options); a program whose native
checksums differ between levels or that crashes is skipped, as in the
differential test. The program is built as an ifunc twice at one level,
native (ucx-ifunc-cc, the baseline ISA) and bitcode alone (--bitcode-only,
which the target compiles for its own CPU), and both are shipped to one
target (csmith_ifunc_run --repeat RUNS): after a first message (link or
compile, then one checked run), a second one runs the program RUNS times,
and the target's time for it, per run, is what is compared: the runs are
calibrated so that a message takes about 10 ms, and the least of 3 timed
messages of each build counts. Prints one line
per program, the ratios' median and range, and CSV lines.

    csmith_time.py --ifunc-cc CMD --driver csmith_ifunc_run
                   --wrapper csmith_ifunc.c --work-dir DIR
                   --bitcode-triple TRIPLE [--count N] [--seed S]
                   [--level -O2] [--runs RUNS]

"make bench-csmith-time" runs it (CSMITH_COUNT, CSMITH_SEED as for
check-csmith). Pin the whole run (taskset) and quote the load.
"""

import argparse
import os
import shlex
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csmith_diff as diff  # noqa: E402  (the generator, builds, checks)


def parse_args(argv):
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=int(env("CSMITH_COUNT", "20")))
    p.add_argument("--seed", type=int, default=int(env("CSMITH_SEED", "1")))
    p.add_argument("--level", default="-O2",
                   help="the level of both builds (default -O2)")
    p.add_argument("--runs", type=int, default=int(env("CSMITH_RUNS", "50")),
                   help="runs of the program in the timed message")
    p.add_argument("--rounds", type=int, default=3,
                   help="timed messages of each build; the least counts")
    p.add_argument("--message-ms", type=float, default=10.0,
                   help="about how long a timed message runs (default 10)")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds a native run may take; slower programs "
                   "are skipped")
    p.add_argument("--ifunc-cc", required=True)
    p.add_argument("--driver", required=True)
    p.add_argument("--wrapper", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--bitcode-triple", required=True)
    p.add_argument("--csmith", default=env("CSMITH", "csmith"))
    args = p.parse_args(argv)
    # What csmith_diff's helpers read from its own options.
    args.levels = args.level
    args.native_cc = ""
    args.target = ""
    args.target_runner = ""
    args.tls = "sm"
    return args


def time_program(cfg, seed):
    """Returns (native ns, bitcode ns) per run, or a reason to skip."""
    work = os.path.join(cfg.args.work_dir, "seed_%d" % seed)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "lib"))
    program = os.path.join(work, "prog.c")
    diff.generate(seed, program, cfg.args.csmith)
    outcome, _, longest, notes = diff.native_checksums(cfg, work, program)
    if outcome is not None:
        return outcome + ": " + notes.splitlines()[0]
    level = cfg.args.level
    native = diff.ifunc_name(seed, level)
    bitcode = diff.bitcode_name(native)
    for name, is_bitcode in ((native, False), (bitcode, True)):
        ok, out = diff.build_ifunc(cfg, work, program, name, level,
                                   bitcode=is_bitcode)
        if not ok:
            return "build of %s failed: %s" % (name, out.strip()[:200])
    env = dict(os.environ)
    env["UCX_IFUNC_LIB_DIR"] = os.path.join(work, "lib")
    env.setdefault("UCX_TLS", "sm")
    env.setdefault("UCX_IFUNC_JIT_TIMEOUT", "30s")
    runs, best = cfg.args.runs, {}
    for attempt in range(cfg.args.rounds + 1):
        timeout = max(30.0, 10 * longest * runs)
        cmd = [cfg.args.driver, "--timeout", "%g" % timeout, "--repeat",
               str(runs), native, bitcode]
        status, out, _ = diff.run_quiet(cmd, timeout=2 * timeout + 60,
                                        env=env)
        times = {}
        for line in out.decode(errors="replace").splitlines():
            words = line.split()
            if len(words) >= 3 and words[1] == "time":
                times[words[0]] = (float(words[2]), "bitcode" in words[4:])
        if native not in times or bitcode not in times:
            return "no time from the driver (exit %s): %s" % (
                status, out.decode(errors="replace").strip()[-300:])
        if times[native][1] or not times[bitcode][1]:
            return "the target did not run the kind of code asked for"
        if attempt == 0:
            # Calibration: enough runs that a message takes about
            # --message-ms, so that the message's own cost (checks, code
            # lookup: about a microsecond) is lost in the program's.
            per_run = max(times[native][0], 1.0)
            runs = max(runs, int(cfg.args.message_ms * 1e6 / per_run))
            continue
        for name in (native, bitcode):
            best[name] = min(best.get(name, float("inf")), times[name][0])
    shutil.rmtree(work, ignore_errors=True)
    return best[native], best[bitcode], runs


def main(argv=None):
    args = parse_args(argv)
    cfg = diff.Config(args)
    if shutil.which(args.csmith) is None or cfg.include is None:
        print("csmith_time: needs csmith and libcsmith-dev", file=sys.stderr)
        return 1
    os.makedirs(args.work_dir, exist_ok=True)
    print("csmith_time: seeds %d..%d at %s, %d runs a message, load %s"
          % (args.seed, args.seed + args.count - 1, args.level, args.runs,
             open("/proc/loadavg").read().split()[0]), flush=True)
    ratios, rows = [], []
    start = time.monotonic()
    for seed in range(args.seed, args.seed + args.count):
        result = time_program(cfg, seed)
        if isinstance(result, str):
            print("seed %d: skipped: %s" % (seed, result), flush=True)
            continue
        native_ns, bitcode_ns, runs = result
        ratio = bitcode_ns / native_ns if native_ns > 0 else float("nan")
        ratios.append(ratio)
        rows.append((seed, runs, native_ns, bitcode_ns, ratio))
        print("seed %d: native %.0f ns, bitcode %.0f ns a run (%d runs a "
              "message, least of %d): %.3fx" % (seed, native_ns, bitcode_ns,
                                                runs, args.rounds, ratio),
              flush=True)
    if not ratios:
        print("csmith_time: no program timed")
        return 1
    print("csmith_time: %d programs timed in %.0f s; bitcode / native run "
          "time: median %.3f, range %.3f-%.3f (load %s)"
          % (len(ratios), time.monotonic() - start, statistics.median(ratios),
             min(ratios), max(ratios),
             open("/proc/loadavg").read().split()[0]))
    print("csv,seed,runs,native_ns,bitcode_ns,ratio")
    for row in rows:
        print("csv,%d,%d,%.1f,%.1f,%.4f" % row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
