/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Channels: a ring of slots in memory the target maps, with credits, and
 * code sent once. The ring's memory starts with a control block that only
 * the target writes:
 *
 *   0     magic | version          (tells a channel from anything else)
 *   8     epoch                    (this channel, random; also in the blob)
 *   16    consumed                 (slots the target has emptied, ever)
 *   64    held[kHeldCodes]         (code ids of full frames that ran here,
 *                                   their low 64 bits, at that % kHeldCodes)
 *   576   index[kHeldCodes]        (this target's index of each of those
 *                                   codes: what references name)
 *   kRingOffset  slots x slot_size
 *
 * The source writes message n into slot n % slots only when consumed > n -
 * slots: the target empties a slot before it counts it, so the slot is no
 * longer read. It learns consumed and held[] by reading the control block:
 * directly when the ring is mapped here, else with a get, started when half
 * the ring is in flight or a message that carried code has gone out.
 *
 * Code once: the source sends a reference to code X, by the index beside
 * it, only after it has seen X in held[]. The target writes X there (and
 * first its index, code_once.h says in which order) after a frame carrying
 * X ran, so X
 * was linked before any reference to it can be written, whatever the
 * transport, lanes or protocol engine; and the channel keeps the target's
 * ifunc state, so code it ran stays linked while the channel lives.
 * docs/design.md goes through the cases.
 *
 * The blob names the ISA the target runs: the source sends the code for it
 * (multi_isa.h).
 */
#include "ucp/ifunc/base/api_guard.h"
#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/paths/channel.h"
#include "ucp/ifunc/base/config.h"
#include "ucp/ifunc/load/context.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/deliver/code_once.h"
#include "ucp/ifunc/deliver/multi_isa.h"
#include "ucp/ifunc/deliver/poll.h"
#include "ucp/ifunc/sandbox/sandbox.h"
#include "ucp/ifunc/deliver/send.h"

#include <ucs/debug/log_def.h>

#include <sys/mman.h>
#include <unistd.h>

#include <sys/random.h>

#include <algorithm>
#include <cinttypes>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

