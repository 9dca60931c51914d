/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Every construct of shipped code, at -O0/-O2/-O3 with and without the
 * stack protector, in both conventions of the payload functions and under
 * the longest name, run in another process over each transport: see
 * test/ifuncs/constructs.c for the checks. Each runs from the library's
 * native image and, in a build with LLVM, from its bitcode alone
 * (bitcode_only/, ucx-ifunc-cc --bitcode-only), which the target compiles
 * for itself (issue 32).
 */
#include "constructs.h"
#include "target.h"

#include <unistd.h>

#include <memory>
#include <ostream>
#include <string>
#include <tuple>

namespace test {

namespace {

/* Whether this ISA links shipped machine code; elsewhere (ppc64el) every
 * library's code arrives as bitcode. */
#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool kRunsMachineCode = true;
#else
constexpr bool kRunsMachineCode = false;
#endif

const char *const kCheckNames[CHECK_COUNT] = {"string literal",
                                              "constant table",
                                              "switch jump table",
                                              ".data variables",
                                              ".bss variables",
                                              "internal function pointers",
                                              "absolute pointer table",
                                              "table of external functions",
                                              "libc calls",
                                              "libm calls",
                                              "errno",
                                              "stdout (data import)",
                                              "global of the target",
                                              "zlib call (-lz)",
                                              "weak undefined symbol",
                                              "stack-protected buffer",
                                              "second source file",
                                              "varargs",
                                              "payload"};

} // namespace

void expect_constructs_passed(const std::string       &name,
                              const constructs_result &result)
{
    EXPECT_EQ(1u, result.calls) << name;
    for (int check = 0; check < CHECK_COUNT; ++check) {
        EXPECT_EQ(1, result.passed[check])
                << name << ": " << kCheckNames[check] << " failed";
    }
}

namespace {

/* What the source ships: the native image, or the bitcode that the
 * target compiles. */
enum class Code { native, bitcode };

void PrintTo(Code code, std::ostream *out)
{
    *out << (code == Code::bitcode ? "bitcode" : "native");
}

using Param = std::tuple<std::string, std::string, Code>; /* transport,
                                                             variant, code */

/* The variants test/Makefile.inc builds (TEST_CONSTRUCTS): the level, _sp
 * for the stack protector, _paper for the paper's convention, whose name
 * is as long as names may be. */
const char *const kLongPaper =
        "O2_paper_named_at_the_longest_length_an_ifunc_can_be";
const auto kVariants = ::testing::Values("O0", "O0_sp", "O2", "O2_sp", "O3",
                                         "O3_sp", kLongPaper);

class Constructs : public ::testing::TestWithParam<Param> {
protected:
    void SetUp() override
    {
        if (code() == Code::native) {
            target_ = std::make_unique<Target>(std::get<0>(GetParam()));
            return;
        }
        /* Both ends load the bitcode-only build: the source has nothing
         * else to send, and the target's own copy vouches for it. */
        const std::string dir = "/bitcode_only";
        if (access((ifunc_lib_dir() + dir + "/" + name() + ".so").c_str(),
                   R_OK) != 0) {
            GTEST_SKIP() << "built without LLVM: no bitcode test libraries";
        }
        target_ = std::make_unique<Target>(std::get<0>(GetParam()),
                                           peer_ifunc_lib_dir() + dir);
        /* Read by the target's context when it first polls. */
        lib_dir_ = std::make_unique<ScopedEnv>("UCX_IFUNC_LIB_DIR",
                                               (ifunc_lib_dir() + dir).c_str());
    }
    void TearDown() override
    {
        target_.reset();
        lib_dir_.reset();
    }

    Code        code() const { return std::get<2>(GetParam()); }
    std::string name() const { return "constructs_" + std::get<1>(GetParam()); }

    std::unique_ptr<Target>    target_;
    std::unique_ptr<ScopedEnv> lib_dir_;
};

TEST_P(Constructs, AllWorkInShippedCode)
{
    std::string name          = this->name();
    uint32_t    handle        = target_->register_ifunc(name);
    int32_t     selector      = 3;
    long        global_before = ucx_ifunc_test_target_global;

    if (std::get<1>(GetParam()) == kLongPaper) {
        ASSERT_EQ(size_t(UCP_IFUNC_NAME_MAX), name.size());
    }
    constructs_result first = {}, second = {};
    for (constructs_result *r : {&first, &second}) {
        ASSERT_EQ(UCS_OK,
                  target_->send(handle, 0, &selector, sizeof(selector)).status);
        ASSERT_EQ(UCS_OK, target_->poll_until_result(0, 1ul << 20, r));
        ASSERT_EQ(1u, r->calls);
        expect_constructs_passed(name, *r);
        /* The code that ran is the one the test meant: on an ISA that runs
         * no machine code (ppc64el), a native library's bitcode. */
        EXPECT_EQ((code() == Code::bitcode) || !kRunsMachineCode ? 1 : 0,
                  r->from_bitcode)
                << name;
    }
    /* Statics kept their values from one message to the next. */
    EXPECT_EQ(first.image_calls + 1, second.image_calls);
    EXPECT_EQ(global_before + 2 * selector, ucx_ifunc_test_target_global);
}

std::string param_name(const ::testing::TestParamInfo<Param> &info)
{
    return std::get<0>(info.param) + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Variants, Constructs,
                         ::testing::Combine(::testing::Values("sm", "tcp"),
                                            kVariants,
                                            ::testing::Values(Code::native)),
                         param_name);

INSTANTIATE_TEST_SUITE_P(Bitcode, Constructs,
                         ::testing::Combine(::testing::Values("sm", "tcp"),
                                            kVariants,
                                            ::testing::Values(Code::bitcode)),
                         param_name);

} // namespace
} // namespace test
