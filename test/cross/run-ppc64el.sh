#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The third ISA (issue 32): a ppc64el target, under user-mode QEMU, runs an
# ifunc that an x86-64 source sends it over UCX_TLS=tcp. No native image
# covers ppc64el: the library is built with ucx-ifunc-cc --bitcode (x86-64
# native, bitcode for x86-64, aarch64 and powerpc64le), the source sends the
# powerpc64le bitcode, and the target JITs it and runs it. Then a ppc64el
# source sends an x86-64 target the x86-64 native image, and (with
# UCX_IFUNC_PREFER_BITCODE=y) its x86-64 bitcode, which the target JITs.
#
#   test/cross/run-ppc64el.sh NATIVE_BUILD PPC64EL_BUILD
#
# NATIVE_BUILD is an x86-64 build with LLVM, its examples and test
# programs (make check TESTS=); PPC64EL_BUILD one configured
# --host=powerpc64le-linux-gnu --with-llvm with libucp_ifunc_jit.la and
# examples/hello/hello_{target,source} built, and for the later steps
# test/integration/ifunc_integration, test/cross/chase_two_isa and
# test/csmith/csmith_ifunc_run (contrib/check-cross.sh does both). Also:
# every constructs variant from bitcode on a ppc64el target, the pointer
# chase between an x86-64 and a ppc64el process, and csmith programs. The hello library is signed with
# NATIVE_BUILD's demo key, which the target trusts: it has no copy of it.
#
# Exit status: 0 passed; 1 failed; 2 wrong use or a build missing; 77 (a
# "SKIP:" line) where this machine cannot run it: not x86-64, no
# qemu-ppc64le, or no ppc64el UCX or LLVM (contrib/install-deps.sh installs
# them where Debian's mirrors allow).
set -uo pipefail

me=test/cross/run-ppc64el.sh
# shellcheck source=test/cross/ppc64el-setup.sh
. "$(dirname "$0")/../cross/ppc64el-setup.sh"

target=$ppc/examples/hello/hello_target
source=$native/examples/hello/hello_source
cc=$native/tools/ucx-ifunc-cc-uninstalled
key=$native/examples/hello/demo.key
top=$(cd "$(dirname "$0")/../.." && pwd)
for file in "$target" "$source" "$cc" "$key" "$ppc/.libs/libucp_ifunc_jit.so" \
    "$ppc/examples/hello/.libs/hello_source" "$native/examples/hello/hello_target"; do
    [ -e "$file" ] || { echo "$me: $file missing: build both trees (contrib/check-cross.sh)" >&2; exit 2; }
done
# 21: EM_PPC64, at byte 18 of the ELF header.
[ "$(od -An -tu2 -j18 -N2 "$target" | tr -d ' ')" = 21 ] ||
    { echo "$me: $target is no ppc64el executable (reconfigure $ppc)" >&2; exit 2; }

work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
"$cc" --bitcode -O2 -Wall -Wextra -Werror --sign "$key" -o "$work/hello.so" \
    "$top/examples/hello/hello.c" || { echo "$me: ucx-ifunc-cc --bitcode failed"; exit 1; }
grep -qa '__ucp_ifunc_bitcode_hello\.em21' "$work/hello.so" ||
    { echo "$me: hello.so has no powerpc64le bitcode"; exit 1; }

# The ppc64el source's hello.so: its payload functions compiled by the
# ppc64el compiler, an x86-64 native image and the three triples' bitcode
# (the same bytes as the x86-64 build's above).
mkdir -p "$work/ppc"
"$cc" --target powerpc64le-linux-gnu,x86_64-linux-gnu --bitcode -O2 -Wall \
    -Wextra -Werror --sign "$key" -o "$work/ppc/hello.so" \
    "$top/examples/hello/hello.c" ||
    { echo "$me: the ppc64el hello.so did not build"; exit 1; }

# QEMU 7.2 refuses UCX's TCP_KEEPINTVL (setsockopt EINVAL), which fails
# the connection: keepalive off on the emulated side. The JIT compiles
# hello under QEMU in 0.5 to 0.75 s (measured): 10 s leaves room for a
# loaded machine.
common_env=(UCX_TLS=tcp UCX_WARN_UNUSED_ENV_VARS=n UCX_TCP_KEEPINTVL=inf
    "UCX_IFUNC_JIT_TIMEOUT=${IFUNC_PPC64EL_JIT_TIMEOUT:-10s}")
failed=0

