/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "create": building a message from a registered ifunc or from code
 * received from a peer (header template, name and code image in one copy,
 * the payload written in place by NAME_payload_init, in the convention of
 * the library (registry.h), or copied from the caller, then the seal;
 * after the frame, the header and
 * seal of its reference form, then the frames for the library's other ISAs,
 * multi_isa.h), and releasing it.
 */
#include "ucp/ifunc/deliver/msg.h"

#include "ucp/ifunc/base/api_guard.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/deliver/multi_isa.h"
#include "ucp/ifunc/load/registry.h"
#include "ucp/ifunc/base/tls.h"

#include <ucs/debug/log_def.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>

using namespace ucx_ifunc;

namespace {

/* A message's frame lives in a block: this header, then the frame. A
 * thread keeps the last few blocks its messages were freed from and builds
 * its next messages in them, so that code which sends itself on at every
 * hop allocates nothing and, when the block held the same library's last
 * message, copies no code image either. malloc's 16-byte alignment is all
 * the format needs (kPayloadAlign); posix_memalign left fragments behind
 * whose consolidation cost more than the rest of a build. */
struct alignas(16) Block {
    uint64_t prefix_serial; /* Library::serial of the prefix it holds, or 0 */
    size_t   capacity;      /* bytes for the frame */
};
static_assert(sizeof(Block) % kPayloadAlign == 0, "frames stay aligned");
static_assert(alignof(std::max_align_t) >= kPayloadAlign,
              "malloc aligns payloads");

constexpr size_t kKeptBlocks      = 4;
constexpr size_t kMaxKeptCapacity = 16384;

struct KeptBlocks {
    std::array<Block *, kKeptBlocks> blocks{};
    size_t                           count = 0;

