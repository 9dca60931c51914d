/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Every construct shipped code must support, each checked by main on the
 * target. Built several times (-O0/-O2/-O3, with and without the stack
 * protector) under different names: IFUNC_NAME is set by the build.
 * Checks depend on the payload so the compiler cannot fold them away.
 * With CONSTRUCTS_PAPER the payload functions take the paper's convention
 * (NAME_payload_get_max_size, payload first), else the slides' one.
 */
#include "test_ifunc.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define IFUNC(suffix) CAT(IFUNC_NAME, suffix)

#define SOURCE_TEXT "hello from the source"

/* Defined by the target program, absent on the source. */
extern long TEST_TARGET_GLOBAL;
/* Defined nowhere: must resolve to NULL. */
extern int ucx_ifunc_test_never_defined(void) __attribute__((weak));
/* In constructs_helper.c. */
int constructs_helper_scale(int x);

static const int         squares[8] = {0, 1, 4, 9, 16, 25, 36, 49};
static const char *const names[]    = {"zero",  "one",  "two",
                                       "three", "four", "five"};
static size_t (*const external_fns[])(const char *) = {strlen};

static int  data_var       = 42; /* .data */
int         global_counter = 7;  /* global .data */
static int  bss_var;             /* .bss */
static char big_bss[1 << 16];    /* large .bss */
static int  call_count;

static int twice(int x)
{
    return 2 * x;
}
static int thrice(int x)
{
    return 3 * x;
}
static int (*const internal_fns[])(int) = {twice, thrice};

static int compare_ints(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static __attribute__((noinline)) int classify(int v)
{
    switch (v) {
        case 0:
            return 11;
        case 1:
            return 22;
        case 2:
            return 33;
        case 3:
            return 44;
        case 4:
            return 55;
        case 5:
            return 66;
        case 6:
            return 77;
        case 7:
            return 88;
        default:
            return -1;
    }
}

static __attribute__((noinline)) int sum_varargs(int n, ...)
{
    va_list ap;
    int     sum = 0;
    va_start(ap, n);
    for (int i = 0; i < n; ++i) {
        sum += va_arg(ap, int);
    }
    va_end(ap);
    return sum;
}

/* A local array: -fstack-protector-strong guards this frame with the canary
 * at %fs:0x28 and calls __stack_chk_fail on mismatch. */
static __attribute__((noinline)) int protected_copy(const char *text)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%s!", text);
    return (int)strlen(buf);
}

/* The payload, from source_args (a selector) when it has their size. */
static void fill_payload(const void *source_args, size_t source_args_size,
                         struct constructs_payload *p)
{
    memset(p, 0, sizeof(*p));
    p->selector = 3;
    if (source_args_size == sizeof(int32_t)) {
        memcpy(&p->selector, source_args, sizeof(int32_t));
    }
    strcpy(p->text, SOURCE_TEXT);
    p->zlib_crc = (uint32_t)crc32(0, (const Bytef *)CONSTRUCTS_ZLIB_INPUT,
                                  (uInt)strlen(CONSTRUCTS_ZLIB_INPUT));
}

#ifdef CONSTRUCTS_PAPER
size_t IFUNC(_payload_get_max_size)(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return sizeof(struct constructs_payload);
}

int IFUNC(_payload_init)(void *payload, size_t payload_size, void *source_args,
                         size_t source_args_size)
{
    struct constructs_payload p;
    if (payload_size < sizeof(p)) {
        return -1;
    }
    fill_payload(source_args, source_args_size, &p);
    memcpy(payload, &p, sizeof(p));
    return 0;
}
#else
size_t IFUNC(_payload_bound)(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return sizeof(struct constructs_payload);
}

int IFUNC(_payload_init)(void *source_args, size_t source_args_size,
                         void *payload, size_t *payload_size)
{
    struct constructs_payload p;
    fill_payload(source_args, source_args_size, &p);
    memcpy(payload, &p, sizeof(p));
    *payload_size = sizeof(p);
    return 0;
}
#endif

