# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Sourced by the ppc64el tests (test/cross/run-ppc64el.sh,
# test/python/run-ppc64el.sh) after they set $me: checks their arguments,
# NATIVE_BUILD PPC64EL_BUILD, and that this machine can run a ppc64el
# process (x86-64, qemu-ppc64le, the ppc64el UCX and LLVM), else exits 77
# with a "SKIP:" line; sets native and ppc to the two builds' paths.

skip()
{
    echo "SKIP: $me: $* (run contrib/install-deps.sh; docs/testing.md)"
    exit 77
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
