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
#include "../common/process.h"
#include "../common/variants.h"
#include "../ifuncs/test_ifunc.h"
#include "path.h"

#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/format/image.h"

#include <sys/auxv.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

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

/* Two ifunc workers of this process, A and B, each on its own UCP context,
 * peers of each other (B connects on an endpoint to A's worker address:
 * by channel, as on one host); sbx_sends runs sandboxed on both, each with
 * its own struct sbx_sends_args (its target_args) in memory granted to it.
 * B's host starts each test with one message to A; the process's memory
 * is that of both ends. */
class SandboxSends : public ::testing::Test {
protected:
    /* Bytes a flood sends per message: more than a channel's slot (1 MiB
     * payload), so they go by active message, which B must progress to
     * take. */
    static constexpr size_t kFloodLength = 1536ul << 10;
    static constexpr size_t kSideBytes =
            SBX_SENDS_DATA_OFFSET + kFloodLength + kPage;

    struct Side {
        std::unique_ptr<ucx_util::Context> context;
        std::unique_ptr<ucx_util::Worker>  worker;
        ucp_ifunc_worker_h                 iw   = nullptr;
        ucp_ifunc_peer_h                   peer = nullptr; /* to the other */
        sbx_sends_args                    *args = nullptr;
    };

    void SetUp() override
    {
        if (!sandbox_supported()) {
            GTEST_SKIP() << "no sandbox here (x86-64 Linux with FSGSBASE)";
        }
    }

    void TearDown() override
    {
        if (b_.iw != nullptr) {
            /* What A holds for B goes before the peers close. */
            progress_until([&] { return queued(a_) == 0; }, 10);
        }
        for (Side *side : {&b_, &a_}) {
            if (side->peer != nullptr) {
                ucp_ifunc_peer_close(side->peer);
            }
        }
        endpoint_.reset();
        if (handle_ != nullptr) {
            ucp_deregister_ifunc(b_.context->get(), handle_);
        }
        for (Side *side : {&b_, &a_}) {
            if (side->iw != nullptr) {
                ucp_ifunc_worker_destroy(side->iw);
            }
            side->worker.reset();
            side->context.reset();
        }
        env_.clear();
    }

    static bool sandbox_supported()
    {
        return (getauxval(AT_HWCAP2) & 2) != 0; /* HWCAP2_FSGSBASE */
    }

    /* Makes both ends with the UCX_IFUNC_* settings @a env ("NAME=VALUE")
     * and connects them. */
    void
    start(const std::vector<std::pair<const char *, const char *>> &env = {})
    {
        env_.push_back(
                std::make_unique<ScopedEnv>("UCX_IFUNC_TRUST", "sandboxed"));
        env_.push_back(std::make_unique<ScopedEnv>("UCX_IFUNC_LIB_DIR",
                                                   ifunc_lib_dir().c_str()));
        for (const auto &variable : env) {
            env_.push_back(std::make_unique<ScopedEnv>(variable.first,
                                                       variable.second));
        }
        memory_.grant(0, 2 * kSideBytes,
                      UCP_IFUNC_SANDBOX_GRANT_READ |
                              UCP_IFUNC_SANDBOX_GRANT_WRITE,
                      "sbx_sends");
        /* connect() progresses A from a thread of its own, then the test
         * from this one: one thread at a time, which a serialized worker
         * allows and a single-threaded one does not (UCX 1.18 on asserts
         * that one thread uses it). */
        make_side(a_, memory_.address(), UCS_THREAD_MODE_SERIALIZED);
        make_side(b_, memory_.address() + kSideBytes, UCS_THREAD_MODE_SINGLE);
        connect();
        ucx_util::check(
                ucp_register_ifunc(b_.context->get(), "sbx_sends", &handle_),
                "ucp_register_ifunc");
    }

    static void peer_arrived(ucp_ifunc_peer_h peer, ucs_status_t status,
                             void *arg)
    {
        if (status == UCS_OK) {
            static_cast<std::atomic<ucp_ifunc_peer_h> *>(arg)->store(peer);
        }
    }

