/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The frame: what one ifunc message looks like in the target's buffer.
 *
 *   0          72         image_offset   payload_offset          frame_size-8
 *   | header   | name     | code image   | payload | padding     | seal |
 *
 * The seal is a hash of the header (which names the code by its code id,
 * code_id.h, and carries a per-message nonce). The sender writes the seal
 * strictly after the rest of the frame; the target runs a frame only when
 * the last 8 bytes equal the seal of the header it sees. docs/design.md
 * explains why that is enough.
 *
 * The envelope: what every format version keeps, so that a target can tell
 * when a frame of a version it does not read is complete, and take it out
 * of its slot instead of leaving the slot blocked:
 *  - word 0: kFrameMagic | version << 32 | header size << 48, the header
 *    size a multiple of 8 from kMinHeaderSize to kMaxHeaderSize;
 *  - word 1: the frame size, seal included, a multiple of 8;
 *  - word 3: the nonce; its high 32 bits identify the sending process;
 *  - the header's last word: the seal, hash64() of the header's bytes
 *    before it (1 where that is 0);
 *  - the frame's last word: the seal again, written last.
 */
#ifndef UCP_IFUNC_FRAME_H_
#define UCP_IFUNC_FRAME_H_

#include "ucp/ifunc/format/code_id.h"
#include "ucp/ifunc/base/peer_log.h"

#include <ucp/api/ucp_ifunc.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ucx_ifunc {

constexpr uint32_t kFrameMagic = 0x434e4649u; /* "IFNC" little-endian */
/* A frame that carries its code. Version 1 (ucx-ifunc 0.1) named its code by
 * a 64-bit hash that is not cryptographic: targets refuse it. */
constexpr uint16_t kFrameVersion       = 3;
constexpr uint16_t kFrameVersionLegacy = 1;
/* A frame that names its code instead (code sent once, on the channel):
 * by the index the target gave it (CodeCache::lookup_index), which the
 * source learnt from the channel's control block. A 48-byte header
 * (RefHeader) and the payload, no trailer. Its seal, the header's last word, is written last:
 * the payload first, then the header with seal 0, then the seal. The
 * target reads one cache line to see it complete; 8 bytes of payload fit
 * that line. */
constexpr uint16_t kRefFrameVersion = 3;
constexpr size_t   kPayloadAlign    = 16;
constexpr size_t   kSealSize        = sizeof(uint64_t);
constexpr size_t   kMinHeaderSize   = 48;   /* of any version (envelope) */
constexpr size_t   kMaxHeaderSize   = 4096; /* of any version (envelope) */

/* Word 0 of a slot when no frame is there: written by the target, it tells a
 * sender that reaches the slot directly how large the slot is. */
constexpr uint32_t kEmptySlotMagic = 0x54504d45u; /* "EMPT" */

/* The code id is split around the nonce, which the envelope keeps in word 3:
 * code_id_lo is word 2, code_id_hi word 4. */
struct FrameHeader {
    uint64_t magic_word; /* kFrameMagic | version << 32 | size << 48 */
    uint64_t frame_size; /* whole frame, seal included; multiple of 8 */
    uint64_t code_id_lo; /* code_id_of() the name and the code image, i.e.
                            of the bytes [kNameOffset, image end) */
    uint64_t nonce;      /* unique per message */
    uint64_t code_id_hi;
    uint64_t payload_size;
    uint32_t payload_offset; /* multiple of kPayloadAlign, after the image */
    uint32_t image_size;     /* the image follows the name */
    uint32_t name_length;    /* 1 to UCP_IFUNC_NAME_MAX */
    uint16_t hop_count;      /* sends-on behind it (kMaxHopCount) */
    uint16_t report;         /* the source's report id, 0: none asked */
    uint64_t seal;           /* frame_seal() of the bytes above */
};

