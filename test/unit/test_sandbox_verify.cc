/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The sandbox verifier (docs/security.md, "Sandboxed code", S1-S7): code
 * with every allowed form is accepted, and each way out of the slot is
 * refused by the rule that forbids it. The code is assembled by GNU as
 * when the test runs (bundled with .bundle_align_mode 5, as the toolchain
 * does), so each case reads as the instructions it tries. Every case
 * also checks that the fast path and the full path decide alike.
 */
#include "ucp/ifunc/format/sandbox_layout.h"
#include "ucp/ifunc/sandbox/sandbox_verify.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace test {
namespace {

using ucx_ifunc::sandbox::verify_x86_64;
using ucx_ifunc::sandbox::verify_x86_64_full;
using ucx_ifunc::sandbox::VerifyInput;
using ucx_ifunc::sandbox::VerifyResult;

/* Where the code lies in the tests: vaddrs [0, kMapSize) of the image. */
constexpr uint64_t kMapSize  = 0x10000;
constexpr uint32_t kImports  = 2;
const char         kBundle[] = ".bundle_align_mode 5\n";

/* A temporary directory, removed with its files. */
class TempDir {
public:
    TempDir()
    {
        const char *tmp = getenv("TMPDIR");
        std::string name =
                std::string(tmp ? tmp : "/tmp") + "/sbx_verify.XXXXXX";
        m_path.assign(name.begin(), name.end());
        m_path.push_back('\0');
        if (mkdtemp(m_path.data()) == nullptr) {
            m_path.clear();
        }
    }
    ~TempDir()
    {
        if (!m_path.empty()) {
            for (const char *f : {"/a.s", "/a.o", "/a.bin", "/err"}) {
                unlink((path() + f).c_str());
            }
            rmdir(path().c_str());
        }
    }
    std::string path() const { return m_path.empty() ? "" : m_path.data(); }

private:
    std::vector<char> m_path;
};

/* Assembles x86-64 source (AT&T) with GNU as and returns its .text, padded
 * to a bundle. `start` labels the text's first byte. */
std::vector<uint8_t> assemble(const std::string &body,
                              const char        *mode = kBundle)
{
    TempDir     dir;
    std::string d = dir.path();
    EXPECT_FALSE(d.empty());
    {
        std::ofstream s(d + "/a.s");
        s << ".text\n" << mode << "start:\n" << body << "\n.p2align 5\n";
    }
    std::string cmd = "as --64 -o '" + d + "/a.o' '" + d + "/a.s' 2>'" + d +
                      "/err' && " + "objcopy -O binary -j .text '" + d +
                      "/a.o' '" + d + "/a.bin' 2>>'" + d + "/err'";
    if (std::system(cmd.c_str()) != 0) {
        std::ifstream err(d + "/err");
        ADD_FAILURE() << "as failed on:\n"
                      << body << "\n"
                      << std::string(std::istreambuf_iterator<char>(err), {});
        return {};
    }
    std::ifstream bin(d + "/a.bin", std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(bin), {});
}

/* Verifies with the fast path, and checks that the full path (every
 * instruction through Zydis) decides the same. */
VerifyResult verify(const std::vector<uint8_t> &text, uint64_t text_vaddr = 0,
                    uint32_t n_imports = kImports)
{
    VerifyInput  in{text.data(), text.size(), text_vaddr, kMapSize, n_imports};
    VerifyResult r    = verify_x86_64(in);
    VerifyResult full = verify_x86_64_full(in);
    EXPECT_EQ(r.accepted, full.accepted);
    EXPECT_EQ(r.offset, full.offset);
    EXPECT_EQ(r.reason, full.reason);
    return r;
}

class SandboxVerify : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (std::system("as --64 -o /dev/null /dev/null 2>/dev/null") != 0) {
            GTEST_SKIP() << "no GNU as for x86-64";
        }
    }

    /* The code is refused by `rule` (e.g. "S3"). */
    static void refused(const std::string &body, const char *rule,
                        const char *mode = kBundle)
    {
        std::vector<uint8_t> text = assemble(body, mode);
        ASSERT_FALSE(text.empty());
        VerifyResult r = verify(text);
        EXPECT_FALSE(r.accepted) << body;
        EXPECT_EQ(std::string(rule) + ":", r.reason.substr(0, 3))
                << body << "\n -> " << r.reason;
    }

    static void accepted(const std::string &body)
    {
        std::vector<uint8_t> text = assemble(body);
        ASSERT_FALSE(text.empty());
        VerifyResult r = verify(text);
        EXPECT_TRUE(r.accepted) << body << "\n -> " << r.reason;
    }
};

