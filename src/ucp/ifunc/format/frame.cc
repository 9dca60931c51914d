/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The frame format: what both sides need to know about frames (hash, seal,
 * nonce, the envelope every version keeps, validation of a received
 * header).
 */
#include "ucp/ifunc/format/frame.h"

#include "ucp/ifunc/format/image.h"

#include <ucs/debug/log_def.h>

#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

namespace ucx_ifunc {
namespace {

constexpr uint64_t kHashKey[] = {0xa0761d6478bd642full, 0xe7037ed1a0b428dbull,
                                 0x8ebc6af09c88c6e3ull, 0x589965cc75374cc3ull};

/* Multiply into 128 bits and fold: every input bit reaches every output bit. */
inline uint64_t mix(uint64_t a, uint64_t b)
{
    unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
    return uint64_t(product) ^ uint64_t(product >> 64);
}

inline uint64_t load64(const unsigned char *p)
{
    uint64_t value;
    std::memcpy(&value, p, sizeof(value));
    return value;
}

/* The high half of every nonce: random per process, so that frames from
 * different senders (or runs) never share a seal by accident. */
uint64_t nonce_salt()
{
    uint64_t salt = 0;
    if (getrandom(&salt, sizeof(salt), GRND_NONBLOCK) != sizeof(salt)) {
        salt = uint64_t(getpid()) ^ uint64_t(std::chrono::steady_clock::now()
                                                     .time_since_epoch()
                                                     .count());
    }
    return salt << 32;
}

bool is_ident_char(char c, bool first)
{
    return ((c >= 'a') && (c <= 'z')) || ((c >= 'A') && (c <= 'Z')) ||
           (c == '_') || (!first && (c >= '0') && (c <= '9'));
}

} // namespace

uint64_t hash64(const void *data, size_t size)
{
    const auto *p = static_cast<const unsigned char *>(data);
    uint64_t a[4] = {kHashKey[0] ^ size, kHashKey[1], kHashKey[2], kHashKey[3]};
    /* Four independent lanes, so a 120-byte header or a large image hashes
     * at several bytes per cycle. */
    for (; size >= 32; size -= 32, p += 32) {
        for (int lane = 0; lane < 4; ++lane) {
            a[lane] = mix(a[lane] ^ load64(p + 8 * lane),
                          kHashKey[(lane + 1) % 4]);
        }
    }
    int lane = 0;
    for (; size >= 8; size -= 8, p += 8, ++lane) {
        a[lane] = mix(a[lane] ^ load64(p), kHashKey[(lane + 1) % 4]);
    }
    if (size > 0) {
        unsigned char tail[8] = {};
        std::memcpy(tail, p, size);
        a[lane] = mix(a[lane] ^ load64(tail) ^ (uint64_t(size) << 56),
                      kHashKey[(lane + 1) % 4]);
    }
    return mix(mix(a[0], a[1]) ^ kHashKey[2], mix(a[2], a[3]) ^ kHashKey[3]);
}

uint64_t next_nonce()
{
    static const uint64_t        salt = nonce_salt();
    static std::atomic<uint32_t> counter{0};
    return salt | counter.fetch_add(1, std::memory_order_relaxed);
}

bool envelope_sealed(const void *buffer, size_t header_size, uint64_t *seal_p)
{
    uint64_t words[kMaxHeaderSize / 8];
    size_t   n_words = header_size / 8;
    for (size_t i = 0; i < n_words; ++i) {
        words[i] = slot_word(const_cast<void *>(buffer), i * 8)
                           ->load(std::memory_order_relaxed);
    }
    uint64_t seal = hash64(words, header_size - kSealSize);
    *seal_p       = words[n_words - 1];
    return (*seal_p != 0) && (*seal_p == (seal ? seal : 1));
}

bool ifunc_name_valid(const char *name)
{
    if (name == nullptr) {
        return false;
    }
    size_t length = 0;
    for (; name[length] != '\0'; ++length) {
        if ((length >= UCP_IFUNC_NAME_MAX) ||
            !is_ident_char(name[length], length == 0)) {
            return false;
        }
    }
    return length > 0;
}

std::vector<char> frame_prefix(const char *name, const void *image,
                               size_t image_size, const CodeId *code_id)
{
    size_t            name_length  = std::strlen(name);
    size_t            image_offset = frame_image_offset(name_length);
    std::vector<char> prefix(image_offset + image_size, 0);
    std::memcpy(prefix.data() + kNameOffset, name, name_length);
    std::memcpy(prefix.data() + image_offset, image, image_size);

    FrameHeader hdr = {};
    hdr.magic_word  = frame_magic_word();
    hdr.image_size  = uint32_t(image_size);
    hdr.name_length = uint32_t(name_length);
    set_header_code_id(&hdr, (code_id != nullptr)
                                     ? *code_id
                                     : code_id_of(prefix.data() + kNameOffset,
                                                  prefix.size() - kNameOffset));
    std::memcpy(prefix.data(), &hdr, sizeof(hdr));
    return prefix;
}

RefHeader ref_header(const FrameHeader &full)
{
    RefHeader ref    = {};
    ref.magic_word   = ref_magic_word();
    ref.frame_size   = align_up(sizeof(RefHeader) + full.payload_size, 8);
    ref.nonce        = full.nonce;
    ref.payload_size = uint32_t(full.payload_size);
    ref.hop_count    = full.hop_count;
    return ref;
}

void frame_set_hop_count(char *frame, size_t frame_size, uint16_t hop_count)
{
    auto *hdr      = reinterpret_cast<FrameHeader *>(frame);
    hdr->hop_count = hop_count;
    hdr->seal      = frame_seal(*hdr);
    std::memcpy(frame + frame_size - kSealSize, &hdr->seal, kSealSize);
    auto *ref =
            reinterpret_cast<RefHeader *>(frame + msg_ref_offset(frame_size));
    ref->hop_count = hop_count;
}

void frame_set_report(char *frame, size_t frame_size, uint16_t report)
{
    auto *hdr   = reinterpret_cast<FrameHeader *>(frame);
    hdr->report = report;
    hdr->seal   = frame_seal(*hdr);
    std::memcpy(frame + frame_size - kSealSize, &hdr->seal, kSealSize);
    auto *ref =
            reinterpret_cast<RefHeader *>(frame + msg_ref_offset(frame_size));
    ref->report = report;
}

RefHeader ref_header_for(const RefHeader &templ, uint64_t code_index,
                         uint64_t *seal_p)
{
    RefHeader ref  = templ;
    ref.code_index = code_index;
    ref.seal       = 0;
    *seal_p        = ref_seal(ref);
    return ref;
}

namespace {

/* The warnings of the checks below, out of their way: a valid frame, the
 * common case, pays for no string or log call. */
[[gnu::cold, gnu::noinline]] ucs_status_t warn_does_not_fit(PeerLog &log,
                                                            uint64_t nonce,
                                                            uint64_t frame_size,
                                                            size_t buffer_size)
{
    uint32_t source = nonce_source_id(nonce);
    ucx_ifunc_peer_warn(log, PeerProblem::malformed_frame, source,
                        "ifunc frame of %llu bytes from source 0x%08x does "
                        "not fit the %zu-byte buffer it was written to; "
                        "message dropped (give the target a larger buffer "
                        "or send a smaller payload)",
                        static_cast<unsigned long long>(frame_size), source,
                        buffer_size);
    return UCS_ERR_EXCEEDS_LIMIT;
}

[[gnu::cold, gnu::noinline]] ucs_status_t
warn_malformed(PeerLog &log, uint64_t nonce, const char *problem)
{
    uint32_t source = nonce_source_id(nonce);
    ucx_ifunc_peer_warn(log, PeerProblem::malformed_frame, source,
                        "malformed ifunc frame from source 0x%08x (%s); "
                        "message dropped",
                        source, problem);
    return UCS_ERR_INVALID_PARAM;
}

} // namespace

ucs_status_t ref_validate(const RefHeader &hdr, size_t buffer_size,
                          PeerLog &log)
{
    if (hdr.frame_size > buffer_size) {
        return warn_does_not_fit(log, hdr.nonce, hdr.frame_size, buffer_size);
    }
    if ((hdr.frame_size < sizeof(RefHeader)) || (hdr.frame_size % 8) ||
        (hdr.payload_size > hdr.frame_size - sizeof(RefHeader))) {
        return warn_malformed(log, hdr.nonce,
                              "reference frame: payload outside the frame");
    }
    return UCS_OK;
}

ucs_status_t frame_validate(const FrameHeader &hdr, size_t buffer_size,
                            PeerLog &log)
{
    /* All arithmetic in 64 bits on values of at most 32 bits, or checked
     * against frame_size first: nothing can wrap. */
    const uint64_t frame_size = hdr.frame_size;
    const uint64_t body_end   = frame_size - kSealSize;
    if ((frame_size < kMinFrameSize) || (frame_size % 8)) {
        return warn_malformed(log, hdr.nonce, "bad frame size");
    }
    if (frame_size > buffer_size) {
        return warn_does_not_fit(log, hdr.nonce, frame_size, buffer_size);
    }
    if ((hdr.name_length == 0) || (hdr.name_length > UCP_IFUNC_NAME_MAX)) {
        return warn_malformed(log, hdr.nonce, "bad name length");
    }
    if ((hdr.image_size < sizeof(ucp_ifunc_image_desc_t)) ||
        (frame_image_offset(hdr.name_length) + uint64_t(hdr.image_size) >
         hdr.payload_offset)) {
        return warn_malformed(log, hdr.nonce, "code image outside the frame");
    }
    if ((hdr.payload_offset % kPayloadAlign) ||
        (hdr.payload_offset > body_end) ||
        (hdr.payload_size > body_end - hdr.payload_offset)) {
        return warn_malformed(log, hdr.nonce, "payload outside the frame");
    }
    return UCS_OK;
}

} // namespace ucx_ifunc
