/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Writes less of its payload than its bound, in the workshop slides'
 * convention (partial_args), and leaves *payload_size at the bound: the
 * rest must arrive as zeros, not as what the message buffer held before.
 * main records what arrived as echo does.
 */
#include "test_ifunc.h"

#include <string.h>

size_t partial_slides_payload_bound(void *source_args, size_t source_args_size)
{
    const struct partial_args *args = source_args;
    return (source_args_size == sizeof(*args)) ? args->bound : 0;
}

int partial_slides_payload_init(void *source_args, size_t source_args_size,
                                void *payload, size_t *payload_size)
{
    const struct partial_args *args = source_args;
    if ((source_args_size != sizeof(*args)) ||
        (*payload_size < sizeof(args->value))) {
        return -1;
    }
    memcpy(payload, &args->value, sizeof(args->value));
    return 0;
}

void partial_slides_main(void *payload, size_t payload_size, void *target_args)
{
    struct echo_result *result = target_args;
    result->calls++;
    result->payload_size = payload_size;
    result->payload_hash = test_hash64(payload, payload_size);
}
