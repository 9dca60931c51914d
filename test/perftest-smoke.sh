#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Smoke test of ucx_ifunc_perftest: the ifunc (channel), AM and put tests
# run over shared memory and TCP, the other ifunc tests (ifunc_full,
# ifunc_am, bigcode) with one size over shared memory, the default path's
# over both, long AM streams over TCP, and the output is
# well formed. It checks the harness, not speed: no number is compared with
# a threshold other than "was measured".
# "make check" sets IFUNC_TEST_PERFTEST and IFUNC_TEST_PERFTEST_LIBDIR.
set -euo pipefail
perftest=${IFUNC_TEST_PERFTEST:?}
libdir=${IFUNC_TEST_PERFTEST_LIBDIR:?}
header="test,payload_size,frame_size,iterations,lat_median_us,lat_avg_us,msg_rate,bandwidth_MBps"
# Pinned when there are two CPUs: two busy-polling processes sharing one CPU
# take a scheduler tick per message.
pin=
[ "$(nproc)" -ge 2 ] && pin="-c 0,1"

# check_csv NAME TESTS SIZES [ITERATIONS]: the CSV on stdin has the exact
# header, then one complete row of ITERATIONS (default 40) for each of TESTS
# (space-separated) and SIZES, and no other.
check_csv() {
    awk -F, -v header="$header" -v name="$1" -v tests="$2" -v sizes="$3" \
        -v iterations="${4:-40}" '
        NR == 1 { if ($0 != header) { print name ": bad header: " $0; bad = 1 }; next }
        {
            rows++
            latency = ($1 ~ /_lat$/)
            if (NF != 8 || $4 != iterations || $3 < $2 ||
                (latency && !($5 > 0 && $6 > 0)) ||
                (!latency && !($7 > 0))) {
                print name ": bad row: " $0; bad = 1
            }
            seen[$1 "/" $2] = 1
        }
        END {
            n_tests = split(tests, t, " ")
            n_sizes = split(sizes, s, " ")
            for (i = 1; i <= n_tests; i++) for (j = 1; j <= n_sizes; j++) {
                if (!((t[i] "/" s[j]) in seen)) {
                    print name ": missing " t[i] " " s[j]; bad = 1
                }
            }
            if (rows != n_tests * n_sizes) {
                print name ": " rows " rows, expected " n_tests * n_sizes; bad = 1
            }
            exit bad
        }'
}

tests="ifunc_lat ifunc_bw am_lat am_bw put_lat put_bw"
for tls in sm tcp; do
    csv=$(UCX_TLS=$tls timeout 300 "$perftest" -l -p 0 $pin -t "${tests// /,}" \
          -s 1,4K,64K -n 40 -w 4 -v -L "$libdir")
    echo "$csv"
    check_csv "$tls" "$tests" "1 4096 65536" <<<"$csv"
done

# The other ifunc paths, one size over shared memory. The big ifunc must
# carry at least 16 KiB of code in every message of its _full test, and none
# once the channel sends it by reference.
tests="ifunc_full_lat ifunc_full_bw ifunc_am_lat ifunc_am_bw ifunc_bigcode_lat ifunc_bigcode_full_lat"
csv=$(UCX_TLS=sm timeout 300 "$perftest" -l -p 0 $pin -t "${tests// /,}" \
      -s 4K -n 40 -w 4 -v -L "$libdir")
echo "$csv"
check_csv "sm, more ifunc paths" "$tests" 4096 <<<"$csv"
awk -F, '
    $1 == "ifunc_bigcode_full_lat" && $3 - $2 < 16384 { print "bigcode: only " $3 - $2 " bytes besides the payload: " $0; bad = 1 }
    $1 == "ifunc_bigcode_lat" && $3 - $2 >= 16384 { print "bigcode: the code in a code-once message: " $0; bad = 1 }
    END { exit bad }' <<<"$csv"

# The default path (peers), as an application gets it: over shared memory
# (with tcp, which connecting by address needs) and over TCP.
tests="ifunc_auto_lat ifunc_auto_bw"
for tls in sm,tcp tcp; do
    csv=$(UCX_TLS=$tls timeout 300 "$perftest" -l -p 0 $pin -t "${tests// /,}" \
          -s 8,64K -n 40 -w 4 -v -L "$libdir")
    echo "$csv"
    check_csv "$tls, default path" "$tests" "8 65536" <<<"$csv"
done

# Long streams by active message, with the senders' windows: every message
# must run (the test ends only when all did).
tests="ifunc_am_bw ifunc_auto_bw"
csv=$(UCX_TLS=tcp timeout 300 "$perftest" -l -p 0 $pin -t "${tests// /,}" \
      -s 8K -n 40000 -w 4 -v -L "$libdir")
echo "$csv"
check_csv "tcp, long streams" "$tests" 8192 40000 <<<"$csv"

# The table form, and a clear error for a bad option.
UCX_TLS=sm "$perftest" -l -p 0 $pin -t put_lat -s 8 -n 10 -f -L "$libdir" | grep -q '| put_lat '
if "$perftest" -t no_such_test 2>/dev/null; then
    echo "an unknown test was accepted"; exit 1
fi
echo "perftest-smoke: OK"
