#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Checks that every C/C++ source the build compiles with the system compiler
# (the _SOURCES of the programs and libraries in Makefile.am and the
# Makefile.inc files; not the ifunc sources, which ucx-ifunc-cc builds)
# compiles against the UCX headers of Debian 13 (libucx-dev, UCX 1.18), with
# the build's own flags. Debian 12 cannot install those packages, so their
# .deb files are fetched with apt-get from the Debian archive that this
# machine's apt configuration names (signed with debian-archive-keyring) and
# unpacked into UCX_HEADERS_DIR (default: build/ucx-debian13), which later
# runs reuse, offline. Parsed and type-checked with the build's own flags
# (-fsyntax-only: what differs between the headers are declarations, types
# and macros; generating code took two thirds of the step's time); nothing
# is linked: Debian 12 cannot run those libraries.
#
#     contrib/check-ucx-headers.sh            against Debian 13's UCX headers
#     contrib/check-ucx-headers.sh --system   against the installed UCX
#
# UCX_HEADERS_MIRROR=URI replaces the archive found in the apt configuration;
# UCX_HEADERS_KEYRING=FILE the keyring that signs it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
me=check-ucx-headers
mode=debian13
case ${1:-} in
    "") ;;
    --system) mode=system ;;
    *) echo "usage: $0 [--system]" >&2; exit 2 ;;
esac

work=$(mktemp -d /tmp/ucx-ifunc-headers.XXXXXX)
trap 'rm -rf "$work"' EXIT

# shellcheck source=contrib/debian13-apt.sh
. "$top/contrib/debian13-apt.sh"

# Fetches libucx-dev and libucx0 of Debian 13 and unpacks them into $1.
fetch_debian13() {
    local dest=$1 out deb
    echo "$me: fetching libucx-dev, libucx0 (trixie)"
    trixie_apt_update "$work" deb UCX_HEADERS
    mkdir -p "$work/debs"
    # apt drops root to _apt for downloads; let it write there.
    if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then
        chown _apt "$work/debs"
    fi
    if ! out=$(cd "$work/debs" && apt-get "${trixie_apt_opts[@]}" download libucx-dev libucx0 2>&1); then
        echo "$out" >&2
        echo "$me: apt-get download failed" >&2
        exit 1
    fi
    rm -rf "$dest.new"
    mkdir -p "$dest.new"
    for deb in "$work"/debs/*.deb; do
        dpkg -x "$deb" "$dest.new"
        # shellcheck disable=SC2016 # dpkg-deb's fields, not the shell's
        dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" >>"$dest.new/debian-packages"
    done
    [ ! -d "$dest" ] || rmdir "$dest" 2>/dev/null || {
        echo "$me: $dest exists but holds no UCX headers; remove it" >&2; exit 1; }
    mv "$dest.new" "$dest"
}

if [ "$mode" = debian13 ]; then
    dir=${UCX_HEADERS_DIR:-$top/build/ucx-debian13}
    if [ ! -f "$dir/usr/include/ucp/api/ucp_version.h" ]; then
        mkdir -p "$(dirname "$dir")"
        fetch_debian13 "$dir"
    fi
    inc=$dir/usr/include
    ucx_flags=(-isystem "$inc")
    where="Debian 13 $(paste -sd, "$dir/debian-packages" 2>/dev/null | sed 's/,/, /g'), in $dir"
    label="Debian 13"
else
    inc=$(pkg-config --variable=includedir ucx)
    read -ra ucx_flags <<<"$(pkg-config --cflags ucx)"
    where="this system: $inc"
    label="this system"
fi

api() {
    sed -n "s/^#define[[:space:]]\{1,\}UCP_API_$1[[:space:]]\{1,\}\([0-9]\{1,\}\).*/\1/p" \
        "$inc/ucp/api/ucp_version.h"
}
version="$(api MAJOR).$(api MINOR)"
echo "$me: UCX $version headers ($where)"
# The compiler must find these headers, not another UCX's.
seen=$(printf '#include <ucp/api/ucp_version.h>\nUCP_API_MAJOR.UCP_API_MINOR\n' |
       ${CXX:-g++} "${ucx_flags[@]}" -I"$top/src" -E -P -x c++ - | tail -n1 | tr -d ' ')
