#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# CI ABI check: the ABI of the built libucp_ifunc.so (its exported functions
# and the public types of src/ucp/api they use) must equal the reference kept
# in src/ucp/ifunc/libucp_ifunc.abi, so that no ABI change, even an added
# function, goes in by accident. Needs abidw/abidiff (Debian: abigail-tools)
# and a library built with debug info (-g, in configure's default -g -O2).
#
#     contrib/check-abi.sh [BUILD_DIR]            check (default: build/)
#     contrib/check-abi.sh --update [BUILD_DIR]   rewrite the reference, after
#                                                 a deliberate ABI change
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
ref_rel=src/ucp/ifunc/libucp_ifunc.abi
ref=$top/$ref_rel
map_rel=src/ucp/ifunc/libucp_ifunc.map
me=contrib/check-abi.sh

update=
if [ "${1:-}" = --update ]; then
    update=1
    shift
fi
case "${1:-}" in
    -h|--help) sed -n '11,13s/^#//p' "$0"; exit 0 ;;
    -*) echo "usage: $me [--update] [BUILD_DIR]" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "usage: $me [--update] [BUILD_DIR]" >&2; exit 2; }
build=${1:-$top/build}

fail() { echo "check-abi: FAILED, $1" >&2; shift; printf '%s\n' "$@" >&2; exit 2; }

for tool in abidw abidiff readelf; do
    command -v "$tool" >/dev/null ||
        fail "$tool not found" \
             "Install it: apt-get install abigail-tools binutils"
done
[ -d "$build" ] || fail "no build directory $build" \
    "Build first: contrib/build.sh  (or configure and make in BUILD_DIR)"
build=$(cd "$build" && pwd)
lib=$build/.libs/libucp_ifunc.so
[ -e "$lib" ] || fail "no library $lib" \
    "Build it first: cd $build && make"
lib=$(readlink -f "$lib")
libname=$(basename "$lib")

# The library is older than what it is made of: say so (the check goes on).
newer=$(cd "$top" && find src -newer "$lib" -type f \
             \( -name '*.cc' -o -name '*.c' -o -name '*.h' -o -name '*.map' \) \
             2>/dev/null | head -n 3 || true)
if [ -n "$newer" ]; then
    echo "check-abi: warning: $libname is older than some sources" \
         "(e.g. ${newer//$'\n'/, }); run make in $build first" >&2
fi

# abidiff compares types only through DWARF: without -g it would see
# symbol names only and miss every change of a type or a signature.
flags_of() {
    [ -f "$build/Makefile" ] &&
        sed -n "s/^$1 = //p" "$build/Makefile" | head -n 1 || true
}
no_debug_info() {
    fail "$libname has no debug info for $1" \
        "abidiff needs DWARF to compare the public types and signatures." \
        "This build has CFLAGS='$(flags_of CFLAGS)' CXXFLAGS='$(flags_of CXXFLAGS)';" \
        "build with -g (configure's default is -g -O2), e.g." \
        "    ../configure CFLAGS='-g -O2' CXXFLAGS='-g -O2' && make clean && make" \
        "and do not strip the library."
}
readelf -S -W "$lib" | grep -q '\.debug_info' || no_debug_info "any function"

# Initial-exec TLS only for the library's own thread-locals (base/tls.h):
# one against another library's (std::call_once's, libstdc++'s) needs that
# library's TLS static, which a dlopen after a program that has used it
# dynamically cannot get ("cannot allocate memory in static TLS block",
# Python importing numba before the library).
foreign_tls=$(readelf -r -W "$lib" |
    awk '$3 ~ /_TPOFF64$|_TLS_TPREL64$|_TPREL64$/ && $5 != "" {print $5}' |
    sort -u | tr '\n' ' ' | sed 's/ $//')
[ -z "$foreign_tls" ] ||
    fail "$libname reaches other libraries' thread-locals by initial-exec TLS: $foreign_tls" \
         "Keep std::call_once and other libraries' thread_local out of the" \
         "library (it is built with -ftls-model=initial-exec, src/ucp/ifunc/Makefile.inc)."

work=$(mktemp -d "${TMPDIR:-/tmp}/check-abi.XXXXXX")
trap 'rm -rf "$work"' EXIT

# What keeps the file stable and free of build paths: only the exported
# interface and the types of the public headers, no corpus or compilation
# path, no source locations (file names without folders, no line numbers),
# no DT_NEEDED list, type ids hashed from the types (not numbered in order).
abidw_opts=(
    --headers-dir "$top/src/ucp/api"
    --exported-interfaces-only --drop-private-types
    --no-corpus-path --no-comp-dir-path --no-show-locs --short-locs
    --no-elf-needed --type-id-style hash
)
current=$work/current.abi
abidw "${abidw_opts[@]}" --out-file "$current" "$lib" ||
    fail "abidw failed on $lib"

# Every exported function must have its debug info (a file compiled
# without -g would leave its functions as bare symbols).
grep -o "<elf-symbol name='[^']*'" "$current" | cut -d"'" -f2 |
    sort -u >"$work/symbols"
grep -E -o "<(function|var)-decl [^>]*elf-symbol-id='[^'@]*" "$current" |
    sed "s/.*elf-symbol-id='//" | sort -u >"$work/described"
missing=$(comm -23 "$work/symbols" "$work/described" | tr '\n' ' ' | sed 's/ $//')
[ -z "$missing" ] || no_debug_info "$missing"
nfun=$(grep -c . "$work/symbols" || true)

if [ -n "$update" ]; then
    if [ -f "$ref" ] && cmp -s "$current" "$ref"; then
        echo "check-abi: $ref_rel is up to date ($nfun symbols of $libname)"
    else
        cp "$current" "$ref"
        echo "check-abi: wrote $ref_rel ($nfun symbols of $libname);" \
             "commit it with the map, NEWS and -version-info changes"
    fi
    exit 0
fi

[ -f "$ref" ] || fail "no reference $ref_rel" \
    "Create it from a good build: $me --update"

# --no-architecture: the reference was made on x86_64; on another 64-bit
# machine the public types must still come out the same.
set +e
report=$(abidiff --no-architecture "$ref" "$current" 2>&1)
rc=$?
set -e
if [ "$rc" -eq 0 ]; then
    echo "check-abi: OK, $libname matches $ref_rel ($nfun symbols," \
         "$(abidiff --version 2>&1 | head -n 1))"
    exit 0
fi
if [ $((rc & 3)) -ne 0 ]; then    # 1: error, 2: usage error
    fail "abidiff could not compare (exit status $rc):" "$report"
fi
kind="the ABI changed"
[ $((rc & 8)) -eq 0 ] || kind="the ABI changed INCOMPATIBLY"
echo "check-abi: FAILED, $kind: $libname differs from $ref_rel" \
     "(abidiff exit status $rc)"
echo "abidiff $ref_rel <built library>:"
sed 's/^/    /' <<<"$report"
cat <<EOF
If the change is a mistake, undo it. If it is deliberate:
  1. update the symbol map $map_rel (new functions in a new
     version node; never change or remove a released one),
  2. say it in NEWS,
  3. update libtool's -version-info (src/ucp/ifunc/Makefile.inc),
  4. rebuild and run:  $me --update${1:+ $1}
     and commit $ref_rel with the rest.
EOF
exit 1