namespace ucx_ifunc {
namespace {

constexpr uint32_t kChannelMagic    = 0x48434649u; /* "IFCH" */
constexpr uint32_t kChannelVersion  = 3;  /* 3: index[], references by it */
constexpr size_t   kHeldCodes       = 64; /* the control block's format */
constexpr unsigned kDefaultSlots    = 64;
constexpr size_t   kDefaultSlotSize = 16384;
constexpr unsigned kMaxSlots        = 65536;
/* The largest ring, slots and all (1 TiB): no size in a blob can wrap. */
constexpr size_t kMaxRingBytes = size_t(1) << 40;
constexpr size_t kMinSlotSize  = 256;
constexpr size_t kStageSize    = 4096;

struct ChannelControl {
    uint64_t magic_word;
    uint64_t epoch;
    uint64_t consumed;
    uint64_t reserved[5];
    uint64_t held[kHeldCodes];
    uint64_t index[kHeldCodes];
};

static_assert(sizeof(ChannelControl) == 64 + 16 * kHeldCodes,
              "channel control layout");
static_assert(
        kHeldCodes == HeldCodes::kSize,
        "the control block's held[] is the source's table, place for place");

constexpr size_t kRingOffset = align_up(sizeof(ChannelControl), 64);

constexpr uint64_t channel_magic_word()
{
    return kChannelMagic | (uint64_t(kChannelVersion) << 32);
}

/* What ucp_ifunc_channel_pack hands to the source, followed by the rkey. */
struct ChannelBlob {
    uint64_t magic_word;
    uint64_t epoch;
    uint64_t address; /* of the control block */
    uint64_t slot_size;
    uint32_t slots;
    uint32_t rkey_size;
    uint32_t machine; /* ELF machine the target runs: which code to send */
    uint32_t reserved;
};

uint64_t random_epoch()
{
    uint64_t epoch = 0;
    if (getrandom(&epoch, sizeof(epoch), GRND_NONBLOCK) != sizeof(epoch)) {
        epoch = next_nonce();
    }
    return epoch;
}

std::atomic<uint64_t> &control_word(void *control, size_t offset)
{
    return *slot_word(control, offset);
}

constexpr size_t kConsumedOffset = offsetof(ChannelControl, consumed);

size_t held_offset(uint64_t code_id)
{
    return offsetof(ChannelControl, held) + (code_id % kHeldCodes) * 8;
}

size_t index_offset(uint64_t code_id)
{
    return offsetof(ChannelControl, index) + (code_id % kHeldCodes) * 8;
}

/* Tells the source that @a ran ran here and is held under its index, in
 * the order code_once.h (HeldCodes) reads it: id 0, index, id. */
void announce(void *control, const RanCode &ran)
{
    auto &held  = control_word(control, held_offset(ran.id.lo));
    auto &index = control_word(control, index_offset(ran.id.lo));
    if ((held.load(std::memory_order_relaxed) == ran.id.lo) &&
        (index.load(std::memory_order_relaxed) == ran.index)) {
        return;
    }
    held.store(0, std::memory_order_relaxed);
    index.store(ran.index, std::memory_order_release);
    held.store(ran.id.lo, std::memory_order_release);
}

template <typename Params, typename T>
T field_or(const Params *params, uint64_t field, T Params::*member, T fallback)
{
    return ((params != nullptr) && (params->field_mask & field))
                   ? params->*member
                   : fallback;
}

/* Whether the @a length bytes at @a address are mapped in this process. */
bool mapped_whole(const void *address, size_t length)
{
    uintptr_t page  = uintptr_t(sysconf(_SC_PAGESIZE));
    uintptr_t start = uintptr_t(address) & ~(page - 1);
    /* msync(MS_ASYNC) does nothing but fail with ENOMEM where a page of
     * the range is not mapped. */
    return msync(reinterpret_cast<void *>(start),
                 uintptr_t(address) + length - start, MS_ASYNC) == 0;
}

} // namespace
} // namespace ucx_ifunc

using namespace ucx_ifunc;

/* The target's end. */
struct ucp_ifunc_channel {
    ucp_context_h context;     /* whose ifunc state runs its messages */
    ucp_context_h mem_context; /* which maps its memory */
    std::shared_ptr<ContextState> state;
    /* The code this channel told its source about; after state, so that
     * it goes first. */
    std::unique_ptr<PeerPins> pins;
    ucp_mem_h                 memh = nullptr;
    char                     *base = nullptr;
    unsigned                  slots;
    size_t                    slot_size;
    uint64_t                  epoch;
    uint64_t                  consumed = 0;
    /* What its messages count as: a peer's channel's as the default
     * path's (channel_count_as_peer). */
    RunPath path = RunPath::channel;

    ~ucp_ifunc_channel()
    {
        if (memh != nullptr) {
            ucp_mem_unmap(mem_context, memh);
        }
    }

    char *slot(uint64_t seq) const
    {
        return base + kRingOffset + (seq % slots) * slot_size;
    }
};

/* The source's end. */
struct ucp_ifunc_channel_ep {
    ucp_worker_h worker;
    ucp_ep_h     ep;
    ucp_rkey_h   rkey = nullptr;
    uint64_t     address; /* of the control block */
    unsigned     slots;
    size_t       slot_size;
    char        *mapped = nullptr; /* the target's memory, when mapped here */

