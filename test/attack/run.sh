#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# What UCX's own wire code lets a network peer without a key do: runs each
# probe of test/attack/ucx_wire_probe against a fresh
# test/attack/am_only_target (a UCP context with UCP_FEATURE_AM only) and
# prints one line per finding: whether the target survived (or the signal
# that killed it), whether its canary changed, its resident memory before
# and after (and the peak), and UCX's last words when it died.
# docs/security.md ("What UCX itself lets a network peer do") and
# docs/known-issues.md hold the measured results.
#
# It documents UCX's behaviour; it is not a test of ucx-ifunc and exits 0
# whatever the targets do (2 on a usage error, 1 when the programs are
# missing). It is safe to run: everything stays on 127.0.0.1 (the probe
# takes only ports, and the target's UCX is held to the loopback device
# with UCX_NET_DEVICES=lo), each probe runs under a time limit, no core
# files are written, and the eager case sends 3 x 64 MiB unless told more
# (at most 8 peers of 512 MiB).
#
#     test/attack/run.sh [--bindir DIR] [--eager-peers N] [--eager-mib N]
#                        [PROBE...]
#
# PROBE: put put-unmapped ats rtr am-middle eager am-first-ep
# put-before-conn long-frame sockaddr-v6 (default: all, in that order;
# docs/security.md says what each sends). DIR: where the two programs
# are (default: build/test/attack, what contrib/build.sh makes).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bindir=$top/build/test/attack
eager_peers=3
eager_mib=64
all_probes=(put put-unmapped ats rtr am-middle eager am-first-ep
            put-before-conn long-frame sockaddr-v6)
probes=()

usage() {
    sed -n 's/^#     //p' "$0" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
    --bindir) [ $# -ge 2 ] || usage; bindir=$2; shift 2 ;;
    --eager-peers) [ $# -ge 2 ] || usage; eager_peers=$2; shift 2 ;;
    --eager-mib) [ $# -ge 2 ] || usage; eager_mib=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) usage ;;
    *)
        case " ${all_probes[*]} " in
        *" $1 "*) probes+=("$1") ;;
        *) echo "run.sh: no probe '$1' (${all_probes[*]})" >&2; exit 2 ;;
        esac
        shift ;;
    esac
