#!/bin/sh
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Runs one libFuzzer harness for "make fuzz" (test/fuzz/Makefile.inc):
#
#     run.sh NAME HARNESS SECONDS SEED_DIR WORK_DIR
#
# New inputs go to a copy of the seed corpus in WORK_DIR/corpus, kept
# between runs; crashes to WORK_DIR/artifacts; the whole log is
# WORK_DIR/fuzz.log. Prints a summary and exits 0, or prints the log's end
# and exits 1 on a crash, leak or sanitizer report.
set -e
name=$1 harness=$2 seconds=$3 seeds=$4 work=$5

mkdir -p "$work/corpus" "$work/artifacts"
cp "$seeds"/* "$work/corpus/"
echo "fuzz: $name: $harness for $seconds s (log: $work/fuzz.log)"
if "$harness" -max_total_time="$seconds" -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" \
    >"$work/fuzz.log" 2>&1; then
    grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)|INITED|^fuzz_[a-z_]*: ' \
        "$work/fuzz.log" | sed "s/^/fuzz: $name: /"
    echo "fuzz: $name: PASS"
else
    tail -n 80 "$work/fuzz.log"
    echo "fuzz: $name: FAIL: see $(pwd)/$work/fuzz.log and the input in $(pwd)/$work/artifacts" >&2
    exit 1
fi
