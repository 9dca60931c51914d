#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# A Python-written ifunc on the third ISA (issue 33): ucx_ifunc.ifunc builds
# it (Numba, bitcode for x86-64 and powerpc64le, signed), an x86-64 source registers
# the images from memory and sends them over UCX_TLS=tcp, and a ppc64el C
# target under user-mode QEMU JITs the bitcode and runs it: the sum it
# writes into target_args must be the one Python computes.
#
#   test/python/run-ppc64el.sh NATIVE_BUILD PPC64EL_BUILD
#
# NATIVE_BUILD: an x86-64 build with test/python/image_source (make
# check); PPC64EL_BUILD: one configured --host=powerpc64le-linux-gnu
# --with-llvm with libucp_ifunc_jit.la and test/python/c_target built
# (contrib/check-cross.sh does both).
#
# Exit status: 0 passed; 1 failed; 2 wrong use or a build missing; 77 (a
# "SKIP:" line) where this machine cannot run it.
set -uo pipefail

me=test/python/run-ppc64el.sh
# shellcheck source=test/cross/ppc64el-setup.sh
. "$(dirname "$0")/../cross/ppc64el-setup.sh"
python=$(sed -n 's/^PYTHON = //p' "$native/Makefile")
python=${python:-python3}
"$python" -c "import numba" 2>/dev/null ||
    skip "$python has no numba (Debian: python3-numba)"

target=$ppc/test/python/c_target
source=$native/test/python/image_source
for file in "$target" "$source" "$ppc/.libs/libucp_ifunc_jit.so"; do
    [ -e "$file" ] || { echo "$me: $file missing: build both trees (contrib/check-cross.sh)" >&2; exit 2; }
done
[ "$(od -An -tu2 -j18 -N2 "$target" | tr -d ' ')" = 21 ] ||
    { echo "$me: $target is no ppc64el executable" >&2; exit 2; }

top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT

# The images and the payload, and the sum the target must find (the
# package's bindings load NATIVE_BUILD's library).
if ! expect=$(PY_UCX_IFUNC_LIBRARY=$native/.libs/libucp_ifunc.so.0 \
    "$python" - "$top" "$work" <<'PY'
import os, sys
top, work = sys.argv[1:3]
sys.path.insert(0, os.path.join(top, "python"))
import numba
import ucx_ifunc
import numpy as np
signing = ucx_ifunc._toolchain.load("signing")


# x86-64 too: a source registers code only with an image for its own ISA
@ucx_ifunc.ifunc(triples=["x86_64-linux-gnu", "powerpc64le-linux-gnu"])
def total(payload, size, target_args):
    values = numba.carray(payload, size // 8, np.int64)
    out = numba.carray(target_args, 2, np.int64)
    s = 0
    for i in range(values.shape[0]):
        s += values[i] * values[i] - 3 * values[i]
    out[1] = s
    out[0] = 1


secret, _ = signing.generate(os.path.join(work, "site"))
values = np.arange(-300, 700, dtype=np.int64)
values.tofile(os.path.join(work, "payload"))
with open(os.path.join(work, "images"), "wb") as stream:
    stream.write(total.images(key=secret))
print(int((values * values - 3 * values).sum()))
PY
); then
    echo "$me: the Python ifunc did not build"
    exit 1
fi

# As test/cross/run-ppc64el.sh: no TCP keepalive under QEMU, and time for
# a compile under emulation.
env=(UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n UCX_TCP_KEEPINTVL=inf
    UCX_IFUNC_TRUST=signed "UCX_IFUNC_TRUSTED_KEYS=$work/site.pub"
    "UCX_IFUNC_JIT_TIMEOUT=${IFUNC_PPC64EL_JIT_TIMEOUT:-10s}")
start=$(date +%s.%N)
for _ in 1 2 3; do
    port=$((20000 + RANDOM % 20000))
    : >"$work/target.log"
    env "${env[@]}" timeout -k 5 90 qemu-ppc64le "$target" "$port" 60 \
        >"$work/target.log" 2>&1 &
    target_pid=$!
    for _ in $(seq 150); do
        grep -q "listening on" "$work/target.log" && break
        kill -0 $target_pid 2>/dev/null || break
        sleep 0.2
    done
    grep -q "listening on" "$work/target.log" && break
    wait $target_pid
done
env "${env[@]}" timeout 60 "$source" "localhost:$port" total "$work/images" \
    "$work/payload" >"$work/source.log" 2>&1
source_status=$?
[ $source_status -eq 0 ] || kill $target_pid 2>/dev/null
wait $target_pid
target_status=$?
seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
if [ $source_status -eq 0 ] && [ $target_status -eq 0 ] &&
    grep -q "^c_target: result $expect\$" "$work/target.log"; then
    echo "$me: Python ifunc (powerpc64le bitcode) run by a ppc64el target under qemu-ppc64le: passed in $seconds s (sum $expect)"
    exit 0
fi
echo "$me: FAILED (source status $source_status, target status $target_status, expected sum $expect) in $seconds s"
sed 's/^/   source | /' "$work/source.log"
sed 's/^/   target | /' "$work/target.log"
exit 1
