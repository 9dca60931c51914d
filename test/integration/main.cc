/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "../ifuncs/test_ifunc.h"

#include <gtest/gtest.h>

#include <csignal>

/* The global of the target program that shipped code updates (see
 * test/ifuncs/constructs.c), and what reply.so's code did here
 * (test_peer.cc); exported because the test links -rdynamic. */
extern "C" {
__attribute__((visibility("default"))) long ucx_ifunc_test_target_global = 0;
__attribute__((
        visibility("default"))) struct reply_record ifunc_test_reply     = {};
}

int main(int argc, char **argv)
{
    /* A peer that dies must fail its test, not kill the suite via SIGPIPE. */
    std::signal(SIGPIPE, SIG_IGN);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
