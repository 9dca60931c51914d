#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The full comparison: ifunc (over a channel, code sent once; into a buffer
# with the code in every message, ifunc_full; by active message, ifunc_am;
# and a big ifunc with and without code once, bigcode) against UCP active
# messages and plain puts, latency and message rate, 1 B to 1 MiB, over
# shared memory and TCP, both processes pinned (server on CPU 0, client on
# CPU 1). Writes, into OUTDIR (default: bench-report/):
#   sm.csv, tcp.csv          ucx_ifunc_perftest output (every test)
#   ratios-sm.csv, ...       ifunc/AM and ifunc/put per size, and what
#                            sending the code once changes
#   latency-*.png, rate-*.png, ratio-*.png
#   latency-bigcode-*.png    the big ifunc, code once against every time
#   calibration.txt          UCX's own ucx_perftest on the same setup
#   machine.txt, summary.md (tables, and the targets of the fast path
#                            checked by contrib/bench_targets.py)
#
#     contrib/bench_report.sh [OUTDIR]
#     contrib/bench_report.sh --replot OUTDIR   (plots and summary again
#                                                from the CSV files there)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
replot=
if [ "${1:-}" = --replot ]; then
    replot=1
    shift
fi
out=$(mkdir -p "${1:-$top/bench-report}" && cd "${1:-$top/bench-report}" && pwd)

measure() {
"$top/contrib/install-deps.sh"
"$top/contrib/build.sh" >/dev/null 2>&1 || "$top/contrib/build.sh"
build=$top/build
perftest="$build/tools/ucx_ifunc_perftest -l -p 0 -c 0,1 -t all -L $build/tools/perftest"

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
    echo "kernel: $(uname -r)"
    echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
    echo "ucx: $(ucx_info -v | sed -n 's/^# Version //p')"
    echo "commit: $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$out/machine.txt"
cat "$out/machine.txt"

echo "bench_report: shared memory, 1 B - 1 MiB"
UCX_TLS=sm $perftest -s 1:1M -v >"$out/sm.csv"
echo "bench_report: TCP, 1 B - 1 MiB (fewer iterations: TCP is ~100x slower)"
UCX_TLS=tcp $perftest -s 1:1M -n 2000 -w 200 -v >"$out/tcp.csv"

echo "bench_report: UCX's own ucx_perftest against this harness, back to back"
# The machine's speed drifts within minutes, so each ucx_perftest point is
# paired with the same test of ucx_ifunc_perftest run right after it.
: >"$out/calibration.txt"
port=$(( 20000 + RANDOM % 20000 ))
for tls in sm tcp; do
    for test in am_lat put_lat; do
        for size in 8 1048576; do
            UCX_TLS=$tls ucx_perftest -t ucp_$test -c 0 -s $size -n 1000 -p $port >/dev/null 2>&1 &
            sleep 0.5
            theirs=$(UCX_TLS=$tls ucx_perftest localhost -t ucp_$test -c 1 -s $size -n 1000 -p $port 2>&1 |
                     awk '/Final:/ {print $3}')
            wait || true
            ours=$(UCX_TLS=$tls $perftest -t $test -s $size -n 1000 -v | awk -F, 'NR == 2 {print $5}')
            echo "$tls $test $size B: ucx_perftest $theirs us, ucx_ifunc_perftest $ours us (medians)" \
                >>"$out/calibration.txt"
        done
    done
done
cat "$out/calibration.txt"
}

[ -n "$replot" ] || measure

# Reads a perftest CSV into lat[test, size] (median), rate[test, size] and
# the sizes in order (the CSV lists them ascending for every test). ratio()
# and num() leave a cell empty where a test is missing (one the transport
# could not run is skipped, and the plots leave a gap).
collect='NR > 1 {
    if ($1 ~ /_lat$/) lat[$1, $2] = $5; else rate[$1, $2] = $7
    if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 }
}
function ratio(a, b, format) { return (a > 0 && b > 0) ? sprintf(format ? format : "%.3f", a / b) : "" }
function num(v, format) { return (v > 0) ? sprintf(format, v) : "" }'

