/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Channels and delivery by active message, over shared memory and TCP:
 * payloads from 0 B to 4 MiB, a stress run of random payloads checked on
 * the target, flow control with a slow target, wrap-around, several
 * sources, and what a channel refuses.
 */
#include "path.h"

#include "../ifuncs/test_ifunc.h"

#include <cstdio>
#include <random>
#include <thread>

namespace test {
namespace {

std::vector<char> random_payload(size_t size, uint64_t seed)
{
    std::mt19937_64   rng(seed);
    std::vector<char> bytes(size);
    for (char &b : bytes) {
        b = char(rng());
    }
    return bytes;
}

class Paths : public PathTest {};

TEST_P(Paths, PayloadsFromZeroTo4MiB)
{
    /* A channel with slots for the largest message. */
    end_.reset();
    end_ = std::make_unique<PathEnd>(*target_, path(), 2, (4ul << 20) + 4096);
    end_->open();
    uint32_t     handle = target_->register_ifunc("echo");
    echo_result &result = end_->result<echo_result>();
    uint64_t     calls  = 0;
    for (size_t size :
         {size_t(0), size_t(1), size_t(8), size_t(1000), size_t(8192),
          size_t(65536), size_t(1) << 20, size_t(4) << 20}) {
        auto payload = random_payload(size, size + 1);
        ASSERT_EQ(UCS_OK, end_->send(0, handle, 1, payload.data(), size).status)
                << size << " bytes";
        ASSERT_TRUE(end_->poll_until([&] { return result.calls > calls; }))
                << size << " bytes never ran";
        ++calls;
        EXPECT_EQ(calls, result.calls);
        EXPECT_EQ(size, result.payload_size);
        EXPECT_EQ(test_hash64(payload.data(), size), result.payload_hash)
                << size << " bytes";
    }
    EXPECT_TRUE(end_->errors().empty());
}

TEST_P(Paths, ManyLargeMessagesInFlight)
{
    /* Over AM, all posted before any completes: the target receives at
     * most a few by rendezvous at once and lets the others wait. */
    constexpr uint64_t kCount  = 64;
    auto               payload = random_payload(256 * 1024, 5);
    end_.reset();
    end_ = std::make_unique<PathEnd>(*target_, path(), 4, 257 * 1024);
    end_->open();
    uint32_t     handle = target_->register_ifunc("echo");
    echo_result &result = end_->result<echo_result>();
    ASSERT_EQ(UCS_OK, end_->send(0, handle, kCount, payload.data(),
                                 payload.size(), kPathPipeline)
                              .status);
    ASSERT_TRUE(end_->poll_until([&] { return result.calls >= kCount; }));
    EXPECT_EQ(kCount, result.calls);
    EXPECT_EQ(test_hash64(payload.data(), payload.size()), result.payload_hash);
    EXPECT_TRUE(end_->errors().empty());
}

TEST_P(Paths, StressEveryMessageArrivesWholeAndRunsOnce)
{
    uint64_t count  = env_count("IFUNC_TEST_PATH_STRESS_COUNT", 100000);
    uint32_t handle = target_->register_ifunc("stress");
    auto    &result = end_->result<stress_result>();

    Request req{};
    req.op         = Op::path_stress;
    req.handle     = handle;
    req.count      = count;
    req.seed       = 0x5eed + count;
    Reply  reply   = end_->call(0, req);
    bool   all_ran = end_->poll_until([&] { return result.executed >= count; });
    double seconds = reply.elapsed_ns / 1e9;
    auto   sent    = end_->sent();
    std::printf("[ stress   ] %s: sent %llu (%llu with code, %llu by "
                "reference), executed %llu, corrupt %llu, out of order "
                "%llu, lost %llu, rejected %zu, %.2f s (%.0f msg/s)\n",
                path_param_name({GetParam(), 0}).c_str(),
                (unsigned long long)count, (unsigned long long)sent.first,
                (unsigned long long)sent.second,
                (unsigned long long)result.executed,
                (unsigned long long)result.corrupt,
                (unsigned long long)result.out_of_order,
                (unsigned long long)(count - std::min(count, result.executed)),
                end_->errors().size(), seconds,
                seconds > 0 ? count / seconds : 0.0);
    ASSERT_EQ(UCS_OK, reply.status);
    EXPECT_TRUE(all_ran);
    EXPECT_EQ(count, result.executed);
    EXPECT_EQ(0u, result.corrupt);
    EXPECT_EQ(count, sent.first + sent.second);
    EXPECT_GT(sent.second, 0u) << "the code was never sent by reference";
    if (path() == Path::channel) {
        EXPECT_EQ(0u, result.out_of_order); /* a ring keeps the order */
    }
    EXPECT_TRUE(end_->errors().empty());
}

TEST_P(Paths, SeveralSourcesIntoOneTarget)
{
    constexpr uint64_t kEach  = 2000;
    size_t             second = target_->add_peer();
    /* Each source has its own channel; over AM both use the one service. */
    std::unique_ptr<PathEnd> second_channel;
    second_source_end(*target_, *end_, second, &second_channel);
    uint32_t handles[2] = {target_->register_ifunc("counter"),
                           register_on_peer(*target_, second, "counter")};

    Request req{};
    req.op    = Op::path_send;
    req.count = kEach;
    req.flags = (path() == Path::am) ? kPathAm : kPathChannel;
    for (size_t peer : {size_t(0), second}) {
        req.handle = handles[peer == 0 ? 0 : 1];
        target_->send_request(peer, req);
    }
    Reply replies[2];
    bool  got[2]   = {false, false};
    auto  deadline = deadline_in(300);
    while (!(got[0] && got[1]) && (Clock::now() < deadline)) {
        target_->worker().progress();
        end_->poll();
        if (second_channel) {
            second_channel->poll();
        }
        for (size_t i = 0; i < 2; ++i) {
            size_t peer = (i == 0) ? 0 : second;
            if (!got[i] && target_->reply_ready(peer)) {
                replies[i] = target_->take_reply(peer);
                got[i]     = true;
            }
        }
    }
    ASSERT_TRUE(got[0] && got[1]);
    EXPECT_EQ(UCS_OK, replies[0].status);
    EXPECT_EQ(UCS_OK, replies[1].status);

    auto total = [&] {
        int64_t sum = end_->result<int64_t>();
        if (second_channel) {
            sum += second_channel->result<int64_t>();
        }
        return sum;
    };
    EXPECT_TRUE(end_->poll_until([&] {
        if (second_channel) {
            second_channel->poll();
        }
        return total() >= int64_t(2 * kEach);
    }));
    EXPECT_EQ(int64_t(2 * kEach), total());
    EXPECT_TRUE(end_->errors().empty());
    if (second_channel) {
        EXPECT_TRUE(second_channel->errors().empty());
    }
    second_channel.reset(); /* closes the second source's end first */
}

INSTANTIATE_PATH_TESTS(Paths);

/* Channels over the put path under UCX's newer protocol engine, where a
 * fence does not order puts and the seal waits for an endpoint flush. */
class ChannelPutPath : public ::testing::TestWithParam<std::string> {};

TEST_P(ChannelPutPath, StressWithProtocolEngineV2)
{
    ScopedEnv proto("UCX_PROTO_ENABLE", "y");
    ScopedEnv direct("UCX_IFUNC_SHM_DIRECT", "n");
    ScopedEnv tcp_put("UCX_TCP_PUT_ENABLE", GetParam() == "tcp" ? "n" : "");
    Target    target(GetParam(), peer_ifunc_lib_dir(),
                     UCP_FEATURE_RMA | UCP_FEATURE_AM);
    PathEnd   end(target, Path::channel);
    end.open();
    uint64_t count  = env_count("IFUNC_TEST_STRESS_MATRIX_COUNT", 10000);
    uint32_t handle = target.register_ifunc("stress");
    auto    &result = end.result<stress_result>();
    Request  req{};
    req.op      = Op::path_stress;
    req.handle  = handle;
    req.count   = count;
    req.seed    = 99;
    Reply reply = end.call(0, req);
    ASSERT_EQ(UCS_OK, reply.status);
    EXPECT_TRUE(end.poll_until([&] { return result.executed >= count; }));
    std::printf("[ stress   ] %s_channel_proto_y_direct_n: executed %llu of "
                "%llu, corrupt %llu, out of order %llu\n",
                GetParam().c_str(), (unsigned long long)result.executed,
                (unsigned long long)count, (unsigned long long)result.corrupt,
                (unsigned long long)result.out_of_order);
    EXPECT_EQ(count, result.executed);
    EXPECT_EQ(0u, result.corrupt);
    EXPECT_EQ(0u, result.out_of_order);
    EXPECT_TRUE(end.errors().empty());
}

INSTANTIATE_TEST_SUITE_P(Transports, ChannelPutPath,
                         ::testing::Values("sm", "tcp"), transport_name);

/* Channel-only behaviour. */
class Channels : public TransportTest {};

TEST_P(Channels, FlowControlWithASlowTarget)
{
    PathEnd end(*target_, Path::channel, 4, 4096);
    end.open();
    uint32_t handle = target_->register_ifunc("counter");
    Request  req{};
    req.op     = Op::path_send;
    req.handle = handle;
    req.count  = 200;
    /* The target takes one message now and then: the source must wait for
     * slots, never overwrite one. */
    auto  last  = Clock::now();
    Reply reply = target_->call_polling(0, req, nullptr, 0, [&] {
        if (Clock::now() - last > std::chrono::milliseconds(2)) {
            end.poll(1);
            last = Clock::now();
        }
    });
    ASSERT_EQ(UCS_OK, reply.status);
    EXPECT_TRUE(end.poll_until([&] { return end.result<int64_t>() >= 200; }));
    EXPECT_EQ(200, end.result<int64_t>());
    EXPECT_GT(reply.value, 0u) << "the source never had to wait for a slot";
    EXPECT_TRUE(end.errors().empty());
}

TEST_P(Channels, WrapsAroundASmallRing)
{
    PathEnd end(*target_, Path::channel, 2, 96 * 1024);
    end.open();
    uint32_t handle = target_->register_ifunc("stress");
    auto    &result = end.result<stress_result>();
    Request  req{};
    req.op      = Op::path_stress;
    req.handle  = handle;
    req.count   = 5000; /* the ring of 2 wraps 2500 times */
    req.seed    = 77;
    Reply reply = end.call(0, req);
    ASSERT_EQ(UCS_OK, reply.status);
    EXPECT_TRUE(end.poll_until([&] { return result.executed >= 5000; }));
    EXPECT_EQ(5000u, result.executed);
    EXPECT_EQ(0u, result.corrupt);
    EXPECT_EQ(0u, result.out_of_order);
    EXPECT_TRUE(end.errors().empty());
}

TEST_P(Channels, RefusesAFrameLargerThanASlot)
{
    PathEnd end(*target_, Path::channel, 4, 1024);
    end.open();
    uint32_t handle  = target_->register_ifunc("echo");
    auto     payload = random_payload(4096, 3);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              end.send(0, handle, 1, payload.data(), payload.size()).status);
    target_->poll_for(0.1, 0, 64, nullptr);
    end.poll();
    EXPECT_EQ(0u, end.result<echo_result>().calls);
}

TEST_P(Channels, BadParametersAreRefused)
{
    ucp_ifunc_channel_params_t params = {};
    ucp_ifunc_channel_h        channel;
    params.field_mask = UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE;
    params.slot_size  = 100; /* not a multiple of 64 */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_channel_create(target_->context(), &params, &channel));
    params.field_mask = UCS_BIT(40);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_channel_create(target_->context(), &params, &channel));

    Request req{};
    req.op               = Op::path_open;
    const char garbage[] = "not a channel blob at all, no, not at all.";
    EXPECT_EQ(
            UCS_ERR_INVALID_PARAM,
            ucs_status_t(target_->call(req, garbage, sizeof(garbage)).status));
}

INSTANTIATE_TEST_SUITE_P(Transports, Channels, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
