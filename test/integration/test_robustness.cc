/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Bad input between two processes: whatever arrives, a frame runs only when
 * all of it is there, a rejected one never runs, the target keeps running,
 * and later messages still work.
 */
#include "target.h"

#include "../ifuncs/test_ifunc.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

namespace test {
namespace {

constexpr size_t kSlot      = 1ul << 20;
constexpr size_t kSmallSlot = 4096;
constexpr size_t kSealSize  = 8;

bool contains(const std::vector<ucs_status_t> &results, ucs_status_t status)
{
    return std::find(results.begin(), results.end(), status) != results.end();
}

std::vector<char> random_bytes(size_t size, uint64_t seed)
{
    std::vector<char> bytes(size);
    std::mt19937_64   rng(seed);
    for (char &c : bytes) {
        c = char(rng());
    }
    return bytes;
}


class Robustness : public TransportTest {
protected:
    void TearDown() override
    {
        setenv("UCX_IFUNC_LIB_DIR", ifunc_lib_dir().c_str(), 1);
        TransportTest::TearDown();
    }

    /* The target runs a normal message in @a offset after the bad input. */
    void expect_slot_works(size_t offset, size_t size)
    {
        uint32_t handle  = target_->register_ifunc("counter");
        int64_t  counter = 0;
        ASSERT_EQ(UCS_OK, target_->send(handle, offset).status);
        EXPECT_EQ(UCS_OK, target_->poll_until_result(offset, size, &counter));
        EXPECT_EQ(1, counter);
    }
};

TEST_P(Robustness, OversizedFrameIsRejectedByTarget)
{
    /* Written by a peer that checks nothing (the send calls would refuse
     * it, below): the frame lands and the target refuses to run it. */
    uint32_t          handle = target_->register_ifunc("echo");
    std::vector<char> args(64 * 1024, 'x');
    echo_result       result = {};
    std::vector<char> frame =
            target_->get_frame(handle, args.data(), args.size());
    ASSERT_EQ(UCS_OK,
              target_->put_raw(kSlot, frame.data(), frame.size()).status);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              target_->poll_until_result(kSlot, kSmallSlot, &result));
    EXPECT_TRUE(target_->poll_for(0.05, kSlot, kSmallSlot, &result).empty());
    EXPECT_EQ(0u, result.calls);
    expect_slot_works(kSlot, kSmallSlot);
}

TEST_P(Robustness, OversizedFrameIsRefusedBySenderThatKnowsTheSize)
{
    /* A fresh slot, on every transport: ucp_ifunc_send_nbx was told the
     * slot's size, so nothing is written. */
    uint32_t          handle = target_->register_ifunc("echo");
    std::vector<char> args(64 * 1024, 'x');
    echo_result       result = {};
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              target_->send(handle, kSlot, args.data(), args.size(), kSmallSlot)
                      .status);
    EXPECT_TRUE(target_->poll_for(0.05, kSlot, kSmallSlot, &result).empty());
    EXPECT_EQ(0u, result.calls);

    /* What fits goes through ucp_ifunc_send_nbx too. */
    ASSERT_EQ(UCS_OK,
              target_->send(handle, kSlot, "fits", 4, kSmallSlot).status);
    EXPECT_EQ(UCS_OK, target_->poll_until_result(kSlot, kSmallSlot, &result));
    EXPECT_EQ(1u, result.calls);
    EXPECT_EQ(4u, result.payload_size);
}

TEST_P(Robustness, OversizedFrameIsRefusedBySenderThatReadsTheSlot)
{
    /* The paper's send, told no size: it reads the size the target last
     * polled the slot with (directly over shared memory, with a get over
     * TCP) and writes nothing that does not fit. Over TCP the call returns
     * before it knows, and logs the refusal. */
    uint32_t          handle = target_->register_ifunc("echo");
    std::vector<char> args(64 * 1024, 'x');
    echo_result       result = {};
    ASSERT_EQ(UCS_ERR_NO_MESSAGE, target_->poll(kSlot, kSmallSlot, &result));
    EXPECT_EQ((GetParam() == "sm") ? UCS_ERR_EXCEEDS_LIMIT : UCS_OK,
              target_->send(handle, kSlot, args.data(), args.size()).status);
    EXPECT_TRUE(target_->poll_for(0.2, kSlot, kSmallSlot, &result).empty());
    EXPECT_EQ(0u, result.calls);
    expect_slot_works(kSlot, kSmallSlot);
}

TEST_P(Robustness, OversizedFrameAtTheEndOfTheBufferIsNeverWrittenPastIt)
{
    /* The last 4 KiB of the target's registered memory, and a 64 KiB
     * frame: over TCP, UCX writes what a put carries wherever it says, and
     * this one used to crash the target in ucp_put_handler. */
    size_t            slot   = Target::kBufferSize - kSmallSlot;
    uint32_t          handle = target_->register_ifunc("echo");
    std::vector<char> args(64 * 1024, 'x');
    echo_result       result = {};
    ASSERT_EQ(UCS_ERR_NO_MESSAGE, target_->poll(slot, kSmallSlot, &result));
    EXPECT_EQ((GetParam() == "sm") ? UCS_ERR_EXCEEDS_LIMIT : UCS_OK,
              target_->send(handle, slot, args.data(), args.size(), 0, 0,
                            kSendUnchecked)
                      .status);
    EXPECT_TRUE(target_->poll_for(0.2, slot, kSmallSlot, &result).empty());
    EXPECT_EQ(0u, result.calls);
    expect_slot_works(slot, kSmallSlot);
}

