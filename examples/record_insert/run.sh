#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Runs examples/record_insert as built by "make" (it builds nothing): the
# target and the source, pinned to two different CPUs, insert the corpus
# with every variant (ifunc, ifunc_full, am, raw) over shared memory
# (UCX_TLS=sm,tcp: peers connect through UCX's TCP connection manager, then
# use shared memory) and over TCP, and print a table per transport: each
# variant runs RUNS times (default 5), round robin, and the table shows the
# median run (-v: also every run as CSV).
#
#     examples/record_insert/run.sh [-n RECORDS] [-r RUNS] [-v] [BUILD_DIR]
#     examples/record_insert/run.sh --check [BUILD_DIR]
#
# --check: 2 000 records, one run, over sm,tcp and tcp, for contrib/test.sh;
# fails if a table on the target does not hold exactly the corpus.
# BUILD_DIR defaults to build/ of the source tree. Exit status 77 (SKIP) when the example was
# not built (configure found no libzstd-dev or libsqlite3-dev).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)

records=10000
runs=5
csv=
build=
while [ $# -gt 0 ]; do
    case $1 in
    --check) records=2000; runs=1 ;;
    -n) records=$2; shift ;;
    -r) runs=$2; shift ;;
    -v) csv=-v ;;
    -*) echo "usage: $0 [--check] [-n RECORDS] [-r RUNS] [-v] [BUILD_DIR]" >&2; exit 2 ;;
    *) build=$1 ;;
    esac
    shift
done
build=$(cd "${build:-$top/build}" && pwd)
dir=$build/examples/record_insert

if [ ! -x "$dir/record_insert" ] || [ ! -f "$dir/record_insert.so" ]; then
    # configure comments the example's rules out ('#') when it lacks them.
    if [ -f "$build/config.log" ] &&
        grep -q "^HAVE_RECORD_INSERT_TRUE='#'" "$build/config.log"; then
        echo "SKIP: examples/record_insert was not built: configure found no" \
            "libzstd-dev or libsqlite3-dev (contrib/install-deps.sh installs them)"
        exit 77
    fi
    echo "record_insert: $dir/record_insert or record_insert.so missing; run make in $build" >&2
    exit 1
fi

# Two CPUs, so that the source and the target do not share one.
mapfile -t cpus < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
    awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }')
if [ ${#cpus[@]} -lt 2 ]; then
    echo "record_insert: needs two CPUs to pin the processes to, has ${cpus[*]}" >&2
    exit 1
fi
target_cpu=${cpus[0]}
source_cpu=${cpus[1]}
echo "record_insert: target on CPU $target_cpu, source on CPU $source_cpu," \
    "$(lscpu | sed -n 's/^Model name: *//p')"

status=0
for tls in sm,tcp tcp; do
    log=$(mktemp)
    # The target has no record_insert.so and no UCX_IFUNC_LIB_DIR: the code
    # arrives in the messages, signed with the demo key it trusts. It
    # listens on a port the system picks, and says which.
    UCX_TLS=$tls UCX_IFUNC_TRUST=signed UCX_IFUNC_TRUSTED_KEYS=$dir/demo.pub \
        timeout 600 taskset -c "$target_cpu" "$dir/record_insert" target \
        -p 0 >"$log" 2>&1 &
    target=$!
    port=
    for _ in $(seq 300); do
        port=$(sed -n 's/.* listening on port \([0-9]*\)$/\1/p' "$log")
        if [ -n "$port" ] || ! kill -0 "$target" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    source_status=0
    if [ -n "$port" ]; then
        UCX_TLS=$tls UCX_IFUNC_LIB_DIR=$dir timeout 600 taskset -c "$source_cpu" \
            "$dir/record_insert" source localhost -p "$port" -n "$records" \
            -r "$runs" $csv || source_status=$?
    else
        echo "record_insert: over $tls the target did not listen" >&2
        kill "$target" 2>/dev/null || true
        source_status=1
    fi
    target_status=0
    wait "$target" || target_status=$?
    if [ $source_status -ne 0 ] || [ $target_status -ne 0 ]; then
        echo "record_insert: over $tls the source exited with $source_status," \
            "the target with $target_status; the target said:" >&2
        cat "$log" >&2
        status=1
    fi
    rm -f "$log"
done
exit $status
