#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""Differential test of ucx-ifunc-cc with csmith.

For each seed: csmith writes a random C program; it is compiled natively
and run at every optimisation level; then it is wrapped as an ifunc
(csmith_ifunc.c), built with ucx-ifunc-cc at every level, and shipped to a
target process through the real runtime (csmith_ifunc_run). Every checksum
the target computed must equal the native one.

With --sandbox (CSMITH_SANDBOX=1) each program is also built with
ucx-ifunc-cc --sandbox, as the ifunc NAME_sbx, and shipped to a second
target that runs it under UCX_IFUNC_TRUST=sandboxed alone (no library, no
key: only its verifier vouches for the code), confined to its slot; its
result struct lies in memory the target granted to NAME_sbx. Its
checksums must equal the native ones too.

With --bitcode (CSMITH_BITCODE=1) each program is also built with
ucx-ifunc-cc --bitcode-only for this machine's triple (--bitcode-triple,
which check-csmith passes where the build has LLVM), as the ifunc NAME_bc,
at the levels of --bitcode-levels (CSMITH_BITCODE_LEVELS, default -O2, to
keep the test command's step short; -O0 adds bitcode as clang leaves it
unoptimised, which the target's -O2 does not optimise either), and
shipped to a target that compiles it for its own CPU (the on-target JIT),
with as much time to compile as the run has (UCX_IFUNC_JIT_TIMEOUT,
unless set). The library has no machine code to send, and the driver
reports that the code which ran was compiled as bitcode; its checksums
must equal the native ones.

A program whose native checksums differ between levels, or whose native run
fails, has undefined behaviour: it is skipped and counted as such, never as
a pass. So is a program whose native run takes longer than the timeout.

Environment (each also an option, see --help): CSMITH_COUNT (programs),
CSMITH_SEED (first seed; seeds run from it upwards; default: from the
clock, printed), CSMITH_LEVELS, CSMITH_JOBS, CSMITH_TIMEOUT, UCX_TLS
(default sm).

A target of another architecture: IFUNC_TARGET names its triplet (say
aarch64-linux-gnu). The source stays native; each ifunc is then built twice
with ucx-ifunc-cc --target, a library for the source (its own ISA first)
and one for the target in lib/TRIPLET (the target's ISA first), both
carrying both images; the driver asks for the target's image
(--target-machine) and starts CSMITH_TARGET_DRIVER, the driver built for
that architecture, under TARGET_RUNNER (default qemu-ARCH),
which also runs the native programs, built by CSMITH_NATIVE_CC (default
TRIPLET-gcc).

A target whose ISA runs bitcode only (IFUNC_TARGET=powerpc64le-linux-gnu,
issue 32's third ISA; needs --bitcode-triple): the native programs run on
this machine, and each ifunc is built with --bitcode-only for this
machine's triple and the target's, at the bitcode levels, twice as above
(the target's library is a ppc64el NAME.so); the target, under
qemu-ppc64le, compiles the target's bitcode and runs it, and its checksums
must equal this machine's native ones. Its ifuncs run from bitcode only.
"""

import argparse
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time

# Small programs that finish quickly: few functions, shallow blocks and
# small arrays. Packed structures are left out because shipped code cannot
# hold pointers at unaligned addresses (docs/toolchain.md, "What is
# refused"): a refusal there is by design, not a bug to find.
CSMITH_OPTIONS = [
    "--no-packed-struct",
    "--max-funcs", "4",
    "--max-block-depth", "3",
    "--max-block-size", "4",
    "--max-expr-complexity", "6",
    "--max-array-dim", "2",
    "--max-array-len-per-dim", "6",
    "--max-struct-fields", "6",
    "--concise",
]

DEFAULT_LEVELS = "-O0 -O1 -O2 -O3 -Os"
CHECKSUM_RE = re.compile(rb"^checksum = ([0-9A-F]+)$", re.M)


def csmith_include_dir():
    """Where csmith.h is (Debian: libcsmith-dev, /usr/include/csmith)."""
    for d in (os.environ.get("CSMITH_INCLUDE", ""), "/usr/include/csmith",
              "/usr/local/include/csmith", "/usr/local/include/csmith-2.3.0"):
        if d and os.path.isfile(os.path.join(d, "csmith.h")):
            return d
    return None


def generate(seed, path, csmith="csmith"):
    """Writes csmith's program for SEED to PATH. csmith also writes a
    platform.info into its working directory: run it where PATH is."""
    path = os.path.abspath(path)
    subprocess.run([csmith, "--seed", str(seed), "-o", path] + CSMITH_OPTIONS,
                   check=True, stdout=subprocess.DEVNULL,
                   cwd=os.path.dirname(path))


def ifunc_name(seed, level):
    """A fresh ifunc name per program and level, so that the target links
    fresh code and fresh data for each."""
    return "csmith_%d_%s" % (seed, level.lstrip("-"))


def sandboxed_name(name):
    """The ifunc name of NAME's build for the sandbox."""
    return name + "_sbx"


def bitcode_name(name):
    """The ifunc name of NAME's bitcode-only build."""
    return name + "_bc"


# How each program is built as an ifunc besides its native images: the
# mode's name in reports, the ifunc name, and its levels.
NATIVE, SANDBOX, BITCODE = "native", "sandboxed", "bitcode"
MODE_NAMES = {NATIVE: lambda name: name, SANDBOX: sandboxed_name,
              BITCODE: bitcode_name}


def wrapper_defines(name, program, sandbox=False):
    """The -D options that make csmith_ifunc.c the ifunc NAME for PROGRAM
    (with SANDBOX, built with ucx-ifunc-cc --sandbox)."""
    return ["-DIFUNC_NAME=" + name,
            '-DCSMITH_PROGRAM="%s"' % os.path.abspath(program)] + (
                ["-DCSMITH_SANDBOX"] if sandbox else [])


class Outcome:
    PASSED = "passed"
    UB = "skipped-UB"
    TIMEOUT = "skipped-timeout"
    FAILED = "FAILED"


# ELF machine numbers of the architectures ucx-ifunc-cc builds images for.
ELF_MACHINES = {"x86_64": 62, "aarch64": 183, "powerpc64le": 21}
# ISAs whose targets run bitcode only (no native image covers them).
BITCODE_ONLY_ARCHES = ("powerpc64le",)
QEMU_NAMES = {"powerpc64le": "qemu-ppc64le"}
# The least time a target under emulation gets per program (and its JIT):
# a csmith program's compile under qemu-ppc64le takes seconds.
EMULATED_JIT_TIMEOUT = 60.0


class Config:
    def __init__(self, args):
        self.args = args
        self.levels = args.levels.split()
        self.include = csmith_include_dir()
        self.target = args.target  # "" for this machine's own
        self.host = ""
        self.machine = 0
        self.bitcode_target = False  # the target runs bitcode only
        runner, native_cc = args.target_runner, args.native_cc
        self.target_runner = []
        if self.target:
            arch = self.target.split("-")[0]
            self.machine = ELF_MACHINES.get(arch, 0)
            self.bitcode_target = arch in BITCODE_ONLY_ARCHES
            cc = shlex.split(os.environ.get("CC", "cc"))
            self.host = subprocess.run(
                cc + ["-dumpmachine"], stdout=subprocess.PIPE, check=True,
                universal_newlines=True).stdout.strip()
            # The target's libraries (UCX, libsodium) are the multiarch
            # ones of the running system: no -L prefix, whose cross libc
            # would be mixed with them.
            runner = runner or QEMU_NAMES.get(arch, "qemu-%s" % arch)
            self.target_runner = shlex.split(runner)
            if self.bitcode_target:
                runner = ""  # the native programs run here
            else:
                native_cc = native_cc or self.target + "-gcc"
        self.runner = shlex.split(runner)  # of the native programs
        self.native_cc = shlex.split(native_cc or os.environ.get("CC", "cc"))


def run_quiet(cmd, timeout=None, env=None):
    """Runs CMD; returns (exit status or None on timeout, output, seconds)."""
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout,
                              env=env)
        return proc.returncode, proc.stdout, time.monotonic() - start
    except subprocess.TimeoutExpired as exc:
        return None, exc.stdout or b"", time.monotonic() - start


def native_checksums(cfg, work, program):
    """Compiles and runs PROGRAM at each level. Returns (outcome or None,
    {level: checksum}, longest run in seconds, notes)."""
    sums, longest = {}, 0.0
    for level in cfg.levels:
        exe = os.path.join(work, "native" + level)
        status, out, _ = run_quiet(cfg.native_cc + [level, "-w", "-I",
                                                    cfg.include, program,
                                                    "-o", exe])
        if status != 0:
            return (Outcome.FAILED, sums, longest,
                    "native build at %s failed:\n%s" % (level, out.decode(
                        errors="replace")))
        status, out, seconds = run_quiet(cfg.runner + [exe],
                                         timeout=cfg.args.timeout)
        longest = max(longest, seconds)
        if status is None:
            return (Outcome.TIMEOUT, sums, longest,
                    "native run at %s took over %g s" % (level,
                                                          cfg.args.timeout))
        match = CHECKSUM_RE.search(out)
        if status != 0 or not match:
            # A crash or an abort is undefined behaviour that csmith's
            # safe-math wrappers did not catch (or a stack overflow).
            how = ("killed by signal %d" % -status if status < 0 else
                   "exit status %d" % status if status else "no checksum")
            return (Outcome.UB, sums, longest,
                    "native run at %s: %s" % (level, how))
        sums[level] = match.group(1).decode()
    if len(set(sums.values())) > 1:
        return (Outcome.UB, sums, longest, "native checksums differ: " +
                " ".join("%s=%s" % kv for kv in sums.items()))
    return None, sums, longest, ""


def build_ifunc(cfg, work, program, name, level, sandbox=False,
                bitcode=False):
    """Builds WORK/lib/NAME.so, and with a target of another architecture
    also WORK/lib/TRIPLET/NAME.so; with SANDBOX, for the sandbox; with
    BITCODE, bitcode alone for this machine; returns (ok, output)."""
    options = (["--sandbox"] if sandbox else
               ["--bitcode-only=" + cfg.args.bitcode_triple] if bitcode else
               [])
    builds = [(os.path.join(work, "lib"), options)]
    if cfg.bitcode_target:
        # bitcode alone, for this machine and the target
        only = ["--bitcode-only=%s,%s" % (cfg.args.bitcode_triple,
                                          cfg.target)]
        builds = [(os.path.join(work, "lib"), ["--target", cfg.host] + only),
                  (os.path.join(work, "lib", cfg.target),
                   ["--target", "%s,%s" % (cfg.target, cfg.host)] + only)]
    elif cfg.target:
        builds = [(os.path.join(work, "lib"),
                   ["--target", "%s,%s" % (cfg.host, cfg.target)]),
                  (os.path.join(work, "lib", cfg.target),
                   ["--target", "%s,%s" % (cfg.target, cfg.host)])]
    for lib_dir, target_options in builds:
        os.makedirs(lib_dir, exist_ok=True)
        cmd = shlex.split(cfg.args.ifunc_cc) + target_options + [
            level, "-w", "-I", cfg.include] + wrapper_defines(name, program,
                                                              sandbox)
        cmd += ["-o", os.path.join(lib_dir, name + ".so"), cfg.args.wrapper]
        status, out, _ = run_quiet(cmd)
        if status != 0:
            return False, out.decode(errors="replace")
    return True, ""


def run_ifuncs(cfg, work, names, timeout, sandbox=False):
    """Ships NAMES to a target (with SANDBOX, one that runs them
    sandboxed); returns ({name: driver line}, output)."""
    env = dict(os.environ)
    env["UCX_IFUNC_LIB_DIR"] = os.path.join(work, "lib")
    env.setdefault("UCX_TLS", cfg.args.tls)
    # The JIT's default bound (1 s) is for a target's safety: a csmith
    # program of 30 KiB took 1.2-1.4 s to compile at load 5 on 2 cores.
    # Here only the checksum counts, in the time the run has.
    env.setdefault("UCX_IFUNC_JIT_TIMEOUT", "%ds" % int(timeout))
    cmd = [cfg.args.driver, "--timeout", "%g" % timeout]
    if sandbox:
        # A target without the libraries: nothing but its verifier can
        # vouch for the code.
        empty = os.path.join(work, "no-lib")
        os.makedirs(empty, exist_ok=True)
        cmd += ["--sandbox", "--target-lib-dir", empty]
    if cfg.target_runner:
        cmd += ["--target-runner", " ".join(cfg.target_runner)]
    if cfg.target:
        cmd += ["--target-program", cfg.args.target_driver,
                "--target-lib-dir", os.path.join(work, "lib", cfg.target),
                "--target-machine", str(cfg.machine)]
    cmd += names
    # The driver has its own timeout per name; this one only guards
    # against a driver that hangs in setup.
    status, out, _ = run_quiet(cmd, timeout=timeout * len(names) + 60,
                               env=env)
    text = out.decode(errors="replace")
    lines = {}
    for line in text.splitlines():
        words = line.split(None, 1)
        if len(words) == 2 and words[0] in names:
            lines[words[0]] = words[1]
    if status is None:
        text += "\n(driver timed out)"
    return lines, text


def check_program(cfg, seed):
    """Returns (outcome, one-line summary, details for a failure)."""
    work = os.path.join(cfg.args.work_dir, "seed_%d" % seed)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "lib"))
    program = os.path.join(work, "prog.c")
    generate(seed, program, cfg.args.csmith)

    outcome, sums, longest, notes = native_checksums(cfg, work, program)
    if outcome is not None:
        return outcome, notes.splitlines()[0], notes

    expected = next(iter(sums.values()))
    modes = {} if cfg.bitcode_target else {NATIVE: cfg.levels}
    if cfg.args.sandbox:
        modes[SANDBOX] = cfg.levels
    if cfg.args.bitcode:
        modes[BITCODE] = cfg.args.bitcode_levels.split()
    names = {mode: {} for mode in modes}
    for mode, levels in modes.items():
        for level in levels:
            name = MODE_NAMES[mode](ifunc_name(seed, level))
            ok, out = build_ifunc(cfg, work, program, name, level,
                                  sandbox=mode == SANDBOX,
                                  bitcode=mode == BITCODE)
            what = "ucx-ifunc-cc%s %s" % (
                {NATIVE: "", SANDBOX: " --sandbox",
                 BITCODE: " --bitcode-only"}[mode], level)
            if not ok:
                return (Outcome.FAILED, what + " failed",
                        "%s failed:\n%s" % (what, out))
            names[mode][name] = level

    # The shipped code does what the native program did, plus linking:
    # give it ample time over the slowest native run.
    timeout = max(EMULATED_JIT_TIMEOUT if cfg.bitcode_target else 10.0,
                  10 * longest)
    bad, out = [], ""
    for mode in modes:
        lines, text = run_ifuncs(cfg, work, list(names[mode]), timeout,
                                 mode == SANDBOX)
        out += text
        for name, level in names[mode].items():
            line = lines.get(name, "no answer")
            words = line.split()
            where = level + ("" if mode == NATIVE else " " + mode)
            if words[:1] != ["ok"] or words[1] != expected:
                bad.append("%s: target says '%s', native checksum %s" %
                           (where, line, expected))
            elif ("bitcode" in words[3:]) != (mode == BITCODE):
                # Else a bitcode run could pass on machine code.
                bad.append("%s: target says '%s': %s" % (
                    where, line, "not compiled from bitcode"
                    if mode == BITCODE else "compiled from bitcode"))
    if bad:
        return Outcome.FAILED, "; ".join(bad), "\n".join(bad) + "\n" + out
    if not cfg.args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return Outcome.PASSED, "checksum %s at %s%s%s" % (
        expected, " ".join(cfg.levels),
        ", also sandboxed" if cfg.args.sandbox else "",
        ", from bitcode at %s" % " ".join(modes[BITCODE])
        if BITCODE in modes else ""), ""


def parse_args(argv):
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=int(env("CSMITH_COUNT", "6")),
                   help="how many programs (CSMITH_COUNT, default 6)")
    p.add_argument("--seed", type=int, default=env("CSMITH_SEED"),
                   help="first seed (CSMITH_SEED; default from the clock)")
    p.add_argument("--levels", default=env("CSMITH_LEVELS", DEFAULT_LEVELS),
                   help="optimisation levels (CSMITH_LEVELS, default '%s')"
                   % DEFAULT_LEVELS)
    p.add_argument("--jobs", type=int,
                   default=int(env("CSMITH_JOBS", str(os.cpu_count() or 1))),
                   help="programs checked at once (CSMITH_JOBS)")
    p.add_argument("--timeout", type=float,
                   default=float(env("CSMITH_TIMEOUT", "5")),
                   help="seconds a native run may take (CSMITH_TIMEOUT, "
                   "default 5); slower programs are skipped")
    p.add_argument("--tls", default=None,
                   help="UCX_TLS for the driver when UCX_TLS is not set "
                   "(default sm; tcp with --target: UCX's shared memory "
                   "does not reach a process under qemu)")
    p.add_argument("--ifunc-cc", required=True, help="ucx-ifunc-cc command")
    p.add_argument("--driver", required=True, help="csmith_ifunc_run")
    p.add_argument("--wrapper", required=True, help="csmith_ifunc.c")
    p.add_argument("--work-dir", required=True,
                   help="where programs are written; failed ones stay")
    p.add_argument("--csmith", default=env("CSMITH", "csmith"))
    p.add_argument("--native-cc", default=env("CSMITH_NATIVE_CC", ""),
                   help="compiler of the native runs (CSMITH_NATIVE_CC; "
                   "default $CC, else cc; with --target TRIPLET-gcc)")
    p.add_argument("--target", default=env("IFUNC_TARGET", ""),
                   help="triplet of a target of another architecture "
                   "(IFUNC_TARGET, e.g. aarch64-linux-gnu)")
    p.add_argument("--target-runner", default=env("TARGET_RUNNER", ""),
                   help="runs the native programs and the driver's target "
                   "(TARGET_RUNNER; default with --target: qemu-ARCH)")
    p.add_argument("--target-driver", default=env("CSMITH_TARGET_DRIVER", ""),
                   help="the driver built for the target's architecture "
                   "(CSMITH_TARGET_DRIVER; needed with --target)")
    p.add_argument("--sandbox", action="store_true",
                   default=env("CSMITH_SANDBOX", "0") not in ("", "0"),
                   help="also build each program with ucx-ifunc-cc "
                   "--sandbox and run it sandboxed (CSMITH_SANDBOX=1)")
    p.add_argument("--bitcode", action="store_true",
                   default=env("CSMITH_BITCODE", "0") not in ("", "0"),
                   help="also build each program with ucx-ifunc-cc "
                   "--bitcode-only and run it from bitcode (CSMITH_BITCODE=1; "
                   "needs --bitcode-triple)")
    p.add_argument("--bitcode-triple", default="",
                   help="this machine's triple for --bitcode-only, given "
                   "where the build has LLVM (check-csmith passes it)")
    p.add_argument("--bitcode-levels",
                   default=env("CSMITH_BITCODE_LEVELS", "-O2"),
                   help="optimisation levels of the bitcode builds "
                   "(CSMITH_BITCODE_LEVELS, default -O2)")
    p.add_argument("--keep", action="store_true",
                   help="keep the work directory of passed programs too")
    args = p.parse_args(argv)
    if args.sandbox and args.target:
        p.error("--sandbox runs x86-64 code on this machine: no --target")
    bitcode_target = args.target.split("-")[0] in BITCODE_ONLY_ARCHES
    if bitcode_target:
        if not args.bitcode_triple:
            p.error("--target %s runs bitcode only: it needs "
                    "--bitcode-triple (a build with LLVM)" % args.target)
        args.bitcode = True
    elif args.bitcode and args.target:
        p.error("--bitcode runs on this machine's JIT: no --target (but "
                "a target that runs bitcode only, powerpc64le-linux-gnu)")
    if args.target and not args.target_driver:
        p.error("--target needs --target-driver (CSMITH_TARGET_DRIVER)")
    if args.tls is None:
        args.tls = "tcp" if args.target else "sm"
    if args.seed is None:
        args.seed = int(time.time()) % 1000000007
    else:
        args.seed = int(args.seed)
    return args