# ratios-TLS.csv: size; ifunc (channel)/AM latency and rate, ifunc/put
# latency and rate (the columns of 0.1.0); then code once against the code
# in every message (ifunc/ifunc_full, bigcode/bigcode_full latency, ifunc/
# ifunc_full rate) and ifunc_am/AM latency and rate. Medians for latency.
for tls in sm tcp; do
    awk -F, "$collect"'
        END {
            print "payload_size,lat_ifunc_over_am,rate_ifunc_over_am,lat_ifunc_over_put,rate_ifunc_over_put," \
                  "lat_ifunc_over_ifunc_full,rate_ifunc_over_ifunc_full,lat_bigcode_over_bigcode_full," \
                  "lat_ifunc_am_over_am,rate_ifunc_am_over_am"
            for (i = 1; i <= n; i++) {
                s = order[i]
                print s "," \
                      ratio(lat["ifunc_lat", s], lat["am_lat", s]) "," \
                      ratio(rate["ifunc_bw", s], rate["am_bw", s]) "," \
                      ratio(lat["ifunc_lat", s], lat["put_lat", s]) "," \
                      ratio(rate["ifunc_bw", s], rate["put_bw", s]) "," \
                      ratio(lat["ifunc_lat", s], lat["ifunc_full_lat", s]) "," \
                      ratio(rate["ifunc_bw", s], rate["ifunc_full_bw", s]) "," \
                      ratio(lat["ifunc_bigcode_lat", s], lat["ifunc_bigcode_full_lat", s]) "," \
                      ratio(lat["ifunc_am_lat", s], lat["am_lat", s]) "," \
                      ratio(rate["ifunc_am_bw", s], rate["am_bw", s])
            }
        }' "$out/$tls.csv" >"$out/ratios-$tls.csv"
done

# A gnuplot "plot" of column $3 against payload size for the mechanisms'
# tests *_$2 in CSV file $1.
plot_mechanisms() {
    local csv=$1 kind=$2 column=$3
    echo "plot \"$csv\" using (select(\"ifunc_$kind\") ? \$2 : 1/0):$column with linespoints title \"ifunc (channel, code once)\", \\"
    echo "     \"\" using (select(\"ifunc_full_$kind\") ? \$2 : 1/0):$column with linespoints title \"ifunc (code in every message)\", \\"
    echo "     \"\" using (select(\"ifunc_am_$kind\") ? \$2 : 1/0):$column with linespoints title \"ifunc by active message\", \\"
    echo "     \"\" using (select(\"am_$kind\") ? \$2 : 1/0):$column with linespoints title \"active message\", \\"
    echo "     \"\" using (select(\"put_$kind\") ? \$2 : 1/0):$column with linespoints title \"put + flag (floor)\""
}

for tls in sm tcp; do
    name=$( [ $tls = sm ] && echo "shared memory" || echo "TCP" )
    gnuplot <<GNUPLOT
set datafile separator ","
set terminal pngcairo size 900,560 font ",11"
set logscale x 2
set xtics ("1" 1, "8" 8, "64" 64, "512" 512, "4K" 4096, "32K" 32768, "256K" 262144, "1M" 1048576)
set xlabel "payload size (bytes)"
set grid
set key top left
select(t) = (strcol(1) eq t)

set output "$out/latency-$tls.png"
set title "One-way latency over $name (median, lower is better)"
set logscale y
set ylabel "microseconds"
$(plot_mechanisms "$out/$tls.csv" lat 5)

set output "$out/rate-$tls.png"
set title "Message rate over $name (higher is better)"
set ylabel "messages per second"
set key top right
$(plot_mechanisms "$out/$tls.csv" bw 7)

