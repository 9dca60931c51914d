#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Builds and tests ucx-ifunc under sanitizers, each in a build directory of
# its own (gcc, as the normal build), making only what it runs:
#   asan  build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer, every
#         report fatal, leaks included; runs the unit and integration suites
#         but the threads tests.
#   tsan  build-tsan/: ThreadSanitizer; runs the threads tests.
# UCX itself is not instrumented. What is suppressed, and why, is in
# contrib/sanitizers/*.supp; nothing of ucx-ifunc's own code is. The log of
# each suite is build-*/sanitizer-logs/NAME.log.
#
#     contrib/check-sanitizers.sh [asan] [tsan]     (default: both)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
supp=$top/contrib/sanitizers

# Each message costs several times more under a sanitizer: the stress tests
# send fewer here. Their full counts, which hunt ordering races, are the
# normal build's (make check); here every code path counts, not the number.
export IFUNC_TEST_STRESS_COUNT=${IFUNC_TEST_STRESS_COUNT:-5000}
export IFUNC_TEST_STRESS_MATRIX_COUNT=${IFUNC_TEST_STRESS_MATRIX_COUNT:-500}
export IFUNC_TEST_PATH_STRESS_COUNT=${IFUNC_TEST_PATH_STRESS_COUNT:-5000}

# Configures (once) build-$1 with -fsanitize=$2 and options $3, then makes
# the targets that follow.
build() {
    local dir=$top/build-$1 sanitize=$2 options=$3
    shift 3
    local flags="-O1 -g -fno-omit-frame-pointer -fsanitize=$sanitize $options"
    [ -x "$top/configure" ] || (cd "$top" && ./autogen.sh)
    mkdir -p "$dir/sanitizer-logs"
    cd "$dir"
    [ -f Makefile ] || "$top/configure" -q CFLAGS="$flags" \
        CXXFLAGS="$flags" LDFLAGS="-fsanitize=$sanitize"
    make -j"$(nproc)" "$@" >/dev/null
}

# Runs test program $1 of the build in the current directory, with the
# arguments that follow; on failure, the tail of its log.
run() {
    local program=$1 log
    log=sanitizer-logs/$(basename "$1").log
    shift
    if UCX_IFUNC_LIB_DIR=$PWD/test/ifuncs/lib "./$program" "$@" >"$log" 2>&1; then
        # gtest names the skipped tests only at the end, each on a line of
        # its own after "[  SKIPPED ] N tests, listed below:".
        awk '/^\[  PASSED  \]|tests from .* ran/ { print; next }
             /^\[  SKIPPED \] [0-9]+ tests?,/ { print; listing = 1; next }
             listing && /^\[  SKIPPED \] / { print; next }
             { listing = 0 }' "$log"
        return 0
    fi
    echo "==== $PWD/$log"
    tail -n 100 "$log"
    return 1
}

run_asan() {
    echo "check-sanitizers: asan: build-asan/"
    build asan address,undefined -fno-sanitize-recover=all \
        test/unit/ifunc_unit test/integration/ifunc_integration \
        test/peer/ifunc_source_peer test/peer/ifunc_peer_node \
        test/peer/ifunc_hostile_peer test-ifuncs
    export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    # The threads tests are the ThreadSanitizer run's.
    run test/unit/ifunc_unit &&
        run test/integration/ifunc_integration --gtest_filter='-*Threads*'
}

run_tsan() {
    echo "check-sanitizers: tsan: build-tsan/"
    build tsan thread "" test/integration/ifunc_threads \
        test/peer/ifunc_source_peer test-ifuncs
    # history_size=7, the most: a suppression matches the frames of both
    # accesses, and with less history a busy machine made TSan lose the
    # stack of UCX's put handler ("failed to restore the stack"), so that
    # ucp_put_handler's suppressed copy was reported as a race.
    export TSAN_OPTIONS="suppressions=$supp/tsan.supp:print_suppressions=0:halt_on_error=1:second_deadlock_stack=1:history_size=7"
    # UCX's memory hooks (libucm) take a lock from inside glibc's thread
    # exit (madvise of the dead thread's stack), where TSan no longer has
    # the thread's state, and crash it; ucx-ifunc does not need them.
    export UCX_MEM_MMAP_HOOK_MODE=none
    run test/integration/ifunc_threads
}

modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(asan tsan)
for mode in "${modes[@]}"; do
    start=$SECONDS
    case $mode in
        asan) run_asan ;;
        tsan) run_tsan ;;
        *) echo "usage: $0 [asan] [tsan]" >&2; exit 2 ;;
    esac
    echo "check-sanitizers: $mode: passed ($((SECONDS - start)) s)"
done