def main(argv=None):
    args = parse_args(argv)
    cfg = Config(args)
    if shutil.which(args.csmith) is None or cfg.include is None:
        print("csmith_diff: needs csmith and its headers (Debian: csmith, "
              "libcsmith-dev; or set CSMITH and CSMITH_INCLUDE)",
              file=sys.stderr)
        return 1
    if args.bitcode and not args.bitcode_triple:
        # The build has no JIT to run bitcode: say so, run the rest.
        print("csmith_diff: no bitcode runs: the build has no LLVM (no "
              "--bitcode-triple)", flush=True)
        args.bitcode = False
    seeds = list(range(args.seed, args.seed + args.count))
    print("csmith_diff: %d programs, seeds %d..%d, levels %s%s%s, "
          "UCX_TLS=%s%s"
          % (args.count, seeds[0], seeds[-1], args.levels,
             " (also sandboxed)" if args.sandbox else "",
             " (bitcode at %s)" % args.bitcode_levels if args.bitcode else "",
             os.environ.get("UCX_TLS", args.tls),
             ", target %s under %s" % (args.target,
                                       " ".join(cfg.target_runner))
             if args.target else ""), flush=True)
    os.makedirs(args.work_dir, exist_ok=True)

    counts = {o: 0 for o in (Outcome.PASSED, Outcome.UB, Outcome.TIMEOUT,
                             Outcome.FAILED)}
    lock = threading.Lock()
    start = time.monotonic()

    def one(seed):
        try:
            outcome, summary, details = check_program(cfg, seed)
        except Exception as exc:  # a broken generator or driver: a failure
            outcome, summary, details = Outcome.FAILED, repr(exc), repr(exc)
        with lock:
            counts[outcome] += 1
            print("csmith_diff: seed %d: %s: %s" % (seed, outcome, summary),
                  flush=True)
            if outcome == Outcome.FAILED:
                print("  (kept in %s)\n  %s" % (
                    os.path.join(args.work_dir, "seed_%d" % seed),
                    details.strip().replace("\n", "\n  ")), flush=True)

    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(one, seeds))

    compared = counts[Outcome.PASSED] + counts[Outcome.FAILED]
    print("csmith_diff: %d generated, %d compared, %d passed, %d skipped-UB, "
          "%d skipped-timeout, %d failed (%.0f s)"
          % (len(seeds), compared, counts[Outcome.PASSED], counts[Outcome.UB],
             counts[Outcome.TIMEOUT], counts[Outcome.FAILED],
             time.monotonic() - start))
    return 1 if counts[Outcome.FAILED] else 0


if __name__ == "__main__":
    sys.exit(main())