    uint64_t sent     = 0; /* messages written */
    uint64_t consumed = 0; /* as last seen */
    /* The target's ISA and what it said it holds (its held[], read as
     * credits are, or straight from the mapped ring): own_codes, or the
     * table the peer shares between its channel and active messages. */
    TargetCodes  own_codes;
    TargetCodes *codes          = &own_codes;
    uint64_t     sent_with_code = 0;
    uint64_t     sent_by_ref    = 0;
    /* The ring's held[] and index[], where it is mapped here. */
    TargetCodes::Announced announced = {nullptr, nullptr};
    /* The control block as read before the last read (put path): an
     * entry of held[] and index[] counts once two reads agree. */
    std::unique_ptr<ChannelControl> previous =
            std::make_unique<ChannelControl>();
    /* The header and seal of the reference frame in each slot, made per
     * send (they name the target's index); a put reads them until the
     * slot is used again. */
    std::vector<RefHeader> ref_headers;
    std::vector<uint64_t>  ref_seals;

    /* Put path: a read of the control block in flight, and its result. */
    bool                            reading     = false;
    bool                            read_done   = false;
    ucs_status_t                    read_status = UCS_OK;
    std::unique_ptr<ChannelControl> snapshot =
            std::make_unique<ChannelControl>();
    SealTracker seals;
    /* Set once a write could not be completed: that slot never gets its
     * seal, so the target would wait on it forever. */
    ucs_status_t failure = UCS_OK;
    /* Put path: small reference frames are gathered here, one stage per
     * slot, so that they go in one put; a stage is reused only when its
     * slot is, after the target has run the message. */
    std::vector<char> stages;
    size_t            stage_size = 0;

    ~ucp_ifunc_channel_ep()
    {
        if (codes != &own_codes) {
            codes->read_announcements(nullptr); /* the ring goes */
        }
        if (rkey != nullptr) {
            ucp_rkey_destroy(rkey);
        }
    }

    unsigned free_slots() const { return unsigned(consumed + slots - sent); }

    void learn(const ChannelControl &seen)
    {
        /* A value outside [consumed, sent] is not one the target wrote
         * (a torn read): ignore it rather than trust a slot is free. */
        if ((seen.consumed >= consumed) && (seen.consumed <= sent)) {
            consumed = seen.consumed;
        }
        codes->learn_tables(seen.held, seen.index, previous->held,
                            previous->index);
        *previous = seen;
    }

    void read_control();
    void refresh();
};

namespace {

void control_read_done(void *request, ucs_status_t status, void *user_data)
{
    auto *chep        = static_cast<ucp_ifunc_channel_ep *>(user_data);
    chep->read_status = status;
    chep->read_done   = true;
    chep->reading     = false;
    ucp_request_free(request);
}

} // namespace

/* Starts a read of the target's control block (put path). */
void ucp_ifunc_channel_ep::read_control()
{
    if (reading) {
        return;
    }
    ucp_request_param_t param;
    param.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send            = control_read_done;
    param.user_data          = this;
    ucs_status_ptr_t request = ucp_get_nbx(
            ep, snapshot.get(), sizeof(ChannelControl), address, rkey, &param);
    if (UCS_PTR_IS_PTR(request)) {
        reading = true;
    } else {
        read_status = UCS_PTR_STATUS(request);
        read_done   = true;
    }
}

/* Takes in what the target says: directly, or from the last read. */
void ucp_ifunc_channel_ep::refresh()
{
    if (mapped != nullptr) {
        auto    *control = reinterpret_cast<ChannelControl *>(mapped);
        uint64_t seen    = control_word(control, kConsumedOffset)
                                .load(std::memory_order_acquire);
        if ((seen >= consumed) && (seen <= sent)) {
            consumed = seen;
        }
        return;
    }
    if (read_done) {
        read_done = false;
        if (read_status == UCS_OK) {
            learn(*snapshot);
        } else {
            ucs_error("ifunc channel: reading the target's credits failed: "
                      "%s",
                      ucs_status_string(read_status));
        }
    }
}