static_assert(sizeof(FrameHeader) == 72, "frame header layout");
static_assert(offsetof(FrameHeader, seal) == 64, "frame header layout");
static_assert((offsetof(FrameHeader, frame_size) == 8) &&
                      (offsetof(FrameHeader, nonce) == 24),
              "frame envelope");

/* The header of a reference frame; the payload follows it. */
struct RefHeader {
    uint64_t magic_word; /* kFrameMagic | 3 << 32 | 48 << 48 */
    uint64_t frame_size; /* header and payload; multiple of 8 */
    uint64_t code_index; /* of the code it runs, the target's index of it */
    uint64_t nonce;      /* the message's, as in its full frame */
    uint32_t payload_size;
    uint16_t hop_count; /* as in its full frame */
    uint16_t report;    /* as in its full frame */
    uint64_t seal;      /* hash64 of the bytes above; never 0 */
};

static_assert(sizeof(RefHeader) == 48, "reference header layout");
static_assert((offsetof(RefHeader, frame_size) == 8) &&
                      (offsetof(RefHeader, nonce) == 24),
              "reference frame envelope");

/* How many times running code sent a message on, one message to the next
 * (hop_count in both headers; 0 for a message the host sent): a target
 * refuses the sends of a message whose count reached its
 * UCX_IFUNC_SANDBOX_HOPS (docs/security.md). Counting up from 0, rather
 * than down from a limit the source chose, keeps the limit the target's
 * and every message from host code as it was. An active message's
 * reference has no room for it: a message with a count travels whole
 * there (am.cc). */
constexpr uint16_t kMaxHopCount = UINT16_MAX;

/* Sets the hop count of the message whose full frame (@a frame_size
 * bytes) starts at @a frame, and of the template of its reference frame
 * behind it (msg_ref_offset()), sealing both again. */
void frame_set_hop_count(char *frame, size_t frame_size, uint16_t hop_count);

/* A delivery report (docs/design.md, "Delivery reports"): the source's id
 * of a message whose outcome it asked to hear, in the full frame's header
 * and its reference template's, 0 where none is asked: what the target
 * names in its report. A frame of a message without one is what it was
 * before reports existed. Sets it in the message whose full frame (@a
 * frame_size bytes) starts at @a frame, sealing both headers again. */
void frame_set_report(char *frame, size_t frame_size, uint16_t report);

/* The name: NUL-terminated, zero-padded to a multiple of 8. */
constexpr size_t kNameOffset   = sizeof(FrameHeader);
constexpr size_t kMinFrameSize = sizeof(FrameHeader) + 8 + kSealSize;

template <typename Header>
CodeId header_code_id(const Header &hdr)
{
    return CodeId{hdr.code_id_lo, hdr.code_id_hi};
}

template <typename Header>
void set_header_code_id(Header *hdr, CodeId id)
{
    hdr->code_id_lo = id.lo;
    hdr->code_id_hi = id.hi;
}

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

constexpr uint64_t ref_magic_word()
{
    return kFrameMagic | (uint64_t(kRefFrameVersion) << 32) |
           (uint64_t(sizeof(RefHeader)) << 48);
}

constexpr unsigned frame_version(uint64_t word0)
{
    return unsigned(word0 >> 32) & 0xffff;
}

constexpr size_t frame_header_size(uint64_t word0)
{
    return size_t(word0 >> 48);
}

/* A message keeps, after its full frame (at msg_ref_offset()), the header
 * of its reference frame without a code index (0) and without a seal (0),
 * then a word that is 0: a channel's send copies it, sets the index the
 * target gave and seals it (ref_header_for()). */
constexpr size_t msg_ref_offset(size_t frame_size)
{
    return align_up(frame_size, 64);
}

constexpr size_t kMsgRefSize = sizeof(RefHeader) + kSealSize;

/* A new nonce: the process's random 32-bit source id in the high half, a
 * counter in the low half. */
uint64_t next_nonce();

constexpr uint32_t nonce_source_id(uint64_t nonce)
{
    return uint32_t(nonce >> 32);
}

