/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * An ifunc whose library needs another library with a constructor
 * (loadcount_dep.c), as real libraries' dependencies may have: the tests
 * count how often a target loads it. main adds 7 to *(int64_t*)target_args.
 */
#include <stddef.h>
#include <stdint.h>

int loadcount_dep_value(void);

size_t loadcount_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return 0;
}

int loadcount_payload_init(void *source_args, size_t source_args_size,
                           void *payload, size_t *payload_size)
{
    (void)source_args;
    (void)source_args_size;
    (void)payload;
    *payload_size = 0;
    return 0;
}

void loadcount_main(void *payload, size_t payload_size, void *target_args)
{
    (void)payload;
    (void)payload_size;
    *(int64_t *)target_args += loadcount_dep_value();
}