# run_pair NAME TARGET_WRAPPER TARGET SOURCE_WRAPPER SOURCE LIB_DIR [ENV...]:
# hello from SOURCE (loading LIB_DIR's hello.so, with ENV) to TARGET, which
# trusts the demo key and has no copy of hello.so; checks that it ran.
run_pair()
{
    local name=$1 target_wrapper=$2 target=$3 source_wrapper=$4 source=$5
    local lib_dir=$6
    shift 6
    local message="hello, $name" port=$((20000 + RANDOM % 20000))
    local start target_pid source_status target_status seconds
    start=$(date +%s.%N)
    : >"$work/target.log"
    # shellcheck disable=SC2086 # the wrappers are command prefixes
    env "${common_env[@]}" UCX_IFUNC_TRUSTED_KEYS="${key%.key}.pub" \
        timeout -k 5 60 $target_wrapper "$target" "$port" \
        >"$work/target.log" 2>&1 &
    target_pid=$!
    for _ in $(seq 100); do
        grep -q "listening on" "$work/target.log" && break
        kill -0 $target_pid 2>/dev/null || break
        sleep 0.2
    done
    # shellcheck disable=SC2086
    env "${common_env[@]}" UCX_IFUNC_LIB_DIR="$lib_dir" "$@" \
        timeout 60 $source_wrapper "$source" "localhost:$port" "$message" \
        >"$work/source.log" 2>&1
    source_status=$?
    wait $target_pid
    target_status=$?
    seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    if [ $source_status -eq 0 ] && [ $target_status -eq 0 ] &&
        grep -q "^hello_main: \"$message\" (running in process" "$work/target.log" &&
        grep -q "^hello_target: ifunc ran" "$work/target.log"; then
        echo "$me: $name: passed in $seconds s"
        return
    fi
    failed=1
    echo "$me: $name: FAILED (source status $source_status, target status $target_status) in $seconds s"
    sed 's/^/   source | /' "$work/source.log"
    sed 's/^/   target | /' "$work/target.log"
}

run_pair "x86-64 source -> ppc64el target (powerpc64le bitcode, JIT under qemu-ppc64le)" \
    qemu-ppc64le "$target" "" "$source" "$work"
# hello_source is a libtool wrapper script: QEMU runs the program itself.
ppc_source=(qemu-ppc64le -E "LD_LIBRARY_PATH=$ppc/.libs")
run_pair "ppc64el source (qemu-ppc64le) -> x86-64 target (x86-64 native image)" \
    "" "$native/examples/hello/hello_target" "${ppc_source[*]}" \
    "$ppc/examples/hello/.libs/hello_source" "$work/ppc"
run_pair "ppc64el source (qemu-ppc64le) -> x86-64 target (x86-64 bitcode, JIT)" \
    "" "$native/examples/hello/hello_target" "${ppc_source[*]}" \
    "$ppc/examples/hello/.libs/hello_source" "$work/ppc" UCX_IFUNC_PREFER_BITCODE=y
# The constructs test (statics, pointer tables, long names, errno, imports,
# weak imports absent, both conventions) on a ppc64el target from an x86-64
# source peer: by default four variants of the native-image tests
# (TEST_CONSTRUCTS in test/Makefile.inc) that cover every level, the stack
# protector, both conventions and the longest name; all seven with
# IFUNC_PPC64EL_CONSTRUCTS=all, or those it names (blank-separated). The
# integration tests of PPC64EL_BUILD under QEMU, the peer
# and its libraries (--bitcode) x86-64, the target's own copies of the
# libraries built for ppc64el as hello's above (its trust policy compares
# the code it gets with them). About 7 s a variant: each compiles twice (an
# absent weak import is compiled as null, RuntimeDyld cannot leave it so),
# 1 to 3 s a compile under QEMU: all seven took 36 to 68 s (load 5 to 6 on
# 2 cores), too long for the test command's step.
long_name=O2_paper_named_at_the_longest_length_an_ifunc_can_be
all_constructs="O0 O0_sp O2 O2_sp O3 O3_sp $long_name"
constructs=${IFUNC_PPC64EL_CONSTRUCTS:-O0 O2_sp O3 $long_name}
[ "$constructs" = all ] && constructs=$all_constructs
integration=$ppc/test/integration/ifunc_integration
if [ -x "$integration" ] &&
    [ "$(od -An -tu2 -j18 -N2 "$integration" | tr -d ' ')" = 21 ]; then
    mkdir -p "$work/x86c" "$work/ppcc"
    filter=
    start=$(date +%s.%N)
    for variant in $constructs; do
        # as CONSTRUCTS_BUILD in test/Makefile.inc
        level=${variant%%_*}
        case $variant in
        *_sp | *_sp_*) protect=-fstack-protector-strong ;;
        *) protect=-fno-stack-protector ;;
        esac
        sources=("$top/test/ifuncs/constructs.c" "$top/test/ifuncs/constructs_helper.c")
        flags=(--bitcode -Wall -Wextra -Werror -"$level" "$protect"
            "-DIFUNC_NAME=constructs_$variant" -I"$top/test/ifuncs")
        case $variant in
        *_paper*) flags+=(-DCONSTRUCTS_PAPER) ;;
        esac
        "$cc" --target x86_64-linux-gnu,aarch64-linux-gnu "${flags[@]}" \
            -o "$work/x86c/constructs_$variant.so" "${sources[@]}" -lz -lm &
        x86_build=$!
        # -l:libz.so.1: zlib1g-dev:ppc64el may be missing, zlib1g:ppc64el
        # is there (UCX needs it)
        "$cc" --target powerpc64le-linux-gnu,x86_64-linux-gnu,aarch64-linux-gnu \
            "${flags[@]}" -o "$work/ppcc/constructs_$variant.so" \
            "${sources[@]}" -l:libz.so.1 -lm
        ppc_status=$?
        if ! wait $x86_build || [ $ppc_status -ne 0 ]; then
            echo "$me: the constructs_$variant libraries did not build"
            exit 1
        fi
        filter+="${filter:+:}Variants/Constructs.AllWorkInShippedCode/tcp_$variant"
    done
    seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    echo "$me: the constructs libraries built in $seconds s"
    start=$(date +%s.%N)
    if env "${common_env[@]}" IFUNC_TEST_LIB_DIR="$work/ppcc" \
        IFUNC_TEST_PEER="$native/test/peer/ifunc_source_peer" \
        IFUNC_TEST_PEER_WRAPPER= IFUNC_TEST_PEER_LIB_DIR="$work/x86c" \
        timeout -k 5 300 qemu-ppc64le "$integration" --gtest_filter="$filter" \
        >"$work/constructs.log" 2>&1 &&
        ! grep -q '^\[  SKIPPED \]' "$work/constructs.log"; then
        seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
        echo "$me: constructs from bitcode on a ppc64el target: $(grep -c '^\[       OK \]' "$work/constructs.log") passed in $seconds s"
    else
        failed=1
        echo "$me: constructs from bitcode on a ppc64el target: FAILED"
        tail -n 30 "$work/constructs.log" | sed 's/^/   | /'
    fi
