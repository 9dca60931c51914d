/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Frame validation and the completion rule, on frames crafted in local
 * memory: torn and unsealed headers never run, sealed but invalid frames are
 * rejected and cleared, complete frames run exactly once.
 */
#include "fixture.h"

#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/format/image.h"

#include "../common/frames.h"
#include "../ifuncs/test_ifunc.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <thread>

namespace test {
namespace {

using ucx_ifunc::FrameHeader;

class Frame : public UnitTest {
protected:
    void SetUp() override
    {
        UnitTest::SetUp();
        std::vector<char> args(300, 'p');
        frame_ = frame_of("echo", args.data(), args.size());
    }

    FrameHeader &header(std::vector<uint64_t> &frame)
    {
        return *reinterpret_cast<FrameHeader *>(frame.data());
    }

    /* Re-seal after editing the header, as a sender would have. */
    static void reseal(std::vector<uint64_t> &frame)
    {
        auto &hdr    = *reinterpret_cast<FrameHeader *>(frame.data());
        hdr.seal     = ucx_ifunc::frame_seal(hdr);
        frame.back() = hdr.seal;
    }

    /* After editing the name or the image: a new code id, then re-seal. */
    static void reidentify(std::vector<uint64_t> &frame)
    {
        auto       &hdr   = *reinterpret_cast<FrameHeader *>(frame.data());
        const char *bytes = reinterpret_cast<const char *>(frame.data());
        size_t      end =
                ucx_ifunc::frame_image_offset(hdr.name_length) + hdr.image_size;
        ucx_ifunc::set_header_code_id(
                &hdr, ucx_ifunc::code_id_of(bytes + ucx_ifunc::kNameOffset,
                                            end - ucx_ifunc::kNameOffset));
        reseal(frame);
    }

    static char *name_field(std::vector<uint64_t> &frame)
    {
        return reinterpret_cast<char *>(frame.data()) + ucx_ifunc::kNameOffset;
    }

    ucs_status_t poll(std::vector<uint64_t> &buffer, echo_result *result)
    {
        return ucp_poll_ifunc(context(), buffer.data(), buffer.size() * 8,
                              result);
    }

