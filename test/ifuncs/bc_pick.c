/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * counter's ifunc, for the bitcode tests (issue 32): its bitcode image
 * (ucx-ifunc-cc defines UCX_IFUNC_BITCODE when it compiles bitcode) adds
 * 1000 more than its native image, so that a test sees which of the two a
 * target ran.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

size_t bc_pick_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return sizeof(int64_t);
}

int bc_pick_payload_init(void *source_args, size_t source_args_size,
                         void *payload, size_t *payload_size)
{
    int64_t increment = 1;
    if (source_args_size == sizeof(increment)) {
        memcpy(&increment, source_args, sizeof(increment));
    }
    memcpy(payload, &increment, sizeof(increment));
    *payload_size = sizeof(increment);
    return 0;
}

void bc_pick_main(void *payload, size_t payload_size, void *target_args)
{
    int64_t increment;
    if (payload_size == sizeof(increment)) {
        __builtin_memcpy(&increment, payload, sizeof(increment));
#ifdef UCX_IFUNC_BITCODE
        increment += 1000;
#endif
        *(int64_t *)target_args += increment;
    }
}