    ~KeptBlocks();
};
UCX_IFUNC_TLS KeptBlocks kept_blocks;
/* Trivially destructible, so a message freed while the thread exits,
 * after kept_blocks is gone, is freed outright. */
UCX_IFUNC_TLS bool kept_blocks_gone = false;

KeptBlocks::~KeptBlocks()
{
    kept_blocks_gone = true;
    for (size_t i = 0; i < count; ++i) {
        std::free(blocks[i]);
    }
}

char *block_frame(Block *block)
{
    return reinterpret_cast<char *>(block + 1);
}

/* A block for a frame of @a capacity bytes: one this thread kept, with the
 * prefix of library @a serial if there is one; nullptr if out of memory.
 * With @a zeroed, a new block comes from calloc: for a block too large to
 * be kept, fresh zero memory costs less than clearing it afterwards. */
Block *take_block(uint64_t serial, size_t capacity, bool zeroed)
{
    if (!kept_blocks_gone) {
        KeptBlocks &kept = kept_blocks;
        size_t      pick = kept.count;
        for (size_t i = 0; i < kept.count; ++i) {
            if (kept.blocks[i]->capacity >= capacity) {
                pick = i;
                if (kept.blocks[i]->prefix_serial == serial) {
                    break;
                }
            }
        }
        if (pick < kept.count) {
            Block *block      = kept.blocks[pick];
            kept.blocks[pick] = kept.blocks[--kept.count];
            return block;
        }
    }
    /* Rounded up, so that messages of nearby sizes share blocks. */
    capacity    = align_up(capacity, 256);
    auto *block = static_cast<Block *>(
            zeroed ? std::calloc(1, sizeof(Block) + capacity)
                   : std::malloc(sizeof(Block) + capacity));
    if (block != nullptr) {
        block->prefix_serial = 0;
        block->capacity      = capacity;
    }
    return block;
}

void give_block(Block *block)
{
    if (!kept_blocks_gone && (block->capacity <= kMaxKeptCapacity)) {
        KeptBlocks &kept = kept_blocks;
        if (kept.count < kKeptBlocks) {
            kept.blocks[kept.count++] = block;
            return;
        }
    }
    std::free(block);
}

struct BlockDeleter {
    void operator()(Block *block) const { give_block(block); }
};
using BlockOwner = std::unique_ptr<Block, BlockDeleter>;

/* What a payload writer leaves of the payload area. */
enum class PayloadFill {
    all,    /* it writes every byte it reports (a copied payload) */
    partial /* it may leave bytes unwritten: they must be zero, not what the
               buffer held before (a freed message's bytes) */
};

/* Builds a message of @a lib whose payload is @a bound bytes at most,
 * written in place by @a write_payload(payload, size_p): it sets *size_p to
 * the bytes used, or logs and returns an error. A template, not a
 * std::function: code that forwards itself builds a message per hop. */
template <typename PayloadWriter>
ucs_status_t create_message(const Library &lib, size_t bound, PayloadFill fill,
                            const PayloadWriter &write_payload,
                            ucp_ifunc_msg_t     *msg_p)
{
    const std::vector<char> &prefix = lib.frame_prefix;
    const char              *name   = lib.name().c_str();

    size_t payload_offset = align_up(prefix.size(), kPayloadAlign);
    if (bound > SIZE_MAX / 2 - payload_offset) {
        ucs_error("ifunc '%s': a payload of %zu bytes is more than a frame "
                  "can hold",
                  name, bound);
        return UCS_ERR_EXCEEDS_LIMIT;
    }

    size_t capacity = msg_isa_table_offset(align_up(payload_offset + bound, 8) +
                                           kSealSize) +
                      align_up(sizeof(IsaTable), 64) +
                      foreign_prefixes_size(lib);
    /* Blocks kept for reuse are at most kMaxKeptCapacity, so a larger frame
     * always gets a new block, which calloc gives zeroed. */
    bool       clear_payload = (fill == PayloadFill::partial);
    bool       zeroed_block  = clear_payload && (capacity > kMaxKeptCapacity);
    BlockOwner block(take_block(lib.serial, capacity, zeroed_block));
    if (block == nullptr) {
        ucs_error("ifunc '%s': cannot allocate a %zu-byte frame", name,
                  capacity);
        return UCS_ERR_NO_MEMORY;
    }

    /* Header template, name and code in one copy, unless the buffer still
     * holds them from this library's last message; the payload is written
     * in place. */
    char *bytes = block_frame(block.get());
    if (block->prefix_serial != lib.serial) {
        std::memcpy(bytes, prefix.data(), prefix.size());
        std::memset(bytes + prefix.size(), 0, payload_offset - prefix.size());
        block->prefix_serial = lib.serial;
    }

    if (clear_payload && !zeroed_block) {
        std::memset(bytes + payload_offset, 0, bound);
    }
    size_t       payload_size = bound;
    ucs_status_t status = write_payload(bytes + payload_offset, &payload_size);
    if (status != UCS_OK) {
        return status;
    }

    size_t frame_size = align_up(payload_offset + payload_size, 8) + kSealSize;
    std::memset(bytes + payload_offset + payload_size, 0,
                frame_size - kSealSize - payload_offset - payload_size);

    auto *hdr           = reinterpret_cast<FrameHeader *>(bytes);
    hdr->frame_size     = frame_size;
    hdr->nonce          = next_nonce();
    hdr->payload_offset = uint32_t(payload_offset);
    hdr->payload_size   = payload_size;
    hdr->seal           = frame_seal(*hdr);
    std::memcpy(bytes + frame_size - kSealSize, &hdr->seal, kSealSize);

    /* The template of the reference frame's header, for a channel that
     * sends the code only once (frame.h). */
    RefHeader ref     = ref_header(*hdr);
    char     *ref_dst = bytes + msg_ref_offset(frame_size);
    std::memcpy(ref_dst, &ref, sizeof(ref));
    std::memset(ref_dst + sizeof(ref), 0, kSealSize);

    ucp_ifunc_msg_t msg = {bytes, frame_size};
    write_isa_table(lib, msg);

    block.release(); /* given back by ucp_ifunc_msg_free */
    *msg_p = msg;
    return UCS_OK;
}

/* A message whose payload the library's payload functions write. */
ucs_status_t create_from_source_args(const Library &lib, void *source_args,
                                     size_t           source_args_size,
                                     ucp_ifunc_msg_t *msg_p)
{
    const char *name = lib.name().c_str();
    if (lib.from_memory) {
        ucs_error("ifunc '%s': code registered from images "
                  "(ucp_ifunc_code_register) has no payload functions; send "
                  "a payload from memory (ucp_ifunc_peer_send_nbx, or "
                  "ucp_ifunc_msg_build with UCP_IFUNC_MSG_FIELD_PAYLOAD)",
                  name);
        return UCS_ERR_UNSUPPORTED;
    }
    if (!lib.has_payload_functions()) {
        ucs_error("ifunc '%s': this handle is of code received from a peer, "
                  "which has no payload functions; build its messages from a "
                  "payload (ucp_ifunc_msg_build with "
                  "UCP_IFUNC_MSG_FIELD_PAYLOAD)",
                  name);
        return UCS_ERR_INVALID_PARAM;
    }
    size_t bound = lib.payload_bound(source_args, source_args_size);
    return create_message(
            lib, bound, PayloadFill::partial,
            [&](void *payload, size_t *payload_size) {
                int result;
                if (lib.convention == PayloadConvention::paper) {
                    /* The payload is the bound: nothing is reported back. */
                    result = lib.paper_payload_init(payload, bound, source_args,
                                                    source_args_size);
                } else {
                    result = lib.slides_payload_init(source_args,
                                                     source_args_size, payload,
                                                     payload_size);
                }
                if (result != 0) {
                    ucs_error("ifunc '%s': %s_payload_init failed (returned "
                              "%d)",
                              name, name, result);
                    return UCS_ERR_INVALID_PARAM;
                }
                if (*payload_size > bound) {
                    ucs_error("ifunc '%s': %s_payload_init used %zu bytes, "
                              "more than the %zu of %s%s",
                              name, name, *payload_size, bound, name,
                              payload_bound_suffix(lib.convention));
                    return UCS_ERR_EXCEEDS_LIMIT;
                }
                return UCS_OK;
            },
            msg_p);
}

} // namespace

