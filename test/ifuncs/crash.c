/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Shipped code that crashes on purpose, for the test that a debugger names
 * the functions of linked code (test/integration/test_gdb.cc): crash_main
 * hands target_args (the test passes NULL) to a static helper that writes
 * through it. Built at -O0 (test/Makefile.inc), so that both functions stay
 * separate, keep this order in the code, and set up frame pointers for gdb
 * to unwind through: the image carries no unwind tables.
 */
#include <stddef.h>

static void crash_poke(int *where);

size_t crash_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return 0;
}

int crash_payload_init(void *source_args, size_t source_args_size,
                       void *payload, size_t *payload_size)
{
    (void)source_args;
    (void)source_args_size;
    (void)payload;
    *payload_size = 0;
    return 0;
}

void crash_main(void *payload, size_t payload_size, void *target_args)
{
    (void)payload;
    (void)payload_size;
    crash_poke((int *)target_args);
}

static __attribute__((noinline)) void crash_poke(int *where)
{
    *where = 42;
}
