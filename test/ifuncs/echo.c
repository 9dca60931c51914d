/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Echoes its source arguments as the payload. payload_bound over-reserves,
 * so every frame is shrunk by payload_init; main records what arrived.
 */
#include "test_ifunc.h"

#include <string.h>

size_t echo_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return 2 * source_args_size + 64;
}

int echo_payload_init(void *source_args, size_t source_args_size, void *payload,
                      size_t *payload_size)
{
    if (*payload_size < source_args_size) {
        return -1;
    }
    if (source_args_size > 0) {
        memcpy(payload, source_args, source_args_size);
    }
    *payload_size = source_args_size;
    return 0;
}

void echo_main(void *payload, size_t payload_size, void *target_args)
{
    struct echo_result *result = target_args;
    result->calls++;
    result->payload_size = payload_size;
    result->payload_hash = test_hash64(payload, payload_size);
}
