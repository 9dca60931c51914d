/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Wraps one csmith program as the ifunc IFUNC_NAME, for the differential
 * test (test/csmith/csmith_diff.py). Build with
 *     -DIFUNC_NAME=NAME -DCSMITH_PROGRAM='"/path/prog.c"' -I<csmith headers>
 * The program is included, not linked: its checksum lives in the static
 * crc32_context of csmith's runtime header, which only this translation
 * unit can read. NAME_main runs the program's main and stores the checksum
 * in the target's result (struct csmith_result, below).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The program's main becomes an ordinary function, and its closing printf
 * of the checksum is compiled out (csmith's platform_main_end tests this
 * macro): the target reports the value instead. */
#define NOT_PRINT_CHECKSUM 1
#define main csmith_program_main
#include CSMITH_PROGRAM
#undef main

#include "csmith_result.h"

#define CSMITH_CONCAT2(a, b) a##b
#define CSMITH_CONCAT(a, b) CSMITH_CONCAT2(a, b)
#define CSMITH_FN(suffix) CSMITH_CONCAT(IFUNC_NAME, suffix)

#define CSMITH_EXPORT __attribute__((visibility("default")))

/* The payload is only the magic word: the program takes no input. */
CSMITH_EXPORT size_t CSMITH_FN(_payload_bound)(void  *source_args,
                                               size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return sizeof(uint32_t);
}

CSMITH_EXPORT int CSMITH_FN(_payload_init)(void  *source_args,
                                           size_t source_args_size,
                                           void *payload, size_t *payload_size)
{
    uint32_t magic = CSMITH_RESULT_MAGIC;
    (void)source_args;
    (void)source_args_size;
    memcpy(payload, &magic, sizeof(magic));
    *payload_size = sizeof(magic);
    return 0;
}

CSMITH_EXPORT void CSMITH_FN(_main)(void *payload, size_t payload_size,
                                    void *target_args)
{
    struct csmith_result *result = target_args;
    uint32_t              magic  = 0;

    if (payload_size == sizeof(magic)) {
        memcpy(&magic, payload, sizeof(magic));
    }
    /* argc 1: the program does not print its per-variable hashes. */
    result->status   = csmith_program_main(1, NULL);
    result->checksum = crc32_context ^ 0xFFFFFFFFUL;
    result->magic    = magic;
}