if [ "$seen" != "$version" ]; then
    echo "$me: the compiler sees UCX $seen, not the $version of $inc" >&2
    exit 1
fi

# configure's AC_DEFINEs (DEFS), their values resolved through m4_define.
defs=()
while read -r name value; do
    m4=$(sed -n "s/^m4_define(\[$value\],[[:space:]]*\[\([^]]*\)\]).*/\1/p" "$top/configure.ac")
    defs+=("-D$name=${m4:-$value}")
done < <(sed -n 's/^AC_DEFINE(\[\([A-Za-z0-9_]*\)\],[[:space:]]*\[\([^]]*\)\].*/\1 \2/p' \
             "$top/configure.ac")
# And AC_INIT's PACKAGE_VERSION (the tools' --version), from the same m4.
m4_number() {
    sed -n "s/^m4_define(\[ucx_ifunc_$1\],[[:space:]]*\[\([^]]*\)\]).*/\1/p" \
        "$top/configure.ac"
}
defs+=("-DPACKAGE_VERSION=\\\"$(m4_number major).$(m4_number minor).$(m4_number release)\\\"")

gtest_cflags=$(pkg-config --cflags gtest) ||
    { echo "$me: gtest not found by pkg-config (contrib/install-deps.sh)" >&2; exit 1; }
# MPI's headers for the launch helper and its users, as configure finds
# them; without MPI those sources are left out (configure leaves them out
# of the build too).
mpi_cflags=$(pkg-config --cflags ompi-c 2>/dev/null ||
             mpicc --showme:compile 2>/dev/null || true)
mpi_targets='libucx_ifunc_mpi_la|examples_pointer_chase_|test_mpi_'
# LLVM's headers for the JIT module, as configure found them for the build
# (build/Makefile); without LLVM its source is left out, as the build
# leaves it out.
llvm_cppflags=$(sed -n 's/^LLVM_CPPFLAGS = //p' "$top/build/Makefile" 2>/dev/null || true)
llvm_targets='libucp_ifunc_jit_la'

# The sources of every program and library, with their flags as automake
# chooses them (per-target _CPPFLAGS/_CFLAGS/_CXXFLAGS or the AM_ ones): GNU
# make reads Makefile.am with its includes, every feature taken as found
# (the "if" branches; the "else" ones hold only the rules that say a
# feature is missing, which would override the real ones), and prints
# "file target flags" lines.
{
    cat <<'EOF'
prefix          = /usr/local
exec_prefix     = $(prefix)
libdir          = $(exec_prefix)/lib
includedir      = $(prefix)/include
datadir         = $(prefix)/share
pkglibdir       = $(libdir)/ucx-ifunc
pkgdatadir      = $(datadir)/ucx-ifunc
top_builddir    = .
builddir        = .
DEFAULT_INCLUDES = -I$(srcdir)
EOF
    awk -v top="$top" '
        /^include[ \t]/ { f = top "/" $2
                          while ((getline l < f) > 0) print l
                          close(f); next }
        { print }' "$top/Makefile.am" |
    awk '/^if[ \t]/              { depth++; skip[depth] = skip[depth - 1]; next }
         /^else([ \t]|$)/        { skip[depth] = 1; next }
         /^endif([ \t]|$)/       { depth--; next }
         !skip[depth]'
    cat <<'EOF'

ucxh_canon   = $(subst @,_,$(subst +,_,$(subst -,_,$(subst .,_,$(subst /,_,$(1))))))
ucxh_targets = $(call ucxh_canon,$(foreach v,$(filter %_PROGRAMS %_LTLIBRARIES %_LIBRARIES,$(.VARIABLES)),$($(v))))
ucxh_pick    = $(if $(filter undefined,$(origin $(1))),$($(2)),$($(1)))
ucxh_cpp     = $(DEFS) $(DEFAULT_INCLUDES) $(INCLUDES) $(call ucxh_pick,$(1)_CPPFLAGS,AM_CPPFLAGS) $(CPPFLAGS)
ucxh_lang    = $(if $(filter %.c,$(2)),$(call ucxh_pick,$(1)_CFLAGS,AM_CFLAGS) $(CFLAGS),$(call ucxh_pick,$(1)_CXXFLAGS,AM_CXXFLAGS) $(CXXFLAGS))
.PHONY: ucxh-list
ucxh-list:
	@:$(foreach t,$(sort $(ucxh_targets)),$(foreach s,$(filter %.c %.cc %.cpp,$($(t)_SOURCES)),$(info $(s) $(t) $(call ucxh_cpp,$(t)) $(call ucxh_lang,$(t),$(s)))))
EOF
} >"$work/list.mk"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -r -R -f "$work/list.mk" \
    srcdir="$top" top_srcdir="$top" abs_srcdir="$top" abs_top_srcdir="$top" \
    abs_builddir="$top/build" abs_top_builddir="$top/build" \
    DEFS="${defs[*]}" UCX_CFLAGS= GTEST_CFLAGS="$gtest_cflags" \
    MPI_CFLAGS="$mpi_cflags" LLVM_CPPFLAGS="$llvm_cppflags" \
    CPPFLAGS="${CPPFLAGS:-}" CFLAGS="${CFLAGS:-}" CXXFLAGS="${CXXFLAGS:-}" \
    ucxh-list | sort -u |
    if [ -n "$mpi_cflags" ]; then cat; else
        echo "$me: no MPI (libopenmpi-dev): its sources are not compiled" >&2
        grep -Ev "^[^ ]+ ($mpi_targets)"
    fi |
    if [ -n "$llvm_cppflags" ]; then cat; else
        echo "$me: no LLVM in build/ (llvm-14-dev): the JIT module is not compiled" >&2
        grep -Ev "^[^ ]+ ($llvm_targets)"
    fi | awk '{ print NR, $0 }' >"$work/jobs"