fi

# The pointer chase (examples/pointer_chase/chase.c, the ifunc, unchanged)
# between two processes without MPI (test/cross/chase_two_isa.c): first
# both x86-64, then an x86-64 origin and a ppc64el process under QEMU,
# which JITs the chase's powerpc64le bitcode. Each side sends on the code
# it received (ucp_ifunc_code_get), and the results must equal a walk of
# the origin's copy of the structure, and the mixed run's those of the
# x86-64 run (the same seed: the same digest). A frame carries the image
# of one ISA: to send the code on to the x86-64 origin, the ppc64el
# process takes the x86-64 image from its own chase.so, which vouched for
# the code under the 'library' policy (the same ucx-ifunc-cc --target
# build for its ISA: byte-identical images; it trusts no key, or the
# signature would vouch first). The x86-64 server has no chase.so: it
# trusts the signer, and sends on to its own ISA only.
chase_program=test/cross/chase_two_isa
chase_args=(0x5eed 4096) # seed, nodes
if [ -x "$native/$chase_program" ] && [ -x "$ppc/$chase_program" ] &&
    [ "$(od -An -tu2 -j18 -N2 "$ppc/$chase_program" | tr -d ' ')" = 21 ]; then
    mkdir -p "$work/chase" "$work/chase-ppc64el" "$work/chase-none"
    for build in "x86_64-linux-gnu,powerpc64le-linux-gnu $work/chase" \
        "powerpc64le-linux-gnu,x86_64-linux-gnu $work/chase-ppc64el"; do
        "$cc" --target "${build% *}" --bitcode -O2 -Wall -Wextra -Werror \
            -I"$top/src" --sign "$key" -o "${build#* }/chase.so" \
            "$top/examples/pointer_chase/chase.c" ||
            { echo "$me: chase.so (--target ${build% *}) did not build"; exit 1; }
    done
    # run_chase NAME SERVER_KEYS SERVER_LIB_DIR SERVER_WRAPPER SERVER: 200
    # chases of 40 hops from an x86-64 origin; sets chase_digest; returns 0
    # (passed) or 1 (failed)
    run_chase()
    {
        local name=$1 server_keys=$2 server_lib=$3 server_wrapper=$4 server=$5
        local port=$((20000 + RANDOM % 20000)) server_pid origin_status
        local server_status
        chase_digest=
        : >"$work/chase_server.log"
        # shellcheck disable=SC2086 # the wrapper is a command prefix
        env "${common_env[@]}" UCX_IFUNC_TRUSTED_KEYS="$server_keys" \
            UCX_IFUNC_LIB_DIR="$server_lib" \
            timeout -k 5 150 $server_wrapper "$server" serve "$port" \
            "${chase_args[@]}" >"$work/chase_server.log" 2>&1 &
        server_pid=$!
        for _ in $(seq 100); do
            grep -q "listening on" "$work/chase_server.log" && break
            kill -0 $server_pid 2>/dev/null || break
            sleep 0.2
        done
        env "${common_env[@]}" UCX_IFUNC_LIB_DIR="$work/chase" \
            timeout 150 "$native/$chase_program" origin "localhost:$port" \
            "${chase_args[@]}" 200 40 >"$work/chase_origin.log" 2>&1
        origin_status=$?
        wait $server_pid
        server_status=$?
        chase_digest=$(sed -n 's/.*all equal to the local walk; digest //p' \
            "$work/chase_origin.log")
        if [ $origin_status -eq 0 ] && [ $server_status -eq 0 ] &&
            [ -n "$chase_digest" ]; then
            echo "$me: pointer chase, $name: $(grep -o '[0-9]* chases of.*' "$work/chase_origin.log")"
            return 0
        fi
        echo "$me: pointer chase, $name: FAILED (origin status $origin_status, server status $server_status)"
        sed 's/^/   origin | /' "$work/chase_origin.log"
        sed 's/^/   server | /' "$work/chase_server.log"
        return 1
    }
    run_chase "x86-64 origin <-> x86-64" "${key%.key}.pub" "$work/chase-none" \
        "" "$native/$chase_program" || failed=1
    x86_digest=$chase_digest
    if run_chase "x86-64 origin <-> ppc64el (bitcode, JIT under qemu-ppc64le)" \
        "" "$work/chase-ppc64el" qemu-ppc64le "$ppc/$chase_program"; then
        if [ "$chase_digest" != "$x86_digest" ]; then
            failed=1
            echo "$me: pointer chase across ISAs: digest $chase_digest, x86-64's $x86_digest: FAILED"
        else
            echo "$me: pointer chase across ISAs: digest $chase_digest, equal to the x86-64 run's"
        fi
    else
        failed=1
    fi
