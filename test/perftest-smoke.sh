#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Smoke test of ucx_ifunc_perftest: every test runs over shared memory and
# TCP, and the output is well formed. It checks the harness, not speed: no
# number is compared with a threshold other than "was measured".
# "make check" sets IFUNC_TEST_PERFTEST and IFUNC_TEST_PERFTEST_LIBDIR.
set -euo pipefail
perftest=${IFUNC_TEST_PERFTEST:?}
libdir=${IFUNC_TEST_PERFTEST_LIBDIR:?}
header="test,payload_size,frame_size,iterations,lat_median_us,lat_avg_us,msg_rate,bandwidth_MBps"
# Pinned when there are two CPUs: two busy-polling processes sharing one CPU
# take a scheduler tick per message.
pin=
[ "$(nproc)" -ge 2 ] && pin="-c 0,1"

for tls in sm tcp; do
    csv=$(UCX_TLS=$tls timeout 300 "$perftest" -l -p 0 $pin -t all -s 1,4K,64K \
          -n 40 -w 4 -v -L "$libdir")
    echo "$csv"
    # The exact header, then one row per test and size, each complete.
    awk -F, -v header="$header" -v tls="$tls" '
        NR == 1 { if ($0 != header) { print tls ": bad header: " $0; bad = 1 }; next }
        {
            rows++
            latency = ($1 ~ /_lat$/)
            if (NF != 8 || $4 != 40 || $3 < $2 ||
                (latency && !($5 > 0 && $6 > 0)) ||
                (!latency && !($7 > 0))) {
                print tls ": bad row: " $0; bad = 1
            }
            seen[$1 "/" $2] = 1
        }
        END {
            split("ifunc_lat ifunc_bw am_lat am_bw put_lat put_bw", tests, " ")
            split("1 4096 65536", sizes, " ")
            for (t in tests) for (s in sizes) if (!((tests[t] "/" sizes[s]) in seen)) {
                print tls ": missing " tests[t] " " sizes[s]; bad = 1
            }
            if (rows != 18) { print tls ": " rows " rows, expected 18"; bad = 1 }
            exit bad
        }' <<<"$csv"
done

# The table form, and a clear error for a bad option.
UCX_TLS=sm "$perftest" -l -p 0 $pin -t put_lat -s 8 -n 10 -f -L "$libdir" | grep -q '| put_lat '
if "$perftest" -t no_such_test 2>/dev/null; then
    echo "an unknown test was accepted"; exit 1
fi
echo "perftest-smoke: OK"