if [ ! -s "$work/jobs" ]; then
    echo "$me: no sources found in Makefile.am" >&2
    exit 1
fi

# One job: "index file target flags"; the flags keep the Makefile's quoting.
compile_one() {
    local idx file target flags compiler
    local -a args pre
    read -r idx file target flags <<<"$1"
    eval "args=($flags)"
    eval "pre=($UCXH_PRE)"
    case $file in
        *.c) compiler=$UCXH_CC ;;
        *)   compiler=$UCXH_CXX ;;
    esac
    # shellcheck disable=SC2086 # CC may carry options
    $compiler "${pre[@]}" "${args[@]}" -fsyntax-only "$UCXH_TOP/$file" \
        >"$UCXH_LOGS/$idx.log" 2>&1 ||
        echo "$file ($target)" >"$UCXH_LOGS/$idx.fail"
}
export -f compile_one
export UCXH_TOP=$top UCXH_LOGS=$work/logs UCXH_CC=${CC:-gcc} UCXH_CXX=${CXX:-g++}
UCXH_PRE=
[ ${#ucx_flags[@]} -eq 0 ] || UCXH_PRE=$(printf '%q ' "${ucx_flags[@]}")
export UCXH_PRE
mkdir -p "$work/logs"
# shellcheck disable=SC2016 # $1 of the inner bash
xargs -d '\n' -n 1 -P "$(nproc)" bash -c 'compile_one "$1"' _ <"$work/jobs" ||
    { echo "$me: the compile jobs did not run" >&2; exit 1; }

failed=0
while read -r idx _; do
    [ -f "$work/logs/$idx.fail" ] || continue
    failed=$((failed + 1))
    echo "$me: FAILED $(cat "$work/logs/$idx.fail"):"
    sed 's/^/    /' "$work/logs/$idx.log"
done <"$work/jobs"
files=$(awk '{ print $2 }' "$work/jobs" | sort -u | wc -l)
units=$(wc -l <"$work/jobs")
if [ "$failed" -ne 0 ]; then
    echo "$me: $failed of $units compilations failed against UCX $version ($label)"
    exit 1
fi
echo "$me: $files files ($units compilations) compiled against UCX $version ($label)"