/* One function with every allowed form: the body of the fuzzer's seed
 * test/fuzz/sandbox_seeds/every_form.s, the lines after its label. */
std::string every_form()
{
    std::ifstream seed(std::string(UCX_IFUNC_TEST_SRC_DIR) +
                       "/test/fuzz/sandbox_seeds/every_form.s");
    std::string   text(std::istreambuf_iterator<char>(seed), {});
    size_t        start = text.find("\nstart:\n");
    EXPECT_NE(std::string::npos, start) << "every_form.s not read";
    return (start == std::string::npos) ? "" : text.substr(start + 8);
}

TEST_F(SandboxVerify, AcceptsEveryAllowedForm)
{
    accepted(every_form());
}

/* The fast path must decide as the full path on every text, not only on
 * valid ones: every single-byte change of valid code, each compared by
 * verify(). */
TEST_F(SandboxVerify, FastAndFullPathsAgreeOnEveryByteChange)
{
    const char loop[] = R"(
    push %r12
    movl %gs:(%edi), %eax
1:  movq %gs:8(%edi,%esi,8), %rcx
    addq %rcx, %rax
    cmpl $16, %eax
    jae 2f
    imull %edx, %edx
    movq %rax, 8(%rsp)
    movsd %gs:(%edx), %xmm0
    mulsd %xmm1, %xmm0
    cvttsd2si %xmm0, %r12d
    leal 1(%rax,%rbx), %ecx
    cmovzl %ebx, %ecx
    movzbl %gs:(%r9d,%eax), %r10d
    movabsq $0x123456789, %r8
    shrq $3, %rcx
    inc %eax
    movb %al, %gs:3(%edi)
    addb 8(%rsp), %cl
    cmpb $7, %ah
    movb $1, %gs:(%eax)
    shlb $2, %dl
    decb %bh
    jmp 1b
    jnz 1b
    .fill 120, 1, 0x90
2:  pop %r12
    jl 1b
)";
    for (const std::string &body : {every_form(), std::string(loop)}) {
        std::vector<uint8_t> text = assemble(body);
        ASSERT_FALSE(text.empty());
        ASSERT_TRUE(verify(text).accepted);
        for (size_t i = 0; i < text.size() && !HasFailure(); ++i) {
            std::vector<uint8_t> changed = text;
            for (unsigned b = 0; b < 256 && !HasFailure(); ++b) {
                changed[i] = uint8_t(b);
                verify(changed);
            }
        }
    }
}

TEST_F(SandboxVerify, AcceptsAtAnotherTextVaddr)
{
    /* The gate is 4 KiB before the image, not before the text. */
    std::vector<uint8_t> text = assemble("call start - 0x2000 + 32\n"
                                         "movq start - 0x1000(%rip), %rax\n");
    ASSERT_FALSE(text.empty());
    VerifyResult r = verify(text, 0x1000);
    EXPECT_TRUE(r.accepted) << r.reason;
    EXPECT_FALSE(verify(text, 0).accepted);
}

TEST_F(SandboxVerify, ReasonNamesRuleInstructionAndOffset)
{
    std::vector<uint8_t> text = assemble("nop\nmovq (%rbx), %rax\n");
    VerifyResult         r    = verify(text);
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ(1u, r.offset);
    EXPECT_EQ("S3: `mov rax, qword ptr [rbx]` at text+0x1: memory operand "
              "without %gs and "
              "32-bit address size",
              r.reason);
}