TEST_P(Robustness, SlotPolledLargerTakesALargerFrame)
{
    /* Polled first with 1 KiB, then with 1 MiB: the size a sender reads
     * is the latest, so a 4 KiB frame goes through. */
    uint32_t          handle = target_->register_ifunc("echo");
    std::vector<char> args(4096, 'x');
    echo_result       result = {};
    ASSERT_EQ(UCS_ERR_NO_MESSAGE, target_->poll(kSlot, 1024, &result));
    ASSERT_EQ(UCS_ERR_NO_MESSAGE, target_->poll(kSlot, kSlot, &result));
    ASSERT_EQ(UCS_OK,
              target_->send(handle, kSlot, args.data(), args.size()).status);
    EXPECT_EQ(UCS_OK, target_->poll_until_result(kSlot, kSlot, &result));
    EXPECT_EQ(1u, result.calls);
    EXPECT_EQ(4096u, result.payload_size);
}

TEST_P(Robustness, TruncatedFrameRunsOnlyWhenComplete)
{
    uint32_t          handle = target_->register_ifunc("echo");
    std::vector<char> args   = random_bytes(10000, 1);
    std::vector<char> frame =
            target_->get_frame(handle, args.data(), args.size());
    size_t      half   = frame.size() / 2;
    size_t      seal   = frame.size() - kSealSize;
    echo_result result = {};

    ASSERT_EQ(UCS_OK, target_->put_raw(0, frame.data(), half).status);
    EXPECT_TRUE(target_->poll_for(0.1, 0, kSlot, &result).empty());
    ASSERT_EQ(UCS_OK,
              target_->put_raw(half, frame.data() + half, seal - half).status);
    EXPECT_TRUE(target_->poll_for(0.1, 0, kSlot, &result).empty());
    EXPECT_EQ(0u, result.calls);

    /* The seal completes it: it runs, once. */
    ASSERT_EQ(UCS_OK,
              target_->put_raw(seal, frame.data() + seal, kSealSize).status);
    EXPECT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &result));
    EXPECT_TRUE(target_->poll_for(0.05, 0, kSlot, &result).empty());
    EXPECT_EQ(1u, result.calls);
    EXPECT_EQ(args.size(), result.payload_size);
    EXPECT_EQ(test_hash64(args.data(), args.size()), result.payload_hash);
}

TEST_P(Robustness, StaleSealDoesNotCompleteANewFrame)
{
    uint32_t          handle = target_->register_ifunc("echo");
    std::vector<char> args_a = random_bytes(5000, 2);
    std::vector<char> args_b = random_bytes(5000, 3);
    std::vector<char> frame_a =
            target_->get_frame(handle, args_a.data(), args_a.size());
    std::vector<char> frame_b =
            target_->get_frame(handle, args_b.data(), args_b.size());
    ASSERT_EQ(frame_a.size(), frame_b.size());
    size_t      seal   = frame_b.size() - kSealSize;
    echo_result result = {};

    /* B's body with A's seal where B's belongs: not B's seal, no run. */
    ASSERT_EQ(UCS_OK, target_->put_raw(0, frame_b.data(), seal).status);
    ASSERT_EQ(UCS_OK,
              target_->put_raw(seal, frame_a.data() + seal, kSealSize).status);
    EXPECT_TRUE(target_->poll_for(0.1, 0, kSlot, &result).empty());
    EXPECT_EQ(0u, result.calls);

    ASSERT_EQ(UCS_OK,
              target_->put_raw(seal, frame_b.data() + seal, kSealSize).status);
    EXPECT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &result));
    EXPECT_EQ(test_hash64(args_b.data(), args_b.size()), result.payload_hash);
}

TEST_P(Robustness, GarbageNeverRuns)
{
    uint32_t          handle = target_->register_ifunc("echo");
    echo_result       result = {};
    std::vector<char> frame  = target_->get_frame(handle, "abc", 3);

    /* Random bytes, then random bytes behind a valid frame magic, then a
     * valid header followed by random bytes up to a random "seal". */
    std::vector<std::vector<char>> garbage;
    garbage.push_back(random_bytes(64 * 1024, 4));
    garbage.push_back(random_bytes(64 * 1024, 5));
    std::memcpy(garbage.back().data(), frame.data(), 8);
    garbage.push_back(random_bytes(64 * 1024, 6));
    std::memcpy(garbage.back().data(), frame.data(), 128);

    for (const auto &bytes : garbage) {
        ASSERT_EQ(UCS_OK,
                  target_->put_raw(0, bytes.data(), bytes.size()).status);
        std::vector<ucs_status_t> results =
                target_->poll_for(0.1, 0, kSlot, &result);
        EXPECT_FALSE(contains(results, UCS_OK));
        EXPECT_EQ(0u, result.calls);
    }
    /* The last garbage starts like a frame that never got its seal: a
     * sender that sees the slot (direct stores) refuses to overwrite it,
     * and the target's owner clears it. */
    if (GetParam() == "sm") {
        uint32_t counter = target_->register_ifunc("counter");
        EXPECT_EQ(UCS_ERR_NO_RESOURCE, target_->send(counter, 0).status);
    }
    std::memset(target_->buffer(), 0, 8);
    expect_slot_works(0, kSlot);
}

INSTANTIATE_TEST_SUITE_P(Transports, Robustness, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
