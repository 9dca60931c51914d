/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The register probes of sandbox_code.S (sbx_t_probe, sbx_t_probe_call)
 * and what their stores must hold: the state sandboxed code may observe on
 * entry and after a host call (docs/security.md, "Registers while
 * sandboxed code runs"). Shared by test_sandbox.cc and the sandbox fuzzer.
 */
#ifndef TEST_UNIT_SANDBOX_PROBE_H_
#define TEST_UNIT_SANDBOX_PROBE_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

extern "C" {
extern const uint8_t sbx_text_start[], sbx_clean_end[];
extern const uint8_t sbx_t_probe[], sbx_t_probe_call[];
}

namespace test {

/* What the probes store at the payload (sandbox_code.S, STORE_STATE). */
struct ProbedState {
    uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, r8, r9, r10, r12, r13, r15;
    uint8_t  of, ah; /* seto %al, lahf */
    uint16_t padding;
    uint32_t mxcsr;
    uint8_t  xmm[16][16];
    uint32_t fcw, fsw, ftw, fip, fcs_fop, fdp, fds; /* FNSAVE, 32-bit form */
    uint8_t  st[8][10];
};
static_assert(offsetof(ProbedState, mxcsr) == 108, "sandbox_code.S");
static_assert(offsetof(ProbedState, xmm) == 112, "sandbox_code.S");
static_assert(offsetof(ProbedState, fcw) == 368, "sandbox_code.S");

/* The first way the vector and x87 registers and MXCSR of @a state differ
 * from: %xmm0-15 zero, MXCSR @a mxcsr, the x87 unit initial but for its
 * control word @a fcw; "" if they do not. */
inline std::string fp_state_differs(const ProbedState &state, uint32_t mxcsr,
                                    uint16_t fcw)
{
    char what[96];
    for (int i = 0; i < 16; ++i) {
        for (uint8_t byte : state.xmm[i]) {
            if (byte != 0) {
                snprintf(what, sizeof(what), "%%xmm%d is not zero", i);
                return what;
            }
        }
    }
    for (int i = 0; i < 8; ++i) {
        for (uint8_t byte : state.st[i]) {
            if (byte != 0) {
                snprintf(what, sizeof(what), "x87 register %d is not zero", i);
                return what;
            }
        }
    }
    /* The upper halves of FNSAVE's first words are reserved. */
    struct Word {
        const char *name;
        uint32_t    value, mask, expected;
    } words[] = {{"MXCSR", state.mxcsr, ~0u, mxcsr},
                 {"x87 control word", state.fcw, 0xffff, fcw},
                 {"x87 status word", state.fsw, 0xffff, 0},
                 {"x87 tag word", state.ftw, 0xffff, 0xffff},
                 {"x87 instruction pointer", state.fip, ~0u, 0},
                 {"x87 code selector and opcode", state.fcs_fop, 0x07ffffff, 0},
                 {"x87 data pointer", state.fdp, ~0u, 0},
                 {"x87 data selector", state.fds, 0xffff, 0}};
    for (const Word &word : words) {
        if ((word.value & word.mask) != word.expected) {
            snprintf(what, sizeof(what), "%s is 0x%x, not 0x%x", word.name,
                     word.value & word.mask, word.expected);
            return what;
        }
    }
    return "";
}

/* The first way @a state differs from the state a message starts with
 * (sbx_t_probe): general registers zero but the arguments @a payload (the
 * payload's address), @a size and @a target_args, the arithmetic flags
 * clear, the floating-point state initial; "" if it does not. */
inline std::string start_state_differs(const ProbedState &state,
                                       uint64_t payload, uint64_t size,
                                       uint64_t target_args)
{
    struct Register {
        const char *name;
        uint64_t    value, expected;
    } registers[] = {{"%rax", state.rax, 0},
                     {"%rbx", state.rbx, 0},
                     {"%rcx", state.rcx, 0},
                     {"%rdx", state.rdx, target_args},
                     {"%rsi", state.rsi, size},
                     {"%rdi", state.rdi, payload},
                     {"%rbp", state.rbp, 0},
                     {"%r8", state.r8, 0},
                     {"%r9", state.r9, 0},
                     {"%r10", state.r10, 0},
                     {"%r12", state.r12, 0},
                     {"%r13", state.r13, 0},
                     {"%r15", state.r15, 0},
                     {"flags (lahf)", state.ah, 0x02}, /* bit 1 is always set */
                     {"OF", state.of, 0}};
    for (const Register &reg : registers) {
        if (reg.value != reg.expected) {
            char what[96];
            snprintf(what, sizeof(what), "%s is 0x%lx, not 0x%lx", reg.name,
                     reg.value, reg.expected);
            return what;
        }
    }
    return fp_state_differs(state, 0x1f80, 0x037f);
}

} // namespace test

#endif