/* S1 */

TEST_F(SandboxVerify, RefusesTextNotWholeBundles)
{
    std::vector<uint8_t> text = assemble(every_form());
    ASSERT_GT(text.size(), 64u);
    for (size_t size : {size_t(0), size_t(31), size_t(33), text.size() - 1}) {
        std::vector<uint8_t> cut(text.begin(), text.begin() + size);
        VerifyResult         r = verify(cut);
        EXPECT_FALSE(r.accepted) << size;
        EXPECT_EQ("S1:", r.reason.substr(0, 3)) << r.reason;
    }
}

TEST_F(SandboxVerify, RefusesMisalignedTextVaddr)
{
    std::vector<uint8_t> text = assemble("nop\n");
    EXPECT_EQ("S1:", verify(text, 16).reason.substr(0, 3));
}

TEST_F(SandboxVerify, RefusesInstructionCrossingBundle)
{
    refused(".fill 30, 1, 0x90\nmovl $1, %eax\n", "S1", "");
}

TEST_F(SandboxVerify, RefusesTruncatedLastInstruction)
{
    std::vector<uint8_t> text(30, 0x90);
    text.push_back(0xb8); /* movl $imm32, %eax, without its immediate */
    text.push_back(0x01);
    VerifyResult r = verify(text);
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ("S1:", r.reason.substr(0, 3)) << r.reason;
    EXPECT_EQ(30u, r.offset);
}

/* S2 */

TEST_F(SandboxVerify, RefusesUndecodableBytes)
{
    refused(".byte 0x06\n", "S2"); /* push %es: invalid in 64-bit mode */
}

/* An instruction over 15 bytes faults: a padding nop after more 0x66
 * prefixes than fit is undecodable at its first prefix, on both paths
 * (the fast path once took it whole). The text is fuzz_sandbox_verify's
 * find (test/fuzz/sandbox_seeds/long_nop.s). */
TEST_F(SandboxVerify, RefusesInstructionOver15Bytes)
{
    const std::vector<uint8_t> found = {
            0x53, 0x48, 0x89, 0xfb, 0xe8, 0x17, 0xf0, 0x66, 0x66, 0x66, 0x66,
            0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x0f, 0x1f,
            0x84, 0x00, 0x00, 0x00, 0x40, 0x00, 0x0f, 0x1f, 0x84, 0x00, 0x00,
            0x00, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
            0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
            0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x4c, 0x24, 0x08,
            0x75, 0xb9, 0x5b, 0xe8, 0xb3, 0xef, 0xff, 0xff, 0x66, 0x6a, 0x2e,
            0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x40, 0x00, 0x0f, 0x00, 0x00,
            0x00, 0x00, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00};
    VerifyResult r = verify(found);
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ(9u, r.offset);
    EXPECT_EQ("S2: at text+0x9: undecodable bytes", r.reason);

    /* nopw 0(%rax,%rax) with n 0x66: 8 + n bytes, accepted up to 15. */
    for (unsigned n : {7u, 8u}) {
        std::vector<uint8_t> text(n, 0x66);
        for (uint8_t b : {0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00}) {
            text.push_back(b);
        }
        text.resize(ucx_ifunc::sandbox::kBundleSize, 0x90);
        r = verify(text);
        EXPECT_EQ(n == 7, r.accepted) << n << ": " << r.reason;
        if (n == 8) {
            EXPECT_EQ("S2: at text+0x0: undecodable bytes", r.reason);
        }
    }
}

