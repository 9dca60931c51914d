/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Sources that die. Of the AM path: a source killed with large messages
 * (rendezvous) in flight, some being received and some waiting for a
 * receive, must not make the target abort, hang or starve another source,
 * whether the source's endpoint came from the target's worker address
 * (no error handling, as examples/hello makes it) or from the target's
 * UCP listener (UCP_ERR_HANDLING_MODE_PEER, as a server accepts it).
 */
#include "../common/frames.h"
#include "../ifuncs/test_ifunc.h"
#include "path.h"
#include "ucp_listener.h"

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace test {
namespace {

enum class EpKind { address, listener };

using DeathParam = std::tuple<std::string, EpKind>;

std::string death_name(const ::testing::TestParamInfo<DeathParam> &info)
{
    return std::get<0>(info.param) +
           ((std::get<1>(info.param) == EpKind::address) ? "_address"
                                                         : "_listener");
}

using Seconds = std::chrono::duration<double>;

class AmPeerDeath : public ::testing::TestWithParam<DeathParam> {
protected:
    /* By rendezvous through a listener; eagerly over an endpoint made
     * from the worker address (am.cc, eager_only_endpoint). */
    static constexpr size_t   kMessageSize = 800 * 1024;
    static constexpr uint64_t kBatch       = 24;

    void SetUp() override
    {
        if (tls() == "tcp") {
            env_.push_back(
                    std::make_unique<ScopedEnv>("UCX_TCP_PUT_ENABLE", "n"));
        }
        env_.push_back(std::make_unique<ScopedEnv>(
                "UCX_IFUNC_AM_RECEIVE_TIMEOUT", "1s"));
        /* A listener needs UCX's TCP connection manager; the data still
         * goes over the transport under test, the fastest one. */
        std::string tls_list =
                ((kind() == EpKind::listener) && (tls() != "tcp"))
                        ? tls() + ",tcp"
                        : tls();
        target_ = std::make_unique<Target>(tls_list, peer_ifunc_lib_dir(),
                                           UCP_FEATURE_RMA | UCP_FEATURE_AM);
        if (kind() == EpKind::listener) {
            listener_ = std::make_unique<UcpListener>(target_->worker().get());
        }
        end_ = std::make_unique<PathEnd>(*target_, Path::am);
        args_.assign(kMessageSize, 0x3c);
    }

    void TearDown() override
    {
        end_.reset();
        listener_.reset();
        target_.reset();
        env_.clear();
    }

    const std::string &tls() const { return std::get<0>(GetParam()); }
    EpKind             kind() const { return std::get<1>(GetParam()); }

    /* Has peer @a peer open its AM end over the endpoint kind under test;
     * returns its handle of echo. */
    uint32_t open(size_t peer)
    {
        if (kind() == EpKind::listener) {
            end_->open(peer, kPathListener, listener_->port());
        } else {
            end_->open(peer);
        }
        return register_on_peer(*target_, peer, "echo");
    }

    /* Asks peer @a peer to send @a count large messages all at once,
     * without waiting for its reply. */
    void send_batch(size_t peer, uint32_t handle, uint64_t count,
                    uint32_t flags = 0)
    {
        Request req{};
        req.op     = Op::path_send;
        req.handle = handle;
        req.count  = count;
        req.flags  = flags | kPathAm | kPathPipeline;
        target_->send_request(peer, req, args_.data(), args_.size());
    }

    uint64_t calls() { return end_->result<echo_result>().calls; }

    /* Peer 0 sends one message, then kBatch at once; it is stopped once
     * they are posted, before the target asks for their data, so that the
     * target starts receives whose data never comes; then it is killed,
     * and the target goes on long enough to see it. */
    void kill_mid_batch()
    {
        uint32_t victim = open(0);
        ASSERT_EQ(UCS_OK,
                  end_->send(0, victim, 1, args_.data(), args_.size()).status);
        uint64_t before = calls();
        send_batch(0, victim, kBatch, kPathReportPosted);
        ASSERT_EQ(UCS_INPROGRESS, target_->take_reply(0).status);
        target_->signal_peer(0, SIGSTOP);
        end_->poll_until([] { return false; }, 0.3);
        target_->kill_peer(0);
        end_->forget(0);
        end_->poll_until([] { return false; }, 0.3);
        std::printf("    killed with %llu of %llu messages run\n",
                    static_cast<unsigned long long>(calls() - before),
                    static_cast<unsigned long long>(kBatch));
    }

    std::vector<std::unique_ptr<ScopedEnv>> env_;
    std::unique_ptr<Target>                 target_;
    std::unique_ptr<UcpListener>            listener_;
    std::unique_ptr<PathEnd>                end_;
    std::vector<char>                       args_;
};

TEST_P(AmPeerDeath, DisableReturnsAfterASourceDiedMidMessage)
{
    /* Before 0.4, ucp_ifunc_am_disable released the dead source's waiting
     * messages (UCX 1.13 asserted on the endpoint it had destroyed) or
     * waited for ever for its receives under way. */
    ASSERT_NO_FATAL_FAILURE(kill_mid_batch());
    auto start = Clock::now();
    end_.reset();
    double disable = Seconds(Clock::now() - start).count();
    std::printf("    disabled in %.2f s\n", disable);
    EXPECT_LT(disable, 10);
}

TEST_P(AmPeerDeath, OtherSourcesRunAfterOneDiedMidMessage)
{
    /* Before 0.4, the dead source held every receive for ever. */
    size_t   other  = target_->add_peer();
    uint32_t handle = open(other);
    ASSERT_NO_FATAL_FAILURE(kill_mid_batch());
    uint64_t ran   = calls();
    auto     start = Clock::now();
    send_batch(other, handle, 4);
    ASSERT_TRUE(
            end_->poll_until([&] { return target_->reply_ready(other); }, 10));
    EXPECT_EQ(UCS_OK, target_->take_reply(other).status);
    EXPECT_TRUE(end_->poll_until([&] { return calls() >= ran + 4; }, 5));
    std::printf("    the other source's 4 messages ran in %.2f s\n",
                Seconds(Clock::now() - start).count());
}

/* Sources of channels over shared memory that die: a source killed while
 * it stores large frames into its ring (direct stores) leaves a slot that
 * never completes. The target must not block on it: polling that channel
 * keeps returning, another source's channel runs all its messages, and
 * the dead source's channel is destroyed at once. (Over TCP the channel's
 * puts keep UCX 1.13's known abort when a put source dies.) */
class ChannelPeerDeath : public ::testing::Test {
protected:
    static constexpr size_t   kMessageSize = 800 * 1024;
    static constexpr uint64_t kBatch       = 1024;
    static constexpr unsigned kKills       = 5;

    void SetUp() override
    {
        target_ = std::make_unique<Target>("sm", peer_ifunc_lib_dir(),
                                           UCP_FEATURE_RMA | UCP_FEATURE_AM);
        args_.assign(kMessageSize, 0x5c);
    }

    /* A channel of 4 slots that take a message of kMessageSize. */
    std::unique_ptr<PathEnd> channel_end()
    {
        return std::make_unique<PathEnd>(*target_, Path::channel, 4,
                                         kMessageSize + 64 * 1024);
    }

    std::vector<char>       args_;
    std::unique_ptr<Target> target_;
};

TEST_F(ChannelPeerDeath, OthersRunAndTheDeadSourcesChannelGoesAtOnce)
{
    size_t other = target_->add_peer();
    auto   alive = channel_end();
    alive->open(other);
    uint32_t alive_handle = register_on_peer(*target_, other, "echo");
    uint64_t alive_calls  = 0;
    for (unsigned kill = 0; kill < kKills; ++kill) {
        size_t victim = target_->add_peer();
        auto   dying  = channel_end();
        dying->open(victim);
        uint32_t handle = register_on_peer(*target_, victim, "echo");
        Request  req{};
        req.op     = Op::path_send;
        req.handle = handle;
        req.count  = kBatch;
        req.flags  = kPathChannel;
        target_->send_request(victim, req, args_.data(), args_.size());
        /* Let some frames through, then stop and kill it at whatever point
         * of its stores it is. */
        dying->poll_until([] { return false; }, 0.01 * (kill + 1));
        target_->signal_peer(victim, SIGSTOP);
        dying->poll_until([] { return false; }, 0.05);
        target_->kill_peer(victim);
        dying->forget(victim);
        uint64_t ran = dying->result<echo_result>().calls;
        /* Polling the dead source's channel returns, again and again. */
        auto start = Clock::now();
        for (int i = 0; i < 1000; ++i) {
            dying->poll();
        }
        double polled = Seconds(Clock::now() - start).count();
        EXPECT_LT(polled, 5.0);
        EXPECT_LE(dying->result<echo_result>().calls, kBatch);
        /* The other source's messages all run, once each. */
        ASSERT_EQ(UCS_OK, alive->send(other, alive_handle, 4, args_.data(),
                                      args_.size())
                                  .status);
        alive_calls += 4;
        EXPECT_TRUE(alive->poll_until(
                [&] {
                    return alive->result<echo_result>().calls >= alive_calls;
                },
                10));
        EXPECT_EQ(alive_calls, alive->result<echo_result>().calls);
        /* The dead source's channel goes at once. */
        start = Clock::now();
        dying.reset();
        double destroyed = Seconds(Clock::now() - start).count();
        EXPECT_LT(destroyed, 1.0);
        std::printf("    kill %u: %llu of %llu ran before it; 1000 polls of "
                    "its channel %.3f s, destroyed in %.3f s\n",
                    kill + 1, static_cast<unsigned long long>(ran),
                    static_cast<unsigned long long>(kBatch), polled, destroyed);
    }
}

INSTANTIATE_TEST_SUITE_P(
        Kinds, AmPeerDeath,
        ::testing::Combine(::testing::Values("sm", "tcp"),
                           ::testing::Values(EpKind::address,
                                             EpKind::listener)),
        death_name);

} // namespace
} // namespace test
