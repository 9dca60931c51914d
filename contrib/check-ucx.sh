#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The test suite ("make check") on a UCX built from source, on a Debian 12
# machine whose UCX is 1.13.1: UCX is built with the options of Debian 12's
# UCX (multi-threaded, CMA; no RDMA or GPU transports, which this machine
# lacks) into a private prefix, and ucx-ifunc is configured against that
# prefix (--with-ucx) and built in build-ucxMN/ (MN: UCX's major and minor
# release, build-ucx122/ for 1.22). make check runs there with the private
# UCX first on the library path. A probe test checks that the test processes
# and the peers they start map UCX's libraries and transport modules from
# the prefix only, and prints them; the summary names the skipped tests.
#
#     IFUNC_TEST_UCX_SRC=PATH contrib/check-ucx.sh
#         the UCX at PATH: an unpacked source tree, a release tarball, or a
#         git repository (a clone or a bare git directory), of which the tag
#         v$IFUNC_TEST_UCX_VERSION is built (default: the newest release
#         tag, vX.Y.Z). CI cannot fetch UCX, so this is run by hand.
#     contrib/check-ucx.sh
#         without a source: UCX 1.18.1, Debian 13's, whose source package is
#         fetched with apt-get source (contrib/debian13-apt.sh: a deb-src
#         list made at run time, apt's state in a temporary directory; the
#         machine's apt configuration is left alone). Debian 12 cannot
#         install (or run) Debian 13's binary packages. The same as
#         contrib/check-ucx-1.18.sh (IFUNC_TEST_UCX_118=1 contrib/test.sh).
#
# UCX is built once: its source, the prefix and a stamp stay in
# IFUNC_TEST_UCX_DIR (default ~/.cache/ucx-ifunc/ucx-VERSION), which later
# runs reuse offline. IFUNC_TEST_UCX_VERSION=X.Y.Z also names the release
# a tree or tarball must declare. For the Debian source package,
# IFUNC_TEST_UCX_MIRROR=URI replaces the archive found in the apt
# configuration, IFUNC_TEST_UCX_KEYRING=FILE the keyring that signs it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
me=check-ucx
from=${IFUNC_TEST_UCX_SRC:-}
want=${IFUNC_TEST_UCX_VERSION:-}
jobs=$(nproc)
start=$SECONDS

# Debian 12's configure options (ucx_info -v of its UCX 1.13.1; 1.18 has no
# --disable-backtrace-detail) less the transports for hardware this machine
# lacks (verbs, rdmacm, GPUs; later releases' efa, mad and gaudi need verbs
# or hardware libraries and are left out with them), and no documentation,
# examples or language bindings.
ucx_options=(--enable-mt --enable-cma --enable-devel-headers
             --disable-logging
             --without-verbs --without-rdmacm --without-cuda --without-rocm
             --without-ze --without-gdrcopy --without-knem --without-xpmem
             --without-fuse3 --without-java --without-go
             --disable-doxygen-doc --disable-examples)

