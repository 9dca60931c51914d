/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The target's arguments of the record kernel of the sandbox overhead
 * benchmark (record_kernel.c; overhead_bench.cc sets them up in memory
 * granted to the sandboxed build), and the kernels' shared macros: C.
 */
#ifndef UCX_IFUNC_TEST_SANDBOX_OVERHEAD_KERNELS_H_
#define UCX_IFUNC_TEST_SANDBOX_OVERHEAD_KERNELS_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KERNEL_CONCAT2(a, b) a##b
#define KERNEL_CONCAT(a, b) KERNEL_CONCAT2(a, b)
/* NAME##suffix for the ifunc IFUNC_NAME (-DIFUNC_NAME=NAME). */
#define KERNEL_FN(suffix) KERNEL_CONCAT(IFUNC_NAME, suffix)

/* The payload functions of both kernels: the payload is source_args. */
#define KERNEL_PAYLOAD_IS_SOURCE_ARGS                                          \
    size_t KERNEL_FN(_payload_bound)(void *source_args, size_t size)           \
    {                                                                          \
        (void)source_args;                                                     \
        return size;                                                           \
    }                                                                          \
    int KERNEL_FN(_payload_init)(void *source_args, size_t size,               \
                                 void *payload, size_t *payload_size)          \
    {                                                                          \
        if (*payload_size < size) {                                            \
            return -1;                                                         \
        }                                                                      \
        memcpy(payload, source_args, size);                                    \
        *payload_size = size;                                                  \
        return 0;                                                              \
    }

/* The record insert of examples/record_insert without SQLite and zstd: a
 * table of rows (their text in a heap) with an index sorted by id. */
typedef struct record_kernel_args {
    uint64_t *ids;  /* sorted, count of capacity */
    uint64_t *rows; /* heap offset of the row of ids[i] */
    char     *heap;
    uint64_t  heap_size, heap_used;
    uint64_t  count, capacity;
    uint64_t  failed;
} record_kernel_args_t;

#endif
