/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Frames an attacker makes from one captured frame, consistent (code id,
 * seal and trailer recomputed) so that only the runtime's own checks can
 * tell: extra bytes after the image (which no signature covers), or
 * another name of the same length (new code under the 'any' policy). And
 * the bytes of a message around a frame, for the send calls of the paths
 * with code sent once.
 */
#ifndef UCX_IFUNC_TEST_VARIANTS_H_
#define UCX_IFUNC_TEST_VARIANTS_H_

#include "ucp/ifunc/format/code_id.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/deliver/multi_isa.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace test {

inline ucx_ifunc::FrameHeader &frame_header(std::vector<char> &frame)
{
    return *reinterpret_cast<ucx_ifunc::FrameHeader *>(frame.data());
}

/* Sets the code id of @a frame to the digest of its name and image, and
 * seals it again. */
inline void reidentify_frame(std::vector<char> &frame)
{
    auto  &hdr = frame_header(frame);
    size_t image_end =
            ucx_ifunc::frame_image_offset(hdr.name_length) + hdr.image_size;
    ucx_ifunc::set_header_code_id(
            &hdr, ucx_ifunc::code_id_of(frame.data() + ucx_ifunc::kNameOffset,
                                        image_end - ucx_ifunc::kNameOffset));
    hdr.seal = ucx_ifunc::frame_seal(hdr);
    std::memcpy(frame.data() + frame.size() - ucx_ifunc::kSealSize, &hdr.seal,
                ucx_ifunc::kSealSize);
}

/* @a frame with the 8 bytes of @a tag after its image: the image inside is
 * untouched (its signature still verifies), its code id is new. */
inline std::vector<char> with_trailing_bytes(const std::vector<char> &frame,
                                             uint64_t                 tag)
{
    using namespace ucx_ifunc;
    FrameHeader hdr;
    std::memcpy(&hdr, frame.data(), sizeof(hdr));
    size_t image_end = frame_image_offset(hdr.name_length) + hdr.image_size;
    size_t payload_offset = align_up(image_end + sizeof(tag), kPayloadAlign);
    size_t frame_size =
            align_up(payload_offset + hdr.payload_size, 8) + kSealSize;
    std::vector<char> out(frame_size, 0);
    std::memcpy(out.data(), frame.data(), image_end);
    std::memcpy(out.data() + image_end, &tag, sizeof(tag));
    std::memcpy(out.data() + payload_offset, frame.data() + hdr.payload_offset,
                hdr.payload_size);
    auto &new_hdr          = frame_header(out);
    new_hdr.image_size     = uint32_t(hdr.image_size + sizeof(tag));
    new_hdr.payload_offset = uint32_t(payload_offset);
    new_hdr.frame_size     = frame_size;
    reidentify_frame(out);
    return out;
}

/* @a frame under the name @a name, as long as its own name. */
inline std::vector<char> renamed(const std::vector<char> &frame,
                                 const std::string       &name)
{
    std::vector<char> out = frame;
    if (name.size() != frame_header(out).name_length) {
        throw std::invalid_argument("renamed: the name must keep its length");
    }
    std::memcpy(out.data() + ucx_ifunc::kNameOffset, name.data(), name.size());
    reidentify_frame(out);
    return out;
}

/* The bytes of a message whose frame is @a frame, as ucp_ifunc_msg_create
 * lays one out: the frame, its reference header (seal 0) and seal, and an
 * IsaTable for no other ISA. Placed at a 16-byte aligned address, the
 * first frame.size() bytes are a ucp_ifunc_msg_t's frame. */
inline std::vector<char> message_bytes(const std::vector<char> &frame)
{
    using namespace ucx_ifunc;
    FrameHeader hdr;
    std::memcpy(&hdr, frame.data(), sizeof(hdr));
    size_t size = msg_isa_table_offset(frame.size()) + sizeof(IsaTable);
    std::vector<char> out(size, 0);
    std::memcpy(out.data(), frame.data(), frame.size());
    RefHeader ref     = ref_header(hdr); /* the template: no index, seal */
    char     *ref_dst = out.data() + msg_ref_offset(frame.size());
    std::memcpy(ref_dst, &ref, sizeof(ref));
    return out; /* the IsaTable: zeros, n_foreign 0 */
}

} // namespace test

#endif
