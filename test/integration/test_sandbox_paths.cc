/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Sandboxed code (UCX_IFUNC_TRUST=sandboxed, docs/security.md "Sandboxed
 * code") from a source process, over shared memory and TCP, by channel and
 * by active message: it runs confined and writes its result into memory the
 * target granted; every way out that a message can try (an address of the
 * host, granted read-only memory, an endless loop, a deep recursion, ud2, a
 * division by zero, another tenant's memory and data, a function the
 * sandbox does not grant, a system call patched into the text) ends that
 * message, is counted, and the next message runs.
 */
#if defined(__x86_64__) && defined(__linux__)

#include "../common/counters.h"
#include "../common/frames.h"
#include "../common/variants.h"
#include "../ifuncs/test_ifunc.h"
#include "path.h"

#include "ucp/ifunc/frame.h"
#include "ucp/ifunc/image.h"

#include <sys/mman.h>

#include <cstring>
#include <stdexcept>

namespace test {
namespace {

constexpr size_t   kPage   = 4096;
constexpr uint64_t kSecret = 0x5ec2e75ec2e7ull;

/* Memory of ucp_ifunc_sandbox_mem_alloc, one page per use. */
class GrantedPages {
public:
    explicit GrantedPages(size_t pages) : memory_(pages * kPage) {}

    char *page(size_t index) const { return memory_.address() + index * kPage; }

    void grant(size_t index, unsigned rights, const char *ifunc_name)
    {
        memory_.grant(index * kPage, kPage, rights, ifunc_name);
    }

private:
    SandboxMemory memory_;
};

/* A page of the host whose address, taken modulo 4 GiB as sandboxed code
 * takes it, falls into the low guard of every slot: code that uses the
 * host's address faults whatever slot it runs in (at other addresses it
 * could land in its own memory, which proves nothing). */
class HostPage {
public:
    HostPage()
    {
        for (uint64_t high = 0x100; high < 0x7f00; high += 0x11) {
            void *want = reinterpret_cast<void *>((high << 32) + kPage);
            void *got  = mmap(want, kPage, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                              -1, 0);
            if (got == want) {
                address_ = static_cast<uint64_t *>(got);
                break;
            }
            if (got != MAP_FAILED) {
                munmap(got, kPage); /* a kernel that took it as a hint */
            }
        }
        if (address_ == nullptr) {
            throw std::runtime_error("no free page at 4 GiB * n + 4 KiB");
        }
        *address_ = kSecret;
    }
    ~HostPage() { munmap(address_, kPage); }
    HostPage(const HostPage &)            = delete;
    HostPage &operator=(const HostPage &) = delete;

    uint64_t  address() const { return reinterpret_cast<uint64_t>(address_); }
    uint64_t &word() const { return *address_; }

private:
    uint64_t *address_ = nullptr;
};

/* Host code at an address whose low 32 bits fall into the low guard of
 * every slot (HostPage's): it counts its calls. Code the sandbox sends
 * there, by any branch, lands at that offset of its own slot instead. */
class HostCode {
public:
    HostCode()
    {
        /* movabs $&calls_, %rax; incq (%rax); ret */
        uint8_t   code[]  = {0x48, 0xb8, 0, 0,    0,    0,    0,
                             0,    0,    0, 0x48, 0xff, 0x00, 0xc3};
        uint64_t *counter = &calls_;
        std::memcpy(code + 2, &counter, sizeof(counter));
        std::memcpy(&page_.word(), code, sizeof(code));
        if (mprotect(&page_.word(), kPage, PROT_READ | PROT_EXEC) != 0) {
            throw std::runtime_error("mprotect of the host code failed");
        }
    }

    uint64_t address() const { return page_.address(); }
    uint64_t calls() const { return calls_; }
    void     call() const { reinterpret_cast<void (*)()>(address())(); }

private:
    HostPage page_;
    uint64_t calls_ = 0;
};

/* Page use of the tests' granted memory. */
enum GrantedPage : size_t {
    kResultPage,   /* sandboxed's result (target_args), read+write */
    kReadOnlyPage, /* sandboxed may read it */
    kOtherPage,    /* sandboxed_other's result, read+write */
    kGrantedPages
};

class SandboxPaths : public PathTest {
protected:
    void SetUp() override
    {
        trust_ = std::make_unique<ScopedEnv>("UCX_IFUNC_TRUST", "sandboxed");
        budget_ =
                std::make_unique<ScopedEnv>("UCX_IFUNC_SANDBOX_BUDGET", "50ms");
        granted_.grant(kResultPage,
                       UCP_IFUNC_SANDBOX_GRANT_READ |
                               UCP_IFUNC_SANDBOX_GRANT_WRITE,
                       "sandboxed");
        granted_.grant(kReadOnlyPage, UCP_IFUNC_SANDBOX_GRANT_READ,
                       "sandboxed");
        granted_.grant(kOtherPage,
                       UCP_IFUNC_SANDBOX_GRANT_READ |
                               UCP_IFUNC_SANDBOX_GRANT_WRITE,
                       "sandboxed_other");
        std::memcpy(granted_.page(kReadOnlyPage), &kSecret, sizeof(kSecret));
        target_args_ = granted_.page(kResultPage);
        PathTest::SetUp();
        handle_ = target_->register_ifunc("sandboxed");
    }

    void TearDown() override
    {
        PathTest::TearDown();
        budget_.reset();
        trust_.reset();
    }

    sandboxed_result &result(GrantedPage page = kResultPage)
    {
        return *reinterpret_cast<sandboxed_result *>(granted_.page(page));
    }

    /* Messages run, ended early or dropped so far. */
    uint64_t settled()
    {
        auto a = query_counters(target_->context());
        return a.run_channel + a.run_am + rejected_total(a) +
               a.rejected_sandbox_fault + a.rejected_sandbox_budget;
    }

    /* One message of @a handle; waits until the target ran or ended it. */
    void send(uint32_t handle, sandboxed_args args)
    {
        uint64_t before = settled();
        ASSERT_EQ(UCS_OK, end_->send(0, handle, 1, &args, sizeof(args)).status);
        ASSERT_TRUE(end_->poll_until([&] { return settled() > before; }))
                << "message " << args.op << " never ran";
    }

    /* A way out that must end its message with a fault (or, @a budget, by
     * the budget), leaving the result alone; then a well-behaved message
     * runs. */
    void expect_ended(const sandboxed_args &escape, bool budget = false)
    {
        auto             before = query_counters(target_->context());
        sandboxed_result was    = result();
        send(handle_, escape);
        auto after = query_counters(target_->context());
        EXPECT_EQ(before.rejected_sandbox_fault + (budget ? 0 : 1),
                  after.rejected_sandbox_fault);
        EXPECT_EQ(before.rejected_sandbox_budget + (budget ? 1 : 0),
                  after.rejected_sandbox_budget);
        EXPECT_EQ(was.runs, result().runs);
        EXPECT_EQ(was.value, result().value);
        expect_runs();
    }

    /* The well-behaved message: it adds to the granted result. */
    void expect_runs()
    {
        sandboxed_result was = result();
        send(handle_, {SANDBOXED_ADD, 0, 5, 0});
        EXPECT_EQ(was.runs + 1, result().runs);
        EXPECT_EQ(was.value + 5, result().value);
    }

    std::unique_ptr<ScopedEnv> trust_, budget_;
    GrantedPages               granted_{kGrantedPages};
    uint32_t                   handle_ = 0;
};

TEST_P(SandboxPaths, RunsConfinedAndWritesGrantedMemory)
{
    for (int i = 0; i < 3; ++i) {
        expect_runs();
    }
    /* Granted read-only memory reads, and a result may go wherever the
     * code was granted memory, named by its host address. */
    uint64_t into = reinterpret_cast<uint64_t>(granted_.page(kResultPage)) +
                    sizeof(sandboxed_result);
    send(handle_,
         {SANDBOXED_READ_AT,
          reinterpret_cast<uint64_t>(granted_.page(kReadOnlyPage)), 0, into});
    EXPECT_EQ(kSecret, reinterpret_cast<sandboxed_result *>(into)->value);
    auto counters = query_counters(target_->context());
    EXPECT_EQ(0u, counters.rejected_sandbox_fault);
    EXPECT_EQ(0u, rejected_total(counters));
    EXPECT_TRUE(end_->errors().empty());
}

TEST_P(SandboxPaths, WriteThroughAHostAddressFaults)
{
    HostPage host;
    expect_ended({SANDBOXED_WRITE_AT, host.address(), 1, 0});
    EXPECT_EQ(kSecret, host.word());
}

TEST_P(SandboxPaths, ReadThroughAHostAddressFaults)
{
    HostPage host;
    expect_ended({SANDBOXED_READ_AT, host.address(), 0, 0});
    EXPECT_NE(kSecret, result().value);
}

TEST_P(SandboxPaths, ACallThroughAPointerToHostCodeFaults)
{
    HostCode host;
    host.call(); /* the host code works: called natively, it counts */
    ASSERT_EQ(1u, host.calls());
    expect_ended({SANDBOXED_CALL_AT, host.address(), 0, 0});
    EXPECT_EQ(1u, host.calls());
}

TEST_P(SandboxPaths, AReturnAddressOverwrittenWithHostCodeFaults)
{
    HostCode host;
    expect_ended({SANDBOXED_RETURN_TO, host.address(), 0, 0});
    EXPECT_EQ(0u, host.calls());
}

TEST_P(SandboxPaths, WritingItsOwnCodeFaults)
{
    /* 0xc3 (ret) over the first byte of a function of its own text. */
    expect_ended({SANDBOXED_WRITE_CODE, 0, 0xc3, 0});
    send(handle_, {SANDBOXED_RECURSE, 0, 3, 0}); /* the code is unchanged */
    EXPECT_EQ(2u, result().runs);
}

TEST_P(SandboxPaths, WriteToGrantedReadOnlyMemoryFaults)
{
    expect_ended({SANDBOXED_WRITE_AT,
                  reinterpret_cast<uint64_t>(granted_.page(kReadOnlyPage)), 1,
                  0});
    uint64_t word;
    std::memcpy(&word, granted_.page(kReadOnlyPage), sizeof(word));
    EXPECT_EQ(kSecret, word);
}

TEST_P(SandboxPaths, EndlessLoopEndsAtTheBudget)
{
    expect_ended({SANDBOXED_LOOP, 0, 0, 0}, true);
}

TEST_P(SandboxPaths, StackOverflowByRecursionFaults)
{
    /* A few frames fit; a million (over 500 MB of stack) do not. */
    send(handle_, {SANDBOXED_RECURSE, 0, 10, 0});
    EXPECT_EQ(1u, result().runs);
    expect_ended({SANDBOXED_RECURSE, 0, 1000000, 0});
}

TEST_P(SandboxPaths, Ud2Faults)
{
    expect_ended({SANDBOXED_TRAP, 0, 0, 0});
}

TEST_P(SandboxPaths, DivisionByZeroFaults)
{
    send(handle_, {SANDBOXED_DIVIDE, 84, 2, 0});
    EXPECT_EQ(42u, result().value);
    expect_ended({SANDBOXED_DIVIDE, 84, 0, 0});
}

TEST_P(SandboxPaths, ATenantReachesNeitherMemoryNorDataOfAnother)
{
    uint32_t other = target_->register_ifunc("sandboxed_other");
    uint64_t other_result =
            reinterpret_cast<uint64_t>(granted_.page(kOtherPage));
    /* Each keeps a value in its data segment; the other's stays 0. */
    send(handle_, {SANDBOXED_KEEP, 0, kSecret, 0});
    send(other, {SANDBOXED_RECALL, 0, 0, other_result});
    EXPECT_EQ(1u, result(kOtherPage).runs);
    EXPECT_EQ(0u, result(kOtherPage).value);
    send(handle_, {SANDBOXED_RECALL, 0, 0, 0});
    EXPECT_EQ(kSecret, result().value);

    /* The other tenant names sandboxed's granted memory by its address. */
    auto before  = query_counters(target_->context());
    auto victim  = reinterpret_cast<uint64_t>(granted_.page(kResultPage));
    auto ro_page = reinterpret_cast<uint64_t>(granted_.page(kReadOnlyPage));
    send(other, {SANDBOXED_READ_AT, victim, 0, other_result});
    send(other, {SANDBOXED_READ_AT, ro_page, 0, other_result});
    send(other, {SANDBOXED_WRITE_AT, victim, 1, other_result});
    /* ... and as where its result goes. */
    send(other, {SANDBOXED_ADD, 0, 1, victim});
    auto after = query_counters(target_->context());
    EXPECT_EQ(before.rejected_sandbox_fault + 4, after.rejected_sandbox_fault);
    EXPECT_EQ(1u, result(kOtherPage).runs);
    EXPECT_EQ(0u, result(kOtherPage).value);
    EXPECT_EQ(2u, result().runs);
    EXPECT_EQ(kSecret, result().value);

    /* Both still run. */
    send(other, {SANDBOXED_ADD, 0, 3, other_result});
    EXPECT_EQ(2u, result(kOtherPage).runs);
    EXPECT_EQ(3u, result(kOtherPage).value);
    expect_runs();
}

TEST_P(SandboxPaths, AnImportTheSandboxDoesNotGrantIsRejected)
{
    /* imports_sandbox calls sscanf. */
    WarningCounter warnings("which the sandbox does not grant");
    uint32_t       handle = target_->register_ifunc("imports_sandbox");
    auto           before = query_counters(target_->context());
    send(handle, {});
    auto after = query_counters(target_->context());
    EXPECT_EQ(before.rejected_missing_import + 1,
              after.rejected_missing_import);
    EXPECT_EQ(before.codes_linked, after.codes_linked);
    EXPECT_EQ(1, warnings.count());
    expect_runs();
}

INSTANTIATE_PATH_TESTS(SandboxPaths);

/* Frames made by the source, changed here and put into the target's
 * buffer, as a peer that writes its own frames would. */
class SandboxFrames : public TransportTest {
protected:
    void SetUp() override
    {
        trust_ = std::make_unique<ScopedEnv>("UCX_IFUNC_TRUST", "sandboxed");
        granted_.grant(
                0, UCP_IFUNC_SANDBOX_GRANT_READ | UCP_IFUNC_SANDBOX_GRANT_WRITE,
                "sandboxed");
        TransportTest::SetUp();
    }

    void TearDown() override
    {
        TransportTest::TearDown();
        trust_.reset();
    }

    std::unique_ptr<ScopedEnv> trust_;
    GrantedPages               granted_{1};
};

TEST_P(SandboxFrames, ASystemCallPatchedIntoTheTextIsRefused)
{
    uint32_t       handle = target_->register_ifunc("sandboxed");
    sandboxed_args args   = {SANDBOXED_ADD, 0, 7, 0};
    auto &result = *reinterpret_cast<sandboxed_result *>(granted_.page(0));
    std::vector<char> bytes = target_->get_frame(handle, &args, sizeof(args));
    ASSERT_GE(bytes.size(), sizeof(ucx_ifunc::FrameHeader));
    /* The entry's first bundle becomes syscall and nops; the code id and
     * the seal follow the bytes (no signature: sandboxed needs none). */
    auto  &hdr   = frame_header(bytes);
    size_t image = ucx_ifunc::frame_image_offset(hdr.name_length);
    auto   desc  = reinterpret_cast<ucp_ifunc_image_desc_t *>(&bytes[image]);
    ASSERT_TRUE(desc->flags & UCP_IFUNC_IMAGE_FLAG_SANDBOX);
    ASSERT_EQ(0u, desc->entry_vaddr % 32); /* a bundle (rule S1) */
    char *entry = &bytes[image + desc->seg[UCP_IFUNC_SEG_TEXT].file_offset +
                         desc->entry_vaddr];
    std::memset(entry, 0x90, 32);
    entry[0] = char(0x0f);
    entry[1] = char(0x05);
    reidentify_frame(bytes);

    WarningCounter warnings("rejected by the sandbox's verifier");
    auto           before = query_counters(target_->context());
    ASSERT_EQ(UCS_OK, target_->put_raw(0, bytes.data(), bytes.size()).status);
    EXPECT_EQ(UCS_ERR_REJECTED,
              target_->poll_until_result(0, kPage * 256, &result));
    auto after = query_counters(target_->context());
    EXPECT_EQ(before.rejected_untrusted + 1, after.rejected_untrusted);
    EXPECT_EQ(before.codes_linked, after.codes_linked);
    EXPECT_EQ(0u, result.runs);
    EXPECT_EQ(1, warnings.count());

    /* The frame as built runs: the refusal was the patch's. */
    std::vector<char> good = target_->get_frame(handle, &args, sizeof(args));
    ASSERT_EQ(UCS_OK, target_->put_raw(0, good.data(), good.size()).status);
    ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kPage * 256, &result));
    EXPECT_EQ(1u, result.runs);
    EXPECT_EQ(7u, result.value);
}

INSTANTIATE_TEST_SUITE_P(Transports, SandboxFrames,
                         ::testing::Values("sm", "tcp"), transport_name);

} // namespace
} // namespace test

#endif