work=$(mktemp -d /tmp/ucx-ifunc-ucx.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The version a UCX configure.ac declares (its ucx_ver_*), read from stdin.
declared_version() {
    local text v part
    text=$(cat)
    for part in major minor patch; do
        v+=.$(sed -n "s/^define(\[ucx_ver_$part\],[[:space:]]*\([0-9]*\)).*/\1/p" <<<"$text")
    done
    echo "${v#.}"
}

# The git directory of $from, if it is a repository (a clone, a worktree
# or a bare one), not a tree that merely lies inside one.
gitdir=
if [ -n "$from" ] && [ -d "$from" ]; then
    if [ "$(git -C "$from" rev-parse --is-bare-repository 2>/dev/null)" = true ] ||
            [ "$(git -C "$from" rev-parse --show-toplevel 2>/dev/null)" = \
              "$(cd "$from" && pwd -P)" ]; then
        gitdir=$(git -C "$from" rev-parse --absolute-git-dir)
    fi
fi

# The release to build: given, the tag of a repository, or what a tree or
# tarball declares; Debian 13's 1.18.1 without a source.
if [ -z "$from" ]; then
    want=${want:-1.18.1}
    if [ "$want" != 1.18.1 ]; then
        echo "$me: without IFUNC_TEST_UCX_SRC, only UCX 1.18.1 (Debian 13's)" >&2
        exit 2
    fi
elif [ -n "$gitdir" ]; then
    if [ -z "$want" ]; then
        tag=$(git --git-dir="$gitdir" tag -l 'v[0-9]*.[0-9]*.[0-9]*' |
              grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sort -V | tail -n1)
        [ -n "$tag" ] || { echo "$me: no release tag vX.Y.Z in $from" >&2; exit 1; }
        want=${tag#v}
    fi
    tag=v$want
    commit=$(git --git-dir="$gitdir" rev-parse -q --verify "refs/tags/$tag^{commit}") ||
        { echo "$me: no tag $tag in $from" >&2; exit 1; }
elif [ -d "$from" ] && [ -f "$from/configure.ac" ]; then
    found=$(declared_version <"$from/configure.ac")
elif [ -f "$from" ]; then
    found=$(tar -xOf "$from" --wildcards --no-wildcards-match-slash \
                '*/configure.ac' 2>/dev/null | declared_version)
else
    echo "$me: IFUNC_TEST_UCX_SRC=$from: not a UCX source tree, tarball or git repository" >&2
    exit 1
fi
if [ -n "${found:-}" ]; then
    if [ -n "$want" ] && [ "$found" != "$want" ]; then
        echo "$me: $from is UCX $found, not $want" >&2
        exit 1
    fi
    want=$found
fi
if ! [[ "$want" =~ ^([0-9]+)\.([0-9]+)\.[0-9]+$ ]]; then
    echo "$me: cannot tell the UCX release of $from (got \"$want\")" >&2
    exit 1
fi
series=${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
cache=${IFUNC_TEST_UCX_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ucx-ifunc/ucx-$want}
prefix=$cache/prefix
stamp=$prefix/.ucx-ifunc-stamp
build=$top/build-ucx${series/./}

# Where the source came from, as the stamp records it.
if [ -z "$from" ]; then
    origin=
elif [ -n "$gitdir" ]; then
    origin="git $from, tag $tag ($commit)"
else
    origin=$from
fi

# Unpacks UCX's source into $1 and prints where it came from.
fetch_source() {
    local dest=$1 out dsc
    if [ -n "$gitdir" ]; then
        mkdir -p "$dest"
        git --git-dir="$gitdir" archive --format=tar "$tag" | tar -x -C "$dest"
        echo "$origin"
    elif [ -d "$from" ]; then
        cp -a "$from" "$dest"
        echo "$origin"
    elif [ -f "$from" ]; then
        mkdir -p "$dest"
        tar -xf "$from" -C "$dest" --strip-components=1
        echo "$origin"
    else
        # shellcheck source=contrib/debian13-apt.sh
        . "$top/contrib/debian13-apt.sh"
        trixie_apt_update "$work" deb-src IFUNC_TEST_UCX >&2
        mkdir -p "$work/src"
        if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then
            chown _apt "$work/src"
        fi
        echo "$me: apt-get source ucx (trixie)" >&2
        if ! out=$(cd "$work/src" && apt-get "${trixie_apt_opts[@]}" source ucx 2>&1); then
            echo "$out" >&2
            echo "$me: apt-get source ucx failed; IFUNC_TEST_UCX_SRC=PATH builds" \
                 "from another copy of the UCX $want source" >&2
            exit 1
        fi
        dsc=$(find "$work/src" -maxdepth 1 -name 'ucx_*.dsc' | head -n1)
        mv "$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'ucx-*' | head -n1)" "$dest"
        echo "Debian's source package $(basename "$dsc" .dsc | tr _ ' ')"
    fi
}

# Builds UCX into $prefix, from a source tree in $cache/src.
build_ucx() {
    local origin=$1 version log=$cache/build.log
    version=$(declared_version <"$cache/src/configure.ac")
    if [ "$version" != "$want" ]; then
        echo "$me: the source is UCX $version, not $want ($origin)" >&2
        exit 1
    fi
    echo "$me: building UCX $version into $prefix (log: $log)"
    rm -rf "$prefix" "$cache/obj"
    mkdir -p "$cache/obj"
    (
        cd "$cache/src"
        # A git tree has no configure yet; the release tarball has one.
        if [ ! -x configure ]; then
            if [ -x autogen.sh ]; then nice -n 10 ./autogen.sh; else nice -n 10 autoreconf -fi; fi
        fi
        cd "$cache/obj"
        nice -n 10 ../src/configure --prefix="$prefix" "${ucx_options[@]}"
        nice -n 10 make -j"$jobs"
        nice -n 10 make install
    ) >"$log" 2>&1 || {
        tail -n 40 "$log"
        echo "$me: the UCX build failed (log: $log)" >&2
        exit 1
    }
    rm -rf "$cache/obj"
    printf '%s\n' "$origin" "${ucx_options[*]}" >"$stamp"
}

# The stamp says where the prefix's UCX came from and how it was
# configured; another source (IFUNC_TEST_UCX_SRC, another tag) or other
# options build again.
ucx_is_built() {
    [ -f "$stamp" ] && [ -x "$prefix/bin/ucx_info" ] || return 1
    [ "$(sed -n 2p "$stamp")" = "${ucx_options[*]}" ] || return 1
    [ -z "$origin" ] || [ "$(sed -n 1p "$stamp")" = "$origin" ]
}

mkdir -p "$cache"
if ucx_is_built; then
    echo "$me: UCX from $prefix (built before; remove $cache to build again)"
else
    rm -rf "$cache/src"
    origin=$(fetch_source "$cache/src")
    build_ucx "$origin"
    echo "$me: UCX built in $((SECONDS - start)) s"
fi
echo "$me: UCX source: $(sed -n 1p "$stamp")"
libdir=$prefix/lib
# "# Library version: 1.22.0" (1.13: "# Version 1.13.1").
version=$("$prefix/bin/ucx_info" -v | sed -n -E 's/^# (Library version:|Version) //p')
"$prefix/bin/ucx_info" -v | sed "s/^/$me: ucx_info: /"
if [ "$version" != "$want" ]; then
    echo "$me: $prefix/bin/ucx_info says UCX $version, not $want" >&2
    exit 1
fi

# ucx-ifunc against it, in build-ucxMN/.
[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh)
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || ! ./config.status --config | grep -qF -- "--with-ucx=$prefix"; then
    echo "$me: configuring ucx-ifunc in $build"
    nice -n 10 "$top/configure" -q --with-ucx="$prefix"
fi
grep -qxF "UCX_VERSION_NOTE = $series" Makefile ||
    { echo "$me: $build was not configured against UCX $series" >&2; exit 1; }
build_start=$SECONDS
echo "$me: building ucx-ifunc in $build"
nice -n 10 make -j"$jobs" >"$work/make.log" 2>&1 || {
    tail -n 40 "$work/make.log"
    echo "$me: the build failed" >&2
    exit 1
}
echo "$me: built in $((SECONDS - build_start)) s"

# The private UCX first on the library path: the programs carry a run path
# to it (--with-ucx), and so do UCX's own libraries; this also covers what
# they start. UCX loads its transport modules from beside the libucs.so it
# runs with (lib/ucx/), unless UCX_MODULE_DIR says otherwise.
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset UCX_MODULE_DIR

# The tests, built (make check with no TESTS runs none); then the probe:
# two integration tests over sm and tcp, each with a source peer
# in a process of its own; every process records the shared objects it
# loads (ld.so's LD_DEBUG=files, one file per process).
build_start=$SECONDS
nice -n 10 make -j"$jobs" check TESTS= >"$work/make-tests.log" 2>&1 || {
    tail -n 40 "$work/make-tests.log"
    echo "$me: building the tests failed" >&2
    exit 1
}
echo "$me: tests built in $((SECONDS - build_start)) s"
probe=$work/probe
mkdir -p "$probe"
if ! UCX_IFUNC_LIB_DIR=$build/test/ifuncs/lib LD_DEBUG=files LD_DEBUG_OUTPUT=$probe/ld \
        test/integration/ifunc_integration \
        --gtest_filter='Transports/Delivery.RunsOnceAndClearsTheBuffer/*' \
        >"$probe/out" 2>&1; then
    cat "$probe/out"
    echo "$me: the probe test failed" >&2
    exit 1
fi
nproc_probe=$(find "$probe" -name 'ld.*' | wc -l)
loaded=$(cat "$probe"/ld.* | sed -n 's/.*calling init: //p' |
         grep -E '/libuc[mpst]\.so|/ucx/lib' | sort -u)
if [ -z "$loaded" ]; then
    echo "$me: the probe saw no UCX library loaded" >&2
    exit 1
fi
echo "$me: UCX libraries and modules in the $nproc_probe processes of the probe" \
     "(a test and its peers):"
sed 's/^/    /' <<<"$loaded"
foreign=$(grep -v "^$libdir/" <<<"$loaded" || true)
if [ -n "$foreign" ]; then
    echo "$me: loaded from elsewhere than $libdir:" >&2
    sed 's/^/    /' <<<"$foreign" >&2
    exit 1
fi
# tcp, posix and sysv are in libuct itself; cma is a module.
for lib in libucs libucm libuct libucp ucx/libuct_cma; do
    grep -q "^$libdir/$lib\.so" <<<"$loaded" ||
        { echo "$me: the probe did not load $libdir/$lib.so" >&2; exit 1; }
done
echo "$me: the tests run UCX $version from $libdir"

# make check; then its summary, and the gtest suites' counts and skipped
# tests (gtest lists these at the end of its log).
check_start=$SECONDS
status=0
make -j"$jobs" check >"$work/check.log" 2>&1 || status=$?
echo "$me: make check ($((SECONDS - check_start)) s):"
grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR):' "$work/check.log" | sed 's/^/    /' || true
grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' "$work/check.log" |
    sed 's/^# /    /' | paste -sd ' ' || true
for log in test/unit/ifunc_unit.log test/integration/ifunc_integration.log; do
    [ -f "$log" ] || continue
    echo "$me: ${log%.log}:"
    awk '/^\[==========\] [0-9]+ tests? from .* ran/ ||
         /^\[  PASSED  \] [0-9]+ tests?/ ||
         /^\[  FAILED  \] [0-9]+ tests?, listed below/ { print "    " $0; next }
         /^\[  SKIPPED \] [0-9]+ tests?,/ { print "    " $0; listing = "SKIPPED"; next }
         /^\[  FAILED  \] [^ ]/ && !/ms\)$/ { print "    " $0; next }
         listing && /^\[  SKIPPED \] / { print "    " $0; next }
         { listing = "" }' "$log"
done
# Scripts that skip a part say so in SKIP: lines.
for log in test/*.log test/*/*.log contrib/*.log; do
    [ -f "$log" ] || continue
    case $log in test/unit/ifunc_unit.log | test/integration/ifunc_integration.log) continue ;; esac
    grep -H '^SKIP:' "$log" | sed 's/^/    /' || true
done
if [ "$status" -ne 0 ]; then
    grep -l -E '^:test-result: (FAIL|ERROR)' test/*.trs test/*/*.trs contrib/*.trs 2>/dev/null |
        while read -r trs; do
            echo "==== $build/${trs%.trs}.log"
            tail -n 60 "${trs%.trs}.log"
        done
    echo "$me: make check FAILED on UCX $version (logs in $build)"
    exit 1
fi
echo "$me: make check passed on UCX $version in $((SECONDS - start)) s"