namespace ucx_ifunc {

ucs_status_t channel_create_mapped_by(ucp_context_h context,
                                      ucp_context_h mem_context,
                                      const ucp_ifunc_channel_params_t *params,
                                      ucp_ifunc_channel_h *channel_p)
{
    unsigned slots =
            field_or(params, UCP_IFUNC_CHANNEL_FIELD_SLOTS,
                     &ucp_ifunc_channel_params_t::slots, kDefaultSlots);
    size_t slot_size =
            field_or(params, UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE,
                     &ucp_ifunc_channel_params_t::slot_size, kDefaultSlotSize);
    if ((context == nullptr) || (channel_p == nullptr) ||
        ((params != nullptr) &&
         (params->field_mask & ~uint64_t(UCP_IFUNC_CHANNEL_FIELD_SLOTS |
                                         UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE))) ||
        (slots == 0) || (slots > kMaxSlots) || (slot_size < kMinSlotSize) ||
        (slot_size % 64) || (slot_size > kMaxRingBytes / slots)) {
        ucs_error("ucp_ifunc_channel_create: need a context, 1 to %u "
                  "slots of a multiple of 64 bytes, at least %zu (got "
                  "context %p, %u slots of %zu bytes)",
                  kMaxSlots, kMinSlotSize, static_cast<void *>(context), slots,
                  slot_size);
        return UCS_ERR_INVALID_PARAM;
    }

    auto channel         = std::make_unique<ucp_ifunc_channel>();
    channel->context     = context;
    channel->mem_context = mem_context;
    channel->slots       = slots;
    channel->slot_size   = slot_size;
    channel->epoch       = random_epoch();

    ucp_mem_map_params_t map = {};
    map.field_mask =
            UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    map.length          = kRingOffset + slots * slot_size;
    map.flags           = UCP_MEM_MAP_ALLOCATE;
    ucs_status_t status = ucp_mem_map(mem_context, &map, &channel->memh);
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_channel_create: ucp_mem_map of %zu bytes "
                  "failed: %s",
                  map.length, ucs_status_string(status));
        channel->memh = nullptr;
        return status;
    }
    ucp_mem_attr_t attr;
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    status          = ucp_mem_query(channel->memh, &attr);
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_channel_create: ucp_mem_query failed: %s",
                  ucs_status_string(status));
        return status;
    }
    channel->base = static_cast<char *>(attr.address);
    /* The control block, and the first line of each slot (a slot is
         * read beyond it only once a sealed header is there): the rest is
         * touched as messages use it, so that a ring with large slots costs
         * memory only as far as its messages reach. */
    std::memset(channel->base, 0, kRingOffset);
    for (unsigned i = 0; i < slots; ++i) {
        std::memset(channel->slot(i), 0, 64);
    }
    auto *control       = reinterpret_cast<ChannelControl *>(channel->base);
    control->magic_word = channel_magic_word();
    control->epoch      = channel->epoch;
    channel->state      = share_target_state(context);
    channel->pins       = std::make_unique<PeerPins>(channel->state->code);
    *channel_p          = channel.release();
    return UCS_OK;
}

ucs_status_t channel_create(ucp_context_h                     context,
                            const ucp_ifunc_channel_params_t *params,
                            ucp_ifunc_channel_h              *channel_p)
{
    return channel_create_mapped_by(context, context, params, channel_p);
}

ucs_status_t channel_pack(ucp_ifunc_channel_h channel, void **blob_p,
                          size_t *blob_size_p)
{
    if ((channel == nullptr) || (blob_p == nullptr) ||
        (blob_size_p == nullptr)) {
        ucs_error("ucp_ifunc_channel_pack: channel, blob_p and "
                  "blob_size_p must not be NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    void        *rkey_buffer;
    size_t       rkey_size;
    ucs_status_t status = ucp_rkey_pack(channel->mem_context, channel->memh,
                                        &rkey_buffer, &rkey_size);
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_channel_pack: ucp_rkey_pack failed: %s",
                  ucs_status_string(status));
        return status;
    }
    std::unique_ptr<void, decltype(&ucp_rkey_buffer_release)> rkey(
            rkey_buffer, ucp_rkey_buffer_release);
    size_t size  = sizeof(ChannelBlob) + rkey_size;
    auto  *bytes = static_cast<char *>(std::malloc(size));
    if (bytes == nullptr) {
        ucs_error("ucp_ifunc_channel_pack: out of memory");
        return UCS_ERR_NO_MEMORY;
    }
    ChannelBlob blob = {channel_magic_word(),
                        channel->epoch,
                        reinterpret_cast<uint64_t>(channel->base),
                        channel->slot_size,
                        channel->slots,
                        uint32_t(rkey_size),
                        arch::elf_machine(),
                        0};
    std::memcpy(bytes, &blob, sizeof(blob));
    std::memcpy(bytes + sizeof(blob), rkey_buffer, rkey_size);
    *blob_p      = bytes;
    *blob_size_p = size;
    return UCS_OK;
}

