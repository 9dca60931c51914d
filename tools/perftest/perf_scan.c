/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The scan of ifunc_run_time (issue 32, point 4): what a key-value
 * service's scan does, a loop the compiler vectorises. target_args is a
 * struct perf_scan_table; main sums the value of every record whose key is
 * below the payload's bound into the table's sum. Built for the baseline
 * ISA (native image) and as bitcode, which the target compiles for its own
 * CPU (wider vectors where it has them).
 */
#include "perf_scan.h"

#include <string.h>

size_t perf_scan_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return sizeof(struct perf_scan_query);
}

int perf_scan_payload_init(void *source_args, size_t source_args_size,
                           void *payload, size_t *payload_size)
{
    if (source_args_size != sizeof(struct perf_scan_query)) {
        return -1;
    }
    memcpy(payload, source_args, sizeof(struct perf_scan_query));
    *payload_size = sizeof(struct perf_scan_query);
    return 0;
}

void perf_scan_main(void *payload, size_t payload_size, void *target_args)
{
    struct perf_scan_query  query;
    struct perf_scan_table *table = target_args;
    uint64_t                sum   = 0;
    if (payload_size != sizeof(query)) {
        return;
    }
    memcpy(&query, payload, sizeof(query));
    /* Both fields read every time: a load under the condition would keep
     * the loop from being vectorised. */
    for (uint64_t i = 0; i < table->count; ++i) {
        uint32_t value = table->records[i].value;
        sum += (table->records[i].key < query.key_below) ? value : 0;
    }
    table->sum = sum;
}
