/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Peers of different frame format versions meet cleanly: a frame of a future
 * version, written by the source peer over the transport under test, is
 * taken out of the slot and rejected with one warning per source; the
 * current version then runs in the same slot.
 */
#include "target.h"

#include "../common/frames.h"
#include "../ifuncs/test_ifunc.h"

namespace test {
namespace {

constexpr size_t kSlot = 1ul << 20;

class Versions : public TransportTest {
protected:
    /* Writes @a frame into slot 0 as a sender of its version would: all
     * but the seal, then the seal. */
    void put_frame(const std::vector<uint64_t> &frame)
    {
        const char *bytes = reinterpret_cast<const char *>(frame.data());
        size_t      body  = frame.size() * 8 - ucx_ifunc::kSealSize;
        ASSERT_EQ(UCS_OK, target_->put_raw(0, bytes, body).status);
        ASSERT_EQ(UCS_OK,
                  target_->put_raw(body, bytes + body, ucx_ifunc::kSealSize)
                          .status);
    }
};

TEST_P(Versions, FutureFrameIsRejectedThenCurrentRuns)
{
    WarningCounter warnings("format version");
    uint32_t       handle  = target_->register_ifunc("counter");
    int64_t        counter = 0;

    /* The future frame carries the peer's source id, as its own would. */
    std::vector<char> current = target_->get_frame(handle, nullptr, 0);
    uint64_t          nonce;
    std::memcpy(&nonce,
                current.data() + offsetof(ucx_ifunc::FrameHeader, nonce),
                sizeof(nonce));

    for (int i = 0; i < 3; ++i) {
        put_frame(future_frame(nonce + 1000 + i, 4000 * i));
        EXPECT_EQ(UCS_ERR_UNSUPPORTED,
                  target_->poll_until_result(0, kSlot, &counter));
        EXPECT_TRUE(target_->poll_for(0.02, 0, kSlot, &counter).empty());
    }
    EXPECT_EQ(1, warnings.count()); /* once for this source */
    EXPECT_EQ(0, counter);

    ASSERT_EQ(UCS_OK, target_->send(handle, 0).status);
    EXPECT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &counter));
    EXPECT_EQ(1, counter);
}

INSTANTIATE_TEST_SUITE_P(Transports, Versions, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
