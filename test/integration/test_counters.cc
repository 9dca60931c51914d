/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The counters of the target's context (ucp_ifunc_context_query) with
 * messages from a real source over shared memory and TCP: N messages on
 * the raw path, a channel or active messages count N runs of that path and
 * their bytes; code signed by a key the target does not list and a frame
 * of an unknown format count as drops by their reason. The default path's
 * counters: test_peer.cc.
 */
#include "../common/counters.h"
#include "../common/frames.h"
#include "path.h"
#include "target.h"

#include "../ifuncs/test_ifunc.h"

#include <cstring>

namespace test {
namespace {

constexpr size_t kSlot = 1ul << 20;

class RawCounters : public TransportTest {};

TEST_P(RawCounters, EachMessageRunCountsWithItsBytes)
{
    constexpr uint64_t kCount = 10;
    uint32_t           handle = target_->register_ifunc("counter");
    size_t  frame_size        = target_->get_frame(handle, nullptr, 0).size();
    int64_t counter           = 0;
    for (uint64_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(UCS_OK, target_->send(handle, 0).status);
        ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &counter));
    }
    EXPECT_EQ(int64_t(kCount), counter);
    ucp_ifunc_context_attr_t attr = query_counters(target_->context());
    EXPECT_EQ(kCount, attr.run_raw);
    EXPECT_EQ(0u, attr.run_channel + attr.run_am + attr.run_peer);
    EXPECT_EQ(kCount * frame_size, attr.bytes_received);
    EXPECT_EQ(0u, rejected_total(attr));
    EXPECT_EQ(1u, attr.codes_linked);
    EXPECT_EQ(1u, attr.codes_held);
}

TEST_P(RawCounters, RefusedMessagesCountByReason)
{
    /* A target that trusts the site key only, and a source whose library
     * the other key signed. */
    target_.reset();
    EmptyDir empty;
    target_ = std::make_unique<Target>(GetParam(),
                                       peer_ifunc_lib_dir() + "/signed_other");
    ScopedEnv   lib_dir("UCX_IFUNC_LIB_DIR", empty.path().c_str());
    std::string site = std::string(UCX_IFUNC_TEST_KEY_DIR) + "/site.pub";
    ScopedEnv   keys("UCX_IFUNC_TRUSTED_KEYS", site.c_str());

    uint32_t handle    = target_->register_ifunc("constructs_signed");
    int32_t  selector  = 3;
    uint64_t result[8] = {};
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(UCS_OK,
                  target_->send(handle, 0, &selector, sizeof(selector)).status);
        EXPECT_EQ(UCS_ERR_REJECTED,
                  target_->poll_until_result(0, kSlot, result));
    }
    ucp_ifunc_context_attr_t attr = query_counters(target_->context());
    EXPECT_EQ(2u, attr.rejected_untrusted) << "the second from the verdict "
                                              "kept";

    /* A frame of a format this target does not read. */
    std::vector<uint64_t> future = future_frame(0x5eed, 64);
    ASSERT_EQ(UCS_OK,
              target_->put_raw(0, future.data(), future.size() * 8).status);
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              target_->poll_until_result(0, kSlot, result));

    attr = query_counters(target_->context());
    EXPECT_EQ(2u, attr.rejected_untrusted);
    EXPECT_EQ(1u, attr.rejected_bad_version);
    EXPECT_EQ(3u, rejected_total(attr));
    EXPECT_EQ(0u, attr.run_raw);
    EXPECT_EQ(0u, attr.codes_linked);
    EXPECT_GT(attr.bytes_received, future.size() * 8);
}

INSTANTIATE_TEST_SUITE_P(Transports, RawCounters,
                         ::testing::Values("sm", "tcp"), transport_name);

class PathCounters : public PathTest {};

TEST_P(PathCounters, EachMessageRunCountsOnItsPath)
{
    constexpr uint64_t kCount     = 50;
    uint32_t           handle     = target_->register_ifunc("echo");
    echo_result       &result     = end_->result<echo_result>();
    uint64_t           payload[4] = {1, 2, 3, 4};
    ASSERT_EQ(UCS_OK,
              end_->send(0, handle, kCount, payload, sizeof(payload)).status);
    ASSERT_TRUE(end_->poll_until([&] { return result.calls >= kCount; }));
    EXPECT_TRUE(end_->errors().empty());

    ucp_ifunc_context_attr_t attr = query_counters(target_->context());
    uint64_t                 on_path =
            (path() == Path::channel) ? attr.run_channel : attr.run_am;
    EXPECT_EQ(kCount, on_path);
    EXPECT_EQ(kCount,
              attr.run_raw + attr.run_channel + attr.run_am + attr.run_peer);
    EXPECT_EQ(0u, rejected_total(attr));
    EXPECT_EQ(1u, attr.codes_linked);
    /* The code once, then references: at least the payloads. */
    EXPECT_GE(attr.bytes_received, kCount * sizeof(payload));
}

INSTANTIATE_PATH_TESTS(PathCounters);

} // namespace
} // namespace test