void channel_blob_release(void *blob)
{
    std::free(blob);
}

ucs_status_t channel_poll(ucp_ifunc_channel_h channel, unsigned max_count,
                          void *target_args, unsigned *count_p)
{
    if ((channel == nullptr) || (max_count == 0)) {
        ucs_error("ucp_ifunc_channel_poll: need a channel and a count "
                  "of at least 1 (got %p, %u)",
                  static_cast<void *>(channel), max_count);
        return UCS_ERR_INVALID_PARAM;
    }
    sandbox::SignalBatch signals; /* once per poll, if needed */
    ucs_status_t         first_error = UCS_OK;
    unsigned             count       = 0;
    auto                *control     = channel->base;
    for (; count < max_count; ++count) {
        RanCode      ran_code;
        ucs_status_t status;
        try {
            status = poll_slot(channel->context, channel->state.get(),
                               channel->slot(channel->consumed + count),
                               channel->slot_size, target_args, channel->path,
                               channel->pins.get(), &ran_code);
        } catch (const std::exception &e) {
            /* The frame was claimed and its slot emptied: count it, or
             * the ring stops here. */
            ucs_error("ucp_ifunc_channel_poll: message dropped: %s", e.what());
            channel->state->counters.count_reject(Reject::other);
            status = UCS_ERR_NO_MEMORY;
        }
        if (status == UCS_ERR_NO_MESSAGE) {
            break;
        }
        if ((status != UCS_OK) && (first_error == UCS_OK)) {
            first_error = status;
        }
        /* Code before credit: a source that sees the credit may also
         * see the code, never a code that did not run. */
        if (ran_code.index != 0) {
            announce(control, ran_code);
        }
    }
    if (count > 0) {
        /* Credits once per call, not per message: the line they live on
         * moves to the source only when it asks. */
        channel->consumed += count;
        control_word(control, kConsumedOffset)
                .store(channel->consumed, std::memory_order_release);
    }
    if (count_p != nullptr) {
        *count_p = count;
    }
    return first_error;
}

void channel_destroy(ucp_ifunc_channel_h channel)
{
    std::unique_ptr<ucp_ifunc_channel> owner(channel);
}

