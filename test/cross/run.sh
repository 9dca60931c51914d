#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# A mixed-ISA cluster on one machine: targets and sources of different CPU
# architectures exchange ifuncs over UCX_TLS=tcp, the foreign one running
# under user-mode QEMU.
#
#   test/cross/run.sh NATIVE_BUILD CROSS_BUILD
#
# NATIVE_BUILD is a build of this tree for the machine (../configure),
# CROSS_BUILD one for the other ISA (../configure --host=aarch64-linux-gnu
# on x86-64), both with their test programs and ifunc libraries built
# ("make check TESTS=" builds them and runs nothing). Two directions run:
#
#   (a) native target (NATIVE_BUILD's integration tests) taking messages
#       from a foreign source peer (CROSS_BUILD's) under QEMU;
#   (b) foreign target (CROSS_BUILD's integration tests) under QEMU taking
#       messages from a native source peer.
#
# Each runs a plumbing check that needs no ifunc library (peer start, OOB,
# wireup, one request), the constructs tests over TCP and a stress run of
# IFUNC_CROSS_STRESS_COUNT messages (default 10000) with random payloads
# whose checksums the target verifies, and prints sent/run/corrupt/lost.
#
# Exit status: 0 passed; 1 a test failed; 2 wrong use or a build missing;
# 77 (automake's skip) when this machine cannot run it: no emulator, no
# foreign libraries, no cross compiler, or test ifunc libraries without
# images for the other ISA. A skip always prints a line starting "SKIP:".
set -uo pipefail

me=test/cross/run.sh
readonly kSkip=77

usage()
{
    echo "usage: $me NATIVE_BUILD CROSS_BUILD" >&2
    exit 2
}

skip()
{
    echo "SKIP: $me: $* (run contrib/install-deps.sh, then build both trees: see README.md)"
    exit $kSkip
}

[ $# -eq 2 ] || usage
native_build=$(cd "$1" 2>/dev/null && pwd) || { echo "$me: no directory $1" >&2; exit 2; }
cross_build_arg=$2

stress_count=${IFUNC_CROSS_STRESS_COUNT:-10000}
run_timeout=${IFUNC_CROSS_TIMEOUT:-600}

# The other ISA of the pair this project supports, and what running it
# here takes.
native_cpu=$(uname -m)
case $native_cpu in
x86_64) foreign_cpu=aarch64 ;;
aarch64) foreign_cpu=x86_64 ;;
*) skip "machine $native_cpu is neither x86_64 nor aarch64" ;;
esac
foreign_triplet=$foreign_cpu-linux-gnu
emulator=qemu-$foreign_cpu
command -v "$emulator" >/dev/null || skip "no $emulator (Debian: qemu-user)"
command -v "$foreign_triplet-g++" >/dev/null ||
    skip "no $foreign_triplet-g++ (Debian: g++-$foreign_triplet)"
[ -e "/usr/lib/$foreign_triplet/libucp.so.0" ] ||
    skip "no $foreign_cpu UCX in /usr/lib/$foreign_triplet (Debian: libucx-dev:${foreign_cpu/aarch64/arm64})"
cross_build=$(cd "$cross_build_arg" 2>/dev/null && pwd) ||
    { echo "$me: no directory $cross_build_arg (the $foreign_cpu build)" >&2; exit 2; }

# ELF e_machine of a file: 62 x86-64, 183 AArch64.
elf_machine()
{
    od -An -tu2 -j18 -N2 "$1" 2>/dev/null | tr -d ' '
}
machine_of()
{
    case $1 in x86_64) echo 62 ;; aarch64) echo 183 ;; esac
}

# The programs each direction needs, built for the right ISA.
check_program()
{
    local build=$1 program=$2 cpu=$3
    if [ ! -x "$build/$program" ]; then
        echo "$me: $build/$program missing: run \"make check TESTS=\" in $build" >&2
        exit 2
    fi
    if [ "$(elf_machine "$build/$program")" != "$(machine_of "$cpu")" ]; then
        echo "$me: $build/$program is not an $cpu executable (a libtool wrapper? reconfigure and rebuild $build)" >&2
        exit 2
    fi
}
for program in test/integration/ifunc_integration test/peer/ifunc_source_peer; do
    check_program "$native_build" $program "$native_cpu"
    check_program "$cross_build" $program "$foreign_cpu"
done

# The test ifunc libraries of each build must carry an image for the other
# build's ISA (symbol __ucp_ifunc_image_NAME.em<ELF machine>): configure's
# "ifunc ISAs" line names both where the cross compiler was found. Without
# them only the plumbing check runs.
has_image_for()
{
    local lib=$1 name=$2 cpu=$3
    [ -e "$lib" ] && grep -qa "__ucp_ifunc_image_$name\.em$(machine_of "$cpu")" "$lib"
}
have_ifunc_libs=yes
for name in stress constructs_O2; do
    has_image_for "$native_build/test/ifuncs/lib/$name.so" $name "$foreign_cpu" ||
        have_ifunc_libs=no
    has_image_for "$cross_build/test/ifuncs/lib/$name.so" $name "$native_cpu" ||
        have_ifunc_libs=no
