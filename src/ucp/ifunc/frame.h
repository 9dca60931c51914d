/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The frame: what one ifunc message looks like in the target's buffer.
 *
 *   0          64         image_offset   payload_offset          frame_size-8
 *   | header   | name     | code image   | payload | padding     | seal |
 *
 * The header is one cache line. The seal is a hash of it (it names the code
 * by its hash and carries a per-message nonce). The sender writes the seal
 * strictly after the rest of the frame; the target runs a frame only when
 * the last 8 bytes equal the seal of the header it sees. docs/design.md
 * explains why that is enough.
 */
#ifndef UCP_IFUNC_FRAME_H_
#define UCP_IFUNC_FRAME_H_

#include <ucp/api/ucp_ifunc.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ucx_ifunc {

constexpr uint32_t kFrameMagic   = 0x434e4649u; /* "IFNC" little-endian */
constexpr uint16_t kFrameVersion = 1;
constexpr size_t   kPayloadAlign = 16;
constexpr size_t   kSealSize     = sizeof(uint64_t);

/* Word 0 of a slot when no frame is there: written by the target, it tells a
 * sender that reaches the slot directly how large the slot is. */
constexpr uint32_t kEmptySlotMagic = 0x54504d45u; /* "EMPT" */

struct FrameHeader {
    uint64_t magic_word; /* kFrameMagic | version << 32 | size << 48 */
    uint64_t frame_size; /* whole frame, seal included; multiple of 8 */
    uint64_t code_id;    /* hash64 of the name and the code image, i.e.
                                of the bytes [kNameOffset, image end) */
    uint64_t nonce;      /* unique per message */
    uint64_t payload_size;
    uint32_t payload_offset; /* multiple of kPayloadAlign, after the image */
    uint32_t image_size;     /* the image follows the name */
    uint32_t name_length;    /* 1 to UCP_IFUNC_NAME_MAX */
    uint32_t reserved;       /* 0 */
    uint64_t seal;           /* frame_seal() of the bytes above */
};

static_assert(sizeof(FrameHeader) == 64, "frame header layout");
static_assert(offsetof(FrameHeader, seal) == 56, "frame header layout");

/* The name: NUL-terminated, zero-padded to a multiple of 8. */
constexpr size_t kNameOffset   = sizeof(FrameHeader);
constexpr size_t kMinFrameSize = sizeof(FrameHeader) + 8 + kSealSize;

constexpr size_t align_up(size_t value, size_t align)
{
    return (value + align - 1) & ~(align - 1);
}

constexpr size_t frame_image_offset(size_t name_length)
{
    return kNameOffset + align_up(name_length + 1, 8);
}

constexpr uint64_t frame_magic_word()
{
    return kFrameMagic | (uint64_t(kFrameVersion) << 32) |
           (uint64_t(sizeof(FrameHeader)) << 48);
}

/* 64-bit hash of a byte string; fast on whole words. Not cryptographic: it
 * names code images and detects torn or stale headers. */
uint64_t hash64(const void *data, size_t size);

/* The seal of a header: never 0, which marks "no seal yet". */
inline uint64_t frame_seal(const FrameHeader &hdr)
{
    uint64_t h = hash64(&hdr, offsetof(FrameHeader, seal));
    return h ? h : 1;
}

/* Word 0 of an empty slot of @a capacity bytes (stored in 8-byte units). */
inline uint64_t empty_slot_word(size_t capacity)
{
    uint64_t units = capacity / 8;
    if (units > UINT32_MAX) {
        units = UINT32_MAX;
    }
    return kEmptySlotMagic | (units << 32);
}

inline bool is_empty_slot_word(uint64_t word)
{
    return uint32_t(word) == kEmptySlotMagic;
}

inline size_t empty_slot_capacity(uint64_t word)
{
    return size_t(word >> 32) * 8;
}

/* Shared-memory words are read and written as 8-byte atomics: the peer (or
 * the transport on its behalf) writes them concurrently. */
inline std::atomic<uint64_t> *slot_word(void *base, size_t offset)
{
    return reinterpret_cast<std::atomic<uint64_t> *>(static_cast<char *>(base) +
                                                     offset);
}

/* Copy the header out of a buffer that may be changing under us. */
inline void snapshot_header(const void *buffer, FrameHeader *hdr)
{
    uint64_t words[sizeof(FrameHeader) / 8];
    for (size_t i = 0; i < sizeof(FrameHeader) / 8; ++i) {
        words[i] = slot_word(const_cast<void *>(buffer), i * 8)
                           ->load(std::memory_order_relaxed);
    }
    std::memcpy(hdr, words, sizeof(*hdr));
}

/* Checks the sizes and offsets of a sealed header against the buffer it
 * arrived in. Logs one line and returns the status to report when it is not
 * acceptable. The name is checked where the code is linked. */
ucs_status_t frame_validate(const FrameHeader &hdr, size_t buffer_size);

/* Whether @a name is a valid ifunc name. */
bool ifunc_name_valid(const char *name);

/* The bytes of every frame of ifunc @a name up to the end of its image:
 * header template, name, image. The header's code id is set. */
std::vector<char> frame_prefix(const char *name, const void *image,
                               size_t image_size);

} // namespace ucx_ifunc

#endif