namespace ucx_ifunc {

ucs_status_t msg_create(ucp_ifunc_h ifunc_h, void *source_args,
                        size_t source_args_size, ucp_ifunc_msg_t *msg_p)
{
    if ((ifunc_h == nullptr) || (msg_p == nullptr)) {
        ucs_error("ucp_ifunc_msg_create: ifunc_h and msg_p must not be "
                  "NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    return create_from_source_args(*ifunc_h->library, source_args,
                                   source_args_size, msg_p);
}

ucs_status_t msg_build(ucp_ifunc_h                   ifunc_h,
                       const ucp_ifunc_msg_params_t *params,
                       ucp_ifunc_msg_t              *msg_p)
{
    constexpr uint64_t kPayload = UCP_IFUNC_MSG_FIELD_PAYLOAD;
    constexpr uint64_t kArgs    = UCP_IFUNC_MSG_FIELD_SOURCE_ARGS;
    uint64_t           mask     = (params != nullptr) ? params->field_mask : 0;
    if ((ifunc_h == nullptr) || (msg_p == nullptr) ||
        ((mask != kPayload) && (mask != kArgs)) ||
        ((mask == kPayload) && (params->payload == nullptr) &&
         (params->payload_size > 0))) {
        ucs_error("ucp_ifunc_msg_build: need ifunc_h, msg_p, and params "
                  "with exactly one of UCP_IFUNC_MSG_FIELD_PAYLOAD (a "
                  "payload pointer unless the size is 0) and "
                  "UCP_IFUNC_MSG_FIELD_SOURCE_ARGS");
        return UCS_ERR_INVALID_PARAM;
    }
    if (mask == kArgs) {
        return create_from_source_args(*ifunc_h->library, params->source_args,
                                       params->source_args_size, msg_p);
    }
    size_t size = params->payload_size;
    return create_message(
            *ifunc_h->library, size, PayloadFill::all,
            [&](void *payload, size_t *payload_size) {
                if (size > 0) {
                    std::memcpy(payload, params->payload, size);
                }
                *payload_size = size;
                return UCS_OK;
            },
            msg_p);
}

void msg_free(ucp_ifunc_msg_t msg)
{
    if (msg.frame != nullptr) {
        give_block(reinterpret_cast<Block *>(static_cast<char *>(msg.frame) -
                                             sizeof(Block)));
    }
}

} // namespace ucx_ifunc
