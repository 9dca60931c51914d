/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The completion protocol under load: the peer streams messages with random
 * payloads of 0-64 KiB into a ring of slots as fast as credits allow, while
 * the target polls the slot being written. The ifunc checks each payload's
 * checksum and sequence number on the target: a frame that ran before all
 * of it arrived shows up as corrupt, a lost one as a gap.
 *
 * Every transport runs under each of UCX's protocol engines
 * (UCX_PROTO_ENABLE=y/n; n up to UCX 1.21), with direct stores over shared memory on and off
 * (UCX_IFUNC_SHM_DIRECT), with UCX_MAX_RMA_LANES=4, and with both send
 * calls (ucp_ifunc_send_nbix: seal after a flush; ucp_ifunc_send_nbx with
 * the worker: seal after a fence where UCX's configuration makes it cheap
 * and sound, after a flush elsewhere).
 *
 * IFUNC_TEST_STRESS_COUNT sets the number of messages of the default
 * configuration of each transport (default 100000);
 * IFUNC_TEST_STRESS_MATRIX_COUNT that of every other one (default 10000).
 */
#include "target.h"

#include "../ifuncs/test_ifunc.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace test {
namespace {

constexpr size_t kSlots    = 4;
constexpr size_t kSlotSize = 96 * 1024; /* 64 KiB payload + header + image */

struct StressConfig {
    const char *tls;
    const char *proto_enable; /* UCX_PROTO_ENABLE, or "" for UCX's default */
    const char *shm_direct;   /* UCX_IFUNC_SHM_DIRECT */
    const char *rma_lanes;    /* UCX_MAX_RMA_LANES, or "" */
    bool        send_nbx;     /* ucp_ifunc_send_nbx with the worker */
    bool        full_count;   /* IFUNC_TEST_STRESS_COUNT messages */

    std::string name() const
    {
        std::string n = tls;
        if (*proto_enable) {
            n += std::string("_proto_") + proto_enable;
        }
        n += std::string("_direct_") + shm_direct;
        if (*rma_lanes) {
            n += std::string("_lanes_") + rma_lanes;
        }
        return n + (send_nbx ? "_nbx_worker" : "_nbix");
    }
};

class Stress : public ::testing::TestWithParam<StressConfig> {};

TEST_P(Stress, EveryMessageArrivesWholeAndRunsOnce)
{
    const StressConfig &config = GetParam();
    unsigned            major, minor, release;
    ucp_get_version(&major, &minor, &release);
    if (*config.rma_lanes && (major == 1) && (minor < 14)) {
        GTEST_SKIP() << "UCX " << major << "." << minor
                     << " has no UCX_MAX_RMA_LANES (from UCX 1.14 on)";
    }
    /* UCX 1.22 removed the classic engine's puts and gets: under it they
     * return UCS_ERR_UNSUPPORTED. Direct stores over shared memory need
     * neither. */
    bool puts = (std::string(config.tls) != "sm") ||
                (std::string(config.shm_direct) == "n");
    if (puts && (std::string(config.proto_enable) == "n") &&
        ((major > 1) || (minor >= 22))) {
        GTEST_SKIP() << "UCX " << major << "." << minor
                     << " has no puts with UCX_PROTO_ENABLE=n (up to UCX 1.21)";
    }
    /* Both processes read these: the target when it creates its context,
     * the peer it starts inherits them. */
    ScopedEnv proto("UCX_PROTO_ENABLE", config.proto_enable);
    ScopedEnv direct("UCX_IFUNC_SHM_DIRECT", config.shm_direct);
    ScopedEnv lanes("UCX_MAX_RMA_LANES", config.rma_lanes);
    Target    target(config.tls);

    uint32_t handle = target.register_ifunc("stress");
    uint64_t count =
            config.full_count
                    ? env_count("IFUNC_TEST_STRESS_COUNT", 100000)
                    : env_count("IFUNC_TEST_STRESS_MATRIX_COUNT", 10000);
    stress_result             result = {};
    std::vector<ucs_status_t> errors;

    Reply reply = target.stress(
            handle, count, 0x5eed + count, kSlots, kSlotSize, &result, &errors,
            config.send_nbx ? uint32_t(kStressSendNbx) : 0u);
    double   seconds = reply.elapsed_ns / 1e9;
    uint64_t lost    = count - std::min(count, result.executed);

    std::printf("[ stress   ] %s: sent %llu, executed %llu, corrupt %llu, "
                "out of order %llu, lost %llu, rejected %zu, %.2f s "
                "(%.0f msg/s)\n",
                config.name().c_str(), (unsigned long long)reply.value,
                (unsigned long long)result.executed,
                (unsigned long long)result.corrupt,
                (unsigned long long)result.out_of_order,
                (unsigned long long)lost, errors.size(), seconds,
                seconds > 0 ? count / seconds : 0.0);
    RecordProperty("sent", std::to_string(reply.value));
    RecordProperty("executed", std::to_string(result.executed));
    RecordProperty("corrupt", std::to_string(result.corrupt));
    RecordProperty("seconds", std::to_string(seconds));

    ASSERT_EQ(UCS_OK, reply.status);
    EXPECT_EQ(count, reply.value);
    EXPECT_EQ(count, result.executed);
    EXPECT_EQ(0u, result.corrupt);
    EXPECT_EQ(0u, result.out_of_order);
    EXPECT_EQ(0u, lost);
    EXPECT_TRUE(errors.empty());
}

/* Over TCP the source never maps the target's memory: direct stores do not
 * apply, so UCX_IFUNC_SHM_DIRECT is left at its default there. */
const StressConfig kConfigs[] = {
        /* tls, proto, direct, lanes, send_nbx, full_count */
        {"sm", "", "y", "", false, true},
        {"tcp", "", "y", "", false, true},
        {"sm", "y", "y", "", true, false},
        {"sm", "y", "n", "", false, false},
        {"sm", "y", "n", "", true, false},
        {"sm", "n", "y", "", false, false},
        {"sm", "n", "n", "", false, false},
        {"sm", "n", "n", "", true, false},
        {"sm", "y", "n", "4", false, false},
        {"sm", "y", "n", "4", true, false},
        {"tcp", "y", "y", "", false, false},
        {"tcp", "y", "y", "", true, false},
        {"tcp", "n", "y", "", false, false},
        {"tcp", "n", "y", "", true, false},
        {"tcp", "y", "y", "4", false, false},
        {"tcp", "y", "y", "4", true, false},
};

INSTANTIATE_TEST_SUITE_P(
        Matrix, Stress, ::testing::ValuesIn(kConfigs),
        [](const ::testing::TestParamInfo<StressConfig> &info) {
            return info.param.name();
        });

} // namespace
} // namespace test
