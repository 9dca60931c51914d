/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The smallest useful ifunc: add the 8-byte payload to a counter of the
 * target. No imports, so it runs even where the target lacks counter.so.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

size_t counter_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return sizeof(int64_t);
}

int counter_payload_init(void *source_args, size_t source_args_size,
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

void counter_main(void *payload, size_t payload_size, void *target_args)
{
    int64_t increment;
    if (payload_size == sizeof(increment)) {
        __builtin_memcpy(&increment, payload, sizeof(increment));
        *(int64_t *)target_args += increment;
    }
}
