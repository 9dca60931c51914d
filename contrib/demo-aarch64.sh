#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The README's mixed-ISA demo: an x86-64 source injects the hello ifunc into
# an aarch64 target, run here under user-mode QEMU, over UCX_TLS=tcp.
# hello.so is built with
#     ucx-ifunc-cc --target x86_64-linux-gnu,aarch64-linux-gnu --sign demo.key
# (what "make" does when aarch64-linux-gnu-gcc is installed): the x86-64
# source loads it and sends the target the aarch64 image, which the target
# runs without any copy of hello.so because it trusts demo.pub.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(uname -m)" != x86_64 ]; then
    echo "demo-aarch64: this demo runs an x86-64 source; this machine is $(uname -m)" >&2
    exit 1
fi
"$top/contrib/install-deps.sh"
echo "demo-aarch64: building ucx-ifunc for x86-64 in build/"
"$top/contrib/build.sh" >/dev/null 2>&1 || "$top/contrib/build.sh"

echo "demo-aarch64: cross-building the aarch64 hello target in build-aarch64/"
mkdir -p "$top/build-aarch64"
cd "$top/build-aarch64"
if [ ! -f Makefile ]; then
    "$top/configure" --host=aarch64-linux-gnu >configure.out 2>&1 || {
        tail -n 20 configure.out
        exit 1
    }
fi
make -j"$(nproc)" examples/hello/hello_target >make.out 2>&1 || {
    tail -n 30 make.out
    exit 1
}

hello=$top/build/examples/hello
echo
echo "== the images in hello.so:"
"$top/build/tools/ucx-ifunc-cc-uninstalled" --dump "$hello/hello.so" |
    grep -E '^(image|machine)' || true

port=$((20000 + RANDOM % 20000))
echo
echo "== hello over UCX_TLS=tcp: x86-64 source -> aarch64 target (qemu-aarch64)"
UCX_TLS=tcp UCX_IFUNC_TRUSTED_KEYS=$hello/demo.pub \
    qemu-aarch64 "$top/build-aarch64/examples/hello/hello_target" "$port" &
target=$!
UCX_TLS=tcp UCX_IFUNC_LIB_DIR=$hello "$hello/hello_source" "localhost:$port" \
    "hello from x86-64 to aarch64"
wait "$target"
