/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * An ifunc that imports from libc, so the target needs its library to link
 * it. Built under one name per test transport (IFUNC_NAME).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define IFUNC(suffix) CAT(IFUNC_NAME, suffix)

size_t IFUNC(_payload_bound)(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return 16;
}

int IFUNC(_payload_init)(void *source_args, size_t source_args_size,
                         void *payload, size_t *payload_size)
{
    (void)source_args;
    (void)source_args_size;
    *payload_size = (size_t)snprintf(payload, *payload_size, "%d", 42) + 1;
    return 0;
}

void IFUNC(_main)(void *payload, size_t payload_size, void *target_args)
{
    int value = 0;
    if ((payload_size > 0) && (sscanf(payload, "%d", &value) == 1) &&
        (value == 42)) {
        ++*(uint64_t *)target_args;
    }
}
