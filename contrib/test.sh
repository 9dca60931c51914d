#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The test command of the README: installs what is needed, builds, runs the
# whole test suite ("make check"), a differential test of ucx-ifunc-cc
# with random csmith programs ("make check-csmith"), the network fault
# tests (test/netns: two network namespaces, skipped where they cannot be
# created), a mixed x86-64/AArch64 cluster, the foreign side cross-built and
# under QEMU (contrib/check-cross.sh), fuzzes the target's handling of
# received frames and active messages and the sandbox's verifier for 60 s
# ("make fuzz", 20 s each), runs the pointer-chase example
# under mpirun (examples/pointer_chase/check.sh), the key-value example's short
# check (examples/kv/run.sh --check), runs the unit and integration
# suites under AddressSanitizer + UndefinedBehaviorSanitizer and the threads
# tests under ThreadSanitizer (contrib/check-sanitizers.sh), installs to a
# temporary prefix and builds and runs an application against the
# installed copy, builds the Debian packages and checks them
# (contrib/check-packages.sh: lintian, apt-get install, the hello example
# against them, purge), then runs CI's other checks: style, spelling, the
# documentation's links (contrib/check-docs.py), the ABI of libucp_ifunc.so,
# the API reference ("make doc": doxygen, every warning an error), and a
# compile of every source against Debian 13's UCX 1.18 headers. Every check
# runs even when an earlier one failed, so that one run shows everything to
# fix. docs/testing.md says what each step covers.
#
#     IFUNC_TEST_UCX_118=1 contrib/test.sh adds "make check on UCX 1.18.1":
#     the suite built and run against UCX 1.18.1 built from Debian 13's
#     source in a private prefix (contrib/check-ucx-1.18.sh; UCX is built
#     the first time only, cached in ~/.cache/ucx-ifunc: 654 s the first
#     time on the 2-vCPU machine, 130 s after).
#
#     contrib/test.sh --quick: the loop while editing, no installing: builds
#     (reusing build/), style, spelling and the documentation's links, the
#     unit and integration suites (sm and tcp) with the stress tests'
#     smaller counts of contrib/check-sanitizers.sh.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
quick=0
case ${1:-} in
    --quick) quick=1 ;;
    "") ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

failed=()
skipped=()
passed=0
# A step that exits 77 (automake's skip status) could not run here: it says
# why in a SKIP: line, and the summary lists it.
step() {
    local name=$1
    shift
    local step_start=$SECONDS status=0
    echo "==== test.sh: $name"
    "$@" || status=$?
    if [ $status -eq 0 ]; then
        echo "==== test.sh: $name: passed ($((SECONDS - step_start)) s)"
        passed=$((passed + 1))
    elif [ $status -eq 77 ]; then
        echo "==== test.sh: $name: SKIPPED ($((SECONDS - step_start)) s)"
        skipped+=("$name")
    else
        echo "==== test.sh: $name: FAILED ($((SECONDS - step_start)) s)"
        failed+=("$name")
    fi
}

# make_check [MAKE ARGUMENTS]: "make check", or what the arguments narrow
# it to.
make_check() {
    cd "$top/build"
    make -j"$(nproc)" check "$@" && return 0
    for log in test/*/*.log test/*.log contrib/*.log; do
        [ -f "$log" ] && { echo "==== $log"; tail -n 60 "$log"; }
    done
    return 1
}

summary() {
    local elapsed=$(( $(date +%s) - start ))
    echo "test.sh: $passed passed, ${#failed[@]} failed, ${#skipped[@]} skipped${skipped:+ (${skipped[*]})}"
    if [ ${#failed[@]} -gt 0 ]; then
        echo "test.sh: FAILED: ${failed[*]} (after $elapsed s)"
        exit 1
    fi
    echo "test.sh: all tests and checks passed in $elapsed s"
}

# The unit and integration suites alone; their stress tests send what they
# send under the sanitizers (contrib/check-sanitizers.sh) unless set.
quick_check() (
    export IFUNC_TEST_STRESS_COUNT=${IFUNC_TEST_STRESS_COUNT:-5000}
    export IFUNC_TEST_STRESS_MATRIX_COUNT=${IFUNC_TEST_STRESS_MATRIX_COUNT:-500}
    export IFUNC_TEST_PATH_STRESS_COUNT=${IFUNC_TEST_PATH_STRESS_COUNT:-5000}
    make_check TESTS="test/unit/ifunc_unit test/integration/ifunc_integration"
)

if [ $quick -eq 1 ]; then
    step style "$top/contrib/check-style.sh"
    step spelling "$top/contrib/check-spelling.sh"
    step "docs links" "$top/contrib/check-docs.py"
    "$top/contrib/build.sh"
    step "unit + integration (sm, tcp)" quick_check
    summary
    exit 0
fi

"$top/contrib/install-deps.sh"
step style "$top/contrib/check-style.sh"
step spelling "$top/contrib/check-spelling.sh"
step "docs links" "$top/contrib/check-docs.py"
"$top/contrib/build.sh"
step "make check" make_check
# A few random csmith programs, each run natively and shipped to a target
# at -O0..-O3 and -Os, also built with --sandbox and run by a target that
# trusts only its sandbox, and (where the build has LLVM) built with
# --bitcode-only at -O2 and run by a target that compiles the
# bitcode (test/csmith/csmith_diff.py; CSMITH_COUNT=N for more).
step "csmith differential" make -C "$top/build" check-csmith CSMITH_SANDBOX=1 \
    CSMITH_BITCODE=1
# The pointer-chase example, 4 processes under mpirun, every implementation
# over sm and tcp (examples/pointer_chase/check.sh; skipped without mpirun).
step "pointer chase (mpirun -np 4)" "$top/examples/pointer_chase/check.sh" \
    "$top/build/examples/pointer_chase/ucx_ifunc_chase"
step "network faults" "$top/test/netns/run.sh" "$top/build"
step "record insert" "$top/examples/record_insert/run.sh" --check "$top/build"
# The key-value service on the default path and on active messages, 2
# clients, every result checked, over sm,tcp and tcp (a few seconds).
step "key-value service" "$top/examples/kv/run.sh" --check "$top/build"
step "mixed ISA (qemu)" "$top/contrib/check-cross.sh"
step "fuzz 60 s" make -C "$top/build" fuzz FUZZ_SECONDS=60
step "ASan+UBSan" "$top/contrib/check-sanitizers.sh" asan
step "TSan threads" "$top/contrib/check-sanitizers.sh" tsan
step install "$top/contrib/check-install.sh"
step "Debian packages" "$top/contrib/check-packages.sh"
step abi "$top/contrib/check-abi.sh" "$top/build"
step "API docs (doxygen)" make -C "$top/build" doc
step "UCX 1.18 headers" "$top/contrib/check-ucx-headers.sh"
if [ "${IFUNC_TEST_UCX_118:-0}" = 1 ]; then
    step "make check on UCX 1.18.1" "$top/contrib/check-ucx-1.18.sh"
fi

summary
