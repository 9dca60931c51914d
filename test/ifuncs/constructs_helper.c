/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Second source file of the constructs ifunc: a global function and its own
 * static state, reached from main through a cross-file call.
 */
static int helper_calls;

int constructs_helper_scale(int x)
{
    return 3 * x + 1 + helper_calls++;
}