    void make_side(Side &side, char *args, ucs_thread_mode_t thread_mode)
    {
        side.context = std::make_unique<ucx_util::Context>(UCP_FEATURE_AM |
                                                           UCP_FEATURE_RMA);
        side.worker  = std::make_unique<ucx_util::Worker>(side.context->get(),
                                                         thread_mode);
        side.args    = reinterpret_cast<sbx_sends_args *>(args);
        ucp_ifunc_worker_params_t params = {};
        params.field_mask                = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS |
                            UCP_IFUNC_WORKER_FIELD_PEER_CB |
                            UCP_IFUNC_WORKER_FIELD_PATH;
        params.path        = path_;
        params.target_args = args;
        params.peer_cb     = peer_arrived;
        params.peer_cb_arg = &accepted_;
        ucx_util::check(ucp_ifunc_worker_create(side.context->get(),
                                                side.worker->get(), &params,
                                                &side.iw),
                        "ucp_ifunc_worker_create");
    }

    /* B connects, while a thread progresses A, which answers. */
    void connect()
    {
        endpoint_ = std::make_unique<ucx_util::Endpoint>(*b_.worker,
                                                         a_.worker->address());
        std::atomic<bool>       done{false};
        std::thread             a_progress([&] {
            while (!done.load() || (accepted_.load() == nullptr)) {
                ucp_ifunc_worker_progress(a_.iw);
            }
        });
        ucp_ifunc_peer_params_t params = {};
        params.field_mask              = UCP_IFUNC_PEER_FIELD_EP;
        params.ep                      = endpoint_->get();
        ucs_status_t status = ucp_ifunc_peer_connect(b_.iw, &params, &b_.peer);
        done.store(true);
        if (status != UCS_OK) {
            accepted_.store(reinterpret_cast<ucp_ifunc_peer_h>(1));
        }
        a_progress.join();
        ucx_util::check(status, "ucp_ifunc_peer_connect");
        a_.peer = accepted_.load();
    }

    /* Progresses both ends until @a done or @a seconds pass. */
    template <typename Done>
    bool progress_until(const Done &done, double seconds)
    {
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(seconds);
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) {
                return false;
            }
            ucp_ifunc_worker_progress(a_.iw);
            ucp_ifunc_worker_progress(b_.iw);
        }
        return true;
    }

    /* The memory the process holds, in KiB: its resident set; under
     * AddressSanitizer, whose quarantine keeps freed blocks resident, the
     * heap in use. */
    static long held_kib()
    {
#if defined(__SANITIZE_ADDRESS__)
        return long(heap_in_use() >> 10);
#else
        return rss_kib();
#endif
    }

    /* Progresses A alone until @a done or @a seconds pass. */
    template <typename Done>
    bool progress_until_a(const Done &done, double seconds)
    {
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(seconds);
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) {
                return false;
            }
            ucp_ifunc_worker_progress(a_.iw);
        }
        return true;
    }

    /* Progresses both ends until no message ran for 200 ms (or 10 s
     * passed): what the test started has ended. */
    void settle()
    {
        uint64_t runs  = 0;
        auto     quiet = std::chrono::steady_clock::now();
        progress_until(
                [&] {
                    uint64_t now_runs = a_.args->runs + b_.args->runs;
                    auto     now      = std::chrono::steady_clock::now();
                    if (now_runs != runs) {
                        runs  = now_runs;
                        quiet = now;
                    }
                    return now - quiet > std::chrono::milliseconds(200);
                },
                10);
    }

    static unsigned queued(const Side &side)
    {
        ucp_ifunc_peer_attr_t attr = {};
        attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_QUEUED;
        ucp_ifunc_peer_query(side.peer, &attr);
        return attr.queued;
    }

    static size_t held_bytes(const Side &side)
    {
        ucp_ifunc_peer_attr_t attr = {};
        attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_HELD_BYTES;
        ucp_ifunc_peer_query(side.peer, &attr);
        return attr.held_bytes;
    }

    /* B's host sends @a p to A. */
    void start_at_a(const sbx_sends_payload &p)
    {
        ASSERT_EQ(UCS_OK, ucp_ifunc_peer_send_nbx(b_.peer, handle_, &p,
                                                  sizeof(p), nullptr));
    }

    /* The handle with which A's sandboxed code names B. */
    uint64_t grant_b_at_a(const char *ifunc = "sbx_sends")
    {
        ucp_ifunc_peer_h handle = nullptr;
        EXPECT_EQ(UCS_OK, ucp_ifunc_sandbox_peer_grant(a_.peer, ifunc, nullptr,
                                                       &handle));
        return reinterpret_cast<uintptr_t>(handle);
    }

    std::vector<std::unique_ptr<ScopedEnv>> env_;
    ucx_util::SandboxMemory                 memory_{2 * kSideBytes};
    Side                                    a_, b_;
    std::unique_ptr<ucx_util::Endpoint>     endpoint_;
    std::atomic<ucp_ifunc_peer_h>           accepted_{nullptr};
    ucp_ifunc_h                             handle_ = nullptr;
    ucp_ifunc_path_t                        path_   = UCP_IFUNC_PATH_AUTO;
};

