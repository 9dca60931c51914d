/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * An ordinary shared library (built with cc, not ucx-ifunc-cc) placed where
 * ifunc libraries are looked up: registering it must fail cleanly, and
 * load it (run its constructor) only once. The constructor counts its runs
 * in the environment variable IFUNC_TEST_PLAIN_LOADS.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void plain_loaded(void)
{
    const char *before = getenv("IFUNC_TEST_PLAIN_LOADS");
    char        count[16];
    snprintf(count, sizeof(count), "%d", (before ? atoi(before) : 0) + 1);
    setenv("IFUNC_TEST_PLAIN_LOADS", count, 1);
}

int plain_function(int x)
{
    return x + 1;
}
