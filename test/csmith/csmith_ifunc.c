/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Wraps one csmith program as the ifunc IFUNC_NAME, for the differential
 * test (test/csmith/csmith_diff.py). Build with
 *     -DIFUNC_NAME=NAME -DCSMITH_PROGRAM='"/path/prog.c"' -I<csmith headers>
 * and, with ucx-ifunc-cc --sandbox, -DCSMITH_SANDBOX.
 * The program is included, not linked: its checksum lives in the static
 * crc32_context of csmith's runtime header, which only this translation
 * unit can read. NAME_main runs the program's main and stores the checksum
 * in the target's result (struct csmith_result, below), and says whether
 * it was compiled from bitcode (ucx-ifunc-cc --bitcode-only).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The program's main becomes an ordinary function, and its closing printf
 * of the checksum is compiled out (csmith's platform_main_end tests this
 * macro): the target reports the value instead. */
#define NOT_PRINT_CHECKSUM 1
#ifdef CSMITH_SANDBOX
/* Sandboxed code may import only the host functions a target grants
 * (memcpy, memset, strlen, ...), not printf or strcmp: the program's
 * prints, which argc 1 and NOT_PRINT_CHECKSUM leave unreached anyway, go
 * nowhere, and its main's strcmp of argv[1] (-O0 keeps the call) is
 * this file's. */
#include <stdio.h>
static int csmith_no_printf(const char *format, ...)
{
    (void)format;
    return 0;
}
static int csmith_strcmp(const char *a, const char *b)
{
    for (; (*a != '\0') && (*a == *b); ++a, ++b) {
    }
    return (unsigned char)*a - (unsigned char)*b;
}
#define printf csmith_no_printf
#define strcmp csmith_strcmp
#endif
#define main csmith_program_main
#include CSMITH_PROGRAM
#undef main

#include "csmith_result.h"

#define CSMITH_CONCAT2(a, b) a##b
#define CSMITH_CONCAT(a, b) CSMITH_CONCAT2(a, b)
#define CSMITH_FN(suffix) CSMITH_CONCAT(IFUNC_NAME, suffix)

#define CSMITH_EXPORT __attribute__((visibility("default")))

/* The payload is the magic word and how many times to run the program:
 * source_args, a uint32_t, or once (the overhead benchmark,
 * test/sandbox/overhead_bench.cc, runs it many times a message so that
 * the message's own cost does not count). */
struct csmith_payload {
    uint32_t magic;
    uint32_t runs;
};

CSMITH_EXPORT size_t CSMITH_FN(_payload_bound)(void  *source_args,
                                               size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return sizeof(struct csmith_payload);
}

CSMITH_EXPORT int CSMITH_FN(_payload_init)(void  *source_args,
                                           size_t source_args_size,
                                           void *payload, size_t *payload_size)
{
    struct csmith_payload p = {CSMITH_RESULT_MAGIC, 1};
    if (source_args_size == sizeof(p.runs)) {
        memcpy(&p.runs, source_args, sizeof(p.runs));
    }
    memcpy(payload, &p, sizeof(p));
    *payload_size = sizeof(p);
    return 0;
}

CSMITH_EXPORT void CSMITH_FN(_main)(void *payload, size_t payload_size,
                                    void *target_args)
{
    struct csmith_result *result = target_args;
    struct csmith_payload p      = {0, 0};
    uint32_t              i;

    if (payload_size == sizeof(p)) {
        memcpy(&p, payload, sizeof(p));
    }
    /* argc 1: the program does not print its per-variable hashes. Later
     * runs start from the globals the earlier ones left. */
    for (i = 0; i < p.runs; ++i) {
        result->status = csmith_program_main(1, NULL);
    }
    result->checksum = crc32_context ^ 0xFFFFFFFFUL;
    result->magic    = p.magic;
#ifdef UCX_IFUNC_BITCODE
    result->flags = CSMITH_RESULT_FROM_BITCODE;
#endif
}
