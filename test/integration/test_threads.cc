/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Polling from several threads: each message runs exactly once, in one of
 * the threads polling its buffer. (The worker is progressed by the main
 * thread only, as UCS_THREAD_MODE_SINGLE requires.)
 */
#include "target.h"

#include <atomic>
#include <thread>

namespace test {
namespace {

constexpr size_t kSlot = 64 * 1024;

class Threads : public TransportTest {
protected:
    /* A message of @a handle into the slot at @a offset. The sender is
     * told the slot's size: over TCP it would otherwise read the slot's
     * first word with a get, which UCX serves with a memcpy out of the
     * buffer while the pollers swap that word: a remote read, which
     * ThreadSanitizer takes for a race of this process. The robustness
     * tests cover that read. */
    Reply send(uint32_t handle, size_t offset)
    {
        return target_->send(handle, offset, nullptr, 0, kSlot);
    }

    /* Waits, progressing the worker, until @a value reaches @a expected. */
    bool wait_for(const std::atomic<int64_t> &value, int64_t expected)
    {
        auto deadline = deadline_in(30);
        while (value.load() < expected) {
            target_->worker().progress();
            if (Clock::now() > deadline) {
                return false;
            }
        }
        return true;
    }
};

TEST_P(Threads, ConcurrentPollersOfOneBufferRunEachMessageOnce)
{
    constexpr int        kMessages = 500;
    uint32_t             handle    = target_->register_ifunc("counter");
    int64_t              counter   = 0; /* written only by the ifunc */
    std::atomic<int64_t> runs{0};
    std::atomic<int>     errors{0};
    std::atomic<bool>    stop{false};

    auto poller = [&]() {
        while (!stop.load()) {
            ucs_status_t status = target_->poll(0, kSlot, &counter);
            if (status == UCS_OK) {
                runs.fetch_add(1);
            } else if (status != UCS_ERR_NO_MESSAGE) {
                errors.fetch_add(1);
            }
        }
    };
    std::thread a(poller), b(poller), c(poller);
    bool        delivered = true;
    /* The sender is told the slot's size: over TCP it would otherwise read
     * the slot's first word with a get, which UCX serves with a memcpy out
     * of the buffer while the pollers swap that word, a remote read that
     * ThreadSanitizer takes for a race of this process (the robustness
     * tests cover that read). */
    for (int i = 1; delivered && (i <= kMessages); ++i) {
        delivered = (target_->send(handle, 0, nullptr, 0, kSlot).status ==
                     UCS_OK) &&
                    wait_for(runs, i);
    }
    stop = true;
    a.join();
    b.join();
    c.join();

    EXPECT_TRUE(delivered);
    EXPECT_EQ(kMessages, runs.load());
    EXPECT_EQ(kMessages, counter);
    EXPECT_EQ(0, errors.load());
}

TEST_P(Threads, PollersOfDifferentBuffersRunConcurrently)
{
    constexpr int        kRounds     = 200;
    uint32_t             handle      = target_->register_ifunc("counter");
    int64_t              counters[2] = {0, 0};
    std::atomic<int64_t> runs[2];
    std::atomic<bool>    stop{false};
    runs[0] = runs[1] = 0;

    auto poller = [&](int i) {
        while (!stop.load()) {
            if (target_->poll(i * kSlot, kSlot, &counters[i]) == UCS_OK) {
                runs[i].fetch_add(1);
            }
        }
    };
    std::thread first(poller, 0), second(poller, 1);
    bool        delivered = true;
    for (int round = 1; delivered && (round <= kRounds); ++round) {
        delivered = (send(handle, 0).status == UCS_OK) &&
                    (send(handle, kSlot).status == UCS_OK) &&
                    wait_for(runs[0], round) && wait_for(runs[1], round);
    }
    stop = true;
    first.join();
    second.join();

    EXPECT_TRUE(delivered);
    EXPECT_EQ(kRounds, counters[0]);
    EXPECT_EQ(kRounds, counters[1]);
}

INSTANTIATE_TEST_SUITE_P(Transports, Threads, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