ucs_status_t channel_open(ucp_worker_h worker, ucp_ep_h ep, const void *blob,
                          size_t                                 blob_size,
                          const ucp_ifunc_channel_open_params_t *params,
                          ucp_ifunc_channel_ep_h                *channel_ep_p)
{
    ChannelBlob header = {};
    if (blob != nullptr && blob_size >= sizeof(header)) {
        std::memcpy(&header, blob, sizeof(header));
    }
    if ((worker == nullptr) || (ep == nullptr) || (channel_ep_p == nullptr) ||
        ((params != nullptr) && (params->field_mask != 0))) {
        ucs_error("ucp_ifunc_channel_open: need a worker, an endpoint "
                  "and channel_ep_p, and no unknown parameter");
        return UCS_ERR_INVALID_PARAM;
    }
    if ((header.magic_word != channel_magic_word()) ||
        (blob_size != sizeof(header) + header.rkey_size) ||
        (header.slots == 0) || (header.slots > kMaxSlots) ||
        (header.slot_size < kMinSlotSize) || (header.slot_size % 64) ||
        (header.slot_size > kMaxRingBytes / header.slots)) {
        ucs_error("ucp_ifunc_channel_open: the blob is not one of "
                  "ucp_ifunc_channel_pack of this release (%zu bytes)",
                  blob_size);
        return UCS_ERR_INVALID_PARAM;
    }
    auto chep       = std::make_unique<ucp_ifunc_channel_ep>();
    chep->worker    = worker;
    chep->ep        = ep;
    chep->address   = header.address;
    chep->slots     = header.slots;
    chep->slot_size = header.slot_size;
    chep->own_codes.set_machine(uint16_t(header.machine));
    chep->ref_headers.resize(header.slots);
    chep->ref_seals.resize(header.slots);
    ucs_status_t status = ucp_ep_rkey_unpack(
            ep, static_cast<const char *>(blob) + sizeof(header), &chep->rkey);
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_channel_open: ucp_ep_rkey_unpack failed: "
                  "%s",
                  ucs_status_string(status));
        chep->rkey = nullptr;
        return status;
    }
    /* Mapped once here, not per message. */
    void *mapped;
    if (config_shm_direct() &&
        (ucp_rkey_ptr(chep->rkey, header.address, &mapped) == UCS_OK)) {
        chep->mapped    = static_cast<char *>(mapped);
        chep->announced = {
                &control_word(chep->mapped, offsetof(ChannelControl, held)),
                &control_word(chep->mapped, offsetof(ChannelControl, index))};
        if (!mapped_whole(mapped,
                          kRingOffset + header.slots * header.slot_size)) {
            /* A blob may claim more slots than the key maps: every
             * store would then land past the mapping. */
            ucs_error("ucp_ifunc_channel_open: the blob claims %u slots "
                      "of %" PRIu64 " bytes, more than its key maps here",
                      unsigned(header.slots), uint64_t(header.slot_size));
            chep->mapped = nullptr;
            return UCS_ERR_INVALID_PARAM;
        }
        chep->own_codes.read_announcements(&chep->announced);
        if (reinterpret_cast<ChannelControl *>(mapped)->epoch != header.epoch) {
            ucs_error("ucp_ifunc_channel_open: the channel the blob "
                      "names is gone");
            return UCS_ERR_INVALID_PARAM;
        }
    } else {
        chep->stage_size = std::min<size_t>(header.slot_size, kStageSize);
    }
    *channel_ep_p = chep.release();
    return UCS_OK;
}

} // namespace ucx_ifunc

