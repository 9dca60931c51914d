/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * libFuzzer harness over the sandbox verifier (sandbox_verify.cc): the
 * machine code a peer ships for the sandbox. Input: byte 0 is the number
 * of imports (mod 128), the rest the text, at image vaddr 0 of an image
 * one page longer than the text.
 *
 * For every input:
 * - the fast path and the full path (verify_x86_64, verify_x86_64_full)
 *   decide alike, with the same offset and reason;
 * - a refusal names a rule (S1..S7) and an offset inside the text;
 * - accepted text is checked again here, by code that shares nothing with
 *   the verifier but the decoder: whole bundles, each decoding into
 *   instructions that end inside it; no instruction of a short list of
 *   ways out (system calls, interrupts, returns, far branches, segment
 *   base writes, string instructions); no write to %r14; every memory
 *   access through %gs with 32-bit addresses, %rsp with a small
 *   displacement, or %rip inside the image; every direct branch into the
 *   text or, for calls, onto a gate bundle.
 *
 * Seeds (the .s files of test/fuzz/sandbox_seeds) are assembled by GNU as at build
 * time into the build's test/fuzz/corpus_sandbox.
 */
#include "ucp/ifunc/sandbox_layout.h"
#include "ucp/ifunc/sandbox_verify.h"

#include <Zydis/Zydis.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using namespace ucx_ifunc::sandbox;

[[noreturn]] void fail(const char *what, size_t offset)
{
    fprintf(stderr, "fuzz_sandbox_verify: %s at text+0x%zx\n", what, offset);
    abort();
}

bool is_way_out(ZydisMnemonic m)
{
    switch (m) {
        case ZYDIS_MNEMONIC_SYSCALL:
        case ZYDIS_MNEMONIC_SYSENTER:
        case ZYDIS_MNEMONIC_SYSRET:
        case ZYDIS_MNEMONIC_INT:
        case ZYDIS_MNEMONIC_INT1:
        case ZYDIS_MNEMONIC_INT3:
        case ZYDIS_MNEMONIC_INTO:
        case ZYDIS_MNEMONIC_IRETQ:
        case ZYDIS_MNEMONIC_IRETD:
        case ZYDIS_MNEMONIC_RET:
        case ZYDIS_MNEMONIC_HLT:
        case ZYDIS_MNEMONIC_IN:
        case ZYDIS_MNEMONIC_OUT:
        case ZYDIS_MNEMONIC_CPUID:
        case ZYDIS_MNEMONIC_RDTSC:
        case ZYDIS_MNEMONIC_RDTSCP:
        case ZYDIS_MNEMONIC_WRGSBASE:
        case ZYDIS_MNEMONIC_WRFSBASE:
        case ZYDIS_MNEMONIC_SWAPGS:
        case ZYDIS_MNEMONIC_MOVSB:
        case ZYDIS_MNEMONIC_STOSB:
        case ZYDIS_MNEMONIC_STOSQ:
        case ZYDIS_MNEMONIC_XLAT:
        case ZYDIS_MNEMONIC_LEAVE:
        case ZYDIS_MNEMONIC_ENTER:
        case ZYDIS_MNEMONIC_XSAVE:
        case ZYDIS_MNEMONIC_XRSTOR:
            return true;
        default:
            return false;
    }
}