    std::vector<uint64_t> frame_;
};

TEST(Hash, EveryBitOfAHeaderMatters)
{
    FrameHeader hdr = {};
    std::memset(&hdr, 0x5a, sizeof(hdr));
    std::set<uint64_t> seals = {ucx_ifunc::frame_seal(hdr)};
    auto              *bytes = reinterpret_cast<unsigned char *>(&hdr);
    for (size_t bit = 0; bit < offsetof(FrameHeader, seal) * 8; ++bit) {
        bytes[bit / 8] ^= 1u << (bit % 8);
        seals.insert(ucx_ifunc::frame_seal(hdr));
        bytes[bit / 8] ^= 1u << (bit % 8);
    }
    EXPECT_EQ(offsetof(FrameHeader, seal) * 8 + 1, seals.size());
    EXPECT_NE(0u, ucx_ifunc::frame_seal(hdr));
}

TEST(Hash, LengthMatters)
{
    std::vector<unsigned char> zeros(80, 0);
    std::set<uint64_t>         hashes;
    for (size_t size = 0; size <= zeros.size(); ++size) {
        hashes.insert(ucx_ifunc::hash64(zeros.data(), size));
    }
    EXPECT_EQ(zeros.size() + 1, hashes.size());
}

TEST(Names, OnlyCIdentifiersUpTo63Characters)
{
    using ucx_ifunc::ifunc_name_valid;
    EXPECT_TRUE(ifunc_name_valid("a"));
    EXPECT_TRUE(ifunc_name_valid("_pointer_chase2"));
    EXPECT_TRUE(ifunc_name_valid(std::string(63, 'n').c_str()));
    EXPECT_FALSE(ifunc_name_valid(std::string(64, 'n').c_str()));
    EXPECT_FALSE(ifunc_name_valid(nullptr));
    for (const char *bad : {"", "1abc", "a-b", "../x", "a/b", "a b", "a.so",
                            "\xc3\xa9t\xc3\xa9"}) {
        EXPECT_FALSE(ifunc_name_valid(bad)) << bad;
    }
}

TEST_F(Frame, CompleteFrameRunsOnceAndLeavesAnEmptySlot)
{
    echo_result result = {};
    auto        buffer = frame_;
    EXPECT_EQ(UCS_OK, poll(buffer, &result));
    EXPECT_EQ(1u, result.calls);
    EXPECT_EQ(300u, result.payload_size);
    EXPECT_EQ(UCS_ERR_NO_MESSAGE, poll(buffer, &result));
    EXPECT_EQ(1u, result.calls);
    EXPECT_TRUE(ucx_ifunc::is_empty_slot_word(buffer[0]));
    EXPECT_EQ(buffer.size() * 8, ucx_ifunc::empty_slot_capacity(buffer[0]));
}

TEST_F(Frame, FirstPollOfAFreshSlotRecordsItsSize)
{
    std::vector<uint64_t> buffer(512, 0);
    echo_result           result = {};
    EXPECT_EQ(UCS_ERR_NO_MESSAGE, poll(buffer, &result));
    EXPECT_EQ(ucx_ifunc::empty_slot_word(4096), buffer[0]);
}

TEST_F(Frame, NothingRunsWithoutTheSeal)
{
    echo_result result = {};
    auto        buffer = frame_;
    buffer.back()      = 0;
    EXPECT_EQ(UCS_ERR_NO_MESSAGE, poll(buffer, &result));
    buffer.back() = frame_.back();
    EXPECT_EQ(UCS_OK, poll(buffer, &result));
}

TEST_F(Frame, TornHeaderDoesNotRun)
{
    echo_result result = {};
    auto        buffer = frame_;
    /* Any header byte not yet written (here: an old byte in the nonce). */
    reinterpret_cast<char *>(buffer.data())[offsetof(FrameHeader, nonce)] ^= 1;
    EXPECT_EQ(UCS_ERR_NO_MESSAGE, poll(buffer, &result));
    reinterpret_cast<char *>(buffer.data())[offsetof(FrameHeader, nonce)] ^= 1;
    EXPECT_EQ(UCS_OK, poll(buffer, &result));
}

TEST_F(Frame, StaleSealOfAnotherFrameDoesNotComplete)
{
    std::vector<char> args(300, 'q');
    auto              other  = frame_of("echo", args.data(), args.size());
    auto              buffer = frame_;
    ASSERT_EQ(other.size(), buffer.size());
    buffer.back()      = other.back();
    echo_result result = {};
    EXPECT_EQ(UCS_ERR_NO_MESSAGE, poll(buffer, &result));
    EXPECT_EQ(0u, result.calls);
}

TEST_F(Frame, SealedButInvalidFramesAreRejectedAndCleared)
{
    struct Case {
        const char *what;
        void (*edit)(FrameHeader &);
        ucs_status_t expected;
    };
    const Case cases[] = {
            {"frame size 0", [](FrameHeader &h) { h.frame_size = 0; },
             UCS_ERR_INVALID_PARAM},
            {"frame size not a multiple of 8",
             [](FrameHeader &h) { h.frame_size -= 4; }, UCS_ERR_INVALID_PARAM},
            {"payload beyond the frame",
             [](FrameHeader &h) { h.payload_size += 4096; },
             UCS_ERR_INVALID_PARAM},
            {"payload inside the image",
             [](FrameHeader &h) { h.payload_offset = 128; },
             UCS_ERR_INVALID_PARAM},
            {"payload offset wraps",
             [](FrameHeader &h) { h.payload_offset = ~0u - 15; },
             UCS_ERR_INVALID_PARAM},
            {"image beyond the frame",
             [](FrameHeader &h) { h.image_size = ~0u - 64; },
             UCS_ERR_INVALID_PARAM},
            {"no name", [](FrameHeader &h) { h.name_length = 0; },
             UCS_ERR_INVALID_PARAM},
            {"name too long", [](FrameHeader &h) { h.name_length = 64; },
             UCS_ERR_INVALID_PARAM},
    };
    for (const Case &c : cases) {
        auto buffer = frame_;
        c.edit(header(buffer));
        size_t seal_at      = header(buffer).frame_size / 8 - 1;
        header(buffer).seal = ucx_ifunc::frame_seal(header(buffer));
        if (seal_at < buffer.size()) {
            buffer[seal_at] = header(buffer).seal;
        }
        echo_result result = {};
        EXPECT_EQ(c.expected, poll(buffer, &result)) << c.what;
        EXPECT_EQ(UCS_ERR_NO_MESSAGE, poll(buffer, &result)) << c.what;
        EXPECT_EQ(0u, result.calls) << c.what;
    }
}

TEST_F(Frame, FrameLargerThanTheBufferIsRejected)
{
    auto        buffer = frame_;
    echo_result result = {};
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              ucp_poll_ifunc(context(), buffer.data(), 512, &result));
    EXPECT_EQ(UCS_ERR_NO_MESSAGE,
              ucp_poll_ifunc(context(), buffer.data(), 512, &result));
    EXPECT_EQ(0u, result.calls);
}

TEST_F(Frame, ImageThatDoesNotMatchItsCodeIdIsRejected)
{
    /* Ids the peer made up: each is rejected, and the source is warned
     * about once, not once per id (it could choose new ones forever). */
    WarningCounter warnings("does not match its code id");
    for (uint64_t forged : {0x1234, 0x5678, 0x9abc}) {
        auto buffer = frame_;
        header(buffer).code_id_lo ^= forged; /* never linked: not cached */
        reseal(buffer);
        echo_result result = {};
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, poll(buffer, &result));
        EXPECT_EQ(0u, result.calls);
    }
    EXPECT_EQ(1, warnings.count());
}

