#!/usr/bin/env python3
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
"""Checks the fast path's performance targets against a benchmark report.

    contrib/bench_targets.py REPORT_DIR [BASELINE_SM_CSV]

REPORT_DIR holds sm.csv and tcp.csv from contrib/bench_report.sh;
BASELINE_SM_CSV (default docs/data/0.1.0/sm.csv, the 0.1.0 reference run) is what
ifunc_full_* is compared with, each relative to AM in its own run. Prints one Markdown table: each target, the
worst ratio and the size where it occurs, the sizes that miss it, and
whether it is met. Latencies are medians.
"""

import csv
import os
import sys


def load(path):
    """{test: {size: value}}: median latency for *_lat, rate otherwise."""
    table = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            test, size = row["test"], int(row["payload_size"])
            key = "lat_median_us" if test.endswith("_lat") else "msg_rate"
            value = float(row[key])
            if value > 0:
                table.setdefault(test, {})[size] = value
    return table


def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return "%d %s" % (size >> shift, unit)
    return "%d B" % size


def check(name, ratios, limit, upper):
    """ratios: {size: ratio}; upper: the ratio must stay <= limit."""
    if not ratios:
        return "| %s | - | - | no data | not measured |" % name
    worst = max(ratios, key=ratios.get) if upper else min(ratios, key=ratios.get)
    misses = [s for s, r in sorted(ratios.items())
              if (r > limit if upper else r < limit)]
    miss_text = ", ".join("%s (%.2f)" % (human(s), ratios[s]) for s in misses)
    return "| %s | %.2f at %s | %s | %s | %s |" % (
        name, ratios[worst], human(worst),
        "%d of %d" % (len(misses), len(ratios)), miss_text or "-",
        "met" if not misses else "not met")


def ratio(a, b, sizes):
    out = {}
    for s in sizes:
        if s in a and s in b:
            out[s] = a[s] / b[s]
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    report = sys.argv[1]
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    baseline = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        top, "docs", "data", "0.1.0", "sm.csv")
    sm = load(os.path.join(report, "sm.csv"))
    tcp = load(os.path.join(report, "tcp.csv"))
    base = load(baseline) if os.path.exists(baseline) else {}

    def get(t, test):
        return t.get(test, {})

    sizes = sorted(get(sm, "ifunc_lat"))
    small = [s for s in sizes if s <= 8192]
    large = [s for s in sizes if s > 8192]
    upto1k = [s for s in sizes if s <= 1024]
    rows = [
        check("sm: ifunc_lat / am_lat <= 0.75 up to 8 KiB",
              ratio(get(sm, "ifunc_lat"), get(sm, "am_lat"), small), 0.75, True),
        check("sm: ifunc_lat / am_lat <= 0.5 above 8 KiB",
              ratio(get(sm, "ifunc_lat"), get(sm, "am_lat"), large), 0.5, True),
        check("sm: ifunc_lat / put_lat <= 1.3 up to 8 KiB",
              ratio(get(sm, "ifunc_lat"), get(sm, "put_lat"), small), 1.3, True),
        check("sm: ifunc_bw / am_bw >= 1.2 up to 1 KiB",
              ratio(get(sm, "ifunc_bw"), get(sm, "am_bw"), upto1k), 1.2, False),
        check("sm: ifunc_bw / put_bw >= 0.9 up to 1 KiB",
              ratio(get(sm, "ifunc_bw"), get(sm, "put_bw"), upto1k), 0.9, False),
    ]
    if base:
        # The machine's speed drifts between runs (three to four times at
        # small sizes), so ifunc_full is compared with 0.1.0's ifunc through
        # AM, measured in the same run as each: (full/AM now) / (ifunc/AM
        # then).
        def against_am(t, test, am):
            return ratio(get(t, test), get(t, am), sizes)

        rows += [
            check("sm: ifunc_full_lat/am_lat over 0.1.0's ifunc_lat/am_lat "
                  "<= 1",
                  ratio(against_am(sm, "ifunc_full_lat", "am_lat"),
                        against_am(base, "ifunc_lat", "am_lat"), sizes),
                  1.0, True),
            check("sm: ifunc_full_bw/am_bw over 0.1.0's ifunc_bw/am_bw >= 1",
                  ratio(against_am(sm, "ifunc_full_bw", "am_bw"),
                        against_am(base, "ifunc_bw", "am_bw"), sizes),
                  1.0, False),
        ]
    tcp_sizes = sorted(get(tcp, "am_lat"))
    best_lat = {s: min(v for v in (get(tcp, "ifunc_lat").get(s),
                                   get(tcp, "ifunc_am_lat").get(s)) if v)
                for s in tcp_sizes
                if get(tcp, "ifunc_lat").get(s) or get(tcp, "ifunc_am_lat").get(s)}
    best_rate = {s: max(v for v in (get(tcp, "ifunc_bw").get(s),
                                    get(tcp, "ifunc_am_bw").get(s)) if v)
                 for s in tcp_sizes
                 if get(tcp, "ifunc_bw").get(s) or get(tcp, "ifunc_am_bw").get(s)}
    rows += [
        check("tcp: best of (ifunc_lat, ifunc_am_lat) / am_lat <= 1.05",
              ratio(best_lat, get(tcp, "am_lat"), tcp_sizes), 1.05, True),
        check("tcp: best of (ifunc_bw, ifunc_am_bw) / am_bw >= 0.95",
              ratio(best_rate, get(tcp, "am_bw"), sorted(get(tcp, "am_bw"))),
              0.95, False),
    ]
    print("| target | worst | sizes missed | missed at | result |")
    print("| --- | ---: | ---: | --- | --- |")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