fi

# csmith on ppc64el: IFUNC_PPC64EL_CSMITH programs (default 3; 0: none),
# each built with --bitcode-only for x86-64 and ppc64el and shipped from
# this machine to a target under qemu-ppc64le that JITs it, its checksum
# equal to the x86-64 native one (test/csmith/csmith_diff.py with
# IFUNC_TARGET). About 5 s a program; the JIT gets 60 s, as long as
# csmith_diff.py gives a program under emulation (a compile takes
# seconds there, more than 10 at a load of 9). Left out, saying so,
# without csmith.
csmith_count=${IFUNC_PPC64EL_CSMITH:-3}
driver=$ppc/test/csmith/csmith_ifunc_run
if [ "$csmith_count" -gt 0 ]; then
    if ! command -v csmith >/dev/null; then
        echo "$me: csmith on ppc64el: left out: no csmith (Debian: csmith, libcsmith-dev)"
    elif [ ! -x "$driver" ]; then
        failed=1
        echo "$me: csmith on ppc64el: no $driver (make -C $ppc test/csmith/csmith_ifunc_run)"
    elif ! env "${common_env[@]}" UCX_IFUNC_JIT_TIMEOUT=60s \
        IFUNC_TARGET=powerpc64le-linux-gnu CSMITH_TARGET_DRIVER="$driver" \
        CSMITH_COUNT="$csmith_count" \
        make -C "$native" --no-print-directory check-csmith >"$work/csmith.log" 2>&1; then
        failed=1
        echo "$me: csmith on ppc64el: FAILED"
        sed 's/^/   | /' "$work/csmith.log"
    else
        echo "$me: csmith on ppc64el: $(tail -n 1 "$work/csmith.log" | sed 's/^csmith_diff: //')"
    fi
fi

# The JIT's unit tests on ppc64el (RuntimeDyld there), where the unit test
# program was built: make test/unit/ifunc_unit
# EXTRA_test_unit_ifunc_unit_DEPENDENCIES= (the test ifunc libraries do
# not build for ppc64el). Left out: the memory bound (QEMU does not apply
# RLIMIT_AS to the guest) and the speed test.
unit=$ppc/test/unit/ifunc_unit
if [ -x "$unit" ] && [ "$(od -An -tu2 -j18 -N2 "$unit" | tr -d ' ')" = 21 ]; then
    jit_filter='Jit.*:-Jit.BombRefusedWithinTheBound:Jit.CompileSpeed'
    if timeout 300 qemu-ppc64le "$unit" --gtest_filter="$jit_filter" \
        >"$work/unit.log" 2>&1; then
        echo "$me: JIT unit tests on ppc64el: $(grep -c '^\[       OK \]' "$work/unit.log") passed"
    else
        failed=1
        echo "$me: JIT unit tests on ppc64el: FAILED"
        tail -n 30 "$work/unit.log" | sed 's/^/   | /'
    fi
fi
[ $failed -eq 0 ] || { echo "$me: FAILED"; exit 1; }
echo "$me: PASSED"
