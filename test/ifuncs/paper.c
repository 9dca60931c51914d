/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The payload functions in the paper's convention: the bound function is
 * paper_payload_get_max_size, and paper_payload_init takes the payload
 * first and its size by value. The payload is the source arguments with
 * every byte complemented, so that a test tells what payload_init wrote
 * from a copy; main records what arrived as echo does (echo_result).
 */
#include "test_ifunc.h"

size_t paper_payload_get_max_size(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int paper_payload_init(void *payload, size_t payload_size, void *source_args,
                       size_t source_args_size)
{
    const uint8_t *from = source_args;
    uint8_t       *to   = payload;
    size_t         count =
            (source_args_size < payload_size) ? source_args_size : payload_size;
    for (size_t i = 0; i < count; ++i) {
        to[i] = (uint8_t)~from[i];
    }
    return 0;
}

void paper_main(void *payload, size_t payload_size, void *target_args)
{
    struct echo_result *result = target_args;
    result->calls++;
    result->payload_size = payload_size;
    result->payload_hash = test_hash64(payload, payload_size);
}