TEST_F(SandboxSends, AMessageThatSendsItselfOnStopsAtTheHopLimit)
{
    /* Each run sends the message back to its source: A, B, A, ... It
     * runs once from B's host and once per hop UCX_IFUNC_SANDBOX_HOPS
     * allows (64 by default); the send of the last run is refused. */
    start();
    start_at_a({SBX_SENDS_ON, uintptr_t(UCP_IFUNC_PEER_SOURCE), 0, 0});
    settle();
    uint64_t runs = a_.args->runs + b_.args->runs;
    std::printf("[ measured ] runs of a self-sending message: %llu (A %llu, "
                "B %llu), refused sends: %llu\n",
                (unsigned long long)runs, (unsigned long long)a_.args->runs,
                (unsigned long long)b_.args->runs,
                (unsigned long long)(a_.args->refused + b_.args->refused));
    EXPECT_EQ(65u, runs);
    EXPECT_EQ(64u, a_.args->sent + b_.args->sent);
    EXPECT_EQ(1u, a_.args->refused + b_.args->refused);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              (a_.args->refused ? a_.args : b_.args)->last_refusal);
}

TEST_F(SandboxSends, TheHopCountTravelsByActiveMessageToo)
{
    /* The same by active message, where a reference has no room for the
     * count: messages sent on go whole, count and all. */
    path_ = UCP_IFUNC_PATH_AM;
    start();
    start_at_a({SBX_SENDS_ON, uintptr_t(UCP_IFUNC_PEER_SOURCE), 0, 0});
    settle();
    EXPECT_EQ(65u, a_.args->runs + b_.args->runs);
    EXPECT_EQ(1u, a_.args->refused + b_.args->refused);
    ucp_ifunc_peer_attr_t attr = {};
    attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_PATH;
    ucp_ifunc_peer_query(a_.peer, &attr);
    EXPECT_EQ(UCP_IFUNC_PATH_AM, attr.path);
}

TEST_F(SandboxSends, ASendBackToTheMessagesSourceRuns)
{
    /* One hop: A's run sends back to B (its message's source), whose run
     * may not send on. */
    start({{"UCX_IFUNC_SANDBOX_HOPS", "1"}});
    start_at_a({SBX_SENDS_ON, uintptr_t(UCP_IFUNC_PEER_SOURCE), 0, 0});
    settle();
    EXPECT_EQ(1u, a_.args->runs);
    EXPECT_EQ(1u, a_.args->sent);
    EXPECT_EQ(0u, a_.args->refused);
    EXPECT_EQ(1u, b_.args->runs);
    EXPECT_EQ(0u, b_.args->sent);
    EXPECT_EQ(1u, b_.args->refused);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, b_.args->last_refusal);
}

TEST_F(SandboxSends, ASendToAPeerNotGrantedToTheCodeIsRefused)
{
    /* B is granted to another ifunc's code at A, not to sbx_sends: its
     * handle there, and the peer's own pointer, name nothing for it. */
    start();
    uint64_t other     = grant_b_at_a("sandboxed");
    a_.args->probes[0] = other;
    a_.args->probes[1] = uintptr_t(a_.peer);
    a_.args->probes[2] = uintptr_t(b_.peer);
    start_at_a({SBX_SENDS_PROBE, 0, 3, 0});
    settle();
    EXPECT_EQ(1u, a_.args->runs);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, a_.args->probe_status[i]) << i;
    }
    EXPECT_EQ(0u, b_.args->runs);
    EXPECT_EQ(0u, queued(a_));
}

