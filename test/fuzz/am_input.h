/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The input format of the active-message harness (fuzz_am.cc), shared with
 * the seed generator (make_corpus.cc), which writes real messages in it.
 * An input is a sequence of messages, each
 *   byte 0      flags (AmInputFlag)
 *   byte 1      header length
 *   bytes 2-5   data length, little-endian (at most what is left)
 *   the header, then the data.
 */
#ifndef UCX_IFUNC_TEST_FUZZ_AM_INPUT_H_
#define UCX_IFUNC_TEST_FUZZ_AM_INPUT_H_

#include <cstdint>
#include <cstring>
#include <vector>

namespace ucx_ifunc {
namespace fuzz {

enum AmInputFlag : uint8_t {
    kRndv      = 1u << 0, /* UCP_AM_SEND_FLAG_RNDV, else _EAGER */
    kReply     = 1u << 1, /* UCP_AM_SEND_FLAG_REPLY: the target may answer */
    kFixHashes = 1u << 2, /* recompute the hashes of the frames in the data */
    kToReplyId = 1u << 3, /* to am_id + 1, where targets' replies arrive */
    kOverSelf  = 1u << 4  /* to the target over UCX's "self" transport (which
                             delivers inside the send call), else to the one
                             over shared memory */
};

constexpr size_t kAmControlSize = 6;

/* Appends one message to @a input. */
inline void append_am_message(std::vector<char> &input, uint8_t flags,
                              const void *header, uint8_t header_length,
                              const void *data, uint32_t data_length)
{
    char control[kAmControlSize] = {char(flags), char(header_length)};
    std::memcpy(control + 2, &data_length, sizeof(data_length));
    input.insert(input.end(), control, control + kAmControlSize);
    const char *h = static_cast<const char *>(header);
    const char *d = static_cast<const char *>(data);
    input.insert(input.end(), h, h + header_length);
    input.insert(input.end(), d, d + data_length);
}

} // namespace fuzz
} // namespace ucx_ifunc

#endif
