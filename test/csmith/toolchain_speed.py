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

import json
import os
import resource
import sys
import time

# Only what the --profile child needs is imported here, so that its
# interpreter start costs about what ucx-ifunc-cc's own does; the rest is
# imported in main().


def timed(cmd):
    """Runs CMD; returns (wall seconds, CPU seconds of it and its children:
    the compiler driver's cc1, as and ld included)."""
    import subprocess
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime +
                  after.ru_stime - before.ru_stime)


# --profile: the steps of cli.Builder.build in order, what each runs, and
# the Python functions build_image calls. Programs run as Jobs, started
# early and waited for later: their CPU time counts in the step that waits.
STEPS = [
    ("check_target", "cc -dumpmachine"),
    ("toolchains", "cc -dumpmachine, per ISA"),
    ("image_for", "per ISA: cc -S (waited for), what is not below"),
    ("compile_normal", "cc -c, the ordinary objects"),
    ("build_image", "as of the rewritten assembly"),
    ("preload", "  import capstone"),
    ("rewrite", "  rewrite the assembly"),
    ("link_image", "  image linker"),
    ("verify", "  self-check (disassembly)"),
    ("weaken", "weak references (objcopy, or patched)"),
    ("libgcc_helpers", "cc -print-file-name, read libgcc_s"),
    ("needed", "probe link (waited for), its DT_NEEDED"),
    ("probe link", "probe link again (-lgcc_s, or with objects)"),
    ("encode", "encode the image"),
    ("embed", "the image object (as of .incbin, or written)"),
    ("link", "final link of NAME.so"),
    ("check_exports", "read the exports of NAME.so"),
    ("main", "argument parsing, work directory"),
]
# Steps a version of the tool lacks are left out (check_target became
# toolchains with --target; the final link became a Builder.run).
BUILDER_METHODS = ["check_target", "toolchains", "image_for",
                   "compile_normal", "build_image", "weaken",
                   "libgcc_helpers", "needed", "encode", "embed", "link",
                   "check_exports", "run"]
CLI_FUNCTIONS = ["rewrite", "link_image", "verify", "main"]
# Functions that cli imports where it calls them: patched in their module.
MODULE_FUNCTIONS = [("asm_rewrite", "rewrite"),
                    ("image_link", "link_image"),
                    ("verify", "verify"), ("verify", "preload")]


def _snapshot():
    t = os.times()
    return (t.user + t.system, t.children_user + t.children_system,
            time.monotonic())


def step_times_child(pydir, out, argv):
    """In a child Python: runs ucx-ifunc-cc's main() with every step
    wrapped in a timer; writes each step's exclusive time (nested steps
    subtracted) as JSON to OUT. Timers, unlike cProfile, do not slow
    the Python code down."""
    sys.path.insert(0, pydir)
    totals = {}
    stack = []  # per active step: time spent in its nested steps

    def add(key, values):
        old = totals.get(key, (0.0, 0.0, 0.0))
        totals[key] = tuple(a + b for a, b in zip(old, values))

    def timer(key_of, func):
        def wrapped(*args, **kwargs):
            key = key_of(args)
            before = _snapshot()
            stack.append([0.0, 0.0, 0.0])
            try:
                return func(*args, **kwargs)
            finally:
                nested = stack.pop()
                delta = [b - a for a, b in zip(before, _snapshot())]
                add(key, [d - n for d, n in zip(delta, nested)])
                if stack:
                    stack[-1] = [s + d for s, d in zip(stack[-1], delta)]
        return wrapped

    before = _snapshot()
    import ucx_ifunc.cli as cli
    add("import", [b - a for a, b in zip(before, _snapshot())])
    # (the modules of MODULE_FUNCTIONS are imported below, before main,
    # and counted in the interpreter's start: cli imports them anyway)
    active = []

    def key_for(name):
        def key(args):
            if name == "run":  # Builder.run(cmd, what): the links
                what = args[2] if len(args) > 2 else ""
                if not what.startswith("link of"):
                    return active[-2] if len(active) > 1 else "main"
                name_ = "link"
            else:
                name_ = name
            return "probe link" if (name_ == "link" and
                                    "needed" in active) else name_
        return key

    def tracking(name, func):
        def wrapped(*args, **kwargs):
            active.append(name)
            try:
                return func(*args, **kwargs)
            finally:
                active.pop()
        return wrapped

    for name in BUILDER_METHODS:
        if hasattr(cli.Builder, name):
            setattr(cli.Builder, name, tracking(name, timer(
                key_for(name), getattr(cli.Builder, name))))
    for name in CLI_FUNCTIONS:
        if hasattr(cli, name):
            setattr(cli, name, timer(key_for(name), getattr(cli, name)))
    import importlib
    for module_name, name in MODULE_FUNCTIONS:
        try:
            module = importlib.import_module("ucx_ifunc." + module_name)
        except ImportError:
            continue
        if hasattr(module, name) and not hasattr(cli, name):
            setattr(module, name, timer(key_for(name),
                                        getattr(module, name)))
    sys.argv = ["ucx-ifunc-cc"] + argv
    status = cli.main(argv)
    with open(out, "w") as stream:
        json.dump(totals, stream)
    # as the launcher does: no interpreter teardown
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def profile_build(pydir, argv, out):
    """Runs one profiled build; returns the step times and the child's whole
    (python CPU + subprocess CPU, wall), for the interpreter's start."""
    import subprocess
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run([sys.executable, os.path.abspath(__file__),
                    "--step-times", out, "--pydir", pydir, "--"] + argv,
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime -
           before.ru_stime)
    with open(out) as stream:
        return json.load(stream), cpu, wall


