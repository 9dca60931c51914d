/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Calls back into the target while it runs (through a function pointer the
 * target passes, so no imports), then writes after the call returns: the
 * code must still be there when it does. No payload.
 */
#include "test_ifunc.h"

size_t reenter_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return 0;
}

int reenter_payload_init(void *source_args, size_t source_args_size,
                         void *payload, size_t *payload_size)
{
    (void)source_args;
    (void)source_args_size;
    (void)payload;
    *payload_size = 0;
    return 0;
}

void reenter_main(void *payload, size_t payload_size, void *target_args)
{
    struct reenter_args *args = (struct reenter_args *)target_args;
    (void)payload;
    (void)payload_size;
    args->callback(args->callback_arg);
    args->returned++;
}
