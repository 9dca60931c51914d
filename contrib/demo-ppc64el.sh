#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The third ISA: an x86-64 source injects the hello ifunc into a ppc64el
# target, run here under user-mode QEMU, over UCX_TLS=tcp. No native image
# covers ppc64el: hello.so is built with
#     ucx-ifunc-cc --bitcode --sign demo.key
# (x86-64 native image, bitcode for x86-64, aarch64 and powerpc64le), the
# x86-64 source sends the target the powerpc64le bitcode, and the target
# compiles it for its CPU with its LLVM JIT and runs it, without any copy
# of hello.so because it trusts demo.pub.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(uname -m)" != x86_64 ]; then
    echo "demo-ppc64el: this demo runs an x86-64 source; this machine is $(uname -m)" >&2
    exit 1
fi
"$top/contrib/install-deps.sh"
if [ ! -e /usr/lib/powerpc64le-linux-gnu/libLLVM-14.so.1 ] ||
    ! command -v powerpc64le-linux-gnu-g++ >/dev/null; then
    echo "demo-ppc64el: the ppc64el packages are not installed (install-deps.sh said why)" >&2
    exit 1
fi
echo "demo-ppc64el: building ucx-ifunc for x86-64 in build/"
"$top/contrib/build.sh" >/dev/null 2>&1 || "$top/contrib/build.sh"

echo "demo-ppc64el: cross-building the ppc64el hello target (with LLVM) in build-ppc64el/"
mkdir -p "$top/build-ppc64el"
cd "$top/build-ppc64el"
if [ ! -f Makefile ]; then
    "$top/configure" --host=powerpc64le-linux-gnu --with-llvm >configure.out 2>&1 || {
        tail -n 20 configure.out
        exit 1
    }
fi
make -j"$(nproc)" libucp_ifunc_jit.la examples/hello/hello_target >make.out 2>&1 || {
    tail -n 30 make.out
    exit 1
}

hello=$top/build/examples/hello
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$top/build/tools/ucx-ifunc-cc-uninstalled" --bitcode -O2 -Wall -Wextra -Werror \
    --sign "$hello/demo.key" -o "$work/hello.so" "$top/examples/hello/hello.c"
echo
echo "== the images in hello.so:"
"$top/build/tools/ucx-ifunc-cc-uninstalled" --dump "$work/hello.so" |
    grep -E '^machine' || true

port=$((20000 + RANDOM % 20000))
echo
echo "== hello over UCX_TLS=tcp: x86-64 source -> ppc64el target (qemu-ppc64le, bitcode JIT)"
# QEMU 7.2 refuses UCX's TCP keepalive interval option: keepalive off there.
UCX_TLS=tcp UCX_TCP_KEEPINTVL=inf UCX_IFUNC_TRUSTED_KEYS=$hello/demo.pub \
    UCX_IFUNC_JIT_TIMEOUT=10s \
    qemu-ppc64le "$top/build-ppc64el/examples/hello/hello_target" "$port" &
target=$!
sleep 3
UCX_TLS=tcp UCX_IFUNC_LIB_DIR=$work "$hello/hello_source" "localhost:$port" \
    "hello from x86-64 to ppc64el"
wait "$target"