def summarise_profile(profiles):
    n = len(profiles)
    totals = {}
    all_cpu = all_wall = 0.0
    for steps, cpu, wall in profiles:
        all_cpu += cpu
        all_wall += wall
        for key, values in steps.items():
            old = totals.get(key, (0.0, 0.0, 0.0))
            totals[key] = tuple(a + b for a, b in zip(old, values))
    measured = [sum(v[0] + v[1] for v in totals.values()),
                sum(v[2] for v in totals.values())]
    rows = [("start", "interpreter start and exit",
             (all_cpu - measured[0], 0.0, all_wall - measured[1])),
            ("import", "import ucx_ifunc.cli",
             totals.get("import", (0, 0, 0)))]
    rows += [(key, what, totals[key]) for key, what in STEPS
             if key in totals]
    print("\nucx-ifunc-cc steps, mean per build over %d builds "
          "(CPU of Python and of the programs it runs, and wall):" % n)
    print("  %-16s %-44s %8s %8s %8s" % ("step", "", "py ms", "cc ms",
                                         "wall ms"))
    for key, what, (py, sub, wall) in rows:
        print("  %-16s %-44s %8.0f %8.0f %8.0f" % (
            key, what, 1000 * py / n, 1000 * sub / n, 1000 * wall / n))
    py = sum(r[2][0] for r in rows)
    sub = sum(r[2][1] for r in rows)
    print("  %-16s %-44s %8.0f %8.0f %8.0f" % (
        "total", "", 1000 * py / n, 1000 * sub / n, 1000 * all_wall / n))


