/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The pointer chase's own ifunc (examples/pointer_chase/chase.c) under the
 * name IFUNC_NAME (-DIFUNC_NAME=NAME), so that the overhead benchmark can
 * hold its native and its sandboxed build side by side. On one rank a
 * chase never leaves: chase_main walks it to its end and reports it.
 */
#include "overhead_kernels.h"

#define chase_payload_bound KERNEL_FN(_payload_bound)
#define chase_payload_init KERNEL_FN(_payload_init)
#define chase_main KERNEL_FN(_main)
#include "../../examples/pointer_chase/chase.c"
