/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * An ifunc built twice under one name with different code (REBUILT_VERSION
 * 1 and 2): a target must run the code the message was made from, never
 * code of the same name it linked earlier. main writes the version into
 * target_args[0] and counts calls in target_args[1].
 */
#include <stddef.h>
#include <stdint.h>

#ifndef REBUILT_VERSION
#define REBUILT_VERSION 1
#endif

size_t rebuilt_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return 8;
}

int rebuilt_payload_init(void *source_args, size_t source_args_size,
                         void *payload, size_t *payload_size)
{
    (void)source_args;
    (void)source_args_size;
    __builtin_memset(payload, 0, 8);
    *payload_size = 8;
    return 0;
}

void rebuilt_main(void *payload, size_t payload_size, void *target_args)
{
    uint64_t *result = target_args;
    (void)payload;
    (void)payload_size;
    result[0] = REBUILT_VERSION;
    result[1]++;
}