def stats_line(label, values):
    import statistics
    return "  %-30s %9.3f %9.3f" % (label, statistics.median(values),
                                    max(values))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--step-times"]:
        # the child of profile_build: --step-times OUT --pydir DIR -- ARGS
        return step_times_child(argv[3], argv[1], argv[5:])

    import argparse
    import csv
    import shlex
    import shutil
    import statistics
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import csmith_diff  # the generator and the wrapper's options

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--seed", type=int, default=1, help="first seed")
    p.add_argument("--ifunc-cc", required=True, help="ucx-ifunc-cc command")
    p.add_argument("--wrapper", default=os.path.join(here, "csmith_ifunc.c"))
    p.add_argument("--target", metavar="TRIPLET",
                   help="build for another ISA (aarch64-linux-gnu): "
                   "ucx-ifunc-cc --target TRIPLET against a plain build "
                   "with TRIPLET-gcc (unless --cc is given)")
    p.add_argument("--cc", default=None,
                   help="compiler of the plain build (default: TRIPLET-gcc with "
                   "--target, else $CC, else cc)")
    p.add_argument("--level", default="-O2")
    p.add_argument("--csv", help="write the per-program times here instead "
                   "of to stdout")
    p.add_argument("--profile", action="store_true",
                   help="also time each step of ucx-ifunc-cc (a third "
                   "build per program, not counted in the comparison)")
    p.add_argument("--pydir", default=os.path.join(here, os.pardir,
                                                   os.pardir, "tools"),
                   help="where the ucx_ifunc package is, for --profile")
    args = p.parse_args(argv)
    if args.cc is None:
        args.cc = (args.target + "-gcc" if args.target
                   else os.environ.get("CC", "cc"))
    target = ["--target", args.target] if args.target else []

    include = csmith_diff.csmith_include_dir()
    if shutil.which("csmith") is None or include is None:
        print("toolchain_speed: needs csmith and libcsmith-dev",
              file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="toolchain-speed.")
    rows, profiles = [], []
    try:
        for seed in range(args.seed, args.seed + args.count):
            program = os.path.join(work, "prog_%d.c" % seed)
            csmith_diff.generate(seed, program)
            name = "speed_%d" % seed
            common = [args.level, "-w", "-I", include] + \
                csmith_diff.wrapper_defines(name, program)
            ifunc_args = target + common + [
                "-o", os.path.join(work, name + ".so"), args.wrapper]
            plain_cmd = shlex.split(args.cc) + common + [
                "-shared", "-fPIC", "-o",
                os.path.join(work, name + "_plain.so"), args.wrapper]
            # One after the other, so that both see the same load.
            plain = timed(plain_cmd)
            ifunc = timed(shlex.split(args.ifunc_cc) + ifunc_args)
            with open(program) as stream:
                lines = sum(1 for _ in stream)
            rows.append((seed, lines) + plain + ifunc)
            if args.profile:
                profiles.append(profile_build(
                    os.path.abspath(args.pydir), ifunc_args,
                    os.path.join(work, "steps.json")))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    plain_wall, plain_cpu = [r[2] for r in rows], [r[3] for r in rows]
    ifunc_wall, ifunc_cpu = [r[4] for r in rows], [r[5] for r in rows]
    print("%d csmith programs (seeds %d..%d, %d to %d lines), %s, one build "
          "at a time; CPU = user + system of the build and its children:"
          % (len(rows), args.seed, args.seed + args.count - 1,
             min(r[1] for r in rows), max(r[1] for r in rows), args.level))
    print("  %-30s %9s %9s" % ("", "median s", "max s"))
    plain_label = "%s %s -shared -fPIC" % (args.cc, args.level)
    ifunc_label = "ucx-ifunc-cc %s" % args.level
    print(stats_line(plain_label + " wall", plain_wall))
    print(stats_line(ifunc_label + " wall", ifunc_wall))
    print(stats_line(plain_label + " CPU", plain_cpu))
    print(stats_line(ifunc_label + " CPU", ifunc_cpu))
    for kind, ifunc_v, plain_v in (("wall", ifunc_wall, plain_wall),
                                   ("CPU", ifunc_cpu, plain_cpu)):
        ratios = [i / p for i, p in zip(ifunc_v, plain_v)]
        print("  ratio ucx-ifunc-cc / plain, %s: of the medians %.2f, per "
              "program median %.2f, max %.2f"
              % (kind, statistics.median(ifunc_v) / statistics.median(plain_v),
                 statistics.median(ratios), max(ratios)))

    out = open(args.csv, "w", newline="") if args.csv else sys.stdout
    if not args.csv:
        print("\nCSV:")
    writer = csv.writer(out)
    writer.writerow(["seed", "lines", "plain_wall_s", "plain_cpu_s",
                     "ucx_ifunc_cc_wall_s", "ucx_ifunc_cc_cpu_s"])
    for row in rows:
        writer.writerow(list(row[:2]) + ["%.4f" % v for v in row[2:]])
    if args.csv:
        out.close()
        print("per-program times written to %s" % args.csv)
    if profiles:
        summarise_profile(profiles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
