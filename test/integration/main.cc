/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include <gtest/gtest.h>

#include <csignal>

/* The global of the target program that shipped code updates (see
 * test/ifuncs/constructs.c); exported because the test links -rdynamic. */
extern "C" {
__attribute__((visibility("default"))) long ucx_ifunc_test_target_global = 0;
}

int main(int argc, char **argv)
{
    /* A peer that dies must fail its test, not kill the suite via SIGPIPE. */
    std::signal(SIGPIPE, SIG_IGN);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
