/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Counts its own calls in a static variable and writes the count to
 * *(uint64_t *)target_args: shows whose copy of the code ran. No imports.
 */
#include <stddef.h>
#include <stdint.h>

static uint64_t calls;

size_t tally_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return 0;
}

int tally_payload_init(void *source_args, size_t source_args_size,
                       void *payload, size_t *payload_size)
{
    (void)source_args;
    (void)source_args_size;
    (void)payload;
    *payload_size = 0;
    return 0;
}

void tally_main(void *payload, size_t payload_size, void *target_args)
{
    (void)payload;
    (void)payload_size;
    *(uint64_t *)target_args = ++calls;
}