/* The properties of accepted text, from a fresh decoding. */
void recheck(const VerifyInput &in)
{
    if (in.text_size == 0 || in.text_size % kBundleSize != 0) {
        fail("accepted text of a size that is not whole bundles", 0);
    }
    ZydisDecoder decoder;
    ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64,
                     ZYDIS_STACK_WIDTH_64);
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand     ops[ZYDIS_MAX_OPERAND_COUNT];
    for (size_t off = 0; off < in.text_size; off += insn.length) {
        const size_t bundle_end = (off / kBundleSize + 1) * kBundleSize;
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(
                    &decoder, in.text + off, bundle_end - off, &insn, ops))) {
            fail("accepted bytes that do not decode inside their bundle", off);
        }
        if (is_way_out(insn.mnemonic) ||
            insn.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR) {
            fail("accepted a way out", off);
        }
        const uint64_t next = in.text_vaddr + off + insn.length;
        for (unsigned i = 0; i < insn.operand_count; ++i) {
            const ZydisDecodedOperand &op = ops[i];
            if (op.type == ZYDIS_OPERAND_TYPE_REGISTER &&
                (op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
                ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64,
                                                 op.reg.value) ==
                        ZYDIS_REGISTER_R14) {
                fail("accepted a write to %r14", off);
            }
            if (op.type == ZYDIS_OPERAND_TYPE_MEMORY &&
                op.visibility == ZYDIS_OPERAND_VISIBILITY_EXPLICIT &&
                op.mem.type == ZYDIS_MEMOP_TYPE_MEM &&
                insn.mnemonic != ZYDIS_MNEMONIC_NOP &&
                insn.meta.category != ZYDIS_CATEGORY_PREFETCH) {
                const bool gs = op.mem.segment == ZYDIS_REGISTER_GS &&
                                insn.address_width == 32;
                const bool rsp = op.mem.base == ZYDIS_REGISTER_RSP &&
                                 op.mem.index == ZYDIS_REGISTER_NONE &&
                                 op.mem.disp.value >= -0x8000 &&
                                 op.mem.disp.value < 0x8000;
                const int64_t addr = int64_t(next) + op.mem.disp.value;
                const bool    rip =
                        op.mem.base == ZYDIS_REGISTER_RIP && addr >= 0 &&
                        uint64_t(addr) + op.size / 8 <= in.image_map_size;
                if (!gs && !rsp && !rip) {
                    fail("accepted a memory access that can leave the slot",
                         off);
                }
            }
            if (op.type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op.imm.is_relative) {
                const int64_t target = int64_t(next) + op.imm.value.s;
                const bool    in_text =
                        target >= int64_t(in.text_vaddr) &&
                        target < int64_t(in.text_vaddr + in.text_size);
                const int64_t gate = target + int64_t(kGateSize);
                const bool    to_gate =
                        insn.mnemonic == ZYDIS_MNEMONIC_CALL && gate >= 0 &&
                        gate % kBundleSize == 0 &&
                        uint64_t(gate) / kBundleSize <= in.n_imports;
                if (!in_text && !to_gate) {
                    fail("accepted a branch out of the text", off);
                }
            }
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    /* A copy of exactly the text: a read past it is an ASan report. */
    const std::vector<uint8_t> text(data + 1, data + size);
    const VerifyInput in{text.data(), text.size(), 0, text.size() + 0x1000,
                         uint32_t(data[0] % (kMaxGateImports + 1))};

    const VerifyResult fast = verify_x86_64(in);
    const VerifyResult full = verify_x86_64_full(in);
    if (fast.accepted != full.accepted || fast.offset != full.offset ||
        fast.reason != full.reason) {
        fprintf(stderr, "fast: %d %s\nfull: %d %s\n", fast.accepted,
                fast.reason.c_str(), full.accepted, full.reason.c_str());
        fail("the fast and the full path decide differently", fast.offset);
    }
    if (!fast.accepted) {
        if (fast.reason.size() < 4 || fast.reason[0] != 'S' ||
            fast.reason[1] < '1' || fast.reason[1] > '7' ||
            fast.reason[2] != ':' ||
            (text.size() > 0 && fast.offset >= text.size())) {
            fail("a refusal without a rule or inside the text", fast.offset);
        }
        return 0;
    }
    recheck(in);
    /* TODO(sandbox runtime, issue 21): once sandbox.cc can map a slot, run
     * the accepted text here in one (a fault or the budget ends it) and
     * check that the host's memory and registers are untouched. */
    return 0;
}