done
[ ${#probes[@]} -gt 0 ] || probes=("${all_probes[@]}")
if ! [[ $eager_peers =~ ^[1-8]$ ]] || ! [[ $eager_mib =~ ^[0-9]+$ ]] ||
   [ "$eager_mib" -lt 1 ] || [ "$eager_mib" -gt 512 ]; then
    echo "run.sh: --eager-peers 1-8, --eager-mib 1-512" >&2
    exit 2
fi
probe_bin=$bindir/ucx_wire_probe
target_bin=$bindir/am_only_target
for program in "$probe_bin" "$target_bin"; do
    if [ ! -x "$program" ]; then
        echo "run.sh: $program is missing: build first (contrib/build.sh)," \
             "or give --bindir" >&2
        exit 1
    fi
done

work=$(mktemp -d)
target_pid=
keeper_pid=
cleanup() {
    [ -n "$target_pid" ] && kill -KILL "$target_pid" 2>/dev/null
    [ -n "$keeper_pid" ] && wait "$keeper_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
ulimit -c 0

# A /proc/PID/status field of the target, in MiB with one decimal.
target_mib() {
    awk -v field="$1:" '$1 == field {printf "%.1f", $2 / 1024}' \
        "/proc/$target_pid/status" 2>/dev/null
}

# Starts a target under a keeper subshell that records how it ended in
# target.rc (and keeps the shell's own "Segmentation fault" notes out of
# the output); sets target_pid, iface_port, listen_port, canary,
# canary_value, heap. 1 if it did not come up.
start_target() {
    local i
    rm -f "$work/target.pid" "$work/target.rc"
    : >"$work/target.out"
    (
        UCX_NET_DEVICES=lo "$target_bin" >"$work/target.out" \
            2>"$work/target.err" &
        echo $! >"$work/target.pid"
        wait $!
        echo $? >"$work/target.rc"
    ) 2>/dev/null &
    keeper_pid=$!
    for ((i = 0; i < 100; i++)); do
        [ -s "$work/target.pid" ] && break
        sleep 0.1
    done
    target_pid=$(cat "$work/target.pid" 2>/dev/null)
    for ((i = 0; i < 100; i++)); do
        grep -q '^ready$' "$work/target.out" && break
        [ -e "$work/target.rc" ] && break
        sleep 0.1
    done
    iface_port=$(awk -F: '/^iface /{print $2; exit}' "$work/target.out")
    listen_port=$(awk -F: '/^listener /{print $2; exit}' "$work/target.out")
    canary=$(awk '/^canary /{print $2; exit}' "$work/target.out")
    canary_value=$(awk '/^canary /{print $3; exit}' "$work/target.out")
    heap=$(awk '/^heap /{print $2; exit}' "$work/target.out")
    [ -n "$iface_port" ] && [ -n "$listen_port" ] && [ -n "$canary" ]
}

# Waits up to seconds/10 for the target to end; 0 if it did.
target_ended() {
    local i
    for ((i = 0; i < $1; i++)); do
        [ -s "$work/target.rc" ] && return 0
        sleep 0.1
    done
    return 1
}

stop_target() {
    if [ -n "$target_pid" ]; then
        kill -TERM "$target_pid" 2>/dev/null
        target_ended 50 || kill -KILL "$target_pid" 2>/dev/null
    fi
    wait "$keeper_pid" 2>/dev/null
    target_pid=
    keeper_pid=
}

run_probe() {
    local name=$1 limit=60 args rss_before outcome memory changed last rc
    local at_abort
    if ! start_target; then
        printf '%-16s target did not start: %s\n' "$name" \
            "$(head -c 200 "$work/target.err")"
        stop_target
        return
    fi
    rss_before=$(target_mib VmRSS)
    case $name in
    put) args=(put "$iface_port" "$canary") ;;
    put-unmapped) args=(put "$iface_port" 0x100000000000) ;;
    put-before-conn) args=(put-before-conn "$iface_port" "$canary") ;;
    am-middle) args=(am-middle "$iface_port" "$listen_port") ;;
    sockaddr-v6) args=(sockaddr-v6 "$listen_port") ;;
    eager)
        args=(eager "$listen_port" "$eager_peers" "$eager_mib")
        limit=300 ;;
    *) args=("$name" "$iface_port") ;;
    esac
    timeout "$limit" "$probe_bin" "${args[@]}" >"$work/probe.out" 2>&1
    sleep 1

    changed=$(sed -n 's/^canary changed /changed /p' "$work/target.out" |
              head -n 1)
    if target_ended 50; then
        rc=$(cat "$work/target.rc")
        stop_target
        # A write just before an abort: the target's last words.
        at_abort=$(sed -n 's/^canary at abort //p' "$work/target.err")
        if [ -z "$changed" ] && [ -n "$at_abort" ] &&
           [ "$at_abort" != "$canary_value" ]; then
            changed="changed $canary_value -> $at_abort (seen at abort)"
        fi
        if [ "$rc" -gt 128 ]; then
            outcome="dead (SIG$(kill -l $((rc - 128))))"
        else
            outcome="dead (exit $rc)"
        fi
        memory="RSS before ${rss_before} MiB"
        last=$(grep -m 1 -E 'Assertion|Caught signal' "$work/target.err" |
               sed 's/^\[[^]]*\] *//' | cut -c 1-200)
        [ "$name" = am-middle ] && last+=" (heap top at start: $heap)"
    else
        outcome=alive
        memory="RSS ${rss_before} -> $(target_mib VmRSS) MiB,"
        memory+=" peak $(target_mib VmHWM) MiB"
        last="AM messages handled: $(grep -c '^am ' "$work/target.out")"
        stop_target
    fi
    printf '%-16s target %s, canary %s, %s | %s\n' "$name" "$outcome" \
        "${changed:-unchanged}" "$memory" "$last"
}

echo "UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p'),"\
     "target UCX_TLS=${UCX_TLS:-default} UCX_NET_DEVICES=lo;"\
     "eager: $eager_peers x $eager_mib MiB"
for probe in "${probes[@]}"; do
    run_probe "$probe"
done
exit 0
