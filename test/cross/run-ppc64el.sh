#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The third ISA (issue 32): a ppc64el target, under user-mode QEMU, runs an
# ifunc that an x86-64 source sends it over UCX_TLS=tcp. No native image
# covers ppc64el: the library is built with ucx-ifunc-cc --bitcode (x86-64
# native, bitcode for x86-64, aarch64 and powerpc64le), the source sends the
# powerpc64le bitcode, and the target JITs it and runs it.
#
#   test/cross/run-ppc64el.sh NATIVE_BUILD PPC64EL_BUILD
#
# NATIVE_BUILD is an x86-64 build with LLVM and its examples (make);
# PPC64EL_BUILD one configured --host=powerpc64le-linux-gnu --with-llvm
# with libucp_ifunc_jit.la and examples/hello/hello_target built
# (contrib/check-cross.sh does both). The hello library is signed with
# NATIVE_BUILD's demo key, which the target trusts: it has no copy of it.
#
# Exit status: 0 passed; 1 failed; 2 wrong use or a build missing; 77 (a
# "SKIP:" line) where this machine cannot run it: not x86-64, no
# qemu-ppc64le, or no ppc64el UCX or LLVM (contrib/install-deps.sh installs
# them where Debian's mirrors allow).
set -uo pipefail

me=test/cross/run-ppc64el.sh
readonly kSkip=77

skip()
{
    echo "SKIP: $me: $* (run contrib/install-deps.sh; docs/testing.md)"
    exit $kSkip
}

[ $# -eq 2 ] || { echo "usage: $me NATIVE_BUILD PPC64EL_BUILD" >&2; exit 2; }
[ "$(uname -m)" = x86_64 ] || skip "the source is x86-64; this machine is $(uname -m)"
command -v qemu-ppc64le >/dev/null || skip "no qemu-ppc64le (Debian: qemu-user)"
[ -e /usr/lib/powerpc64le-linux-gnu/libucp.so.0 ] ||
    skip "no ppc64el UCX (Debian: libucx-dev:ppc64el)"
[ -e /usr/lib/powerpc64le-linux-gnu/libLLVM-14.so.1 ] ||
    skip "no ppc64el LLVM (Debian: libllvm14:ppc64el)"
native=$(cd "$1" 2>/dev/null && pwd) || { echo "$me: no directory $1" >&2; exit 2; }
ppc=$(cd "$2" 2>/dev/null && pwd) || { echo "$me: no directory $2" >&2; exit 2; }

target=$ppc/examples/hello/hello_target
source=$native/examples/hello/hello_source
cc=$native/tools/ucx-ifunc-cc-uninstalled
key=$native/examples/hello/demo.key
top=$(cd "$(dirname "$0")/../.." && pwd)
for file in "$target" "$source" "$cc" "$key" "$ppc/.libs/libucp_ifunc_jit.so"; do
    [ -e "$file" ] || { echo "$me: $file missing: build both trees (contrib/check-cross.sh)" >&2; exit 2; }
done
# 21: EM_PPC64, at byte 18 of the ELF header.
[ "$(od -An -tu2 -j18 -N2 "$target" | tr -d ' ')" = 21 ] ||
    { echo "$me: $target is no ppc64el executable (reconfigure $ppc)" >&2; exit 2; }

work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
"$cc" --bitcode -O2 -Wall -Wextra -Werror --sign "$key" -o "$work/hello.so" \
    "$top/examples/hello/hello.c" || { echo "$me: ucx-ifunc-cc --bitcode failed"; exit 1; }
grep -qa '__ucp_ifunc_bitcode_hello\.em21' "$work/hello.so" ||
    { echo "$me: hello.so has no powerpc64le bitcode"; exit 1; }

# QEMU 7.2 refuses UCX's TCP_KEEPINTVL (setsockopt EINVAL), which fails
# the connection: keepalive off on the emulated side. The JIT compiles
# under QEMU in about 0.6 s (hello, measured): 10 s leaves room for a
# loaded machine.
message="hello from x86-64 to ppc64el"
port=$((20000 + RANDOM % 20000))
start=$(date +%s.%N)
: >"$work/target.log"
UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n UCX_TCP_KEEPINTVL=inf \
    UCX_IFUNC_TRUSTED_KEYS="${key%.key}.pub" \
    UCX_IFUNC_JIT_TIMEOUT=${IFUNC_PPC64EL_JIT_TIMEOUT:-10s} \
    timeout -k 5 60 qemu-ppc64le "$target" "$port" >"$work/target.log" 2>&1 &
target_pid=$!
for _ in $(seq 100); do
    grep -q "listening on" "$work/target.log" && break
    kill -0 $target_pid 2>/dev/null || break
    sleep 0.2
done
UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n UCX_IFUNC_LIB_DIR="$work" \
    timeout 60 "$source" "localhost:$port" "$message" >"$work/source.log" 2>&1
source_status=$?
wait $target_pid
target_status=$?
seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')

if [ $source_status -eq 0 ] && [ $target_status -eq 0 ] &&
    grep -q "^hello_main: \"$message\" (running in process" "$work/target.log" &&
    grep -q "^hello_target: ifunc ran" "$work/target.log"; then
    echo "$me: x86-64 source -> ppc64el target (bitcode JIT under qemu-ppc64le): passed in $seconds s"
    exit 0
fi
echo "$me: FAILED (source status $source_status, target status $target_status) in $seconds s"
sed 's/^/   source | /' "$work/source.log"
sed 's/^/   target | /' "$work/target.log"
exit 1