void IFUNC(_main)(void *payload, size_t payload_size, void *target_args)
{
    struct constructs_result        *r  = target_args;
    const struct constructs_payload *p  = payload;
    int32_t                         *ok = r->passed;
    char                             buf[32];
    int                              arr[5];
    volatile double                  x;

    r->calls++;
#ifdef UCX_IFUNC_BITCODE
    r->from_bitcode = 1;
#else
    r->from_bitcode = 0;
#endif
    ok[CHECK_PAYLOAD] = payload_size == sizeof(*p);
    if (!ok[CHECK_PAYLOAD] || (p->selector < 0) || (p->selector > 3)) {
        ok[CHECK_PAYLOAD] = 0;
        return;
    }
    int sel = p->selector;
    /* Statics persist between messages that carry the same code image: all
     * of them advance together, from their initial values. */
    int n          = call_count;
    r->image_calls = (uint64_t)n;

    ok[CHECK_STRING_LITERAL] = strcmp(p->text, "hello from the source") == 0;
    ok[CHECK_CONST_TABLE]    = (squares[sel] == sel * sel) &&
                            (squares[sel + 4] == (sel + 4) * (sel + 4));
    ok[CHECK_SWITCH_TABLE] = (classify(sel) == 11 * (sel + 1)) &&
                             (classify(sel + 4) == 11 * (sel + 5)) &&
                             (classify(sel + 20) == -1);

    ok[CHECK_DATA_VARIABLE] = (data_var == 42 + n) && (global_counter == 7 + n);
    data_var++;
    global_counter++;
    ok[CHECK_BSS_VARIABLE] =
            (bss_var == n) && (big_bss[1000 * sel + 7] == (n ? 'x' : 0));
    bss_var++;
    big_bss[1000 * sel + 7] = 'x';
    call_count++;

    arr[0] = 5;
    arr[1] = 3;
    arr[2] = sel + 10;
    arr[3] = 1;
    arr[4] = 4;
    qsort(arr, 5, sizeof(int), compare_ints);
    ok[CHECK_INTERNAL_FUNCTION_POINTER] =
            (arr[0] == 1) && (arr[1] == 3) && (arr[4] == sel + 10) &&
            (internal_fns[sel % 2](5) == ((sel % 2) ? 15 : 10));

    ok[CHECK_ABSOLUTE_POINTER_TABLE] = (strcmp(names[sel], "three") == 0) &&
                                       (strcmp(names[sel + 2], "five") == 0);
    ok[CHECK_EXTERNAL_FUNCTION_TABLE] =
            external_fns[0](p->text) == strlen(SOURCE_TEXT);

    snprintf(buf, sizeof(buf), "%d-%s", sel, names[1]);
    ok[CHECK_LIBC_CALLS] =
            (strcmp(buf, "3-one") == 0) && (strtol("123", NULL, 10) == 123);

    x = sel * sel;
    ok[CHECK_LIBM_CALLS] =
            (fabs(sqrt(x) - sel) < 1e-12) && (fabs(exp(x - 9.0) - 1.0) < 1e-12);

    errno = 0;
    (void)strtol("99999999999999999999999999", NULL, 10);
    ok[CHECK_ERRNO] = errno == ERANGE;

#ifndef IFUNC_SANDBOX
    ok[CHECK_STDIO_DATA_IMPORT] = (stdout != NULL) && (fileno(stdout) == 1);

    TEST_TARGET_GLOBAL += sel;
#else
    /* Sandboxed code imports functions only (docs/toolchain.md). */
    ok[CHECK_STDIO_DATA_IMPORT] = 1;
#endif
    ok[CHECK_TARGET_GLOBAL] = 1; /* the test checks the global's value */

    ok[CHECK_ZLIB_CALL] =
            crc32(0, (const Bytef *)CONSTRUCTS_ZLIB_INPUT,
                  (uInt)strlen(CONSTRUCTS_ZLIB_INPUT)) == p->zlib_crc;

#ifndef IFUNC_SANDBOX
    ok[CHECK_WEAK_UNDEFINED] = ucx_ifunc_test_never_defined == NULL;
#else
    ok[CHECK_WEAK_UNDEFINED]    = 1;
#endif
    ok[CHECK_STACK_PROTECTED_BUFFER] =
            protected_copy(p->text) == (int)strlen(SOURCE_TEXT) + 1;
    ok[CHECK_SECOND_SOURCE_FILE] =
            constructs_helper_scale(sel) == 3 * sel + 1 + n;
    ok[CHECK_VARARGS] = sum_varargs(3, sel, 2, 1) == sel + 3;
}
