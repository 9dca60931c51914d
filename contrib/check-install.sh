#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Checks the installation as a user does it: configure --prefix=P, make,
# make install into a temporary prefix; then checks that the installed copy
# is complete and usable from outside the tree: the hello example is built
# with the installed ucx-ifunc-cc and "pkg-config ucx-ifunc", and run between
# two processes.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/ucx-ifunc-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh)
mkdir -p "$work/build"
(cd "$work/build" && "$top/configure" -q --prefix="$prefix" &&
 make -j"$(nproc)" >/dev/null && make install >/dev/null)
for piece in lib/libucp_ifunc.so include/ucp/api/ucp_ifunc.h \
             lib/pkgconfig/ucx-ifunc.pc bin/ucx-ifunc-cc; do
    [ -e "$prefix/$piece" ] || { echo "check-install: missing $piece" >&2; exit 1; }
done

# An application outside the tree, as a user would build it.
app=$work/app
mkdir -p "$app"
cp "$top"/examples/hello/*.c "$top"/examples/hello/*.h "$app"/
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
cd "$app"
"$prefix/bin/ucx-ifunc-cc" -O2 -o hello.so hello.c
for prog in hello_target hello_source; do
    cc -Wall -Werror -o $prog $prog.c $(pkg-config --cflags --libs ucx-ifunc)
done

port=$(( 20000 + RANDOM % 20000 ))
export UCX_IFUNC_LIB_DIR=$app
./hello_target -p $port >target.out 2>&1 &
target=$!
./hello_source localhost -p $port "installed copy works" >source.out 2>&1 || true
wait $target || true
if grep -q 'hello_main: "installed copy works"' target.out &&
   grep -q 'ifunc ran' target.out; then
    echo "check-install: OK (installed to a temporary prefix, example built with pkg-config ucx-ifunc and run)"
else
    echo "check-install: the installed copy did not work" >&2
    cat target.out source.out >&2
    exit 1
fi
