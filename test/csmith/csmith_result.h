/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What a wrapped csmith program (csmith_ifunc.c) leaves in the target's
 * arguments for the driver (run_ifunc.cc): C, for both.
 */
#ifndef UCX_IFUNC_TEST_CSMITH_RESULT_H_
#define UCX_IFUNC_TEST_CSMITH_RESULT_H_

#include <stdint.h>

/* Travels in the payload and comes back in the result: proves that the
 * shipped main ran with the payload the source built. */
#define CSMITH_RESULT_MAGIC 0x43534d54u /* "CSMT" */

struct csmith_result {
    uint32_t magic;
    uint32_t checksum; /* what the program would print as "checksum = %X" */
    int32_t  status;   /* the program's main's return value */
    uint32_t flags;    /* CSMITH_RESULT_* */
};

/* The code that ran was compiled from bitcode (UCX_IFUNC_BITCODE). */
#define CSMITH_RESULT_FROM_BITCODE 1u

#endif