done

plumbing_filter='Transports/Channels.BadParametersAreRefused/tcp'
ifunc_filter='Variants/Constructs.AllWorkInShippedCode/tcp_*'
ifunc_filter+=':Matrix/Stress.EveryMessageArrivesWholeAndRunsOnce/tcp_direct_y_nbix'
# The code-once paths pick the target's ISA themselves (channel blob, AM
# reply); the raw path is told it.
ifunc_filter+=':Paths/MultiIsaPath.*/tcp_*:Paths/CodeOnce.FirstMessageCarriesTheCodeLaterOnesNameIt/tcp_*'
ifunc_filter+=':Transports/MultiIsaRaw.CodeForAnotherIsaIsRefusedByTheTargetAndOwnIsaRuns/tcp'
filter=$plumbing_filter
[ $have_ifunc_libs = yes ] && filter+=":$ifunc_filter"

log_dir=${IFUNC_CROSS_LOG_DIR:-$cross_build/test/cross}
mkdir -p "$log_dir" || exit 2

failed=0
summary=()

# run_direction NAME TARGET_BUILD TARGET_WRAPPER PEER_BUILD PEER_WRAPPER:
# the integration tests of TARGET_BUILD as the target (under
# TARGET_WRAPPER, empty for none), their source peers from PEER_BUILD
# (under PEER_WRAPPER), each side loading its own build's ifunc libraries.
run_direction()
{
    local name=$1 target_build=$2 target_wrapper=$3 peer_build=$4 peer_wrapper=$5
    local log=$log_dir/$name.log start end status
    echo "== $name: $filter"
    start=$(date +%s.%N)
    # timeout signals its whole process group: the target and the peers it
    # started, which QEMU may keep alive after SIGTERM (hence -k).
    # shellcheck disable=SC2086 # the wrapper is a command prefix
    env UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n \
        IFUNC_TEST_LIB_DIR="$target_build/test/ifuncs/lib" \
        IFUNC_TEST_PEER="$peer_build/test/peer/ifunc_source_peer" \
        IFUNC_TEST_PEER_WRAPPER="$peer_wrapper" \
        IFUNC_TEST_PEER_LIB_DIR="$peer_build/test/ifuncs/lib" \
        IFUNC_TEST_STRESS_COUNT="$stress_count" \
        timeout -k 10 "$run_timeout" $target_wrapper \
        "$target_build/test/integration/ifunc_integration" \
        --gtest_filter="$filter" >"$log" 2>&1
    status=$?
    end=$(date +%s.%N)
    local seconds
    seconds=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
    local stress constructs_ok constructs_failed paths_ok
    stress=$(sed -n 's/^\[ stress   \] [^:]*: //p' "$log" |
        sed -E 's/^sent ([0-9]+), executed ([0-9]+), corrupt ([0-9]+), out of order [0-9]+, lost ([0-9]+).*/sent \1, run \2, corrupt \3, lost \4/')
    constructs_ok=$(grep -c '^\[       OK \] Variants/Constructs' "$log")
    constructs_failed=$(grep -c '^\[  FAILED  \] Variants/Constructs.*ms)' "$log")
    paths_ok=$(grep -Ec '^\[       OK \] (Paths|Transports/MultiIsa)' "$log")
    # A test that skips here lacks a library this run should have built.
    if [ $status -eq 0 ] && [ $have_ifunc_libs = yes ] &&
        grep -q '^\[  SKIPPED \]' "$log"; then
        status=1
    fi
    if [ $status -eq 0 ] && grep -q '^\[  PASSED  \]' "$log"; then
        echo "   passed in $seconds s (log: $log)"
    else
        failed=1
        [ $status -eq 124 ] && echo "   timed out after $run_timeout s"
        echo "   FAILED (status $status) in $seconds s; last lines of $log:"
        tail -n 30 "$log" | sed 's/^/   | /'
    fi
    if [ $have_ifunc_libs = yes ]; then
        summary+=("$name: constructs ${constructs_ok} passed, ${constructs_failed} failed; channel/AM/raw ISA choice ${paths_ok} passed; stress ${stress:-no result}; $seconds s")
    else
        summary+=("$name: plumbing only; $seconds s")
    fi
}

echo "$me: $native_cpu build $native_build, $foreign_cpu build $cross_build"
echo "$me: $foreign_cpu side under $emulator; UCX_TLS=tcp; stress $stress_count messages"
run_direction "${native_cpu}_target-${foreign_cpu}_source" \
    "$native_build" "" "$cross_build" "$emulator"
run_direction "${foreign_cpu}_target-${native_cpu}_source" \
    "$cross_build" "$emulator" "$native_build" ""

echo "== summary"
for line in "${summary[@]}"; do
    echo "   $line"
done
if [ $failed -ne 0 ]; then
    echo "$me: FAILED"
    exit 1
fi
if [ $have_ifunc_libs = no ]; then
    skip "plumbing passed both ways, but the test ifunc libraries in $native_build or $cross_build lack the other ISA's image: configure both with the other ISA's cross compiler on PATH and a ucx-ifunc-cc that knows --target"
fi
echo "$me: PASSED"
