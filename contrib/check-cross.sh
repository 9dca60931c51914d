#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Cross-builds what the mixed-ISA tests need for the other ISA (AArch64 on
# x86-64) in build-<cpu>/ and runs the mixed-ISA cluster tests (test/cross/run.sh)
# between it and build/, which must hold a native build with its test
# programs ("make check" or "make check TESTS="), then a few csmith
# programs shipped from a native source to a target of the other ISA
# (CSMITH_CROSS_COUNT, default 2). On x86-64 it then cross-builds the
# third ISA, ppc64el, in build-ppc64el/ (with LLVM: it runs bitcode only)
# and runs test/cross/run-ppc64el.sh. Exits as run.sh does: 0 passed, 1
# failed, 77 skipped with a "SKIP:" line where the cross toolchain, QEMU or
# the other ISA's libraries are not installed (the ppc64el part alone
# skipping leaves the status the aarch64 part's).
#
#     contrib/check-cross.sh
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
me=check-cross

# The third ISA: a ppc64el target JITs the bitcode an x86-64 source sends
# (test/cross/run-ppc64el.sh). Prints its own SKIP line where the packages
# are missing; returns run-ppc64el.sh's status, then test/python/
# run-ppc64el.sh's (a Python-written ifunc on the ppc64el target).
check_ppc64el()
{
    [ "$(uname -m)" = x86_64 ] || return 77
    if ! command -v powerpc64le-linux-gnu-g++ >/dev/null ||
        [ ! -e /usr/lib/powerpc64le-linux-gnu/libLLVM-14.so.1 ]; then
        echo "SKIP: $me: no powerpc64le-linux-gnu-g++ or ppc64el LLVM (run contrib/install-deps.sh)"
        return 77
    fi
    local build=$top/build-ppc64el start=$SECONDS
    mkdir -p "$build" || return 1
    if [ ! -f "$build/Makefile" ]; then
        (cd "$build" && "$top/configure" --host=powerpc64le-linux-gnu \
            --with-llvm >configure.out 2>&1) || {
            tail -n 20 "$build/configure.out"
            echo "$me: configure --host=powerpc64le-linux-gnu failed (log: $build/config.log)"
            return 1
        }
    fi
    make -C "$build" -j"$(nproc)" libucp_ifunc_jit.la \
        examples/hello/hello_target examples/hello/hello_source \
        test/integration/ifunc_integration test/cross/chase_two_isa \
        test/csmith/csmith_ifunc_run test/python/c_target \
        EXTRA_test_integration_ifunc_integration_DEPENDENCIES= \
        >"$build/make.out" 2>&1 || {
        tail -n 30 "$build/make.out"
        echo "$me: the ppc64el build failed (log: $build/make.out)"
        return 1
    }
    echo "$me: ppc64el build up to date in $((SECONDS - start)) s"
    "$top/test/cross/run-ppc64el.sh" "$top/build" "$build" || return $?
    # A Python-written ifunc on the ppc64el target (issue 33)
    make -C "$top/build" test/python/image_source >/dev/null 2>&1 || {
        echo "$me: test/python/image_source did not build in $top/build"
        return 1
    }
    "$top/test/python/run-ppc64el.sh" "$top/build" "$build"
}

case $(uname -m) in
x86_64) foreign_cpu=aarch64 ;;
aarch64) foreign_cpu=x86_64 ;;
*) echo "SKIP: $me: $(uname -m) is neither x86_64 nor aarch64"; exit 77 ;;
esac
foreign_triplet=$foreign_cpu-linux-gnu
if ! command -v "$foreign_triplet-g++" >/dev/null; then
    echo "SKIP: $me: no $foreign_triplet-g++ (run contrib/install-deps.sh)"
    exit 77
fi

cross_build=$top/build-$foreign_cpu
mkdir -p "$cross_build" && cd "$cross_build" || exit 1
start=$SECONDS
if [ ! -f Makefile ]; then
    "$top/configure" --host="$foreign_triplet" >configure.out 2>&1 || {
        tail -n 20 configure.out
        echo "$me: configure --host=$foreign_triplet failed (log: $cross_build/config.log)"
        exit 1
    }
fi
# What run.sh runs, and nothing else: the whole suite's time is bounded
# (README), and the rest of the tree is checked natively.
cross_targets=(test/peer/ifunc_source_peer test/integration/ifunc_integration
    test/ifuncs/lib/stress.so test/ifuncs/lib/counter.so
    test/ifuncs/lib/multi_isa/counter.so test/csmith/csmith_ifunc_run)
# The variants test_constructs.cc runs (TEST_CONSTRUCTS in test/Makefile.inc).
for variant in O0 O0_sp O2 O2_sp O3 O3_sp \
    O2_paper_named_at_the_longest_length_an_ifunc_can_be; do
    cross_targets+=("test/ifuncs/lib/constructs_$variant.so")
done
make -j"$(nproc)" "${cross_targets[@]}" >make.out 2>&1 || {
    tail -n 30 make.out
    echo "$me: the $foreign_cpu build failed (log: $cross_build/make.out)"
    exit 1
}
echo "$me: $foreign_cpu build up to date in $((SECONDS - start)) s"
"$top/test/cross/run.sh" "$top/build" "$cross_build"
status=$?
[ $status -eq 0 ] || exit $status

# The csmith differential test with the target of the other ISA: the
# programs run natively under QEMU and shipped from this machine's source
# to a $foreign_cpu target under QEMU (CSMITH_CROSS_COUNT programs).
echo "$me: csmith programs shipped to a $foreign_cpu target"
make -C "$top/build" --no-print-directory check-csmith \
    IFUNC_TARGET="$foreign_triplet" \
    CSMITH_TARGET_DRIVER="$cross_build/test/csmith/csmith_ifunc_run" \
    CSMITH_COUNT="${CSMITH_CROSS_COUNT:-2}" || exit 1

check_ppc64el
status=$?
[ $status -eq 77 ] && exit 0
exit $status
