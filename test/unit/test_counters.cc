/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The runtime counters of a context (ucp_ifunc_context_query, counters.h)
 * in one process: messages run and bytes received on the raw path, drops
 * counted by their reason, counts from more threads than there are shards,
 * and the lines UCX_IFUNC_PRINT_COUNTERS=y prints at release.
 */
#include "fixture.h"

#include "../common/counters.h"
#include "../common/frames.h"

#include "ucp/ifunc/base/counters.h"
#include "ucp/ifunc/format/frame.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace test {
namespace {

class Counters : public UnitTest {
protected:
    void SetUp() override
    {
        UnitTest::SetUp();
        tally_ = frame_of("tally", nullptr, 0);
    }

    void TearDown() override
    {
        unsetenv("UCX_IFUNC_PRINT_COUNTERS");
        unsetenv("UCX_IFUNC_MAX_IMAGE_SIZE");
    }

    /* Polls a copy of @a frame in @a context. */
    ucs_status_t deliver(ucp_context_h context, std::vector<uint64_t> frame)
    {
        uint64_t calls = 0;
        return ucp_poll_ifunc(context, frame.data(), frame.size() * 8, &calls);
    }

    std::vector<uint64_t> tally_;
};

TEST_F(Counters, AContextWithoutStateReportsZeros)
{
    Context                  fresh;
    ucp_ifunc_context_attr_t attr = query_counters(fresh.get());
    EXPECT_EQ(0u,
              attr.run_raw + attr.run_channel + attr.run_am + attr.run_peer);
    EXPECT_EQ(0u, attr.bytes_received);
    EXPECT_EQ(0u, rejected_total(attr));
    EXPECT_EQ(0u, attr.codes_linked + attr.codes_evicted + attr.codes_held +
                          attr.code_memory);
}

TEST_F(Counters, NullArgumentsAreRefused)
{
    ucp_ifunc_context_attr_t attr = {};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_context_query(nullptr, &attr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_context_query(context(), nullptr));
}

TEST_F(Counters, RawMessagesCountAsRunWithTheirBytes)
{
    Context target;
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(UCS_OK, deliver(target.get(), tally_));
    }
    ucp_ifunc_context_attr_t attr = query_counters(target.get());
    EXPECT_EQ(5u, attr.run_raw);
    EXPECT_EQ(0u, attr.run_channel + attr.run_am + attr.run_peer);
    EXPECT_EQ(5 * tally_.size() * 8, attr.bytes_received);
    EXPECT_EQ(0u, rejected_total(attr));
    EXPECT_EQ(1u, attr.codes_linked);
    EXPECT_EQ(0u, attr.codes_evicted);
    EXPECT_EQ(1u, attr.codes_held);
    EXPECT_GT(attr.code_memory, 0u);

    /* Only the groups asked for are filled. */
    ucp_ifunc_context_attr_t runs =
            query_counters(target.get(), UCP_IFUNC_CONTEXT_ATTR_FIELD_RUN);
    EXPECT_EQ(5u, runs.run_raw);
    EXPECT_EQ(0xeeeeeeeeeeeeeeeeull, runs.bytes_received);
    EXPECT_EQ(0xeeeeeeeeeeeeeeeeull, runs.rejected_untrusted);
    EXPECT_EQ(0xeeeeeeeeeeeeeeeeull, runs.codes_linked);

    /* The counters go with the state. */
    ucp_ifunc_context_release(target.get());
    EXPECT_EQ(0u, query_counters(target.get()).run_raw);
}

