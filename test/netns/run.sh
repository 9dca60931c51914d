#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Faults across a real network stack: a target and its sources in two
# network namespaces joined by a veth pair, over UCX_TLS=tcp, on each
# delivery path (raw puts into slots, channels, active messages):
#
#   loss   nftables drops 2% of the TCP packets in both directions of the
#          source's namespace while stress runs stream random payloads;
#   link   the veth link goes down for LINK_DOWN seconds and up again in
#          the middle of stress runs;
#   kill   sources die (SIGKILL) in the middle of a 1 MiB frame, again and
#          again; then a new source's messages must all run.
#
# The target checks every message's checksum and counts its runs: a
# message runs whole and once, or not at all, and every message the source
# was told completed runs. The target must survive every source's death.
# The loss and link scenarios run the paths side by side (they wait on TCP
# retransmissions, not on the CPUs); the kills one path after the other.
#
# UCX (1.13 of Debian 12, and 1.18.1) aborts a target whose source dies at
# the wrong moment in two ways (README, "Known UCX issues"): a wireup reply
# to the dead source (UCX 1.13 only; avoided here by connecting through a
# UCP listener of the target) and the acknowledgement of a put that UCX
# emulates with active messages over TCP (raw and channel paths; no
# configuration avoids it). Aborts on the put paths are therefore counted
# and reported as that known issue; on the AM path they fail the test. Corrupt, duplicate or missing messages fail on every path.
#
#   test/netns/run.sh [BUILD_DIR]      (root; BUILD_DIR defaults to build/)
#
# Where network namespaces cannot be created (not root, no iproute2, a
# container without CAP_NET_ADMIN), prints a SKIP line and succeeds.
#
# Environment: NETNS_LOSS_COUNT (messages per path in the loss scenario,
# default 1200; 3400 gives the 10 200 messages of the issue's figure, in
# about 2 minutes), NETNS_LOSS_MAX_SIZE (largest payload there, default 4096),
# NETNS_KILLS (source deaths per path, default 20), NETNS_PATHS (default
# "raw channel am"), NETNS_SCENARIOS (default "loss link kill"), LINK_DOWN
# (seconds, default 1.5), NETNS_CONN (how sources connect: "listener", the
# default, through a UCP listener of the target, or "address", to the
# target's worker address).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
bin=$build/test/netns/ifunc_netns_stress
libdir=$build/test/ifuncs/lib
loss_count=${NETNS_LOSS_COUNT:-1200}
loss_max_size=${NETNS_LOSS_MAX_SIZE:-4096}
kills=${NETNS_KILLS:-20}
paths=${NETNS_PATHS:-raw channel am}
scenarios=${NETNS_SCENARIOS:-loss link kill}
link_down=${LINK_DOWN:-1.5}
conn=${NETNS_CONN:-listener}

skip() {
    echo "network faults: SKIP: $*"
    exit 0
}

