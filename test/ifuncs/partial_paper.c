/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Writes less of its payload than its bound, in the paper's convention
 * (partial_args): the rest must arrive as zeros, not as what the message
 * buffer held before. main records what arrived as echo does.
 */
#include "test_ifunc.h"

#include <string.h>

size_t partial_paper_payload_get_max_size(void  *source_args,
                                          size_t source_args_size)
{
    const struct partial_args *args = source_args;
    return (source_args_size == sizeof(*args)) ? args->bound : 0;
}

int partial_paper_payload_init(void *payload, size_t payload_size,
                               void *source_args, size_t source_args_size)
{
    const struct partial_args *args = source_args;
    if ((source_args_size != sizeof(*args)) ||
        (payload_size < sizeof(args->value))) {
        return -1;
    }
    memcpy(payload, &args->value, sizeof(args->value));
    return 0;
}

void partial_paper_main(void *payload, size_t payload_size, void *target_args)
{
    struct echo_result *result = target_args;
    result->calls++;
    result->payload_size = payload_size;
    result->payload_hash = test_hash64(payload, payload_size);
}