TEST_F(SandboxVerify, RefusesSyscall)
{
    refused("syscall", "S2");
}
TEST_F(SandboxVerify, RefusesSysenter)
{
    refused("sysenter", "S2");
}
TEST_F(SandboxVerify, RefusesInt80)
{
    refused("int $0x80", "S2");
}
TEST_F(SandboxVerify, RefusesInt3)
{
    refused("int3", "S2");
}
TEST_F(SandboxVerify, RefusesInt1)
{
    refused("int1", "S2");
}
TEST_F(SandboxVerify, RefusesHlt)
{
    refused("hlt", "S2");
}
TEST_F(SandboxVerify, RefusesIn)
{
    refused("in %dx, %al", "S2");
}
TEST_F(SandboxVerify, RefusesOut)
{
    refused("out %al, $0x80", "S2");
}
TEST_F(SandboxVerify, RefusesCli)
{
    refused("cli", "S2");
}
TEST_F(SandboxVerify, RefusesRdtsc)
{
    refused("rdtsc", "S2");
}
TEST_F(SandboxVerify, RefusesRdtscp)
{
    refused("rdtscp", "S2");
}
TEST_F(SandboxVerify, RefusesCpuid)
{
    refused("cpuid", "S2");
}
TEST_F(SandboxVerify, RefusesWrgsbase)
{
    refused("wrgsbase %rax", "S2");
}
TEST_F(SandboxVerify, RefusesRdgsbase)
{
    refused("rdgsbase %rax", "S2");
}
TEST_F(SandboxVerify, RefusesWrfsbase)
{
    refused("wrfsbase %rax", "S2");
}
TEST_F(SandboxVerify, RefusesMovToGs)
{
    refused("mov %ax, %gs", "S2");
}
TEST_F(SandboxVerify, RefusesMovToFs)
{
    refused("mov %ax, %fs", "S2");
}
TEST_F(SandboxVerify, RefusesMovToSs)
{
    refused("mov %ax, %ss", "S2");
}
TEST_F(SandboxVerify, RefusesPopFs)
{
    refused("pop %fs", "S2");
}
TEST_F(SandboxVerify, RefusesLgs)
{
    refused("lgs (%rsp), %eax", "S2");
}
TEST_F(SandboxVerify, RefusesLfs)
{
    refused("lfs (%rsp), %eax", "S2");
}
TEST_F(SandboxVerify, RefusesFarJmp)
{
    refused("ljmp *(%rsp)", "S2");
    refused(".byte 0x48, 0xff, 0x2c, 0x24", "S2"); /* rex.w ljmp *(%rsp) */
}
TEST_F(SandboxVerify, RefusesFarCall)
{
    refused("lcall *(%rsp)", "S2");
    refused(".byte 0x48, 0xff, 0x1c, 0x24", "S2"); /* rex.w lcall *(%rsp) */
}
TEST_F(SandboxVerify, RefusesFarRet)
{
    refused("lret", "S2");
}
TEST_F(SandboxVerify, RefusesIretq)
{
    refused("iretq", "S2");
}
TEST_F(SandboxVerify, RefusesEnter)
{
    refused("enter $16, $0", "S2");
}
TEST_F(SandboxVerify, RefusesMovToControlRegister)
{
    refused("mov %rax, %cr3", "S2");
}

/* String instructions, with and without rep (movsl and cmpsl share
 * their mnemonics with SSE2's movsd and cmpsd). */
