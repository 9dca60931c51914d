/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The ifunc of ucx_ifunc_perftest (the paper's benchmark function): main
 * bumps a counter of the target, the same work as the benchmark's active
 * message handler. source_args is the payload size (a size_t). Built as
 * perf_bump, and for the sandbox as perf_bump_sandbox (IFUNC_NAME).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef IFUNC_NAME
#define IFUNC_NAME perf_bump
#endif
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define IFUNC(suffix) CAT(IFUNC_NAME, suffix)

size_t IFUNC(_payload_bound)(void *source_args, size_t source_args_size)
{
    return (source_args_size == sizeof(size_t)) ? *(size_t *)source_args : 0;
}

int IFUNC(_payload_init)(void *source_args, size_t source_args_size,
                         void *payload, size_t *payload_size)
{
    (void)source_args;
    (void)source_args_size;
    memset(payload, 0x5a, *payload_size);
    return 0;
}

void IFUNC(_main)(void *payload, size_t payload_size, void *target_args)
{
    (void)payload;
    (void)payload_size;
    ++*(uint64_t *)target_args;
}
