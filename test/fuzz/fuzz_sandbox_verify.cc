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
 *   text or, for calls, onto a gate bundle;
 * - accepted text then runs in a slot of the sandbox runtime (sandbox.cc),
 *   its imports granted host functions, on a payload of its own bytes,
 *   with a budget of 5 ms: the run returns, faults or runs out of time,
 *   and leaves the host alone: pages next to the slot, pages of the host at
 *   the same offsets modulo 4 GiB as the slot's memory (what a %gs access
 *   that ignored the base would reach), a host buffer passed as
 *   target_args, MXCSR, the x87 control, status and tag words, the
 *   pending floating-point exceptions and the direction flag are as they
 *   were (the host first leaves a host address in %xmm8-15 and the x87
 *   registers and raises exception flags);
 * - then a probe (sandbox_code.S, sbx_t_probe) runs in a slot of its own,
 *   as the next tenant: it starts with the registers defined
 *   (sandbox_probe.h), none of the program's or the host's values.
 *
 * Seeds (the .s files of test/fuzz/sandbox_seeds) are assembled by GNU as at build
 * time into the build's test/fuzz/corpus_sandbox.
 */
#include "ucp/ifunc/sandbox/sandbox.h"
#include "ucp/ifunc/format/sandbox_layout.h"
#include "ucp/ifunc/sandbox/sandbox_verify.h"

#include "test/fuzz/drop_log.h"
#include "test/unit/sandbox_probe.h"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <cfenv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <xmmintrin.h>

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

constexpr uint64_t kPage   = 4096;
constexpr uint8_t  kCanary = 0xc5;

/* Pages of the host filled with kCanary, where free, that confined code
 * must not change. */
class Canaries {
public:
    Canaries() = default;
    ~Canaries()
    {
        for (const auto &range : ranges_) {
            munmap(reinterpret_cast<void *>(range.first), range.second);
        }
    }
    Canaries(const Canaries &)            = delete;
    Canaries &operator=(const Canaries &) = delete;

    void add(uint64_t address, uint64_t length)
    {
        void *want = reinterpret_cast<void *>(address);
        void *got =
                mmap(want, length, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (got == want) {
            memset(got, kCanary, length);
            ranges_.emplace_back(address, length);
        } else if (got != MAP_FAILED) {
            munmap(got, length); /* a kernel that took it as a hint */
        }
    }

    void check() const
    {
        for (const auto &range : ranges_) {
            const auto *bytes = reinterpret_cast<const uint8_t *>(range.first);
            for (uint64_t i = 0; i < range.second; ++i) {
                if (bytes[i] != kCanary) {
                    fprintf(stderr, "host byte at 0x%lx changed\n",
                            range.first + i);
                    fail("sandboxed code changed the host's memory", 0);
                }
            }
        }
    }

private:
    std::vector<std::pair<uint64_t, uint64_t>> ranges_;
};

/* Canaries for the slot at @a base: S3's margins of 32 KiB on either side,
 * and the host's pages at the slot's offsets 4 GiB above it. */
void add_canaries(uint64_t base, uint64_t data_offset, Canaries *canaries)
{
    canaries->add(base - 0x8000, 0x8000);
    canaries->add(base + kSlotSize, 0x8000);
    const uint64_t alias = base + 2 * kSlotSize;
    for (uint64_t offset :
         {uint64_t(0), kGateOffset, kImageOffset, data_offset, kStackBase,
          kStackTop - kPage, kPayloadOffset, kGrantOffset}) {
        canaries->add(alias + offset, kPage);
    }
}

/* The host's floating-point state that sandboxed code must leave as it
 * was. */
struct HostFp {
    uint32_t mxcsr;
    uint16_t fcw, fsw, ftw; /* the x87 control, status and tag words */
    int      exceptions;    /* fetestexcept */
    bool     df;

