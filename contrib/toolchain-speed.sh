#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Build time of ucx-ifunc-cc against a plain "cc -O2 -shared -fPIC" of the
# same source, over csmith programs wrapped as ifuncs (the differential
# test's generator and wrapper): median and max of each, wall and CPU, their
# ratio, and the per-program times as CSV (test/csmith/toolchain_speed.py).
# Needs a build in build/ (contrib/build.sh) and csmith + libcsmith-dev.
#
#     contrib/toolchain-speed.sh [--count N] [--seed S] [--csv FILE] [--profile]
#                                [--target aarch64-linux-gnu]
#
# --target builds for that ISA (ucx-ifunc-cc --target, the plain build with
# TRIPLET-gcc). --profile also times each step of ucx-ifunc-cc (docs/benchmarks.md,
# "Toolchain build time"). Run it on a quiet machine: builds run one at a
# time, but other load still shows in the wall times.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
ifunc_cc=$build/tools/ucx-ifunc-cc-uninstalled
if [ ! -x "$ifunc_cc" ]; then
    echo "toolchain-speed: $ifunc_cc not found; run contrib/build.sh first" >&2
    exit 1
fi
# The Python configure found (one with pyelftools), as the launcher uses.
python=${PYTHON:-$(sed -n 's/^PYTHON = //p' "$build/Makefile")}
exec "$python" "$top/test/csmith/toolchain_speed.py" --ifunc-cc "$ifunc_cc" "$@"
