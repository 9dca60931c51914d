/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Every construct of shipped code, at -O0/-O2/-O3 with and without the
 * stack protector, run in another process over each transport: see
 * test/ifuncs/constructs.c for the checks.
 */
#include "constructs.h"
#include "target.h"

#include <tuple>

namespace test {

namespace {

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

using Param = std::tuple<std::string, std::string>; /* transport, variant */

class Constructs : public ::testing::TestWithParam<Param> {
protected:
    void SetUp() override
    {
        target_ = std::make_unique<Target>(std::get<0>(GetParam()));
    }
    void TearDown() override { target_.reset(); }

    std::unique_ptr<Target> target_;
};

TEST_P(Constructs, AllWorkInShippedCode)
{
    std::string name          = "constructs_" + std::get<1>(GetParam());
    uint32_t    handle        = target_->register_ifunc(name);
    int32_t     selector      = 3;
    long        global_before = ucx_ifunc_test_target_global;

    constructs_result first = {}, second = {};
    for (constructs_result *r : {&first, &second}) {
        ASSERT_EQ(UCS_OK,
                  target_->send(handle, 0, &selector, sizeof(selector)).status);
        ASSERT_EQ(UCS_OK, target_->poll_until_result(0, 1ul << 20, r));
        ASSERT_EQ(1u, r->calls);
        expect_constructs_passed(name, *r);
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
                                            ::testing::Values("O0", "O0_sp",
                                                              "O2", "O2_sp",
                                                              "O3", "O3_sp")),
                         param_name);

} // namespace
} // namespace test