TEST_F(Counters, DropsCountByTheirReason)
{
    Context target;

    /* A frame of a format this target does not read. */
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              deliver(target.get(), future_frame(0x1234, 64)));
    EXPECT_EQ(1u, query_counters(target.get()).rejected_bad_version);

    /* A frame whose code is not the code id it names. */
    std::vector<uint64_t>   forged = tally_;
    ucx_ifunc::FrameHeader &hdr =
            *reinterpret_cast<ucx_ifunc::FrameHeader *>(forged.data());
    hdr.code_id_lo ^= 1;
    hdr.seal      = ucx_ifunc::frame_seal(hdr);
    forged.back() = hdr.seal;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, deliver(target.get(), forged));
    EXPECT_EQ(1u, query_counters(target.get()).rejected_bad_code);

    /* A sealed header whose frame size cannot be right. */
    std::vector<uint64_t>   torn = tally_;
    ucx_ifunc::FrameHeader &header =
            *reinterpret_cast<ucx_ifunc::FrameHeader *>(torn.data());
    header.frame_size = 12; /* not a multiple of 8 */
    header.seal       = ucx_ifunc::frame_seal(header);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, deliver(target.get(), torn));
    EXPECT_EQ(1u, query_counters(target.get()).rejected_bad_frame);

    ucp_ifunc_context_attr_t attr = query_counters(target.get());
    EXPECT_EQ(3u, rejected_total(attr));
    EXPECT_EQ(0u, attr.run_raw);
    /* The two frames whose size could be read. */
    EXPECT_EQ((future_frame(0x1234, 64).size() + forged.size()) * 8,
              attr.bytes_received);

    /* An image beyond UCX_IFUNC_MAX_IMAGE_SIZE, in a context that reads
     * it now. */
    setenv("UCX_IFUNC_MAX_IMAGE_SIZE", "4096", 1);
    Context small;
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, deliver(small.get(), tally_));
    EXPECT_EQ(1u, query_counters(small.get()).rejected_too_large);
    EXPECT_EQ(0u, query_counters(small.get()).codes_linked);
}

TEST_F(Counters, ThreadsBeyondTheShardsAllCount)
{
    /* More threads than shards: the last ones share one, atomically. */
    constexpr unsigned       kThreads = ucx_ifunc::Counters::kShards + 8;
    constexpr uint64_t       kEach    = 20000;
    ucx_ifunc::Counters      counters;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < kThreads; ++t) {
        threads.emplace_back([&counters, t]() {
            for (uint64_t i = 0; i < kEach; ++i) {
                counters.count_run((t % 2) ? ucx_ifunc::RunPath::peer
                                           : ucx_ifunc::RunPath::am,
                                   1);
                counters.count_bytes(2);
            }
            counters.count_reject(ucx_ifunc::Reject::lost);
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    ucx_ifunc::CounterValues values = counters.read();
    uint64_t                 runs   = 0;
    for (uint64_t count : values.runs) {
        runs += count;
    }
    EXPECT_EQ(kThreads * kEach, runs);
    EXPECT_EQ(kThreads / 2 * kEach,
              values.runs[size_t(ucx_ifunc::RunPath::peer)]);
    EXPECT_EQ(3 * kThreads * kEach, values.bytes_received);
    EXPECT_EQ(kThreads, values.rejected[size_t(ucx_ifunc::Reject::lost)]);
}

/* The value printed for counter @a name, or -1. */
long long printed(const std::string &text, const std::string &name)
{
    size_t at = text.find("#   " + name + " ");
    return (at == std::string::npos)
                   ? -1
                   : std::stoll(text.substr(at + 4 + name.size()));
}

TEST_F(Counters, PrintedAtReleaseWhenAsked)
{
    setenv("UCX_IFUNC_PRINT_COUNTERS", "y", 1);
    Context target;
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(UCS_OK, deliver(target.get(), tally_));
    }
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              deliver(target.get(), future_frame(0x99, 8)));
    ::testing::internal::CaptureStdout();
    ucp_ifunc_context_release(target.get());
    std::string text = ::testing::internal::GetCapturedStdout();

    EXPECT_NE(std::string::npos, text.find("# ucx-ifunc counters of UCP "
                                           "context"))
            << text;
    EXPECT_EQ(3, printed(text, "run_raw")) << text;
    EXPECT_EQ(0, printed(text, "run_peer")) << text;
    EXPECT_EQ(1, printed(text, "rejected_bad_version")) << text;
    EXPECT_EQ(1, printed(text, "codes_linked")) << text;
    /* One line per field of ucp_ifunc_context_attr_t but field_mask. */
    size_t lines = 0;
    for (size_t at = 0; (at = text.find("\n#   ", at)) != std::string::npos;
         ++at) {
        ++lines;
    }
    EXPECT_EQ(sizeof(ucp_ifunc_context_attr_t) / 8 - 1, lines) << text;
}

TEST_F(Counters, NotPrintedByDefault)
{
    Context target;
    ASSERT_EQ(UCS_OK, deliver(target.get(), tally_));
    ::testing::internal::CaptureStdout();
    ucp_ifunc_context_release(target.get());
    EXPECT_EQ("", ::testing::internal::GetCapturedStdout());
}

} // namespace
} // namespace test