    static HostFp now()
    {
        uint16_t env[14]; /* FNSTENV, 32-bit form */
        uint64_t flags;
        asm volatile("fnstenv %0\n\tfldenv %0" : "=m"(env));
        asm volatile("pushfq\n\tpopq %0" : "=r"(flags));
        return HostFp{_mm_getcsr(),
                      env[0],
                      env[2],
                      env[4],
                      fetestexcept(FE_ALL_EXCEPT),
                      ((flags >> 10) & 1) != 0};
    }

    bool operator==(const HostFp &other) const
    {
        return (mxcsr == other.mxcsr) && (fcw == other.fcw) &&
               (fsw == other.fsw) && (ftw == other.ftw) &&
               (exceptions == other.exceptions) && (df == other.df);
    }
};

/* Leaves @a value in %xmm8-15 and in an x87 register (popped) and raises
 * the SSE and x87 zero divide flags, as host code may. */
void dirty_host_registers(uint64_t value)
{
    asm volatile("movq %0, %%xmm8\n\tmovq %0, %%xmm9\n\t"
                 "movq %0, %%xmm10\n\tmovq %0, %%xmm11\n\t"
                 "movq %0, %%xmm12\n\tmovq %0, %%xmm13\n\t"
                 "movq %0, %%xmm14\n\tmovq %0, %%xmm15\n\t"
                 "fildq %1\n\tfstp %%st(0)\n\t"
                 "fld1\n\tfldz\n\tfdivrp\n\tfstp %%st(0)\n\t"
                 "xorps %%xmm0, %%xmm0\n\tdivss %%xmm0, %%xmm8"
                 :
                 : "r"(value), "m"(value)
                 : "xmm0", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
                   "xmm14", "xmm15", "st");
}

/* The slot of sandbox_code.S's part that keeps the rules, where the probe
 * runs after each program. */
Slot &probe_slot()
{
    static std::unique_ptr<Slot> slot = [] {
        /* sandbox_code.S's layout: data up to 0x4000, five imports. */
        const uint64_t     text_size = uint64_t(sbx_clean_end - sbx_text_start);
        const uint64_t     map_size  = 0x4000;
        const VerifyInput  in{sbx_text_start, text_size, 0, map_size, 5};
        const VerifyResult verdict = verify_x86_64(in);
        if (!verdict.accepted) {
            fprintf(stderr, "%s\n", verdict.reason.c_str());
            fail("the verifier refuses the probe", verdict.offset);
        }
        SlotImage image;
        image.name     = "fuzz_probe";
        image.map_size = map_size;
        image.segments = {{0, text_size, sbx_text_start, text_size,
                           kSlotRead | kSlotExec}};
        image.imports  = {"memcpy", "memset", "memmove", "memcmp", "strlen"};
        image.payload_limit = kPage;
        std::unique_ptr<Slot> made;
        if ((Slot::create(image, &made) != UCS_OK) ||
            (made->seal() != UCS_OK)) {
            fail("no slot for the probe", 0);
        }
        return made;
    }();
    return *slot;
}

/* Runs the probe as the next tenant; fails unless it starts with the
 * registers defined. */
void check_next_tenant_starts_clean()
{
    Slot                 &slot = probe_slot();
    std::vector<uint64_t> words(sizeof(test::ProbedState) / 8 + 1, 0);
    static uint64_t       host_word;
    dirty_host_registers(reinterpret_cast<uint64_t>(&host_word));
    const ucs_status_t status =
            slot.run(uint64_t(sbx_t_probe - sbx_text_start), words.data(),
                     8 * words.size(), nullptr);
    feclearexcept(FE_ALL_EXCEPT);
    if (status == UCS_ERR_TIMED_OUT) {
        return; /* preempted past the 5 ms budget on a loaded machine */
    }
    if (status != UCS_OK) {
        fprintf(stderr, "status %d, signal %d at 0x%lx\n", int(status),
                slot.last_fault().signal, slot.last_fault().pc);
        fail("the probe did not run", 0);
    }
    test::ProbedState state;
    memcpy(&state, slot.payload_area(), sizeof(state));
    const std::string differs = test::start_state_differs(
            state, slot.base() + kPayloadOffset, 8 * words.size(), 0);
    if (!differs.empty()) {
        fprintf(stderr, "the next tenant starts with %s\n", differs.c_str());
        fail("registers of a program or the host reach the next tenant", 0);
    }
}

/* Whether this process runs sandboxed code (LLVMFuzzerInitialize). */
bool runs_sandboxed = false;

/* How the runs ended, for the summary at exit. */
struct Outcomes {
    unsigned long returned = 0, faulted = 0, timed_out = 0;
    ~Outcomes()
    {
        fprintf(stderr,
                "fuzz_sandbox_verify: ran %lu accepted programs: %lu "
                "returned, %lu faulted, %lu ran out of time\n",
                returned + faulted + timed_out, returned, faulted, timed_out);
    }
} outcomes;

/* Runs accepted text in a slot; see the top of the file. */
void run_confined(const VerifyInput &in)
{
    if (!runs_sandboxed) {
        return;
    }
    static const std::vector<std::string> granted = granted_functions();
    /* A buffer of the host that the code is given the address of. */
    static std::vector<uint8_t> host(kPage, kCanary);

    const uint64_t text_pages = (in.text_size + kPage - 1) / kPage * kPage;
    SlotImage      image;
    image.name     = "fuzz";
    image.map_size = text_pages + kPage; /* covers in.image_map_size */
    image.segments = {
            {0, in.text_size, in.text, in.text_size, kSlotRead | kSlotExec},
            {text_pages, kPage, nullptr, 0, kSlotRead | kSlotWrite}};
    for (uint32_t i = 0; i < in.n_imports; ++i) {
        image.imports.push_back(granted[i % granted.size()]);
    }
    image.payload_limit = kPage;
    std::unique_ptr<Slot> slot;
    if ((Slot::create(image, &slot) != UCS_OK) || (slot->seal() != UCS_OK)) {
        fail("no slot for accepted code", 0);
    }
    Canaries canaries;
    add_canaries(slot->base(), kImageOffset + text_pages, &canaries);

    const size_t size = std::min<size_t>(in.text_size, kPage);
    dirty_host_registers(reinterpret_cast<uint64_t>(host.data()));
    const HostFp       before = HostFp::now();
    const ucs_status_t status = slot->run(0, in.text, size, host.data());
    const HostFp       after  = HostFp::now();
    feclearexcept(FE_ALL_EXCEPT);
    switch (status) {
        case UCS_OK:
            ++outcomes.returned;
            break;
        case UCS_ERR_REJECTED:
            ++outcomes.faulted;
            break;
        case UCS_ERR_TIMED_OUT:
            ++outcomes.timed_out;
            break;
        default:
            fprintf(stderr, "status %d\n", int(status));
            fail("a run that neither returned, faulted nor ran out of time", 0);
    }
    canaries.check();
    if (std::count(host.begin(), host.end(), kCanary) != ssize_t(kPage)) {
        fail("sandboxed code changed the host buffer it was given", 0);
    }
    if (!(after == before)) {
        fprintf(stderr,
                "before: MXCSR 0x%x FCW 0x%x FSW 0x%x FTW 0x%x except 0x%x "
                "DF %d\nafter:  MXCSR 0x%x FCW 0x%x FSW 0x%x FTW 0x%x except "
                "0x%x DF %d\n",
                before.mxcsr, before.fcw, before.fsw, before.ftw,
                before.exceptions, before.df, after.mxcsr, after.fcw, after.fsw,
                after.ftw, after.exceptions, after.df);
        fail("the host's floating-point state changed", 0);
    }
    check_next_tenant_starts_clean();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    /* Accepted code that faults warns at every input. */
    ucs_log_push_handler(ucx_ifunc::fuzz::drop_log_line);
    std::string why;
    runs_sandboxed = sandbox_supported(&why);
    if (!runs_sandboxed) {
        fprintf(stderr, "fuzz_sandbox_verify: accepted code is not run: %s\n",
                why.c_str());
    }
    /* Endless loops cost the budget each: a small one. */
    sandbox_set_budget(0.005);
    return 0;
}

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
    run_confined(in);
    return 0;
}