TEST_F(SandboxSends, AForgedOrGuessedHandleIsRefused)
{
    /* Handles near and far from the one granted, and the peer's pointer;
     * then the granted one, which works. */
    start();
    uint64_t       granted  = grant_b_at_a();
    const uint64_t forged[] = {0,
                               granted + 1,
                               granted + 8,
                               granted + 65536,
                               granted | (uint64_t(1) << 32),
                               ~granted,
                               0x5ec2e75ec2e70001ull,
                               uintptr_t(a_.peer)};
    const size_t   n_forged = sizeof(forged) / sizeof(forged[0]);
    std::memcpy(a_.args->probes, forged, sizeof(forged));
    a_.args->probes[n_forged] = granted;
    start_at_a({SBX_SENDS_PROBE, 0, n_forged + 1, 0});
    settle();
    for (size_t i = 0; i < n_forged; ++i) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, a_.args->probe_status[i])
                << "handle 0x" << std::hex << forged[i];
    }
    EXPECT_EQ(UCS_OK, a_.args->probe_status[n_forged]);
    EXPECT_EQ(1u, b_.args->runs); /* the granted handle's message only */
}

TEST_F(SandboxSends, SendsAreBoundedPerMessageAndPerCode)
{
    /* A message may make 16 sends; the code 20 a second, in bursts of as
     * many: of two messages of 20 sends each, the first makes 16 (4 over
     * its own bound), the second 4 (16 over its code's). */
    start({{"UCX_IFUNC_SANDBOX_SEND_RATE", "20"}});
    uint64_t granted = grant_b_at_a();
    char    *data = reinterpret_cast<char *>(a_.args) + SBX_SENDS_DATA_OFFSET;
    sbx_sends_payload count = {SBX_SENDS_COUNT, 0, 0, 0};
    std::memcpy(data, &count, sizeof(count));
    start_at_a({SBX_SENDS_FLOOD, granted, 20, sizeof(count)});
    ASSERT_TRUE(progress_until([&] { return a_.args->runs == 1; }, 10));
    EXPECT_EQ(16u, a_.args->sent);
    EXPECT_EQ(4u, a_.args->refused);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, a_.args->last_refusal);
    start_at_a({SBX_SENDS_FLOOD, granted, 20, sizeof(count)});
    ASSERT_TRUE(progress_until([&] { return a_.args->runs == 2; }, 10));
    EXPECT_EQ(20u, a_.args->sent);
    EXPECT_EQ(20u, a_.args->refused);
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, a_.args->last_refusal);
    settle();
    EXPECT_EQ(20u, b_.args->runs);
}

TEST_F(SandboxSends, SendsThatMustWaitStayWithinTheQueuesBytes)
{
    /* B does not progress: A's sends of 1.5 MiB each wait (in flight by
     * active message, then queued). 32 messages of 16 sends each would
     * hold 768 MiB; the peer's bytes are capped at 16 MiB. */
    start({{"UCX_IFUNC_PEER_QUEUE_BYTES", "16m"}});
    uint64_t granted = grant_b_at_a();
    char    *data = reinterpret_cast<char *>(a_.args) + SBX_SENDS_DATA_OFFSET;
    sbx_sends_payload count = {SBX_SENDS_COUNT, 0, 0, 0};
    std::memcpy(data, &count, sizeof(count));
    const uint64_t kMessages = 32, kSends = 16;
    long           before = held_kib();
    for (uint64_t i = 0; i < kMessages; ++i) {
        start_at_a({SBX_SENDS_FLOOD, granted, kSends, kFloodLength});
        /* A alone runs it; B's host only sent. */
        ASSERT_TRUE(progress_until_a([&] { return a_.args->runs > i; }, 10));
    }
    long   grown_kib = held_kib() - before;
    size_t held      = held_bytes(a_);
    std::printf("[ measured ] %llu sends of %zu KiB: %llu taken, %llu "
                "refused; %zu KiB held for B; process +%ld KiB\n",
                (unsigned long long)(kMessages * kSends), kFloodLength >> 10,
                (unsigned long long)a_.args->sent,
                (unsigned long long)a_.args->refused, held >> 10, grown_kib);
    EXPECT_EQ(kMessages * kSends, a_.args->sent + a_.args->refused);
    /* What A holds stays within the cap and fills it: the sends were
     * refused for want of room. A send UCX ended before B progressed (UCX
     * 1.22 ends one over shared memory) holds nothing, so it is not
     * counted against the sends taken. */
    EXPECT_LE(held, 16ul << 20);
    EXPECT_GT(held + kFloodLength, (16ul << 20) - kFloodLength);
    EXPECT_EQ(UCS_ERR_NO_RESOURCE, a_.args->last_refusal);
    EXPECT_LT(grown_kib, 64l << 10);
    /* B progresses again: what was taken runs there. */
    EXPECT_TRUE(
            progress_until([&] { return b_.args->runs == a_.args->sent; }, 20));
}

} // namespace
} // namespace test

#endif
