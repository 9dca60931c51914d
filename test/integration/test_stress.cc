/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The completion protocol under load: the peer streams messages with random
 * payloads of 0-64 KiB into a ring of slots as fast as credits allow, while
 * the target polls the slot being written. The ifunc checks each payload's
 * checksum and sequence number on the target: a frame that ran before all
 * of it arrived shows up as corrupt, a lost one as a gap.
 *
 * IFUNC_TEST_STRESS_COUNT sets the number of messages (default 100000).
 */
#include "target.h"

#include "../ifuncs/test_ifunc.h"

#include <cstdio>
#include <cstdlib>

namespace test {
namespace {

constexpr size_t kSlots    = 4;
constexpr size_t kSlotSize = 96 * 1024; /* 64 KiB payload + header + image */

uint64_t stress_count()
{
    const char *value = getenv("IFUNC_TEST_STRESS_COUNT");
    return (value && *value) ? strtoull(value, nullptr, 10) : 100000;
}

class Stress : public TransportTest {};

TEST_P(Stress, EveryMessageArrivesWholeAndRunsOnce)
{
    uint32_t                  handle = target_->register_ifunc("stress");
    uint64_t                  count  = stress_count();
    stress_result             result = {};
    std::vector<ucs_status_t> errors;

    Reply    reply   = target_->stress(handle, count, 0x5eed + count, kSlots,
                                       kSlotSize, &result, &errors);
    double   seconds = reply.elapsed_ns / 1e9;
    uint64_t lost    = count - std::min(count, result.executed);

    std::printf("[ stress   ] UCX_TLS=%s: sent %llu, executed %llu, corrupt "
                "%llu, out of order %llu, lost %llu, rejected %zu, %.2f s "
                "(%.0f msg/s)\n",
                GetParam().c_str(), (unsigned long long)reply.value,
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

INSTANTIATE_TEST_SUITE_P(Transports, Stress, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
