/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Code for the sandbox (ucx-ifunc-cc --sandbox): the well-behaved message
 * and the ways out of the sandbox that test_sandbox_paths.cc sends (see
 * test_ifunc.h). Built under one name per tenant (IFUNC_NAME).
 */
#include "test_ifunc.h"

#include <string.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define IFUNC(suffix) CAT(IFUNC_NAME, suffix)

/* In the code's data segment: each tenant has its own. */
static uint64_t kept;

size_t IFUNC(_payload_bound)(void *source_args, size_t source_args_size)
{
    (void)source_args;
    (void)source_args_size;
    return sizeof(struct sandboxed_args);
}

int IFUNC(_payload_init)(void *source_args, size_t source_args_size,
                         void *payload, size_t *payload_size)
{
    if (source_args_size != sizeof(struct sandboxed_args)) {
        return -1;
    }
    memcpy(payload, source_args, sizeof(struct sandboxed_args));
    *payload_size = sizeof(struct sandboxed_args);
    return 0;
}

/* A frame that stays on the stack until the call below it returns, so
 * that the recursion can neither become a loop nor a tail call. */
static __attribute__((noinline)) uint64_t recurse(uint64_t depth)
{
    volatile uint64_t frame[64];
    frame[depth % 64] = depth;
    if (depth == 0) {
        return 0;
    }
    uint64_t below = recurse(depth - 1);
    frame[0]       = below;
    return frame[0] + frame[depth % 64];
}

/* Overwrites its own return address, above the saved frame pointer. */
static __attribute__((noinline)) void return_to(uint64_t address)
{
    volatile uint64_t *frame = __builtin_frame_address(0);
    frame[1]                 = address;
}

void IFUNC(_main)(void *payload, size_t payload_size, void *target_args)
{
    struct sandboxed_args    args;
    struct sandboxed_result *result;
    volatile uint64_t        divisor;

    if (payload_size != sizeof(args)) {
        return;
    }
    __builtin_memcpy(&args, payload, sizeof(args));
    result = (args.result != 0) ? (struct sandboxed_result *)args.result
                                : target_args;
    switch (args.op) {
        case SANDBOXED_ADD:
            result->value += args.value;
            break;
        case SANDBOXED_WRITE_AT:
            *(volatile uint64_t *)args.address = args.value;
            break;
        case SANDBOXED_READ_AT:
            result->value = *(volatile uint64_t *)args.address;
            break;
        case SANDBOXED_LOOP:
            for (;;) {
                __asm__ volatile("" ::: "memory");
            }
        case SANDBOXED_RECURSE:
            result->value = recurse(args.value);
            break;
        case SANDBOXED_TRAP:
            __builtin_trap();
        case SANDBOXED_DIVIDE:
            divisor       = args.value;
            result->value = args.address / divisor;
            break;
        case SANDBOXED_KEEP:
            kept          = args.value;
            result->value = kept;
            break;
        case SANDBOXED_RECALL:
            result->value = kept;
            break;
        case SANDBOXED_CALL_AT:
            ((void (*)(void))(uintptr_t)args.address)();
            break;
        case SANDBOXED_RETURN_TO:
            return_to(args.address);
            break;
        case SANDBOXED_WRITE_CODE:
            *(volatile uint8_t *)(uintptr_t)&recurse = (uint8_t)args.value;
            break;
        default:
            return;
    }
    ++result->runs;
}
