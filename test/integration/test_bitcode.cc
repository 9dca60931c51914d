/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Bitcode images between two processes (issue 32) over shared memory and
 * TCP: a source peer whose library carries bitcode for the target's ISA
 * sends it, and the target compiles it for its own CPU and runs it, under
 * the default trust policy (its own copy of the library vouches). The
 * test library bc_pick's bitcode adds 1000 more than its native image, so
 * each test sees which code ran. Skipped where the build has no LLVM (the
 * libraries are not made then).
 */
#include "target.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace test {
namespace {

constexpr size_t kSlot = 1ul << 20;

class Bitcode : public TransportTest {
protected:
    void SetUp() override {}

    /* A target whose peer and whose own UCX_IFUNC_LIB_DIR are the test
     * libraries' @a dir, with @a env set before the peer starts (the peer
     * inherits it). */
    void start(const std::string                                &dir,
               std::vector<std::pair<const char *, std::string>> env = {})
    {
        for (auto &[name, value] : env) {
            env_.push_back(std::make_unique<ScopedEnv>(name, value.c_str()));
        }
        target_ = std::make_unique<Target>(GetParam(),
                                           peer_ifunc_lib_dir() + dir);
        /* The target sets its own UCX_IFUNC_LIB_DIR when it starts; its
         * context reads it when it first polls. */
        env_.push_back(std::make_unique<ScopedEnv>(
                "UCX_IFUNC_LIB_DIR", (ifunc_lib_dir() + dir).c_str()));
    }

    void TearDown() override
    {
        target_.reset();
        env_.clear();
    }

    /* What one message of bc_pick adding @a add did to a counter at 0. */
    int64_t run(int64_t add)
    {
        uint32_t handle = target_->register_ifunc("bc_pick");
        EXPECT_EQ(UCS_OK,
                  target_->send(handle, kSlot, &add, sizeof(add)).status);
        int64_t counter = 0;
        EXPECT_EQ(UCS_OK, target_->poll_until_result(kSlot, kSlot, &counter));
        return counter;
    }

    bool built()
    {
        return access((ifunc_lib_dir() + "/bitcode_only/bc_pick.so").c_str(),
                      R_OK) == 0;
    }

    std::vector<std::unique_ptr<ScopedEnv>> env_;
};

TEST_P(Bitcode, BitcodeOnlyLibraryRunsCompiledOnTheTarget)
{
    if (!built()) {
        GTEST_SKIP() << "built without LLVM: no bitcode test libraries";
    }
    start("/bitcode_only");
    EXPECT_EQ(1005, run(5));
    EXPECT_EQ(1003, run(3)) << "the compiled code again";
}

TEST_P(Bitcode, NativeImageWhenTheLibraryHasBoth)
{
    if (!built()) {
        GTEST_SKIP() << "built without LLVM: no bitcode test libraries";
    }
    start("");
    EXPECT_EQ(5, run(5));
}

TEST_P(Bitcode, BitcodeWhenTheSourcePrefersIt)
{
    if (!built()) {
        GTEST_SKIP() << "built without LLVM: no bitcode test libraries";
    }
    start("", {{"UCX_IFUNC_PREFER_BITCODE", "y"}});
    EXPECT_EQ(1005, run(5));
    EXPECT_EQ(1007, run(7));
}

INSTANTIATE_TEST_SUITE_P(Transports, Bitcode, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