TEST_F(Frame, BadNamesAreRejectedWhereTheCodeIsLinked)
{
    /* "echo": the name field holds "echo", its NUL and padding to 8. */
    struct Case {
        const char *what;
        void (*edit)(char *name);
    };
    const Case cases[] = {
            {"path", [](char *n) { std::memcpy(n, "../x", 4); }},
            {"not an identifier", [](char *n) { n[1] = '-'; }},
            {"not terminated", [](char *n) { n[4] = 'x'; }},
            {"NUL inside the name", [](char *n) { n[2] = '\0'; }},
            {"bytes after the name", [](char *n) { n[6] = 'z'; }},
    };
    for (const Case &c : cases) {
        auto buffer = frame_;
        c.edit(name_field(buffer));
        reidentify(buffer);
        echo_result result = {};
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, poll(buffer, &result)) << c.what;
        EXPECT_EQ(UCS_ERR_NO_MESSAGE, poll(buffer, &result)) << c.what;
        EXPECT_EQ(0u, result.calls) << c.what;
    }
}

TEST_F(Frame, CodeForAnotherMachineIsRejected)
{
    auto  buffer = frame_;
    char *image  = reinterpret_cast<char *>(buffer.data()) +
                  ucx_ifunc::frame_image_offset(header(buffer).name_length);
    reinterpret_cast<ucp_ifunc_image_desc_t *>(image)->machine =
            kForeignMachine;
    reidentify(buffer);
    echo_result    result = {};
    WarningCounter warnings("code is for");
    for (int i = 0; i < 3; ++i) {
        auto again = buffer;
        EXPECT_EQ(UCS_ERR_UNSUPPORTED, poll(again, &result));
    }
    EXPECT_EQ(0u, result.calls);
    EXPECT_EQ(1, warnings.count()) << "one log line per code id";
}

