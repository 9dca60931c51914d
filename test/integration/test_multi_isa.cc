/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Libraries built for several ISAs (ucx-ifunc-cc --target T1,T2), seen from
 * a target of this machine's ISA: every path sends it the code of its own
 * ISA, each message runs once, and code for another ISA sent on the raw
 * path (where the user names the ISA) is refused. The mixed-cluster run
 * (test/cross) sends the other ISA's code to a real target of that ISA.
 */
#include "path.h"

#include "../common/frames.h"

#include <elf.h>
#include <sys/stat.h>

namespace test {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kOwnMachine   = EM_X86_64;
constexpr uint16_t kOtherMachine = EM_AARCH64;
constexpr char     kOtherName[]  = "aarch64";
#elif defined(__aarch64__)
constexpr uint16_t kOwnMachine   = EM_AARCH64;
constexpr uint16_t kOtherMachine = EM_X86_64;
constexpr char     kOtherName[]  = "x86-64";
#elif defined(__powerpc64__)
constexpr uint16_t kOwnMachine   = EM_PPC64;
constexpr uint16_t kOtherMachine = EM_X86_64;
constexpr char     kOtherName[]  = "x86-64";
#endif

/* The test libraries built for this ISA and the other one; absent where
 * the other ISA's cross compiler is not installed. */
std::string multi_isa_lib_dir()
{
    return ifunc_lib_dir() + "/multi_isa";
}

/* The source's: the peer may be of the other ISA (test/cross). */
std::string peer_multi_isa_lib_dir()
{
    return peer_ifunc_lib_dir() + "/multi_isa";
}

/* The multi-ISA library the target or the source lacks, or "". */
std::string missing_multi_isa_lib()
{
    struct stat st;
    for (const std::string &dir :
         {multi_isa_lib_dir(), peer_multi_isa_lib_dir()}) {
        std::string path = dir + "/counter.so";
        if (stat(path.c_str(), &st) != 0) {
            return path;
        }
    }
    return "";
}

#define SKIP_WITHOUT_MULTI_ISA_LIBS()                                          \
    if (!missing_multi_isa_lib().empty()) {                                    \
        GTEST_SKIP() << "no " << missing_multi_isa_lib()                       \
                     << ": the other ISA's cross compiler was not found when " \
                        "the tree was configured (run "                        \
                        "contrib/install-deps.sh, then configure again)";      \
    }

/* A path whose source loads the multi-ISA libraries. */
class MultiIsaPath : public ::testing::TestWithParam<PathParam> {
protected:
    void SetUp() override
    {
        SKIP_WITHOUT_MULTI_ISA_LIBS();
        if (tls() == "tcp") {
            /* As PathTest: UCX 1.13's TCP PUT with UCP_FEATURE_AM. */
            tcp_put_ = std::make_unique<ScopedEnv>("UCX_TCP_PUT_ENABLE", "n");
        }
        target_ = std::make_unique<Target>(tls(), peer_multi_isa_lib_dir(),
                                           UCP_FEATURE_RMA | UCP_FEATURE_AM);
        end_    = std::make_unique<PathEnd>(*target_, path());
        end_->open();
    }

    void TearDown() override
    {
        end_.reset();
        target_.reset();
        tcp_put_.reset();
    }

    const std::string &tls() const { return std::get<0>(GetParam()); }
    Path               path() const { return std::get<1>(GetParam()); }

    uint64_t machine()
    {
        Request req{};
        req.op = Op::path_machine;
        return end_->call(0, req).value;
    }