namespace {

/* The failure of an earlier write (logged), which leaves the target waiting
 * on its slot forever; UCS_OK if none. */
ucs_status_t earlier_failure(ucp_ifunc_channel_ep &chep, const char *function)
{
    if (chep.failure == UCS_OK) {
        chep.failure = ucs_status_t(
                chep.seals.failure.load(std::memory_order_relaxed));
    }
    if (chep.failure != UCS_OK) {
        ucs_error("%s: an earlier write on this channel failed (%s) and the "
                  "target waits on its slot; close the channel endpoint and "
                  "open a new channel",
                  function, ucs_status_string(chep.failure));
    }
    return chep.failure;
}

/* Whether the next slot is free; if not, credits have been asked for. */
bool has_free_slot(ucp_ifunc_channel_ep &chep)
{
    if (chep.free_slots() == 0) {
        chep.refresh();
        if (chep.free_slots() == 0) {
            if (chep.mapped == nullptr) {
                chep.read_control();
            }
            return false;
        }
    }
    return true;
}

/* Writes @a out into the next slot, which the caller knows to be free, and
 * counts it; @a by_ref: a reference frame. */
ucs_status_t write_slot(ucp_ifunc_channel_ep &chep, OutFrame out, bool by_ref)
{
    uint64_t offset = kRingOffset + (chep.sent % chep.slots) * chep.slot_size;
    if ((out.n_parts > 1) && (chep.mapped == nullptr) &&
        (out.size <= chep.stage_size)) {
        /* One put instead of two (a round trip less over TCP). */
        if (chep.stages.empty()) {
            chep.stages.resize(chep.stage_size * chep.slots);
        }
        char *stage =
                chep.stages.data() + (chep.sent % chep.slots) * chep.stage_size;
        for (size_t i = 0; i < out.n_parts; ++i) {
            std::memcpy(stage + out.parts[i].offset, out.parts[i].data,
                        out.parts[i].size);
        }
        /* The header's seal word is 0 there: the seal follows. */
        out.parts[0] = {stage, out.size, 0};
        out.n_parts  = 1;
    }
    ucs_status_t status;
    if (chep.mapped != nullptr) {
        store_direct(chep.mapped + offset, out);
        status = UCS_OK;
    } else {
        status = put_frame(chep.ep, chep.worker, out, chep.address + offset,
                           chep.rkey, &chep.seals);
        if (UCS_STATUS_IS_ERR(status)) {
            /* Part of the frame may be on its way into that slot. */
            chep.failure = status;
            return status;
        }
    }
    ++chep.sent;
    ++(by_ref ? chep.sent_by_ref : chep.sent_with_code);
    if (chep.mapped == nullptr) {
        /* Ask for credits early, and for the code as soon as it may
         * have run: both come with one read of the control block. */
        chep.refresh();
        if (!by_ref || (chep.free_slots() <= chep.slots / 2)) {
            chep.read_control();
        }
    }
    return status;
}

} // namespace