TEST_F(Frame, FutureFrameVersionIsClearedAndRejectedOncePerSource)
{
    WarningCounter        warnings("format version");
    std::vector<uint64_t> buffer(frame_.size() + 64, 0);
    echo_result           result = {};
    auto                  put    = [&](const std::vector<uint64_t> &frame) {
        std::copy(frame.begin(), frame.end(), buffer.begin());
    };

    /* Not complete yet (no seal at its end): left alone. */
    std::vector<uint64_t> future = future_frame(0x1234abcd00000001ull, 200);
    uint64_t              seal   = future.back();
    future.back()                = 0;
    put(future);
    EXPECT_EQ(UCS_ERR_NO_MESSAGE, poll(buffer, &result));
    EXPECT_EQ(future[0], buffer[0]);

    /* Complete: taken out of the slot, one warning naming both versions. */
    future.back() = seal;
    put(future);
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, poll(buffer, &result));
    EXPECT_TRUE(ucx_ifunc::is_empty_slot_word(buffer[0]));
    EXPECT_EQ(UCS_ERR_NO_MESSAGE, poll(buffer, &result));
    EXPECT_EQ(1, warnings.count());

    /* The same source again: rejected, no second warning. Another source:
     * warned once. */
    put(future_frame(0x1234abcd00000002ull, 0));
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, poll(buffer, &result));
    EXPECT_EQ(1, warnings.count());
    put(future_frame(0x99990000000000ffull, 64));
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, poll(buffer, &result));
    EXPECT_EQ(2, warnings.count());

    /* A sealed future header whose frame cannot fit: rejected at once. */
    future    = future_frame(0x99990000000000feull, 0);
    future[1] = buffer.size() * 8 + 8;
    seal_future(future);
    put(future);
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, poll(buffer, &result));
    EXPECT_TRUE(ucx_ifunc::is_empty_slot_word(buffer[0]));

    /* Our version with another header size is a damaged frame. */
    future    = future_frame(0x99990000000000fdull, 0);
    future[0] = ucx_ifunc::kFrameMagic |
                (uint64_t(ucx_ifunc::kFrameVersion) << 32) |
                (uint64_t(kFutureHeaderSize) << 48);
    seal_future(future);
    put(future);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, poll(buffer, &result));
    EXPECT_TRUE(ucx_ifunc::is_empty_slot_word(buffer[0]));
    EXPECT_EQ(2, warnings.count());

    /* The current version still runs in the same slot. */
    EXPECT_EQ(0u, result.calls);
    put(frame_);
    EXPECT_EQ(UCS_OK, poll(buffer, &result));
    EXPECT_EQ(1u, result.calls);
}

TEST_F(Frame, ManyPollersOneRun)
{
    for (int round = 0; round < 100; ++round) {
        auto                     buffer = frame_;
        echo_result              result = {};
        std::atomic<int>         runs{0};
        std::atomic<int>         errors{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&]() {
                for (int i = 0; i < 50; ++i) {
                    ucs_status_t status = poll(buffer, &result);
                    runs += status == UCS_OK;
                    errors += (status != UCS_OK) &&
                              (status != UCS_ERR_NO_MESSAGE);
                }
            });
        }
        for (auto &thread : threads) {
            thread.join();
        }
        ASSERT_EQ(1, runs.load());
        ASSERT_EQ(0, errors.load());
    }
}

TEST_F(Frame, MutatedHeadersAndGarbageNeverRun)
{
    std::mt19937_64 rng(11);
    echo_result     result = {};
    for (int i = 0; i < 20000; ++i) {
        auto buffer = frame_;
        /* Flip 1-3 distinct random bits of the header (the seal kept). */
        std::set<size_t> bits;
        for (size_t flips = 1 + rng() % 3; bits.size() < flips;) {
            bits.insert(rng() % (offsetof(FrameHeader, seal) * 8));
        }
        for (size_t bit : bits) {
            reinterpret_cast<unsigned char *>(buffer.data())[bit / 8] ^=
                    1u << (bit % 8);
        }
        ASSERT_NE(UCS_OK, poll(buffer, &result)) << "iteration " << i;
    }
    for (int i = 0; i < 2000; ++i) {
        std::vector<uint64_t> garbage(1024);
        for (uint64_t &word : garbage) {
            word = rng();
        }
        if (i % 2) {
            garbage[0] = ucx_ifunc::frame_magic_word();
        }
        ASSERT_NE(UCS_OK, poll(garbage, &result)) << "iteration " << i;
    }
    EXPECT_EQ(0u, result.calls);
}

TEST_F(Frame, BadPollArguments)
{
    std::vector<uint64_t> buffer(64, 0);
    echo_result           result = {};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_poll_ifunc(nullptr, buffer.data(), 512, &result));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_poll_ifunc(context(), nullptr, 512, &result));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_poll_ifunc(context(),
                             reinterpret_cast<char *>(buffer.data()) + 4, 500,
                             &result));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_poll_ifunc(context(), buffer.data(), 16, &result));
}

} // namespace
} // namespace test