    std::unique_ptr<ScopedEnv> tcp_put_;
    std::unique_ptr<Target>    target_;
    std::unique_ptr<PathEnd>   end_;
};

TEST_P(MultiIsaPath, TargetRunsItsOwnIsasCodeOnceThenByReference)
{
    WarningCounter other_isa("code is for");
    uint32_t       handle = target_->register_ifunc("counter");
    if (path() == Path::channel) {
        /* The blob said it. */
        EXPECT_EQ(kOwnMachine, machine());
    }
    int64_t ran = 0;
    do {
        ASSERT_EQ(UCS_OK, end_->send(0, handle, 1).status);
        ++ran;
        ASSERT_TRUE(end_->poll_until(
                [&] { return end_->result<int64_t>() == ran; }));
    } while ((end_->sent().second == 0) && (ran < 200));
    ASSERT_GT(end_->sent().second, 0u)
            << "the source never learned that the target holds the code";
    /* The first reply said it. */
    EXPECT_EQ(kOwnMachine, machine());

    ASSERT_EQ(UCS_OK, end_->send(0, handle, 50).status);
    ran += 50;
    ASSERT_TRUE(
            end_->poll_until([&] { return end_->result<int64_t>() == ran; }));
    auto sent = end_->sent();
    EXPECT_EQ(uint64_t(ran), sent.first + sent.second);
    EXPECT_GE(sent.second, 50u);
    EXPECT_EQ(0, other_isa.count());
    EXPECT_TRUE(end_->errors().empty());
}

/* Before the target's first reply an AM carries every ISA's frame: each
 * message must still run exactly once. */
TEST_P(MultiIsaPath, BurstBeforeTheTargetSaysItsIsaRunsEachMessageOnce)
{
    WarningCounter other_isa("code is for");
    WarningCounter bad_frames("frames");
    uint32_t       handle = target_->register_ifunc("counter");
    ASSERT_EQ(UCS_OK,
              end_->send(0, handle, 300, nullptr, 0,
                         (path() == Path::am) ? uint32_t(kPathPipeline) : 0u)
                      .status);
    ASSERT_TRUE(
            end_->poll_until([&] { return end_->result<int64_t>() == 300; }));
    /* Nothing more arrives late. */
    end_->poll_until([] { return false; }, 0.2);
    EXPECT_EQ(300, end_->result<int64_t>());
    EXPECT_EQ(0, other_isa.count());
    EXPECT_EQ(0, bad_frames.count());
    EXPECT_TRUE(end_->errors().empty());
}

INSTANTIATE_TEST_SUITE_P(Paths, MultiIsaPath,
                         ::testing::Combine(::testing::Values("sm", "tcp"),
                                            ::testing::Values(Path::channel,
                                                              Path::am)),
                         path_param_name);

constexpr size_t kSlot = 1ul << 20;

/* The raw path: the user names the target's ISA. */
class MultiIsaRaw : public ::testing::TestWithParam<std::string> {};

TEST_P(MultiIsaRaw, CodeForAnotherIsaIsRefusedByTheTargetAndOwnIsaRuns)
{
    SKIP_WITHOUT_MULTI_ISA_LIBS();
    Target   target(GetParam(), peer_multi_isa_lib_dir());
    uint32_t handle  = target.register_ifunc("counter");
    int64_t  counter = 0;
    int64_t  add     = 7;
    {
        WarningCounter other_isa(std::string("code is for ") + kOtherName);
        ASSERT_EQ(UCS_OK, target.send(handle, kSlot, &add, sizeof(add), 0,
                                      kOtherMachine)
                                  .status);
        EXPECT_EQ(UCS_ERR_UNSUPPORTED,
                  target.poll_until_result(kSlot, kSlot, &counter));
        EXPECT_EQ(1, other_isa.count());
        EXPECT_EQ(0, counter);
    }
    ASSERT_EQ(UCS_OK,
              target.send(handle, kSlot, &add, sizeof(add), 0, kOwnMachine)
                      .status);
    ASSERT_EQ(UCS_OK, target.poll_until_result(kSlot, kSlot, &counter));
    EXPECT_EQ(7, counter);
}

/* A library with this ISA's code only: single_isa/ where the test
 * libraries carry both ISAs' (configure found the cross compiler), else any
 * of them. */
std::string single_isa_lib_dir()
{
    struct stat st;
    std::string dir = ifunc_lib_dir() + "/single_isa";
    return (stat((dir + "/counter.so").c_str(), &st) == 0) ? dir
                                                           : ifunc_lib_dir();
}

TEST_P(MultiIsaRaw, LibraryWithoutCodeForTheIsaIsRefusedBeforeAnythingIsSent)
{
    Target   target(GetParam(), single_isa_lib_dir());
    uint32_t handle  = target.register_ifunc("counter");
    int64_t  counter = 0;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              ucs_status_t(
                      target.send(handle, kSlot, nullptr, 0, 0, kOtherMachine)
                              .status));
    EXPECT_TRUE(target.poll_for(0.05, kSlot, kSlot, &counter).empty());
    EXPECT_EQ(0, counter);
}

INSTANTIATE_TEST_SUITE_P(Transports, MultiIsaRaw,
                         ::testing::Values("sm", "tcp"), transport_name);

} // namespace
} // namespace test
