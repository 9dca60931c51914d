/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The ifunc of ucx_ifunc_perftest (the paper's benchmark function): main
 * bumps a counter of the target, the same work as the benchmark's active
 * message handler. source_args is the payload size (a size_t).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

size_t perf_bump_payload_bound(void *source_args, size_t source_args_size)
{
    return (source_args_size == sizeof(size_t)) ? *(size_t *)source_args : 0;
}

int perf_bump_payload_init(void *source_args, size_t source_args_size,
                           void *payload, size_t *payload_size)
{
    (void)source_args;
    (void)source_args_size;
    memset(payload, 0x5a, *payload_size);
    return 0;
}

void perf_bump_main(void *payload, size_t payload_size, void *target_args)
{
    (void)payload;
    (void)payload_size;
    ++*(uint64_t *)target_args;
}
