/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The fuzz harnesses' hash fix-up: random bytes almost never carry the
 * right seal or code id, so the harnesses recompute both over an input
 * before the target's steps see it, and mutated frames get past the seal
 * checks to the parsers behind them.
 */
#ifndef UCX_IFUNC_TEST_FUZZ_FIX_UP_HASHES_H_
#define UCX_IFUNC_TEST_FUZZ_FIX_UP_HASHES_H_

#include "ucp/ifunc/format/code_id.h"
#include "ucp/ifunc/format/frame.h"

#include <cstring>

namespace ucx_ifunc {
namespace fuzz {

/* The one place that knows which fields are hashes (frame.h): fixes the
 * seal, code id and trailing seal of the frame at @a buffer, of at least
 * kMinFrameSize of the @a buffer_size bytes there. After a
 * change of the frame format (e.g. code ids of another hash, a signature
 * block), adapt this function and regenerate the corpus
 * (make fuzz-corpus). */
inline void fix_up_hashes(char *buffer, size_t buffer_size)
{
    uint64_t word0;
    std::memcpy(&word0, buffer, sizeof(word0));
    if (word0 == frame_magic_word()) {
        FrameHeader hdr;
        std::memcpy(&hdr, buffer, sizeof(hdr));
        /* code id: hash of name and image, where the header puts them */
        if (hdr.name_length <= UCP_IFUNC_NAME_MAX) {
            uint64_t image_end = frame_image_offset(hdr.name_length) +
                                 uint64_t(hdr.image_size);
            if (image_end <= buffer_size) {
                set_header_code_id(&hdr, code_id_of(buffer + kNameOffset,
                                                    image_end - kNameOffset));
            }
        }
        hdr.seal = frame_seal(hdr);
        std::memcpy(buffer, &hdr, sizeof(hdr));
    } else if (word0 == ref_magic_word()) {
        RefHeader hdr;
        std::memcpy(&hdr, buffer, sizeof(hdr));
        hdr.seal = ref_seal(hdr);
        std::memcpy(buffer, &hdr, sizeof(hdr));
    } else {
        /* Another version: only the envelope's seal, the header's last word */
        size_t header_size = frame_header_size(word0);
        if ((header_size < kMinHeaderSize) || (header_size > buffer_size) ||
            (header_size % 8)) {
            return;
        }
        uint64_t seal = hash64(buffer, header_size - kSealSize);
        seal          = seal ? seal : 1;
        std::memcpy(buffer + header_size - kSealSize, &seal, kSealSize);
    }

    /* The trailing copy of the seal, where word 1 (the frame size) puts it */
    uint64_t frame_size;
    size_t   header_size = frame_header_size(word0);
    std::memcpy(&frame_size, buffer + 8, sizeof(frame_size));
    if ((header_size >= kMinHeaderSize) && (header_size <= buffer_size) &&
        (header_size % 8 == 0) && (frame_size >= header_size + kSealSize) &&
        (frame_size <= buffer_size) && (frame_size % 8 == 0)) {
        std::memcpy(buffer + frame_size - kSealSize,
                    buffer + header_size - kSealSize, kSealSize);
    }
}

} // namespace fuzz
} // namespace ucx_ifunc

#endif
