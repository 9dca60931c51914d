/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * An ordinary shared library (built with cc, not ucx-ifunc-cc) placed where
 * ifunc libraries are looked up: registering it must fail cleanly.
 */
int plain_function(int x)
{
    return x + 1;
}
