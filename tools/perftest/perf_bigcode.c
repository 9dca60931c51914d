/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The large ifunc of ucx_ifunc_perftest: the same contract and the same work
 * per message as perf_bump (main bumps the target's counter; source_args is
 * the payload size), but main reaches more than 16 KiB of machine code, so
 * that the benchmark shows what sending the code once saves. The code is 256
 * distinct mixing steps (about 100 bytes each); main runs one of them per message, chosen by the
 * counter, so each message costs about as much as one of perf_bump.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One step: a few multiply-xorshift rounds with constants of its own, so
 * that no two steps are identical (the compiler would fold them) and none is
 * inlined into the dispatch. */
#define PERF_BIGCODE_STEP(n)                                                   \
    static __attribute__((noinline))                                           \
    uint64_t perf_bigcode_step_##n(uint64_t x)                                 \
    {                                                                          \
        x ^= x >> ((n) % 29 + 3);                                              \
        x *= 0x9e3779b97f4a7c15ull + 2ull * (n);                               \
        x ^= x << ((n) % 13 + 1);                                              \
        x += 0x632be59bd9b4e019ull * ((n) + 1);                                \
        x ^= x >> ((n) % 31 + 1);                                              \
        x *= 0xd6e8feb86659fd93ull - 2ull * (n);                               \
        x ^= x >> ((n) % 17 + 5);                                              \
        return x ^ (0x5851f42d4c957f2dull * ((n) + 7));                        \
    }

#define PERF_BIGCODE_CASE(n)                                                   \
    case n:                                                                    \
        return perf_bigcode_step_##n(x);

/* Applies X(n) to n = 0 .. 255, written as octal literals 0000 .. 0377:
 * token pasting builds them digit by digit. */
#define PERF_BIGCODE_8(X, p)                                                   \
    X(p##0) X(p##1) X(p##2) X(p##3) X(p##4) X(p##5) X(p##6) X(p##7)
#define PERF_BIGCODE_64(X, p)                                                  \
    PERF_BIGCODE_8(X, p##0)                                                    \
    PERF_BIGCODE_8(X, p##1)                                                    \
    PERF_BIGCODE_8(X, p##2)                                                    \
    PERF_BIGCODE_8(X, p##3)                                                    \
    PERF_BIGCODE_8(X, p##4)                                                    \
    PERF_BIGCODE_8(X, p##5)                                                    \
    PERF_BIGCODE_8(X, p##6)                                                    \
    PERF_BIGCODE_8(X, p##7)
#define PERF_BIGCODE_256(X)                                                    \
    PERF_BIGCODE_64(X, 00)                                                     \
    PERF_BIGCODE_64(X, 01)                                                     \
    PERF_BIGCODE_64(X, 02)                                                     \
    PERF_BIGCODE_64(X, 03)

PERF_BIGCODE_256(PERF_BIGCODE_STEP)

static uint64_t perf_bigcode_dispatch(unsigned step, uint64_t x)
{
    switch (step % 256) {
        PERF_BIGCODE_256(PERF_BIGCODE_CASE)
    }
    return x;
}

/* Where the steps' results go, so that the calls are not dropped. */
static uint64_t perf_bigcode_sink;

size_t perf_bigcode_payload_bound(void *source_args, size_t source_args_size)
{
    return (source_args_size == sizeof(size_t)) ? *(size_t *)source_args : 0;
}

int perf_bigcode_payload_init(void *source_args, size_t source_args_size,
                              void *payload, size_t *payload_size)
{
    (void)source_args;
    (void)source_args_size;
    memset(payload, 0x5a, *payload_size);
    return 0;
}

void perf_bigcode_main(void *payload, size_t payload_size, void *target_args)
{
    (void)payload;
    (void)payload_size;
    uint64_t *counter = (uint64_t *)target_args;
    perf_bigcode_sink = perf_bigcode_dispatch((unsigned)*counter,
                                              perf_bigcode_sink + *counter);
    ++*counter;
}