set output "$out/ratio-$tls.png"
set title "ifunc / active message over $name"
set ylabel "ratio"
set key top right
set yrange [*:*]
plot "$out/ratios-$tls.csv" using 1:2 every ::1 with linespoints title "latency (below 1: ifunc faster)", \
     "" using 1:3 every ::1 with linespoints title "message rate (above 1: ifunc faster)", \
     1 with lines dashtype 2 linecolor "black" title ""

set output "$out/latency-bigcode-$tls.png"
set title "Code once against code in every message over $name (median latency)"
set logscale y
set ylabel "microseconds"
set key top left
set yrange [*:*]
plot "$out/$tls.csv" using (select("ifunc_bigcode_lat") ? \$2 : 1/0):5 with linespoints title "big ifunc (>16 KiB code), code once", \
     "" using (select("ifunc_bigcode_full_lat") ? \$2 : 1/0):5 with linespoints title "big ifunc, code in every message", \
     "" using (select("ifunc_lat") ? \$2 : 1/0):5 with linespoints title "perf_bump, code once" noenhanced, \
     "" using (select("ifunc_full_lat") ? \$2 : 1/0):5 with linespoints title "perf_bump, code in every message" noenhanced
GNUPLOT
done

{
    echo "# ucx-ifunc benchmark report"
    echo
    sed 's/^/    /' "$out/machine.txt"
    for tls in sm tcp; do
        echo
        echo "## UCX_TLS=$tls"
        echo
        echo "| payload | ifunc lat µs | AM lat µs | put lat µs | ifunc/AM lat | ifunc msg/s | AM msg/s | put msg/s | ifunc/AM rate |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        awk -F, "$collect"'
            END {
                for (i = 1; i <= n; i++) {
                    s = order[i]
                    print "| " s " | " num(lat["ifunc_lat", s], "%.3f") \
                          " | " num(lat["am_lat", s], "%.3f") \
                          " | " num(lat["put_lat", s], "%.3f") \
                          " | " ratio(lat["ifunc_lat", s], lat["am_lat", s], "%.2f") \
                          " | " num(rate["ifunc_bw", s], "%.0f") \
                          " | " num(rate["am_bw", s], "%.0f") \
                          " | " num(rate["put_bw", s], "%.0f") \
                          " | " ratio(rate["ifunc_bw", s], rate["am_bw", s], "%.2f") " |"
                }
            }' "$out/$tls.csv"
        echo
        echo "ifunc by path: channel (code once), code in every message (full), active message (am); the big ifunc (>16 KiB code) with code once and in every message."
        echo
        echo "| payload | ifunc lat µs | full lat µs | am lat µs | bigcode lat µs | bigcode full lat µs | ifunc msg/s | full msg/s | am msg/s |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        awk -F, "$collect"'
            END {
                for (i = 1; i <= n; i++) {
                    s = order[i]
                    print "| " s " | " num(lat["ifunc_lat", s], "%.3f") \
                          " | " num(lat["ifunc_full_lat", s], "%.3f") \
                          " | " num(lat["ifunc_am_lat", s], "%.3f") \
                          " | " num(lat["ifunc_bigcode_lat", s], "%.3f") \
                          " | " num(lat["ifunc_bigcode_full_lat", s], "%.3f") \
                          " | " num(rate["ifunc_bw", s], "%.0f") \
                          " | " num(rate["ifunc_full_bw", s], "%.0f") \
                          " | " num(rate["ifunc_am_bw", s], "%.0f") " |"
                }
            }' "$out/$tls.csv"
    done
    echo
    echo "## ucx_perftest calibration"
    echo
    sed 's/^/    /' "$out/calibration.txt"
    echo
    echo "## Targets of the fast path (contrib/bench_targets.py)"
    echo
    python3 "$top/contrib/bench_targets.py" "$out"
} >"$out/summary.md"
echo "bench_report: wrote $out (summary.md, CSV, PNG)"
