/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The record insert's ifunc (examples/record_insert) as sandboxed code can
 * run it: that one calls libzstd and SQLite, which a target does not grant
 * sandboxed code. This one keeps its access pattern on uncompressed
 * records: parse "ID\tNAME\tCITY\tBODY", copy the row into the table's
 * heap and insert its id into a sorted index (a B-tree leaf's work),
 * everything in target memory. Build with -DIFUNC_NAME=NAME.
 */
#include "overhead_kernels.h"

KERNEL_PAYLOAD_IS_SOURCE_ARGS

/* The offset of the next tab at or after @a from, or @a size. */
static size_t record_next_tab(const char *text, size_t from, size_t size)
{
    while ((from < size) && (text[from] != '\t')) {
        ++from;
    }
    return from;
}

void KERNEL_FN(_main)(void *payload, size_t size, void *target_args)
{
    record_kernel_args_t *t    = target_args;
    const char           *text = payload;
    uint64_t              id = 0, lo = 0, hi;
    size_t                p = 0, name_end, city_end;

    for (; (p < size) && (text[p] >= '0') && (text[p] <= '9'); ++p) {
        id = id * 10 + (uint64_t)(text[p] - '0');
    }
    name_end = record_next_tab(text, p + 1, size);
    city_end = record_next_tab(text, name_end + 1, size);
    if ((p == 0) || (p >= size) || (text[p] != '\t') || (city_end >= size) ||
        (t->count == t->capacity) || (t->heap_size - t->heap_used < size)) {
        ++t->failed;
        return;
    }
    memcpy(t->heap + t->heap_used, text, size);
    for (hi = t->count; lo < hi;) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (t->ids[mid] < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    memmove(&t->ids[lo + 1], &t->ids[lo], (t->count - lo) * sizeof(*t->ids));
    memmove(&t->rows[lo + 1], &t->rows[lo], (t->count - lo) * sizeof(*t->rows));
    t->ids[lo]  = id;
    t->rows[lo] = t->heap_used;
    t->heap_used += size;
    ++t->count;
}
