/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "create": building a frame on the source; and what both sides need
 * to know about frames (hash, seal, validation of a received header).
 */
#include "frame.h"

#include "api_guard.h"
#include "image.h"
#include "registry.h"

#include <ucs/debug/log_def.h>

#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>

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

uint64_t next_nonce()
{
    static const uint64_t        salt = nonce_salt();
    static std::atomic<uint32_t> counter{0};
    return salt | counter.fetch_add(1, std::memory_order_relaxed);
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
                               size_t image_size)
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
    hdr.code_id =
            hash64(prefix.data() + kNameOffset, prefix.size() - kNameOffset);
    std::memcpy(prefix.data(), &hdr, sizeof(hdr));
    return prefix;
}

ucs_status_t frame_validate(const FrameHeader &hdr, size_t buffer_size)
{
    /* All arithmetic in 64 bits on values of at most 32 bits, or checked
     * against frame_size first: nothing can wrap. */
    const uint64_t frame_size = hdr.frame_size;
    const uint64_t body_end   = frame_size - kSealSize;
    const char    *problem;

    if ((frame_size < kMinFrameSize) || (frame_size % 8)) {
        problem = "bad frame size";
    } else if (frame_size > buffer_size) {
        ucs_error("ifunc frame of %llu bytes does not fit the %zu-byte buffer "
                  "it was written to; message dropped (give the target a "
                  "larger buffer or send a smaller payload)",
                  static_cast<unsigned long long>(frame_size), buffer_size);
        return UCS_ERR_EXCEEDS_LIMIT;
    } else if ((hdr.name_length == 0) ||
               (hdr.name_length > UCP_IFUNC_NAME_MAX) || (hdr.reserved != 0)) {
        problem = "bad name length";
    } else if ((hdr.image_size < sizeof(ucp_ifunc_image_desc_t)) ||
               (frame_image_offset(hdr.name_length) + uint64_t(hdr.image_size) >
                hdr.payload_offset)) {
        problem = "code image outside the frame";
    } else if ((hdr.payload_offset % kPayloadAlign) ||
               (hdr.payload_offset > body_end) ||
               (hdr.payload_size > body_end - hdr.payload_offset)) {
        problem = "payload outside the frame";
    } else {
        return UCS_OK;
    }
    ucs_error("malformed ifunc frame (%s); message dropped", problem);
    return UCS_ERR_INVALID_PARAM;
}

} // namespace ucx_ifunc

using namespace ucx_ifunc;

ucs_status_t ucp_ifunc_msg_create(ucp_ifunc_h ifunc_h, void *source_args,
                                  size_t           source_args_size,
                                  ucp_ifunc_msg_t *msg_p)
{
    return api_call(__func__, [&]() {
        if ((ifunc_h == nullptr) || (msg_p == nullptr)) {
            ucs_error("ucp_ifunc_msg_create: ifunc_h and msg_p must not be "
                      "NULL");
            return UCS_ERR_INVALID_PARAM;
        }
        const Library           &lib    = *ifunc_h->library;
        const std::vector<char> &prefix = lib.frame_prefix;
        const char              *name   = lib.name().c_str();

        size_t payload_offset = align_up(prefix.size(), kPayloadAlign);
        size_t bound = lib.payload_bound(source_args, source_args_size);
        if (bound > SIZE_MAX / 2 - payload_offset) {
            ucs_error("ifunc '%s': %s_payload_bound returned %zu bytes, more "
                      "than a frame can hold",
                      name, name, bound);
            return UCS_ERR_EXCEEDS_LIMIT;
        }

        size_t capacity = align_up(payload_offset + bound, 8) + kSealSize;
        void  *frame    = nullptr;
        if (posix_memalign(&frame, 64, capacity) != 0) {
            ucs_error("ifunc '%s': cannot allocate a %zu-byte frame", name,
                      capacity);
            return UCS_ERR_NO_MEMORY;
        }
        std::unique_ptr<void, decltype(&std::free)> owner(frame, std::free);

        /* Header template, name and code in one copy; the payload is
         * written in place. */
        char *bytes = static_cast<char *>(frame);
        std::memcpy(bytes, prefix.data(), prefix.size());
        std::memset(bytes + prefix.size(), 0, payload_offset - prefix.size());

        size_t payload_size = bound;
        int    result       = lib.payload_init(source_args, source_args_size,
                                               bytes + payload_offset, &payload_size);
        if (result != 0) {
            ucs_error("ifunc '%s': %s_payload_init failed (returned %d)", name,
                      name, result);
            return UCS_ERR_INVALID_PARAM;
        }
        if (payload_size > bound) {
            ucs_error("ifunc '%s': %s_payload_init used %zu bytes, more than "
                      "the %zu of %s_payload_bound",
                      name, name, payload_size, bound, name);
            return UCS_ERR_EXCEEDS_LIMIT;
        }

        size_t frame_size =
                align_up(payload_offset + payload_size, 8) + kSealSize;
        std::memset(bytes + payload_offset + payload_size, 0,
                    frame_size - kSealSize - payload_offset - payload_size);

        auto *hdr           = reinterpret_cast<FrameHeader *>(bytes);
        hdr->frame_size     = frame_size;
        hdr->nonce          = next_nonce();
        hdr->payload_offset = uint32_t(payload_offset);
        hdr->payload_size   = payload_size;
        hdr->seal           = frame_seal(*hdr);
        std::memcpy(bytes + frame_size - kSealSize, &hdr->seal, kSealSize);

        msg_p->frame      = owner.release(); /* freed by ucp_ifunc_msg_free */
        msg_p->frame_size = frame_size;
        return UCS_OK;
    });
}

void ucp_ifunc_msg_free(ucp_ifunc_msg_t msg)
{
    std::free(msg.frame);
}