/* 64-bit hash of a byte string; fast on whole words. Not cryptographic: it
 * detects torn or stale headers (seals), and checksums payloads in tests. */
uint64_t hash64(const void *data, size_t size);

/* The seal of a header: never 0, which marks "no seal yet". */
inline uint64_t frame_seal(const FrameHeader &hdr)
{
    uint64_t h = hash64(&hdr, offsetof(FrameHeader, seal));
    return h ? h : 1;
}

/* The one check that a frame is whole, for every path that receives one
 * (poll.cc from a slot, am.cc from active message data): @a hdr is its
 * header, @a trailer its last 8 bytes, @a frame_size its size as the
 * receiver sees it (the slot's size word, or the data's length). A frame
 * is whole when its header carries the header's seal (no torn or stale
 * header), says that size, and the trailer holds the same seal (the sender
 * writes it last). Then frame_validate() checks the rest. */
inline bool frame_complete(const FrameHeader &hdr, uint64_t trailer,
                           uint64_t frame_size)
{
    return (hdr.magic_word == frame_magic_word()) && (hdr.seal != 0) &&
           (hdr.frame_size == frame_size) && (trailer == hdr.seal) &&
           (frame_seal(hdr) == hdr.seal);
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

/* Whether the header of @a header_size bytes (envelope rules: a multiple of
 * 8, at most kMaxHeaderSize) at @a buffer carries its seal, for a frame of
 * any version. Returns the seal in @a seal_p. */
bool envelope_sealed(const void *buffer, size_t header_size, uint64_t *seal_p);

/* Checks the sizes and offsets of a sealed header against the buffer it
 * arrived in. Logs one warning through @a log (the frame is a peer's) and
 * returns the status to report when it is not acceptable. The name is
 * checked where the code is linked. */
ucs_status_t frame_validate(const FrameHeader &hdr, size_t buffer_size,
                            PeerLog &log);

/* The seal of a reference header. */
inline uint64_t ref_seal(const RefHeader &hdr)
{
    uint64_t h = hash64(&hdr, offsetof(RefHeader, seal));
    return h ? h : 1;
}

/* What one send writes: parts at their offsets from the slot's start, in
 * this order (the frame without its trailer; or, for another ISA's frame,
 * its header, name and image, then the payload; or a reference frame's
 * payload, then its header with seal 0), then the seal at seal_offset.
 * All of it lives in the message. */
struct OutFrame {
    struct Part {
        const void *data;
        size_t      size;
        size_t      offset;
    };
    Part            parts[2];
    size_t          n_parts;
    const uint64_t *seal;
    size_t          seal_offset;
    size_t          size; /* of the whole frame, seal included */
};

/* The header of the reference frame that stands for the full frame whose
 * header is @a full: same nonce and payload; no code index, no seal. */
RefHeader ref_header(const FrameHeader &full);

/* @a templ (a ref_header()) for the code the target indexes @a code_index,
 * its seal in @a seal_p and 0 in its seal word (the seal goes last). */
RefHeader ref_header_for(const RefHeader &templ, uint64_t code_index,
                         uint64_t *seal_p);

/* Checks a sealed reference header against the buffer (or message) of
 * @a buffer_size bytes it arrived in; logs one warning through @a log and
 * returns the status to report when it is not acceptable. */
ucs_status_t ref_validate(const RefHeader &hdr, size_t buffer_size,
                          PeerLog &log);

/* Whether @a name is a valid ifunc name. */
bool ifunc_name_valid(const char *name);

/* The bytes of every frame of ifunc @a name up to the end of its image:
 * header template, name, image. The header's code id is set: @a code_id
 * where the caller knows it already, else computed. */
std::vector<char> frame_prefix(const char *name, const void *image,
                               size_t        image_size,
                               const CodeId *code_id = nullptr);

} // namespace ucx_ifunc

#endif
