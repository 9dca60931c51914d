/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Defines the bound functions of both conventions, so that the order of
 * its payload_init's arguments would be a guess: the runtime must refuse
 * to register it. Built with cc (ucx-ifunc-cc refuses it too).
 */
#include <stddef.h>

size_t both_bounds_payload_get_max_size(void  *source_args,
                                        size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

size_t both_bounds_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int both_bounds_payload_init(void *payload, size_t payload_size,
                             void *source_args, size_t source_args_size)
{
    (void)payload;
    (void)payload_size;
    (void)source_args;
    (void)source_args_size;
    return 0;
}

void both_bounds_main(void *payload, size_t payload_size, void *target_args)
{
    (void)payload;
    (void)payload_size;
    (void)target_args;
}