TEST_F(SandboxVerify, RefusesMovsb)
{
    refused("movsb", "S2");
}
TEST_F(SandboxVerify, RefusesRepMovsb)
{
    refused("rep movsb", "S2");
}
TEST_F(SandboxVerify, RefusesMovsq)
{
    refused("movsq", "S2");
}
TEST_F(SandboxVerify, RefusesMovsl)
{
    refused("movsl", "S2");
}
TEST_F(SandboxVerify, RefusesStosq)
{
    refused("stosq", "S2");
}
TEST_F(SandboxVerify, RefusesRepStosq)
{
    refused("rep stosq", "S2");
}
TEST_F(SandboxVerify, RefusesLodsb)
{
    refused("lodsb", "S2");
}
TEST_F(SandboxVerify, RefusesScasb)
{
    refused("scasb", "S2");
}
TEST_F(SandboxVerify, RefusesRepneScasb)
{
    refused("repne scasb", "S2");
}
TEST_F(SandboxVerify, RefusesCmpsb)
{
    refused("cmpsb", "S2");
}
TEST_F(SandboxVerify, RefusesCmpsl)
{
    refused("cmpsl", "S2");
}
TEST_F(SandboxVerify, RefusesRepeCmpsq)
{
    refused("repe cmpsq", "S2");
}
TEST_F(SandboxVerify, RefusesInsb)
{
    refused("insb", "S2");
}
TEST_F(SandboxVerify, RefusesOutsb)
{
    refused("outsb", "S2");
}
TEST_F(SandboxVerify, RefusesStd)
{
    refused("std", "S2");
}
TEST_F(SandboxVerify, RefusesXlat)
{
    refused("xlat", "S2");
}
TEST_F(SandboxVerify, RefusesXsave)
{
    refused("xsave (%rsp)", "S2");
}
TEST_F(SandboxVerify, RefusesXrstor)
{
    refused("xrstor (%rsp)", "S2");
}
TEST_F(SandboxVerify, RefusesFxsave)
{
    refused("fxsave (%rsp)", "S2");
}
TEST_F(SandboxVerify, RefusesFxrstor)
{
    refused("fxrstor (%rsp)", "S2");
}
TEST_F(SandboxVerify, RefusesPushf)
{
    refused("pushfq", "S2");
}
TEST_F(SandboxVerify, RefusesPopf)
{
    refused("popfq", "S2");
}
TEST_F(SandboxVerify, RefusesXbegin)
{
    refused("xbegin 1f\n1:", "S2");
}
TEST_F(SandboxVerify, RefusesXend)
{
    refused("xend", "S2");
}
TEST_F(SandboxVerify, RefusesGather)
{
    refused("vpgatherdd %xmm2, %gs:(%eax,%xmm1,4), %xmm0", "S2");
}
TEST_F(SandboxVerify, RefusesMaskmov)
{
    refused("maskmovdqu %xmm1, %xmm0", "S2");
}
TEST_F(SandboxVerify, RefusesAvx)
{
    refused("vaddps %ymm0, %ymm1, %ymm2", "S2");
}
TEST_F(SandboxVerify, RefusesMmx)
{
    refused("paddb %mm0, %mm1", "S2");
}
TEST_F(SandboxVerify, RefusesUd1)
{
    refused("ud1 %eax, %eax", "S2");
}

/* S3: every addressing form that can leave the slot */

