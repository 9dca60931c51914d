#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Runs examples/kv as built by "make" (it builds nothing): 1 target and N
# clients of the key-value service, on the default path (kv_ifunc_*) and on
# UCX active messages (kv_am_*), the target pinned to one CPU and the
# clients to another, for each UCX_TLS of the list. Each client times its
# increments, puts and gets and checks every result; the service's rate
# for an operation is the clients' operations over the time from the first
# client's start to the last client's end. Each implementation runs RUNS times (default 3), round robin, and
# the table (and its CSV) shows the median run and the ifunc/AM ratio; -v
# also prints every run as CSV.
#
#     examples/kv/run.sh [-c CLIENTS] [-n OPS] [-r RUNS] [-t "TLS ..."] [-v]
#                        [BUILD_DIR]
#     examples/kv/run.sh --check [BUILD_DIR]
#
# Defaults: 4 clients, 100 000 operations of each kind per client,
# -t "sm,tcp tcp". --check: 2 clients, 2 000 operations, one run, for
# contrib/test.sh (a few seconds); fails if any check fails. BUILD_DIR
# defaults to build/ of the source tree.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)

clients=4
ops=100000
runs=3
tls_list="sm,tcp tcp"
verbose=0
build=
usage="usage: $0 [--check] [-c CLIENTS] [-n OPS] [-r RUNS] [-t \"TLS ...\"] [-v] [BUILD_DIR]"
while [ $# -gt 0 ]; do
    case $1 in
    --check) clients=2; ops=2000; runs=1 ;;
    -c) clients=$2; shift ;;
    -n) ops=$2; shift ;;
    -r) runs=$2; shift ;;
    -t) tls_list=$2; shift ;;
    -v) verbose=1 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) build=$1 ;;
    esac
    shift
done
build=$(cd "${build:-$top/build}" && pwd)
dir=$build/examples/kv
for f in kv_ifunc_target kv_ifunc_client kv_am_target kv_am_client kv.so; do
    if [ ! -e "$dir/$f" ]; then
        echo "kv: $dir/$f missing; run make in $build" >&2
        exit 1
    fi
done

# One CPU for the target, the next for the clients, where there are two.
mapfile -t cpus < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
    awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }')
target_cpu=${cpus[0]}
client_cpu=${cpus[1]:-${cpus[0]}}
echo "kv: 1 target on CPU $target_cpu, $clients clients on CPU $client_cpu," \
    "$ops operations of each kind per client;" \
    "$(lscpu | sed -n 's/^Model name: *//p'), load average" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run IMPL TLS: one run; appends "op rate" lines to $work/rates. The ifunc
# target has no kv.so: the code comes from the clients, signed with the
# example's key, which both sides trust (the clients run the answers).
run() {
    local impl=$1 tls=$2 port= target status=0 i pids=() env=(UCX_TLS="$tls")
    if [ "$impl" = ifunc ]; then
        env+=(UCX_IFUNC_TRUST=signed UCX_IFUNC_TRUSTED_KEYS="$dir/demo.pub")
    fi
    env "${env[@]}" timeout 300 taskset -c "$target_cpu" \
        "$dir/kv_${impl}_target" -c "$clients" >"$work/target" 2>&1 &
    target=$!
    for _ in $(seq 300); do
        port=$(sed -n 's/.* listening on port \([0-9]*\)$/\1/p' "$work/target" 2>/dev/null)
        if [ -n "$port" ] || ! kill -0 "$target" 2>/dev/null; then
            break
        fi
        sleep 0.1
    done
    if [ -z "$port" ]; then
        echo "kv: $impl over $tls: the target did not listen:" >&2
        kill "$target" 2>/dev/null || true
        cat "$work/target" >&2
        return 1
    fi
    for ((i = 0; i < clients; i++)); do
        env "${env[@]}" ${env[1]:+UCX_IFUNC_LIB_DIR="$dir"} timeout 300 \
            taskset -c "$client_cpu" "$dir/kv_${impl}_client" -c "$clients" \
            -i "$i" -n "$ops" "localhost:$port" >"$work/client$i" 2>&1 &
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        wait "$i" || status=1
    done
    if [ $status -ne 0 ]; then # a client that failed may not have said done
        sleep 1
        kill "$target" 2>/dev/null || true
    fi
    wait "$target" || status=1
    if [ $status -ne 0 ]; then
        echo "kv: $impl over $tls failed:" >&2
        cat "$work/target" "$work"/client* >&2
        return 1
    fi
    # "NAME client I: OP N ops S s R ops/s from START to END": all the
    # clients' operations over the first start to the last end.
    cat "$work"/client* | awk '$4 ~ /^(incr|put|get)$/ {
            n[$4] += $5
            if (!($4 in a) || $12 < a[$4]) a[$4] = $12
            if ($14 > b[$4]) b[$4] = $14 }
        END { for (op in n) printf "%s %.0f\n", op, n[op] / (b[op] - a[op]) }'
    rm -f "$work"/client*
}

status=0
for tls in $tls_list; do
    for ((r = 1; r <= runs; r++)); do
        for impl in ifunc am; do
            if ! run "$impl" "$tls" >"$work/rates"; then
                status=1
                continue
            fi
            while read -r op rate; do
                echo "$tls $impl $op $r $rate" >>"$work/all"
                if [ $verbose -eq 1 ]; then
                    echo "csv-run,\"$tls\",$impl,$op,$r,$rate"
                fi
            done <"$work/rates"
        done
    done
done
[ -f "$work/all" ] || exit 1

# The median run of each implementation, operation and UCX_TLS.
median() {
    awk -v t="$1" -v i="$2" -v o="$3" '$1 == t && $2 == i && $3 == o { print $5 }' \
        "$work/all" | sort -n | awk '{ v[NR] = $1 }
        END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
printf "%-8s %-5s %14s %14s %9s\n" UCX_TLS op "ifunc ops/s" "am ops/s" ifunc/am
csv="csv,UCX_TLS,op,ifunc_ops_per_s,am_ops_per_s,ifunc_over_am"
for tls in $tls_list; do
    for op in incr put get; do
        a=$(median "$tls" ifunc "$op")
        b=$(median "$tls" am "$op")
        ratio=$(awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
        printf "%-8s %-5s %14.0f %14.0f %9s\n" "$tls" "$op" "${a:-0}" "${b:-0}" "$ratio"
        csv+=$'\n'"csv,\"$tls\",$op,${a:-0},${b:-0},$ratio"
    done
done
echo "$csv"
exit $status
