/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Our UCX_IFUNC_* variables are registered with UCX's configuration parser:
 * setting them draws no "unused env variable" warning, while a misspelt one
 * still does. UCX prints the warning once per process, when the first worker
 * is created, so each case runs in a child process.
 */
#include "fixture.h"

#include "../../src/ucp/ifunc/base/config.h"
#include "../../src/ucp/ifunc/peer/peer_net.h"

#include <cstdio>
#include <string>

namespace test {
namespace {

constexpr char kChildMarker[] = "IFUNC_TEST_CONFIG_CHILD";

/* In the child: create a worker, which makes UCX check the environment. */
TEST(Config, CreateWorker)
{
    if (getenv(kChildMarker) == nullptr) {
        GTEST_SKIP() << "runs as a child of the tests below";
    }
    Context context;
    Worker  worker(context.get());
}

/* Runs this test binary's Config.CreateWorker with @a env; returns its output. */
std::string child_output(const std::string &env)
{
    std::string command = std::string(kChildMarker) + "=1 " + env +
                          " UCX_WARN_UNUSED_ENV_VARS=y /proc/" +
                          std::to_string(getpid()) +
                          "/exe --gtest_filter=Config.CreateWorker 2>&1";
    std::string output;
    FILE       *pipe = popen(command.c_str(), "r");
    char        line[512];
    while (pipe && fgets(line, sizeof(line), pipe)) {
        output += line;
    }
    EXPECT_EQ(0, pipe ? pclose(pipe) : -1) << output;
    return output;
}

TEST(Config, OurVariablesAreKnownToUcx)
{
    std::string output = child_output("UCX_IFUNC_LIB_DIR=/tmp "
                                      "UCX_IFUNC_SHM_DIRECT=n "
                                      "UCX_IFUNC_MAX_IMAGE_SIZE=16MB");
    /* "unused env variable" (UCX 1.13) or "unused environment variable"
     * (UCX 1.18): neither may appear. */
    EXPECT_EQ(std::string::npos, output.find("unused env")) << output;
}

TEST(Config, MisspeltVariableIsReported)
{
    std::string output = child_output("UCX_IFUNC_LIBDIR=/tmp");
    size_t      report = output.find("unused env");
    ASSERT_NE(std::string::npos, report) << output;
    EXPECT_NE(std::string::npos, output.find("UCX_IFUNC_LIBDIR", report))
            << output;
}

/* A bad value is that variable's problem only: the others keep theirs. */
TEST(Config, BadValueLeavesTheOthersAlone)
{
    setenv("UCX_IFUNC_LIB_DIR", "/some/where", 1);
    setenv("UCX_IFUNC_SHM_DIRECT", "n", 1);
    setenv("UCX_IFUNC_MAX_IMAGE_SIZE", "bogus", 1);
    ucx_ifunc::Config config = ucx_ifunc::config_read();
    unsetenv("UCX_IFUNC_MAX_IMAGE_SIZE");
    unsetenv("UCX_IFUNC_SHM_DIRECT");
    unsetenv("UCX_IFUNC_LIB_DIR");
    ucx_ifunc::Config defaults = ucx_ifunc::config_read();
    EXPECT_EQ("/some/where", config.lib_dir);
    EXPECT_FALSE(config.shm_direct);
    EXPECT_EQ(defaults.max_image_size, config.max_image_size);
    EXPECT_GT(defaults.max_image_size, 0u);
}

/* The sandbox's policy and budget, and their defaults. */
TEST(Config, SandboxPolicyAndBudget)
{
    ucx_ifunc::Config defaults = ucx_ifunc::config_read();
    setenv("UCX_IFUNC_TRUST", "signed,sandboxed", 1);
    setenv("UCX_IFUNC_SANDBOX_BUDGET", "250ms", 1);
    ucx_ifunc::Config config = ucx_ifunc::config_read();
    unsetenv("UCX_IFUNC_SANDBOX_BUDGET");
    unsetenv("UCX_IFUNC_TRUST");
    EXPECT_EQ(unsigned(ucx_ifunc::kTrustSigned | ucx_ifunc::kTrustSandboxed),
              config.trust);
    EXPECT_DOUBLE_EQ(0.25, config.sandbox_budget);
    EXPECT_EQ("signed,sandboxed", ucx_ifunc::trust_kinds_text(config.trust));
    EXPECT_DOUBLE_EQ(0.1, defaults.sandbox_budget);
    EXPECT_EQ(0u, defaults.trust & ucx_ifunc::kTrustSandboxed);
}

/* The transports the owned shared-memory context keeps of UCX_TLS: its
 * shared-memory ones and self, never a network one. */
TEST(PeerNet, SharedMemoryTransportsOfUcxTls)
{
    using ucx_ifunc::shm_transports;
    EXPECT_EQ("sm,self", shm_transports(""));
    EXPECT_EQ("sm,self", shm_transports("all"));
    EXPECT_EQ("sm,self", shm_transports("sm,tcp"));
    EXPECT_EQ("sm,self", shm_transports("shm,self,tcp"));
    EXPECT_EQ("", shm_transports("tcp"));
    EXPECT_EQ("", shm_transports("tcp,rc,ud"));
    EXPECT_EQ("posix,self", shm_transports("posix,tcp"));
    EXPECT_EQ("posix,sysv,xpmem,self", shm_transports("mm"));
    EXPECT_EQ("sm,self", shm_transports("^tcp"));
    EXPECT_EQ("cma,knem,sysv,xpmem,self", shm_transports("^posix,tcp"));
    EXPECT_EQ("", shm_transports("^sm"));
}

/* The transports of the owned network-facing context: UCX_TLS with tcp let
 * in, which UCX's connection by address needs, and nothing else changed. */
TEST(PeerNet, NetworkTransportsOfUcxTls)
{
    using ucx_ifunc::net_transports;
    EXPECT_EQ("", net_transports(""));
    EXPECT_EQ("", net_transports("all"));
    EXPECT_EQ("sm,tcp", net_transports("sm,tcp"));
    EXPECT_EQ("tcp", net_transports("tcp"));
    EXPECT_EQ("sm,tcp", net_transports("sm"));
    EXPECT_EQ("posix,self,tcp", net_transports("posix,self"));
    EXPECT_EQ("^ib", net_transports("^ib"));
    EXPECT_EQ("^ib", net_transports("^ib,tcp"));
    EXPECT_EQ("", net_transports("^tcp"));
}

} // namespace
} // namespace test