TEST_F(SandboxVerify, RefusesMemoryWithoutSegment)
{
    refused("movq (%rax), %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesStoreWithoutSegment)
{
    refused("movq %rcx, 8(%rdi)", "S3");
}
TEST_F(SandboxVerify, RefusesAbsoluteAddress)
{
    refused("movq 0x1000, %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesFsSegment)
{
    refused("movq %fs:(%eax), %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesFsSegment64)
{
    refused("movq %fs:0x28, %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesGsWith64BitAddress)
{
    refused("movq %gs:(%rax), %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesDsOverride)
{
    refused("movq %ds:8(%rsp), %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesTwoSegmentOverrides)
{
    refused(".byte 0x64\nmovl %gs:(%eax), %ecx", "S3");
}
TEST_F(SandboxVerify, Refuses32BitAddressWithoutGs)
{
    refused("movl (%eax), %ecx", "S3");
}
TEST_F(SandboxVerify, Refuses32BitRspWithoutGs)
{
    refused("movl 8(%esp), %ecx", "S3");
}
TEST_F(SandboxVerify, RefusesRipRelativeAfterImage)
{
    refused("movq start+0x10000(%rip), %rax", "S3");
}
TEST_F(SandboxVerify, RefusesRipRelativeAccessOverImageEnd)
{
    /* Starts inside, its last bytes after the end: the access size counts. */
    refused("movq start+0xfffc(%rip), %rax", "S3");
    refused("movdqu start+0xfff8(%rip), %xmm0", "S3");
}
TEST_F(SandboxVerify, RefusesRipRelativeBeforeImage)
{
    refused("movq start-8(%rip), %rax", "S3");
}
TEST_F(SandboxVerify, RefusesRipRelativeStore)
{
    refused("movq %rax, start+0x20000(%rip)", "S3");
}
TEST_F(SandboxVerify, RefusesRspWithIndex)
{
    refused("movq (%rsp,%rax), %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesRspDisplacement0x8000)
{
    refused("movq 0x8000(%rsp), %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesRspDisplacementMinus0x8001)
{
    refused("movq -0x8001(%rsp), %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesRbpBased)
{
    refused("movq -8(%rbp), %rcx", "S3");
}
TEST_F(SandboxVerify, RefusesX87Store)
{
    refused("fstpl (%rax)", "S3");
}
TEST_F(SandboxVerify, RefusesSseStore)
{
    refused("movaps %xmm0, (%rdi)", "S3");
}
TEST_F(SandboxVerify, RefusesPushFromMemory)
{
    refused("pushq (%rax)", "S3");
}
TEST_F(SandboxVerify, RefusesPopToMemory)
{
    refused("popq (%rax)", "S3");
}
TEST_F(SandboxVerify, RefusesBitTestWithRegisterOffsetInMemory)
{
    /* The bit offset moves the access up to 2^60 bytes, even from a
     * %gs or %rsp form. */
    for (const char *s : {"btq %rax, 8(%rsp)", "btsq %rax, %gs:(%edi)",
                          "btrl %eax, 8(%rsp)", "btcq %rcx, %gs:(%eax)"}) {
        refused(s, "S3");
    }
    accepted("btq $63, 8(%rsp)\nbtsq %rax, %rcx\nbtrl $3, %gs:(%edi)");
}
TEST_F(SandboxVerify, RefusesCmpxchg16bMemory)
{
    refused("cmpxchg16b (%rdi)", "S3");
}

/* S4: %r14 written by every form */

TEST_F(SandboxVerify, RefusesMovToR14)
{
    refused("mov %rax, %r14", "S4");
}
TEST_F(SandboxVerify, RefusesLoadToR14)
{
    refused("mov 8(%rsp), %r14", "S4");
}
TEST_F(SandboxVerify, RefusesMovToR14d)
{
    refused("mov %eax, %r14d", "S4");
}
TEST_F(SandboxVerify, RefusesMovToR14w)
{
    refused("mov %ax, %r14w", "S4");
}
TEST_F(SandboxVerify, RefusesAddToR14)
{
    refused("add $1, %r14", "S4");
}
TEST_F(SandboxVerify, RefusesLeaToR14)
{
    refused("lea 8(%rax), %r14", "S4");
}
TEST_F(SandboxVerify, RefusesXchgR14)
{
    refused("xchg %rax, %r14", "S4");
}
TEST_F(SandboxVerify, RefusesXchgR14Memory)
{
    refused("xchg %r14, 8(%rsp)", "S4");
}
TEST_F(SandboxVerify, RefusesPopR14)
{
    refused("pop %r14", "S4");
}
TEST_F(SandboxVerify, RefusesCmovR14)
{
    refused("cmovz %rax, %r14", "S4");
}
TEST_F(SandboxVerify, RefusesSetccR14b)
{
    refused("setz %r14b", "S4");
}
TEST_F(SandboxVerify, RefusesCmpxchgR14)
{
    refused("cmpxchg %rax, %r14", "S4");
}
TEST_F(SandboxVerify, RefusesXaddR14)
{
    refused("xadd %rax, %r14", "S4");
}
TEST_F(SandboxVerify, RefusesIncR14)
{
    refused("inc %r14", "S4");
}
TEST_F(SandboxVerify, RefusesShiftR14)
{
    refused("shl $1, %r14", "S4");
}
TEST_F(SandboxVerify, RefusesBswapR14)
{
    refused("bswap %r14", "S4");
}

/* S5: stack pivots */

TEST_F(SandboxVerify, RefusesMovToRsp)
{
    refused("mov %rax, %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesMovToEsp)
{
    refused("mov %eax, %esp", "S5");
}
TEST_F(SandboxVerify, RefusesXchgRsp)
{
    refused("xchg %rax, %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesPopRsp)
{
    refused("pop %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesLeave)
{
    refused("leave", "S2");
}
TEST_F(SandboxVerify, RefusesAddRsp)
{
    refused("add $8, %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesSubRsp)
{
    refused("sub $8, %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesAndRsp)
{
    refused("and $-16, %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesLeaRsp)
{
    refused("lea 8(%rsp), %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesStackPairWithWrongMask)
{
    refused("andl $0x3fffff, %r11d\nleaq 0x40000000(%r14,%r11), %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesStackPairWithMaskOnOtherRegister)
{
    refused("andl $0x1fffff, %eax\nleaq 0x40000000(%r14,%r11), %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesStackPairInTwoBundles)
{
    refused("andl $0x1fffff, %r11d\n.p2align 5\nleaq 0x40000000(%r14,%r11), "
            "%rsp",
            "S5");
}
TEST_F(SandboxVerify, RefusesStackPairNotAdjacent)
{
    refused("andl $0x1fffff, %r11d\nnop\nleaq 0x40000000(%r14,%r11), %rsp",
            "S5");
}
TEST_F(SandboxVerify, RefusesStackLeaWithOtherDisplacement)
{
    refused("andl $0x1fffff, %r11d\nleaq 0x40000008(%r14,%r11), %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesStackLeaWithScale2)
{
    refused("andl $0x1fffff, %r11d\nleaq 0x40000000(%r14,%r11,2), %rsp", "S5");
}
TEST_F(SandboxVerify, RefusesStackLeaWithSwappedRegisters)
{
    refused("andl $0x1fffff, %r11d\nleaq 0x40000000(%r11,%r14), %rsp", "S5");
}

/* S7: indirect branches */

TEST_F(SandboxVerify, RefusesUnmaskedIndirectJmp)
{
    refused("jmp *%r11", "S7");
}
TEST_F(SandboxVerify, RefusesUnmaskedIndirectCall)
{
    refused("call *%r11", "S7");
}
TEST_F(SandboxVerify, RefusesIndirectJmpOtherRegister)
{
    refused("jmp *%rax", "S7");
}
TEST_F(SandboxVerify, RefusesIndirectCallOtherRegister)
{
    refused("call *%rax", "S7");
}
TEST_F(SandboxVerify, RefusesJmpWithMaskInPreviousBundle)
{
    refused("andl $0xffffffe0, %r11d\naddq %r14, %r11\n.p2align 5\njmp *%r11",
            "S7");
}
TEST_F(SandboxVerify, RefusesCallWithAndInPreviousBundle)
{
    refused("andl $0xffffffe0, %r11d\n.p2align 5\naddq %r14, %r11\ncall *%r11",
            "S7");
}
TEST_F(SandboxVerify, RefusesMaskedJmpThroughOtherRegister)
{
    refused("andl $0xffffffe0, %eax\naddq %r14, %rax\njmp *%rax", "S7");
}
TEST_F(SandboxVerify, RefusesAndOnOtherRegister)
{
    refused("andl $0xffffffe0, %eax\naddq %r14, %r11\njmp *%r11", "S7");
}
TEST_F(SandboxVerify, RefusesAddOnOtherRegister)
{
    refused("andl $0xffffffe0, %r11d\naddq %r14, %rax\ncall *%r11", "S7");
}
TEST_F(SandboxVerify, RefusesWrongMask)
{
    refused("andl $0xfffffff0, %r11d\naddq %r14, %r11\njmp *%r11", "S7");
}
TEST_F(SandboxVerify, RefusesAddOfOtherBase)
{
    refused("andl $0xffffffe0, %r11d\naddq %r13, %r11\njmp *%r11", "S7");
}
TEST_F(SandboxVerify, RefusesMaskedSequenceWithGap)
{
    refused("andl $0xffffffe0, %r11d\naddq %r14, %r11\nnop\njmp *%r11", "S7");
}
TEST_F(SandboxVerify, RefusesJmpThroughMemory)
{
    refused("jmp *8(%rsp)", "S7");
}
TEST_F(SandboxVerify, RefusesCallThroughMemory)
{
    refused("call *%gs:(%eax)", "S7");
}
TEST_F(SandboxVerify, RefusesRipRelativeCall)
{
    refused("call *start(%rip)", "S7");
}
TEST_F(SandboxVerify, RefusesRet)
{
    refused("ret", "S7");
}
TEST_F(SandboxVerify, RefusesRetImm)
{
    refused("ret $8", "S7");
}
TEST_F(SandboxVerify, RefusesIndirectJmpWithOperandSizePrefix)
{
    refused("andl $0xffffffe0, %r11d\naddq %r14, %r11\n.byte 0x66, 0x41, 0xff, "
            "0xe3",
            "S7");
}

/* S6: direct branches */

TEST_F(SandboxVerify, RefusesJmpIntoInstruction)
{
    refused("1: movl $1, %eax\njmp 1b+1", "S6");
}
TEST_F(SandboxVerify, RefusesJccIntoInstruction)
{
    refused("1: movl $1, %eax\nje 1b+2", "S6");
}
TEST_F(SandboxVerify, RefusesCallIntoInstruction)
{
    refused("1: movl $1, %eax\ncall 1b+1", "S6");
}
/* andl, then 2: addq and 3: jmp, the 2nd and 3rd of an S7 sequence */
const char kMaskedJmp[] = ".bundle_lock\nandl $0xffffffe0, %r11d\n"
                          "2: addq %r14, %r11\n3: jmp *%r11\n.bundle_unlock\n";
TEST_F(SandboxVerify, RefusesJumpOntoSecondOfMaskedBranch)
{
    refused(std::string(kMaskedJmp) + "jmp 2b", "S6");
}
TEST_F(SandboxVerify, RefusesJumpOntoThirdOfMaskedBranch)
{
    refused(std::string(kMaskedJmp) + "jne 3b", "S6");
}
TEST_F(SandboxVerify, RefusesCallOntoThirdOfMaskedBranch)
{
    refused(std::string(kMaskedJmp) + "call 3b", "S6");
}
TEST_F(SandboxVerify, RefusesJumpIntoStackPair)
{
    refused(".bundle_lock\nandl $0x1fffff, %r11d\n4: leaq "
            "0x40000000(%r14,%r11), %rsp\n"
            ".bundle_unlock\njmp 4b",
            "S6");
}
TEST_F(SandboxVerify, RefusesJumpAfterText)
{
    refused("jmp start+0x2000", "S6");
}
TEST_F(SandboxVerify, RefusesJumpBeforeText)
{
    refused("jmp start-32", "S6");
}
TEST_F(SandboxVerify, RefusesJccOutsideText)
{
    refused("jz start+0x2000", "S6");
}
TEST_F(SandboxVerify, RefusesLoopOutsideText)
{
    refused("1: loop 1b+0x70", "S6");
}
TEST_F(SandboxVerify, RefusesJumpToGate)
{
    refused("jmp start-0x1000", "S6");
}
TEST_F(SandboxVerify, RefusesCallBeyondImports)
{
    refused("call start - 0x1000 + 32 * 3", "S6"); /* kImports is 2 */
}
TEST_F(SandboxVerify, RefusesCallInsideGateBundle)
{
    refused("call start - 0x1000 + 8", "S6");
}
TEST_F(SandboxVerify, RefusesCallBeforeGate)
{
    refused("call start - 0x1020", "S6");
}
TEST_F(SandboxVerify, RefusesBranchWithOperandSizePrefix)
{
    refused(".byte 0x66, 0xe9, 0x00, 0x00, 0x00, 0x00", "S6");
}

} // namespace
} // namespace test
