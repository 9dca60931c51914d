/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What perf_scan's source and target share: the query it carries and the
 * table of records it scans (target_args).
 */
#ifndef UCX_IFUNC_PERF_SCAN_H_
#define UCX_IFUNC_PERF_SCAN_H_

#include <stdint.h>

struct perf_scan_query {
    uint32_t key_below; /* sum the records whose key is below this */
    uint32_t reserved;
};

struct perf_scan_record {
    uint32_t key;
    uint32_t value;
};

struct perf_scan_table {
    uint64_t                count;
    uint64_t                sum;
    struct perf_scan_record records[];
};

#endif
