/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The constructs ifunc (test/ifuncs/constructs.c) checks every construct of
 * shipped code on the target; this reports its checks.
 */
#ifndef UCX_IFUNC_TEST_CONSTRUCTS_H_
#define UCX_IFUNC_TEST_CONSTRUCTS_H_

#include "../ifuncs/test_ifunc.h"

#include <string>

extern "C" long ucx_ifunc_test_target_global;

namespace test {

/* Expects one run of ifunc @a name in which every check passed. */
void expect_constructs_passed(const std::string       &name,
                              const constructs_result &result);

} // namespace test

#endif