namespace ucx_ifunc {

bool ChannelPath::whole_fits(const Outgoing &out) const
{
    const ucp_ifunc_msg_t &msg     = *out.msg;
    uint16_t               machine = out.choice->machine;
    const ForeignFrame    *foreign = (machine != arch::elf_machine())
                                             ? foreign_frame(msg, machine)
                                             : nullptr;
    size_t                 full_size =
            (foreign != nullptr) ? foreign->frame_size : msg.frame_size;
    if (full_size <= chep_.slot_size) {
        return true;
    }
    ucs_error("%s: frame of %zu bytes (code included) does not fit the "
              "channel's %zu-byte slots; nothing was written (create the "
              "channel with larger slots)",
              function_, full_size, chep_.slot_size);
    return false;
}

ucs_status_t ChannelPath::write_ref(const Outgoing &out)
{
    ucs_status_t failure = earlier_failure(chep_, function_);
    if (failure != UCS_OK) {
        return failure;
    }
    /* A message built whole goes only where it could go with its code. */
    if ((out.msg != nullptr) && !whole_fits(out)) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (!has_free_slot(chep_)) {
        return UCS_ERR_NO_RESOURCE;
    }
    /* The reference frame is made here, around the payload: one copy (into
     * the slot), whatever the ISA (only the index differs). */
    const Reference ref  = reference_of(out);
    size_t          slot = chep_.sent % chep_.slots;
    RefHeader      &hdr  = chep_.ref_headers[slot];
    uint64_t       &seal = chep_.ref_seals[slot];
    hdr                  = {};
    hdr.magic_word       = ref_magic_word();
    hdr.frame_size       = align_up(sizeof(hdr) + ref.length, 8);
    hdr.code_index       = out.choice->code_index;
    hdr.nonce            = (ref.nonce != 0) ? ref.nonce : next_nonce();
    hdr.payload_size     = uint32_t(ref.length);
    hdr.hop_count        = ref.hop_count;
    hdr.report           = ref.report;
    seal                 = ref_seal(hdr);
    OutFrame frame       = {};
    frame.parts[0]       = {ref.payload, ref.length, sizeof(hdr)};
    frame.parts[1]       = {&hdr, sizeof(hdr), 0};
    frame.n_parts        = 2;
    frame.seal           = &seal;
    frame.seal_offset    = offsetof(RefHeader, seal);
    frame.size           = hdr.frame_size;
    return write_slot(chep_, frame, true);
}

ucs_status_t ChannelPath::write_full(const Outgoing &out)
{
    ucs_status_t failure = earlier_failure(chep_, function_);
    if (failure != UCS_OK) {
        return failure;
    }
    if (!whole_fits(out)) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (!has_free_slot(chep_)) {
        return UCS_ERR_NO_RESOURCE;
    }
    const ucp_ifunc_msg_t &msg     = *out.msg;
    uint16_t               machine = out.choice->machine;
    const ForeignFrame    *foreign = (machine != arch::elf_machine())
                                             ? foreign_frame(msg, machine)
                                             : nullptr;
    return write_slot(chep_,
                      (foreign != nullptr) ? foreign_full_frame(msg, *foreign)
                                           : full_frame(msg),
                      false);
}

ucs_status_t channel_send(ucp_ifunc_channel_ep_h chep,
                          const ucp_ifunc_msg_t &msg, bool with_code)
{
    ChannelPath path(*chep, "ucp_ifunc_channel_send_nbx");
    return send_built(path, msg,
                      choose_code(*chep->codes, with_code, MsgCodes{msg}),
                      "ucp_ifunc_channel_send_nbx");
}

ucs_status_t channel_ep_query(ucp_ifunc_channel_ep_h chep,
                              ucp_ifunc_ep_attr_t   *attr)
{
    if ((chep == nullptr) || (attr == nullptr)) {
        ucs_error("ucp_ifunc_channel_ep_query: channel_ep and attr must "
                  "not be NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    chep->refresh();
    if (attr->field_mask & UCP_IFUNC_EP_ATTR_FIELD_FREE_SLOTS) {
        attr->free_slots = chep->free_slots();
    }
    if (attr->field_mask & UCP_IFUNC_EP_ATTR_FIELD_SENT_WITH_CODE) {
        attr->sent_with_code = chep->sent_with_code;
    }
    if (attr->field_mask & UCP_IFUNC_EP_ATTR_FIELD_SENT_BY_REF) {
        attr->sent_by_ref = chep->sent_by_ref;
    }
    if (attr->field_mask & UCP_IFUNC_EP_ATTR_FIELD_MACHINE) {
        attr->machine = chep->codes->machine();
    }
    return UCS_OK;
}

void channel_close(ucp_ifunc_channel_ep_h chep)
{
    if (chep == nullptr) {
        return;
    }
    std::unique_ptr<ucp_ifunc_channel_ep> owner(chep);
    /* The seals waiting for a flush, and a credit read, use the rkey and
     * this object: let them finish first. */
    while (chep->reading ||
           (chep->seals.pending.load(std::memory_order_acquire) > 0)) {
        ucp_worker_progress(chep->worker);
    }
    ucp_request_param_t param;
    param.op_attr_mask       = 0;
    ucs_status_ptr_t request = ucp_ep_flush_nbx(chep->ep, &param);
    if (UCS_PTR_IS_PTR(request)) {
        while (ucp_request_check_status(request) == UCS_INPROGRESS) {
            ucp_worker_progress(chep->worker);
        }
        ucp_request_free(request);
    }
}

void channel_count_as_peer(ucp_ifunc_channel &channel)
{
    channel.path = RunPath::peer;
}

void channel_ep_discard(ucp_ifunc_channel_ep *chep)
{
    std::unique_ptr<ucp_ifunc_channel_ep> owner(chep);
}

bool channel_ep_direct(const ucp_ifunc_channel_ep &chep)
{
    return chep.mapped != nullptr;
}

size_t channel_ep_slot_size(const ucp_ifunc_channel_ep &chep)
{
    return chep.slot_size;
}

void channel_ep_share_codes(ucp_ifunc_channel_ep &chep, TargetCodes &codes)
{
    chep.codes = &codes;
    if (chep.mapped != nullptr) {
        codes.read_announcements(&chep.announced);
    }
}

} // namespace ucx_ifunc
