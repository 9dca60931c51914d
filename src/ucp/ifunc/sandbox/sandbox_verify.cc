/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The verifier of sandboxed x86-64 code (docs/security.md, "Sandboxed
 * code", rules S1-S7). Pass 1 decodes the text linearly, bundle by bundle,
 * checks each instruction alone and against the one or two before it in
 * its bundle, and records instruction starts, the inner instructions of the
 * S5 and S7 sequences, and the direct branches. Pass 2 checks the branch
 * targets against those records. Zydis decodes; every decision is ours.
 */
#include "ucp/ifunc/sandbox/sandbox_verify.h"

#include "ucp/ifunc/format/sandbox_layout.h"

#include <Zydis/Zydis.h>

#include <array>
#include <cinttypes>
#include <cstdio>
#include <initializer_list>
#include <vector>

namespace ucx_ifunc {
namespace sandbox {
namespace {

/* S2: the allow-list. Two parts: whole instruction classes (ISA
 * extensions) less a few members, and integer mnemonics one by one (the
 * base class also holds syscall, in/out, string instructions and the
 * like). A mnemonic that names both a string and an SSE2 instruction
 * (movsd, cmpsd) is allowed only through the SSE2 class. */
constexpr ZydisISAExt kAllowedClasses[] = {
        ZYDIS_ISA_EXT_SSE, ZYDIS_ISA_EXT_SSE2, ZYDIS_ISA_EXT_X87};

/* In an allowed class but refused: byte-masked stores through an implicit
 * %rdi/%edi (no S3 form), and the fx state saves (S2's list). */
constexpr ZydisMnemonic kRefusedInClasses[] = {
        ZYDIS_MNEMONIC_MASKMOVQ, ZYDIS_MNEMONIC_MASKMOVDQU,
        ZYDIS_MNEMONIC_FXSAVE,   ZYDIS_MNEMONIC_FXSAVE64,
        ZYDIS_MNEMONIC_FXRSTOR,  ZYDIS_MNEMONIC_FXRSTOR64};

/* Integer instructions. No std: string instructions are refused, so the
 * direction flag has no use, and host functions called through the gate
 * expect it clear. call and jmp are further limited by S6 and S7
 * (and far forms refused), mov and push/pop by the segment register check
 * below, every instruction by the privileged attribute. */
#define M(name) ZYDIS_MNEMONIC_##name
constexpr ZydisMnemonic kAllowedIntegerMnemonics[] = {
        M(ADC),       M(ADD),        M(AND),     M(BSF),    M(BSR),
        M(BSWAP),     M(BT),         M(BTC),     M(BTR),    M(BTS),
        M(CALL),      M(CBW),        M(CDQ),     M(CDQE),   M(CLC),
        M(CLD),       M(CMC),        M(CMOVB),   M(CMOVBE), M(CMOVL),
        M(CMOVLE),    M(CMOVNB),     M(CMOVNBE), M(CMOVNL), M(CMOVNLE),
        M(CMOVNO),    M(CMOVNP),     M(CMOVNS),  M(CMOVNZ), M(CMOVO),
        M(CMOVP),     M(CMOVS),      M(CMOVZ),   M(CMP),    M(CMPXCHG),
        M(CMPXCHG8B), M(CMPXCHG16B), M(CQO),     M(CWD),    M(CWDE),
        M(DEC),       M(DIV),        M(ENDBR64), M(IDIV),   M(IMUL),
        M(INC),       M(JB),         M(JBE),     M(JECXZ),  M(JL),
        M(JLE),       M(JMP),        M(JNB),     M(JNBE),   M(JNL),
        M(JNLE),      M(JNO),        M(JNP),     M(JNS),    M(JNZ),
        M(JO),        M(JP),         M(JRCXZ),   M(JS),     M(JZ),
        M(LAHF),      M(LEA),        M(LOOP),    M(LOOPE),  M(LOOPNE),
        M(LZCNT),     M(MOV),        M(MOVSX),   M(MOVSXD), M(MOVZX),
        M(MUL),       M(NEG),        M(NOP),     M(NOT),    M(OR),
        M(PAUSE),     M(POP),        M(POPCNT),  M(PUSH),   M(RCL),
        M(RCR),       M(ROL),        M(ROR),     M(SAHF),   M(SAR),
        M(SBB),       M(SETB),       M(SETBE),   M(SETL),   M(SETLE),
        M(SETNB),     M(SETNBE),     M(SETNL),   M(SETNLE), M(SETNO),
        M(SETNP),     M(SETNS),      M(SETNZ),   M(SETO),   M(SETP),
        M(SETS),      M(SETZ),       M(SHL),     M(SHLD),   M(SHR),
        M(SHRD),      M(STC),        M(SUB),     M(TEST),   M(TZCNT),
        M(UD2),       M(XADD),       M(XCHG),    M(XOR)};
#undef M

/* The allow-list as a table indexed by mnemonic, built once. */
struct AllowList {
    std::array<bool, ZYDIS_MNEMONIC_MAX_VALUE + 1> integer{};
    std::array<bool, ZYDIS_MNEMONIC_MAX_VALUE + 1> refused_in_class{};
    std::array<bool, ZYDIS_ISA_EXT_MAX_VALUE + 1>  cls{};

    AllowList()
    {
        for (ZydisMnemonic m : kAllowedIntegerMnemonics) {
            integer[m] = true;
        }
        for (ZydisMnemonic m : kRefusedInClasses) {
            refused_in_class[m] = true;
        }
        for (ZydisISAExt e : kAllowedClasses) {
            cls[e] = true;
        }
    }
};

const AllowList kAllowList;

bool allowed_instruction(const ZydisDecodedInstruction &insn)
{
    if (insn.encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY ||
        (insn.attributes & ZYDIS_ATTRIB_IS_PRIVILEGED) ||
        insn.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR) {
        return false;
    }
    if (kAllowList.cls[insn.meta.isa_ext]) {
        return !kAllowList.refused_in_class[insn.mnemonic];
    }
    return kAllowList.integer[insn.mnemonic];
}

/* What an instruction is to the S5 and S7 sequences. */
enum class Seq : uint8_t {
    kNone,
    kAndBundle, /* andl $kBundleMask, %r11d */
    kAddBase,   /* addq %r14, %r11 after kAndBundle */
    kAndStack,  /* andl $kStackMask, %r11d */
};

/* Per text byte, from pass 1. */
constexpr uint8_t kMarkStart = 1; /* an instruction starts here */
constexpr uint8_t kMarkInner = 2; /* ... that is 2nd or 3rd of S5/S7 */

struct DirectBranch {
    uint64_t offset;
    int64_t  target; /* image vaddr */
    bool     is_call;
};

bool is_reg(const ZydisDecodedOperand &op, ZydisRegister reg)
{
    return op.type == ZYDIS_OPERAND_TYPE_REGISTER && op.reg.value == reg;
}

bool is_and_r11d(const ZydisDecodedInstruction &insn,
                 const ZydisDecodedOperand *ops, uint32_t mask)
{
    return insn.mnemonic == ZYDIS_MNEMONIC_AND &&
           insn.operand_count_visible == 2 &&
           is_reg(ops[0], ZYDIS_REGISTER_R11D) &&
           ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
           uint32_t(ops[1].imm.value.u) == mask;
}

bool is_add_r14_r11(const ZydisDecodedInstruction &insn,
                    const ZydisDecodedOperand     *ops)
{
    return insn.mnemonic == ZYDIS_MNEMONIC_ADD &&
           insn.operand_count_visible == 2 &&
           is_reg(ops[0], ZYDIS_REGISTER_R11) &&
           is_reg(ops[1], ZYDIS_REGISTER_R14);
}

/* leaq kStackWindow(%r14,%r11), %rsp */
bool is_stack_lea(const ZydisDecodedInstruction &insn,
                  const ZydisDecodedOperand     *ops)
{
    if (insn.mnemonic != ZYDIS_MNEMONIC_LEA || insn.address_width != 64 ||
        !is_reg(ops[0], ZYDIS_REGISTER_RSP)) {
        return false;
    }
    const ZydisDecodedOperandMem &mem = ops[1].mem;
    return mem.base == ZYDIS_REGISTER_R14 && mem.index == ZYDIS_REGISTER_R11 &&
           mem.scale == 1 && mem.disp.has_displacement &&
           mem.disp.value == int64_t(kStackWindow);
}

/* The fast path: a small decoder of the commonest integer and SSE2 forms.
 * It answers an instruction's length only where the full path (Zydis and
 * check_instruction) would accept the instruction and give it no part in
 * an S5 or S7 sequence; it answers false for anything else, and never
 * refuses, so every refusal and its reason come from the full path. It
 * leaves %rsp, %r11 and %r14 writes, %rip-relative operands, prefixes
 * other than %gs, 0x67, a mandatory SSE prefix and the %cs of padding
 * nops, and every branch but jmp, jcc and call rel to the full path. The
 * fuzzer checks that both paths decide alike (verify_x86_64_full). */
struct FastInsn {
    uint8_t length;
    uint8_t branch; /* kFastJump, kFastCall or 0 */
    int64_t rel;    /* of a branch, from the next instruction */
};
constexpr uint8_t kFastJump = 1;
constexpr uint8_t kFastCall = 2;

/* How an opcode's ModRM form writes registers. */
enum FastForm : uint8_t {
    kFastNo,      /* not in the fast path */
    kFastWriteRm, /* writes the r/m operand */
    kFastWriteReg,
    kFastRead,   /* writes no general register */
    kFastSse,    /* writes an xmm register or memory */
    kFastSseGpr, /* writes the general register of the reg field */
};

/* The fast path's opcode tables, indexed by opcode, built once from
 * lists of opcodes. */
struct FastTables {
    FastForm one_byte[256] = {}; /* with ModRM; 0x81, 0x83, 0xc1, 0xc7,
                                     0xff also depend on the reg field */
    uint8_t  imm[256]      = {}; /* immediate bytes after ModRM */
    FastForm two_byte[256] = {}; /* after 0x0f, no mandatory prefix */
    FastForm sse[4][256]   = {}; /* after 0x0f: none, 0x66, 0xf2, 0xf3 */

    static void set(FastForm *table, FastForm form,
                    std::initializer_list<uint8_t> ops)
    {
        for (uint8_t op : ops) {
            table[op] = form;
        }
    }

    FastTables()
    {
        /* add or adc sbb and sub xor mov, both directions; cmp, test
         * (byte forms too: their register 4 without REX is %ah, which the
         * fast path leaves to the full path as if it were %spl) */
        set(one_byte, kFastWriteRm,
            {0x00, 0x01, 0x08, 0x09, 0x10, 0x11, 0x18, 0x19, 0x20, 0x21, 0x28,
             0x29, 0x30, 0x31, 0x88, 0x89});
        set(one_byte, kFastWriteReg,
            {0x02, 0x03, 0x0a, 0x0b, 0x12, 0x13, 0x1a, 0x1b, 0x22, 0x23, 0x2a,
             0x2b, 0x32, 0x33, 0x8a, 0x8b});
        set(one_byte, kFastRead, {0x38, 0x39, 0x3a, 0x3b, 0x84, 0x85});
        set(one_byte, kFastWriteReg, {0x63}); /* movsxd */
        /* imul $imm; group 1 (/7 cmp); shifts; mov $imm; inc, dec */
        set(one_byte, kFastWriteReg, {0x69, 0x6b});
        set(one_byte, kFastWriteRm,
            {0x80, 0x81, 0x83, 0xc0, 0xc1, 0xc6, 0xc7, 0xfe, 0xff});
        imm[0x69] = imm[0x81] = imm[0xc7] = 4;
        imm[0x6b] = imm[0x80] = imm[0x83] = 1;
        imm[0xc0] = imm[0xc1] = imm[0xc6] = 1;
        /* cmovcc, imul, movzx, movsx */
        for (unsigned op = 0x40; op <= 0x4f; ++op) {
            two_byte[op] = kFastWriteReg;
        }
        set(two_byte, kFastWriteReg, {0xaf, 0xb6, 0xb7, 0xbe, 0xbf});
        /* setcc (r/m8; %ah and %spl are register 4, left to the full path
         * by fast_may_write) */
        for (unsigned op = 0x90; op <= 0x9f; ++op) {
            two_byte[op] = kFastWriteRm;
        }
        /* movups movaps ucomiss comiss andps xorps addps mulps subps divps,
         * the same pd forms and movdqa paddq movq pxor paddd under 0x66 */
        for (FastForm *t : {sse[0], sse[1]}) {
            set(t, kFastSse,
                {0x10, 0x11, 0x28, 0x29, 0x2e, 0x2f, 0x54, 0x57, 0x58, 0x59,
                 0x5c, 0x5e});
        }
        set(sse[1], kFastSse, {0x6f, 0x7f, 0xd4, 0xd6, 0xef, 0xfe});
        /* movs[sd] cvtsi2s[sd] sqrts[sd] add mul cvt sub div; cvtts[sd]2si;
         * movdqu movq under 0xf3 */
        for (FastForm *t : {sse[2], sse[3]}) {
            set(t, kFastSse,
                {0x10, 0x11, 0x2a, 0x51, 0x58, 0x59, 0x5a, 0x5c, 0x5e});
            set(t, kFastSseGpr, {0x2c});
        }
        set(sse[3], kFastSse, {0x6f, 0x7e, 0x7f});
    }
};

const FastTables kFast;

/* A one-byte opcode's form for the reg field `sub` of its ModRM. */
FastForm fast_one_byte(uint8_t op, unsigned sub)
{
    switch (op) {
        case 0x80:
        case 0x81:
        case 0x83:
            return sub == 7 ? kFastRead : kFastWriteRm; /* cmp */
        case 0xc0:
        case 0xc1: /* /6 is an undocumented alias */
            return sub == 6 ? kFastNo : kFastWriteRm;
        case 0xc6:
        case 0xc7: /* other than /0: xabort, xbegin and invalid forms */
            return sub == 0 ? kFastWriteRm : kFastNo;
        case 0xfe:
        case 0xff: /* inc, dec; the others are branches and push */
            return sub <= 1 ? kFastWriteRm : kFastNo;
        case 0xf6:
        case 0xf7: /* not, neg, mul, imul, div, idiv (implicitly %rax and
                      %rdx); test $imm is the full path's */
            return sub >= 2 ? kFastWriteRm : kFastNo;
        default:
            return kFast.one_byte[op];
    }
}

FastForm fast_sse(uint8_t prefix, uint8_t op)
{
    const unsigned i = prefix == 0x66   ? 1
                       : prefix == 0xf2 ? 2
                       : prefix == 0xf3 ? 3
                                        : 0;
    return kFast.sse[i][op];
}

/* The S5 and S7 sequences' instructions in the encodings GNU as writes;
 * other encodings of them go through the full path. */
struct FastSeq {
    const char *bytes;
    uint8_t     length;
    Seq         after; /* the instruction before; kNone: any */
    Seq         gives;
    bool        inner;
};
const FastSeq kFastSeqs[] = {
        {"\x41\x83\xe3\xe0", 4, Seq::kNone, Seq::kAndBundle, false},
        {"\x41\x81\xe3\xff\xff\x1f\x00", 7, Seq::kNone, Seq::kAndStack, false},
        {"\x4d\x01\xf3", 3, Seq::kAndBundle, Seq::kAddBase, true}, /* add */
        {"\x41\xff\xe3", 3, Seq::kAddBase, Seq::kNone, true},      /* jmp */
        {"\x41\xff\xd3", 3, Seq::kAddBase, Seq::kNone, true},      /* call */
        {"\x4b\x8d\xa4\x1e\x00\x00\x00\x40", 8, Seq::kAndStack, Seq::kNone,
         true}, /* leaq */
};

const FastSeq *fast_sequence(const uint8_t *p, size_t avail, Seq prev)
{
    if (p[0] != 0x41 && p[0] != 0x4b && p[0] != 0x4d) {
        return nullptr;
    }
    for (const FastSeq &f : kFastSeqs) {
        if (f.length > avail || (f.after != Seq::kNone && prev != f.after)) {
            continue;
        }
        unsigned i = 0;
        while (i < f.length && p[i] == uint8_t(f.bytes[i])) {
            ++i;
        }
        if (i == f.length) {
            return &f;
        }
    }
    return nullptr;
}

/* %rsp (S5), %r11 (the S5 and S7 sequences) and %r14 (S4) are the full
 * path's. */
bool fast_may_write(unsigned reg)
{
    return reg != 4 && reg != 11 && reg != 14;
}

int64_t read_le(const uint8_t *p, unsigned n)
{
    if (n == 1) {
        return int8_t(p[0]);
    }
    return int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                   uint32_t(p[3]) << 24);
}

/* Decodes at p, with avail bytes to the bundle's end. */
bool fast_decode(const uint8_t *p, size_t avail, FastInsn *out)
{
    size_t   i  = 0;
    bool     gs = false, a32 = false, cs = false;
    uint8_t  mandatory = 0;
    unsigned extra_66  = 0; /* gas pads with nops of several 0x66 */
    for (; i < avail; ++i) {
        const uint8_t b = p[i];
        if (b == 0x65 && !gs) {
            gs = true;
        } else if (b == 0x67 && !a32) {
            a32 = true;
        } else if (b == 0x2e && !cs) {
            cs = true;
        } else if ((b == 0x66 || b == 0xf2 || b == 0xf3) && !mandatory) {
            mandatory = b;
        } else if (b == 0x66 && mandatory == 0x66 && !cs && !gs && !a32) {
            ++extra_66;
        } else {
            break;
        }
    }
    const bool legacy = gs || a32 || cs || mandatory;
    uint8_t    rex    = 0;
    if (i < avail && (p[i] & 0xf0) == 0x40) {
        rex = p[i++];
    }
    if (i >= avail) {
        return false;
    }
    const uint8_t op = p[i++];
    out->branch      = 0;
    if ((op == 0x90 && mandatory == 0x66 && !extra_66 && !gs && !a32 && !cs &&
         !rex) ||
        ((op == 0x98 || op == 0x99) && !legacy && (rex & 0x07) == 0)) {
        out->length = uint8_t(i); /* nop; cltq, cqto: %rax, %rdx */
        return true;
    }

    if (!legacy && !rex) {
        unsigned rel = 0;
        if ((op >= 0x70 && op <= 0x7f) || op == 0xeb) {
            rel = 1;
        } else if (op == 0xe8 || op == 0xe9) {
            rel = 4;
        } else if (op == 0x0f && i < avail && (p[i] & 0xf0) == 0x80) {
            ++i; /* jcc rel32 */
            rel = 4;
        } else if (op == 0x90) {
            out->length = uint8_t(i);
            return true;
        } else if (op == 0x0f && i < avail && p[i] == 0x0b) {
            out->length = uint8_t(i + 1); /* ud2: the toolchain's filler */
            return true;
        }
        if (rel != 0) {
            if (avail - i < rel) {
                return false;
            }
            out->branch = op == 0xe8 ? kFastCall : kFastJump;
            out->rel    = read_le(p + i, rel);
            out->length = uint8_t(i + rel);
            return true;
        }
    }
    if (mandatory == 0xf3 && !gs && !a32 && !cs && !rex && op == 0x0f &&
        avail - i >= 2 && p[i] == 0x1e && p[i + 1] == 0xfa) {
        out->length = uint8_t(i + 2); /* endbr64 */
        return true;
    }
    if (!legacy && (rex & 0x0e) == 0 && op >= 0x50 && op <= 0x5f) {
        /* push, pop: REX.B at most */
        const unsigned reg = (op & 7) | (rex & 1) << 3;
        if (op >= 0x58 &&
            (reg == 4 ||
             reg == 14)) { /* pop %r11 plays no part in a sequence */
            return false;
        }
        out->length = uint8_t(i);
        return true;
    }
    if (!legacy && op >= 0xb8 && op <= 0xbf) { /* mov $imm, %reg */
        const unsigned imm = (rex & 8) ? 8 : 4;
        if (!fast_may_write((op & 7) | (rex & 1) << 3) || avail - i < imm) {
            return false;
        }
        out->length = uint8_t(i + imm);
        return true;
    }

    /* ModRM forms. */
    FastForm form   = kFastNo;
    unsigned imm    = 0;
    bool     agen   = false; /* lea, nop: no access */
    bool     is_nop = false;
    if (i >= avail) {
        return false;
    }
    const unsigned sub = (p[i] >> 3) & 7;
    if (op == 0x0f) {
        const uint8_t op2 = p[i++];
        if (i >= avail) {
            return false;
        }
        if (op2 == 0x1f && ((p[i] >> 3) & 7) == 0 && !gs && !a32 &&
            (mandatory == 0 || mandatory == 0x66)) {
            form   = kFastRead;
            is_nop = true;
        } else if (cs) {
            return false;
        } else if (mandatory != 0 || fast_sse(0, op2) != kFastNo) {
            form = fast_sse(mandatory, op2);
        } else {
            form = kFast.two_byte[op2];
        }
    } else if (!mandatory && !cs) {
        form = fast_one_byte(op, sub);
        imm  = kFast.imm[op];
        if (op == 0x8d) {
            form = kFastWriteReg;
            agen = true;
        }
    }
    if ((form == kFastNo) || (extra_66 && !is_nop)) {
        return false;
    }
    agen = agen || is_nop;

    const uint8_t  modrm = p[i++];
    const unsigned mod   = modrm >> 6;
    const unsigned reg   = ((modrm >> 3) & 7) | (rex & 4) << 1;
    const unsigned rm    = (modrm & 7) | (rex & 1) << 3;
    if (mod == 3) {
        if (gs || a32 || op == 0x8d) { /* lea of a register is invalid */
            return false;
        }
    } else {
        unsigned disp     = mod == 1 ? 1 : mod == 2 ? 4 : 0;
        bool     rsp_form = false;
        if ((modrm & 7) == 4) {
            if (i >= avail) {
                return false;
            }
            const uint8_t sib = p[i++];
            if (mod == 0 && (sib & 7) == 5) {
                disp = 4; /* no base */
            }
            rsp_form = (sib & 7) == 4 && !(rex & 1) && ((sib >> 3) & 7) == 4 &&
                       !(rex & 2);
        } else if (mod == 0 && (modrm & 7) == 5) {
            if (!gs) {
                return false; /* %rip-relative: the full path knows the size */
            }
            disp = 4;
        }
        if (avail - i < disp) {
            return false;
        }
        const int64_t d = disp ? read_le(p + i, disp) : 0;
        i += disp;
        if (agen) {
            if (gs || a32) {
                return false;
            }
        } else if (gs ? !a32
                      : (a32 || !rsp_form || d < kRspDispMin ||
                         d > kRspDispMax)) {
            return false;
        }
    }
    /* lea and mov into %r11 end no sequence of S5 or S7 differently from
     * the full path: both reset it. */
    const bool to_r11_ok = (op == 0x8d || op == 0x8b || op == 0x89);
    if ((form == kFastWriteReg || form == kFastSseGpr) &&
        !fast_may_write(reg) && !(reg == 11 && to_r11_ok)) {
        return false;
    }
    if (form == kFastWriteRm && mod == 3 && !fast_may_write(rm) &&
        !(rm == 11 && to_r11_ok)) {
        return false;
    }
    /* Past 15 bytes the CPU faults and Zydis decodes nothing: only a run
     * of 0x66 before a nop reaches it here, and it is the full path's to
     * refuse (S2, at its start). */
    if (avail - i < imm || i + imm > ZYDIS_MAX_INSTRUCTION_LENGTH) {
        return false;
    }
    out->length = uint8_t(i + imm);
    return true;
}

ZydisRegister enclosing(ZydisRegister reg)
{
    return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
}

/* Counts the segment override prefixes (0x26, 0x2e, 0x36, 0x3e, 0x64,
 * 0x65) and says whether the last one is %gs. The raw prefixes are read,
 * not the effective segment: CPUs differ on several overrides at once, so
 * only a lone %gs counts. */
unsigned segment_prefixes(const ZydisDecodedInstruction &insn, bool *gs)
{
    unsigned n = 0;
    *gs        = false;
    for (uint8_t i = 0; i < insn.raw.prefix_count; ++i) {
        switch (insn.raw.prefixes[i].value) {
            case 0x65:
                *gs = true;
                /* fallthrough */
            case 0x26:
            case 0x2e:
            case 0x36:
            case 0x3e:
            case 0x64:
                ++n;
                break;
            default:
                break;
        }
    }
    return n;
}

class Verifier {
public:
    Verifier(const VerifyInput &in, bool fast)
        : m_in(in), m_fast(fast), m_marks(in.text_size, 0)
    {
        ZydisDecoderInit(&m_decoder, ZYDIS_MACHINE_MODE_LONG_64,
                         ZYDIS_STACK_WIDTH_64);
    }

    VerifyResult run()
    {
        if (!check_input()) {
            return std::move(m_result);
        }
        for (uint64_t bundle = 0; bundle < m_in.text_size;
             bundle += kBundleSize) {
            if (!check_bundle(bundle)) {
                return std::move(m_result);
            }
        }
        for (const DirectBranch &b : m_branches) {
            if (!check_direct_branch(b)) {
                return std::move(m_result);
            }
        }
        m_result.accepted = true;
        return std::move(m_result);
    }

private:
    const VerifyInput        &m_in;
    const bool                m_fast;
    ZydisDecoder              m_decoder;
    std::vector<uint8_t>      m_marks;
    std::vector<DirectBranch> m_branches;
    VerifyResult              m_result{false, 0, {}};
    ZydisDecodedInstruction   m_insn;
    ZydisDecodedOperand       m_ops[ZYDIS_MAX_OPERAND_COUNT];
    uint64_t                  m_off = 0;

    bool refuse(uint64_t offset, const char *rule, const std::string &insn_text,
                const std::string &why)
    {
        char where[40];
        snprintf(where, sizeof(where), "text+0x%" PRIx64, offset);
        m_result.accepted = false;
        m_result.offset   = offset;
        m_result.reason   = std::string(rule) + ": " +
                          (insn_text.empty() ? "" : "`" + insn_text + "` ") +
                          "at " + where + ": " + why;
        return false;
    }

    /* Refuses the instruction in m_insn/m_ops at m_off. */
    bool refuse_insn(const char *rule, const std::string &why)
    {
        return refuse(m_off, rule, format(m_insn, m_ops, m_off), why);
    }

    std::string format(const ZydisDecodedInstruction &insn,
                       const ZydisDecodedOperand *ops, uint64_t offset) const
    {
        ZydisFormatter formatter;
        char           text[256];
        if (!ZYAN_SUCCESS(ZydisFormatterInit(&formatter,
                                             ZYDIS_FORMATTER_STYLE_INTEL)) ||
            !ZYAN_SUCCESS(ZydisFormatterSetProperty(
                    &formatter, ZYDIS_FORMATTER_PROP_FORCE_SIZE, ZYAN_TRUE)) ||
            !ZYAN_SUCCESS(ZydisFormatterFormatInstruction(
                    &formatter, &insn, ops, insn.operand_count_visible, text,
                    sizeof(text), m_in.text_vaddr + offset, nullptr))) {
            return "?";
        }
        return text;
    }

    bool check_input()
    {
        if (m_in.text_size == 0 || m_in.text_size % kBundleSize != 0) {
            return refuse(0, "S1", "",
                          "text size " + std::to_string(m_in.text_size) +
                                  " is not a positive multiple of the 32-byte "
                                  "bundle");
        }
        if (m_in.text_vaddr % kBundleSize != 0) {
            return refuse(0, "S1", "", "text vaddr is not bundle aligned");
        }
        if (m_in.image_map_size > kImageEnd - kImageOffset ||
            m_in.text_vaddr > m_in.image_map_size ||
            m_in.text_size > m_in.image_map_size - m_in.text_vaddr) {
            return refuse(0, "S3", "",
                          "text or image does not fit the image area");
        }
        return true;
    }

    bool check_bundle(uint64_t bundle)
    {
        const uint64_t end  = bundle + kBundleSize;
        Seq            prev = Seq::kNone; /* the sequences stay in a bundle */
        m_off               = bundle;
        FastInsn fast;
        while (m_off < end) {
            m_marks[m_off] |= kMarkStart;
            const FastSeq *seq;
            if (m_fast &&
                (seq = fast_sequence(m_in.text + m_off, end - m_off, prev))) {
                if (seq->inner) {
                    m_marks[m_off] |= kMarkInner;
                }
                prev = seq->gives;
                m_off += seq->length;
                continue;
            }
            if (m_fast && fast_decode(m_in.text + m_off, end - m_off, &fast)) {
                if (fast.branch) {
                    const int64_t next =
                            int64_t(m_in.text_vaddr + m_off + fast.length);
                    m_branches.push_back(
                            {m_off, next + fast.rel, fast.branch == kFastCall});
                }
                prev = Seq::kNone;
                m_off += fast.length;
                continue;
            }
            if (!decode(end) || !check_instruction(&prev)) {
                return false;
            }
            m_off += m_insn.length;
        }
        return true;
    }

    /* Decodes at m_off, within the bundle that ends at bundle_end. */
    bool decode(uint64_t bundle_end)
    {
        const uint8_t *p      = m_in.text + m_off;
        ZyanStatus     status = ZydisDecoderDecodeFull(
                    &m_decoder, p, bundle_end - m_off, &m_insn, m_ops);
        if (ZYAN_SUCCESS(status)) {
            return true;
        }
        if (status != ZYDIS_STATUS_NO_MORE_DATA) {
            return refuse(m_off, "S2", "", "undecodable bytes");
        }
        /* Either the instruction goes on into the next bundle or the text
         * ends inside it. */
        status = ZydisDecoderDecodeFull(&m_decoder, p, m_in.text_size - m_off,
                                        &m_insn, m_ops);
        if (ZYAN_SUCCESS(status)) {
            return refuse_insn("S1", "crosses a bundle boundary");
        }
        if (status == ZYDIS_STATUS_NO_MORE_DATA) {
            return refuse(m_off, "S1", "",
                          "the text ends inside an instruction");
        }
        return refuse(m_off, "S2", "", "undecodable bytes");
    }

    bool check_instruction(Seq *prev)
    {
        if (m_insn.mnemonic == ZYDIS_MNEMONIC_RET &&
            m_insn.meta.branch_type != ZYDIS_BRANCH_TYPE_FAR) {
            return refuse_insn("S7", "ret is an unmasked indirect branch");
        }
        if (!allowed_instruction(m_insn)) {
            return refuse_insn("S2", "not an allowed instruction");
        }

        const bool stack_pair =
                *prev == Seq::kAndStack && is_stack_lea(m_insn, m_ops);
        for (uint8_t i = 0; i < m_insn.operand_count; ++i) {
            const ZydisDecodedOperand &op = m_ops[i];
            if (op.type == ZYDIS_OPERAND_TYPE_MEMORY) {
                if (!check_memory(op)) {
                    return false;
                }
            } else if (op.type == ZYDIS_OPERAND_TYPE_REGISTER &&
                       (op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
                       !check_register_write(op, stack_pair)) {
                return false;
            }
        }

        if (!check_branch(*prev)) {
            return false;
        }

        /* The sequences: mark their inner instructions for S6. */
        Seq cur = Seq::kNone;
        if (is_and_r11d(m_insn, m_ops, kBundleMask)) {
            cur = Seq::kAndBundle;
        } else if (is_and_r11d(m_insn, m_ops, kStackMask)) {
            cur = Seq::kAndStack;
        } else if (*prev == Seq::kAndBundle && is_add_r14_r11(m_insn, m_ops)) {
            cur = Seq::kAddBase;
            m_marks[m_off] |= kMarkInner;
        } else if (stack_pair) {
            m_marks[m_off] |= kMarkInner;
        }
        *prev = cur;
        return true;
    }

    bool check_register_write(const ZydisDecodedOperand &op, bool stack_pair)
    {
        const ZydisRegister reg = enclosing(op.reg.value);
        if (reg == ZYDIS_REGISTER_R14) {
            return refuse_insn("S4", "writes %r14");
        }
        if (reg == ZYDIS_REGISTER_RSP) {
            const bool implicit =
                    op.visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT;
            if (implicit && (m_insn.mnemonic == ZYDIS_MNEMONIC_PUSH ||
                             m_insn.mnemonic == ZYDIS_MNEMONIC_POP ||
                             m_insn.mnemonic == ZYDIS_MNEMONIC_CALL)) {
                return true;
            }
            if (stack_pair) {
                return true;
            }
            if (m_insn.mnemonic == ZYDIS_MNEMONIC_LEA &&
                is_stack_lea(m_insn, m_ops)) {
                return refuse_insn(
                        "S5",
                        "not preceded in its bundle by andl $0x1fffff, %r11d");
            }
            return refuse_insn(
                    "S5", "writes %rsp other than by push, pop, call or the "
                          "masked leaq");
        }
        if (ZydisRegisterGetClass(op.reg.value) == ZYDIS_REGCLASS_SEGMENT) {
            return refuse_insn("S2", "writes a segment register");
        }
        return true;
    }

    bool check_memory(const ZydisDecodedOperand &op)
    {
        const ZydisDecodedOperandMem &mem = op.mem;
        /* lea computes no access; nops and prefetches touch nothing a
         * program can see. */
        if (mem.type == ZYDIS_MEMOP_TYPE_AGEN ||
            m_insn.mnemonic == ZYDIS_MNEMONIC_NOP ||
            m_insn.mnemonic == ZYDIS_MNEMONIC_PREFETCHT0 ||
            m_insn.mnemonic == ZYDIS_MNEMONIC_PREFETCHT1 ||
            m_insn.mnemonic == ZYDIS_MNEMONIC_PREFETCHT2 ||
            m_insn.mnemonic == ZYDIS_MNEMONIC_PREFETCHNTA) {
            return true;
        }
        if (mem.type != ZYDIS_MEMOP_TYPE_MEM) {
            return refuse_insn("S3", "unsupported memory operand");
        }
        /* bt* with a register bit offset reach up to 2^60 bytes from the
         * operand's address, whatever its form. */
        if ((m_insn.mnemonic == ZYDIS_MNEMONIC_BT ||
             m_insn.mnemonic == ZYDIS_MNEMONIC_BTS ||
             m_insn.mnemonic == ZYDIS_MNEMONIC_BTR ||
             m_insn.mnemonic == ZYDIS_MNEMONIC_BTC) &&
            m_ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER) {
            return refuse_insn("S3",
                               "bit offset in a register on a memory operand");
        }
        if (op.visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT) {
            /* The stack slot of push, pop and call (S5 keeps %rsp in its
             * window); no other allowed instruction has a hidden one. */
            if (mem.base == ZYDIS_REGISTER_RSP &&
                (m_insn.mnemonic == ZYDIS_MNEMONIC_PUSH ||
                 m_insn.mnemonic == ZYDIS_MNEMONIC_POP ||
                 m_insn.mnemonic == ZYDIS_MNEMONIC_CALL)) {
                return true;
            }
            return refuse_insn("S3", "implicit memory operand");
        }

        bool           gs       = false;
        const unsigned segments = segment_prefixes(m_insn, &gs);
        if (segments > 1 || (segments == 1 && !gs)) {
            return refuse_insn("S3", "segment override other than a lone %gs");
        }
        if (gs) {
            if (m_insn.address_width != 32) {
                return refuse_insn(
                        "S3", "%gs memory operand without 32-bit address size");
            }
            return true;
        }
        if (m_insn.address_width == 64 && mem.base == ZYDIS_REGISTER_RSP &&
            mem.index == ZYDIS_REGISTER_NONE) {
            if (mem.disp.value < kRspDispMin || mem.disp.value > kRspDispMax) {
                return refuse_insn("S3",
                                   "%rsp displacement outside [-32768, 32767]");
            }
            return true;
        }
        if (m_insn.address_width == 64 && mem.base == ZYDIS_REGISTER_RIP) {
            /* The whole access inside the image: [0, image_map_size). */
            const int64_t next =
                    int64_t(m_in.text_vaddr + m_off + m_insn.length);
            const int64_t  addr = next + mem.disp.value;
            const uint64_t size = op.size ? (op.size + 7) / 8 : 1;
            if (addr < 0 || uint64_t(addr) > m_in.image_map_size ||
                size > m_in.image_map_size - uint64_t(addr)) {
                return refuse_insn("S3",
                                   "%rip-relative access outside the image");
            }
            return true;
        }
        return refuse_insn(
                "S3", "memory operand without %gs and 32-bit address size");
    }

    bool check_branch(Seq prev)
    {
        if (m_insn.meta.category != ZYDIS_CATEGORY_COND_BR &&
            m_insn.meta.category != ZYDIS_CATEGORY_UNCOND_BR &&
            m_insn.meta.category != ZYDIS_CATEGORY_CALL) {
            return true;
        }
        const bool is_call = m_insn.mnemonic == ZYDIS_MNEMONIC_CALL;
        const ZydisDecodedOperand &target = m_ops[0];
        const char                *rule =
                target.type == ZYDIS_OPERAND_TYPE_IMMEDIATE ? "S6" : "S7";
        if (target.type == ZYDIS_OPERAND_TYPE_MEMORY) {
            return refuse_insn("S7", "indirect branch through memory");
        }
        /* CPUs disagree on 0x66 for branches (AMD truncates the target to
         * 16 bits) and 0x67 changes what loop and jrcxz count. */
        if (m_insn.attributes &
            (ZYDIS_ATTRIB_HAS_OPERANDSIZE | ZYDIS_ATTRIB_HAS_ADDRESSSIZE)) {
            return refuse_insn(rule,
                               "operand or address size prefix on a branch");
        }
        if (target.type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
            target.imm.is_relative) {
            const int64_t next =
                    int64_t(m_in.text_vaddr + m_off + m_insn.length);
            m_branches.push_back({m_off, next + target.imm.value.s, is_call});
            return true;
        }
        if (!is_reg(target, ZYDIS_REGISTER_R11)) {
            return refuse_insn("S7", "indirect branch not through %r11");
        }
        if (prev != Seq::kAddBase) {
            return refuse_insn(
                    "S7",
                    "not preceded in its bundle by andl $0xffffffe0, %r11d "
                    "and addq %r14, %r11");
        }
        m_marks[m_off] |= kMarkInner;
        return true;
    }

    bool check_direct_branch(const DirectBranch &b)
    {
        const char *why = direct_branch_fault(b);
        if (why == nullptr) {
            return true;
        }
        ZydisDecoderDecodeFull(&m_decoder, m_in.text + b.offset,
                               m_in.text_size - b.offset, &m_insn, m_ops);
        m_off = b.offset;
        return refuse_insn("S6", why);
    }

    const char *direct_branch_fault(const DirectBranch &b) const
    {
        const int64_t text = int64_t(m_in.text_vaddr);
        if (b.target >= text && b.target < text + int64_t(m_in.text_size)) {
            const uint8_t mark = m_marks[uint64_t(b.target - text)];
            if (!(mark & kMarkStart)) {
                return "target is not an instruction start";
            }
            if (mark & kMarkInner) {
                return "target is inside an S5 or S7 sequence";
            }
            return nullptr;
        }
        /* Gate bundle k at image vaddr -kGateSize + 32 * k. */
        const int64_t gate = b.target + int64_t(kGateSize);
        if (!b.is_call) {
            return "target outside the text";
        }
        if (gate < 0 || gate >= int64_t(kGateSize)) {
            return "target outside the text and the gate page";
        }
        if (gate % kBundleSize != 0) {
            return "target is not a gate bundle start";
        }
        if (uint64_t(gate) / kBundleSize > m_in.n_imports) {
            return "gate bundle beyond the image's imports";
        }
        return nullptr;
    }
};

} // namespace

VerifyResult verify_x86_64(const VerifyInput &input)
{
    return Verifier(input, true).run();
}

VerifyResult verify_x86_64_full(const VerifyInput &input)
{
    return Verifier(input, false).run();
}

VerifyResult verify_image(const void *image, const ucp_ifunc_image_desc_t &d)
{
    const ucp_ifunc_image_seg_t &text = d.seg[UCP_IFUNC_SEG_TEXT];
    VerifyInput                  input;
    input.text       = static_cast<const uint8_t *>(image) + text.file_offset;
    input.text_size  = text.file_size;
    input.text_vaddr = text.vaddr;
    input.image_map_size = d.map_size;
    input.n_imports      = d.n_imports;
    return verify_x86_64(input);
}

} // namespace sandbox
} // namespace ucx_ifunc