[ -x "$bin" ] || { echo "network faults: $bin not built" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces"
command -v ip >/dev/null || skip "no ip (iproute2)"

ns_target=ifunc-t-$$
ns_source=ifunc-s-$$
ip netns add "$ns_target" 2>/dev/null ||
    skip "cannot create network namespaces (ip netns add failed)"

work=$(mktemp -d /tmp/ifunc-netns-XXXXXX)
cleanup() {
    local ns
    for ns in "$ns_source" "$ns_target"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    done
    ip netns exec "$ns_source" nft delete table inet ifunc_faults \
        2>/dev/null || true
    ip netns del "$ns_source" 2>/dev/null || true
    ip netns del "$ns_target" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Two hosts: 10.231.0.1 (target) and 10.231.0.2 (sources), veth ifn0 each.
target_ip=10.231.0.1
ip netns add "$ns_source"
ip link add ifn0 netns "$ns_target" type veth peer name ifn0 \
    netns "$ns_source"
ip -n "$ns_target" addr add "$target_ip/24" dev ifn0
ip -n "$ns_source" addr add 10.231.0.2/24 dev ifn0
for ns in "$ns_target" "$ns_source"; do
    ip -n "$ns" link set lo up
    ip -n "$ns" link set ifn0 up
done
# wait_link_up: until both ends have carrier (UCX ignores a device that is
# up but not yet running), 5 s at most.
wait_link_up() {
    local ns tries
    for ns in "$ns_target" "$ns_source"; do
        for tries in $(seq 50); do
            ip -n "$ns" link show ifn0 | grep -q "LOWER_UP" && break
            sleep 0.1
        done
    done
}
wait_link_up

# UCX over the veth only: its loopback is another host's.
export UCX_TLS=tcp UCX_NET_DEVICES=ifn0 UCX_IFUNC_LIB_DIR=$libdir
# No core files from a target that aborts: it is counted, not debugged.
ulimit -c 0

failures=()
known=()
port=17300

in_target() { ip netns exec "$ns_target" "$@"; }
in_source() { ip netns exec "$ns_source" "$@"; }

fail() {
    echo "network faults: FAILED: $*"
    failures+=("$*")
}

# start_target PATH LOG [target options]: a target in the background, on a
# new port; sets target_pid and target_port.
start_target() {
    local path=$1 log=$2
    shift 2
    port=$((port + 1))
    target_port=$port
    in_target "$bin" target --port "$port" --path "$path" --conn "$conn" \
        "$@" >>"$log" 2>&1 &
    target_pid=$!
    sleep 0.3
}

# source_run PORT [source options]: one source; its summary on stdout.
source_run() {
    local to=$1
    shift
    in_source "$bin" source --host "$target_ip" --port "$to" "$@"
}

# stream SCENARIO [source options]: one target and one source per path,
# side by side, in the background; wait_streams SCENARIO collects them.
stream_pids=()
stream() {
    local scenario=$1 path
    shift
    stream_pids=()
    for path in $paths; do
        start_target "$path" "$work/$scenario-$path.log" --sessions 1 \
            --slot-size 98304
        source_run "$target_port" "$@" >"$work/$scenario-$path.out" 2>&1 &
        stream_pids+=("$target_pid" $!)
    done
}

wait_streams() {
    local scenario=$1 path i=0 target source
    for path in $paths; do
        target=${stream_pids[$i]}
        source=${stream_pids[$((i + 1))]}
        i=$((i + 2))
        wait "$source" ||
            fail "$scenario $path: $(tail -n 3 "$work/$scenario-$path.out")"
        wait "$target" || fail "$scenario $path: target exit status $?"
        echo "$scenario $path: $(tail -n 1 "$work/$scenario-$path.out")"
    done
}

# loss: stress runs with 2% of the TCP packets dropped each way.
scenario_loss() {
    if ! in_source nft -f - <<'RULES'; then
table inet ifunc_faults {
    chain input {
        type filter hook input priority 0;
        meta l4proto tcp numgen random mod 100 < 2 counter drop
    }
    chain output {
        type filter hook output priority 0;
        meta l4proto tcp numgen random mod 100 < 2 counter drop
    }
}
RULES
        echo "network faults: loss: SKIP: nftables rules not available"
        return 0
    fi
    stream loss --count "$loss_count" --max-size "$loss_max_size" --seed 7
    wait_streams loss
    local drops
    drops=$(in_source nft list table inet ifunc_faults |
        awk '/counter packets/ { for (i = 1; i < NF; i++)
             if ($i == "packets") n += $(i + 1) } END { print n + 0 }')
    in_source nft delete table inet ifunc_faults
    echo "loss: $drops TCP packets dropped"
}

# link: the link goes down for LINK_DOWN seconds during stress runs.
scenario_link() {
    stream link --count 1000000 --max-size 16384 --seed 11 --seconds 6
    sleep 2
    in_source ip link set ifn0 down
    sleep "$link_down"
    in_source ip link set ifn0 up
    wait_link_up
    wait_streams link
}

# kill PATH: sources die in the middle of a 1 MiB frame, KILLS times; the
# target must survive each, then serve a new source.
kill_path() {
    local path=$1 log=$work/kill-$1.log aborts=0 i out bad
    start_target "$path" "$log"
    for i in $(seq 1 "$kills"); do
        if ! kill -0 "$target_pid" 2>/dev/null; then
            aborts=$((aborts + 1))
            wait "$target_pid" 2>/dev/null || true
            start_target "$path" "$log"
        fi
        # Dies 0.2 to 3 ms after posting its 1st to 4th 1 MiB message.
        # A target that aborted after the check is found at the next one.
        source_run "$target_port" --connect-timeout 3 --count 8 \
            --min-size 1048576 --max-size 1048576 --seed "$i" \
            --die-after $((RANDOM % 4)) \
            --die-delay-us $((200 + RANDOM % 2800)) >/dev/null 2>&1 || true
    done
    sleep 0.5
    if ! kill -0 "$target_pid" 2>/dev/null; then
        aborts=$((aborts + 1))
        wait "$target_pid" 2>/dev/null || true
        start_target "$path" "$log"
    fi
    out=$(source_run "$target_port" --count 200 --max-size 65536 \
        --seed 99 2>&1) || fail "kill $path: the source after the kills: $out"
    kill "$target_pid" 2>/dev/null || true
    wait "$target_pid" 2>/dev/null || true
    bad=$(grep '^session' "$log" |
        grep -v 'corrupt 0, duplicate 0, missing 0' || true)
    [ -z "$bad" ] || fail "kill $path: $bad"
    echo "kill $path: $kills sources killed mid-frame; target aborts:" \
        "$aborts; $(grep -c 'ran [1-9]' "$log" || true) sessions ran" \
        "messages; corrupt, duplicate or missing: $(grep -c '^session' \
            <<<"$bad" || true) sessions"
    echo "kill $path: new source: $(echo "$out" | tail -n 1)"
    grep -h -m 3 -E 'Fatal|Assertion' "$log" |
        sed "s/^/kill $path: target: /" || true
    if [ "$aborts" -gt 0 ] && [ "$path" = am ]; then
        fail "kill $path: the target aborted $aborts times in $kills kills"
    elif [ "$aborts" -gt 0 ]; then
        known+=("kill $path: $aborts aborts in $kills kills")
    fi
}

scenario_kill() {
    local path
    for path in $paths; do
        kill_path "$path"
    done
}

start=$(date +%s)
for scenario in $scenarios; do
    "scenario_$scenario"
done
for line in "${known[@]}"; do
    echo "network faults: KNOWN UCX ISSUE (put paths over TCP):" \
        "$line (README, Known UCX issues)"
done
echo "network faults: ${#failures[@]} failures in $(($(date +%s) - start)) s"
[ ${#failures[@]} -eq 0 ]
