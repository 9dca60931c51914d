/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "poll": deciding whether the buffer holds a complete frame, claiming
 * it, running it and clearing the buffer.
 *
 * A frame is complete when its last 8 bytes hold the seal of its header:
 * the sender writes the seal strictly after the rest (send.cc). A torn or
 * half-written header hashes to something else, and a stale seal left by an
 * earlier frame belongs to another header (every frame has its own nonce),
 * so neither passes. Word 0 of the buffer tells an empty slot (the target's
 * "empty" word, or zero) from one a frame is arriving in. A poller takes a
 * complete frame by swapping the seal in its header for 0 (claim()).
 *
 * A frame of a format version this target does not read is complete by the
 * rules of the envelope (frame.h); it is taken out of the slot the same way
 * and rejected, so that the slot is free for the sender's next frame.
 */
#include "ucp/ifunc/deliver/poll.h"

#include "ucp/ifunc/base/api_guard.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/deliver/run.h"

#include <ucs/debug/log_def.h>

namespace ucx_ifunc {
namespace {

enum class Seen { sealed, incomplete };

/* @a state, or the state of @a context when the caller has none yet:
 * looked up only once there is a frame. Call within a RunningMessage. */
ContextState &state_of(ucp_context_h context, ContextState *state)
{
    return (state != nullptr) ? *state : target_state(context);
}

/* Whether a frame, complete or not, may be arriving: only then is there
 * anything to read beyond word 0. */
bool frame_started(uint64_t word0)
{
    return uint32_t(word0) == kFrameMagic;
}

/* Takes a snapshot of the header and checks that it is one sealed whole. */
Seen read_header(void *buffer, FrameHeader *hdr)
{
    snapshot_header(buffer, hdr);
    if ((hdr->magic_word != frame_magic_word()) || (hdr->seal == 0) ||
        (frame_seal(*hdr) != hdr->seal)) {
        return Seen::incomplete;
    }
    return Seen::sealed;
}

/* The same for a reference frame's header. */
Seen read_ref_header(void *buffer, RefHeader *hdr)
{
    uint64_t words[sizeof(RefHeader) / 8];
    for (size_t i = 0; i < sizeof(RefHeader) / 8; ++i) {
        words[i] = slot_word(buffer, i * 8)->load(std::memory_order_relaxed);
    }
    std::memcpy(hdr, words, sizeof(*hdr));
    if ((hdr->magic_word != ref_magic_word()) || (hdr->seal == 0) ||
        (ref_seal(*hdr) != hdr->seal)) {
        return Seen::incomplete;
    }
    return Seen::sealed;
}

/* Makes the frame whose sealed header is @a hdr ours: of several pollers,
 * one wins. The word swapped is the header's own seal, unique to this
 * message and never part of another frame's payload, so a poller that
 * looked at an earlier frame cannot take a later one. */
bool claim(void *buffer, size_t header_size, uint64_t seal)
{
    return slot_word(buffer, header_size - kSealSize)
            ->compare_exchange_strong(seal, 0, std::memory_order_acquire);
}

bool claim(void *buffer, const FrameHeader &hdr)
{
    return claim(buffer, sizeof(hdr), hdr.seal);
}

/* Once a frame is claimed, the slot is emptied on every way out, errors and
 * exceptions included: otherwise it would never take a frame again. */
class ClaimedSlot {
public:
    ClaimedSlot(void *buffer, size_t buffer_size)
        : buffer_(buffer), buffer_size_(buffer_size)
    {
    }
    ~ClaimedSlot()
    {
        slot_word(buffer_, 0)
                ->store(empty_slot_word(buffer_size_),
                        std::memory_order_release);
    }
    ClaimedSlot(const ClaimedSlot &)            = delete;
    ClaimedSlot &operator=(const ClaimedSlot &) = delete;

private:
    void  *buffer_;
    size_t buffer_size_;
};

/* A frame whose word 0 is @a word0, of another format version (or of ours
 * with another header size, i.e. damaged): rejects it once it is complete
 * by the envelope's rules, with one warning per peer and version. Anything
 * else is not (yet) a message. */
ucs_status_t reject_foreign_frame(ucp_context_h context, ContextState *state,
                                  void *buffer, size_t buffer_size,
                                  uint64_t word0)
{
    size_t   header_size = frame_header_size(word0);
    uint64_t seal;
    if ((header_size < kMinHeaderSize) || (header_size > kMaxHeaderSize) ||
        (header_size % 8) || (header_size + kSealSize > buffer_size) ||
        !envelope_sealed(buffer, header_size, &seal)) {
        return UCS_ERR_NO_MESSAGE;
    }

    uint64_t frame_size = slot_word(buffer, offsetof(FrameHeader, frame_size))
                                  ->load(std::memory_order_relaxed);
    bool fits = (frame_size >= header_size + kSealSize) &&
                (frame_size <= buffer_size) && !(frame_size % 8);
    std::atomic<uint64_t> *trailer_p =
            fits ? slot_word(buffer, frame_size - kSealSize) : nullptr;
    if ((fits && (trailer_p->load(std::memory_order_acquire) != seal)) ||
        !claim(buffer, header_size, seal)) {
        return UCS_ERR_NO_MESSAGE; /* not all there yet, or not ours */
    }
    ClaimedSlot slot(buffer, buffer_size);
    if (fits) {
        trailer_p->store(0, std::memory_order_relaxed);
    }

    uint64_t nonce = slot_word(buffer, offsetof(FrameHeader, nonce))
                             ->load(std::memory_order_relaxed);
    uint32_t       source  = nonce_source_id(nonce);
    unsigned       version = frame_version(word0);
    RunningMessage running;
    ContextState  &target = state_of(context, state);
    PeerLog       &log    = target.peer_log;
    if (fits) {
        target.counters.count_bytes(frame_size);
    }
    if ((version == kFrameVersion) || (version == kRefFrameVersion)) {
        target.counters.count_reject(Reject::bad_frame);
        /* Our own version, but not our header: a damaged frame. */
        ucx_ifunc_peer_warn(log, PeerProblem::malformed_frame, source,
                            "malformed ifunc frame (header of %zu bytes, "
                            "version %u has %zu) from source 0x%08x; "
                            "message dropped",
                            header_size, version,
                            (version == kFrameVersion) ? sizeof(FrameHeader)
                                                       : sizeof(RefHeader),
                            source);
        return UCS_ERR_INVALID_PARAM;
    }
    target.counters.count_reject(Reject::bad_version);
    if (version == kFrameVersionLegacy) {
        ucx_ifunc_peer_warn(log, PeerProblem::unknown_version, source,
                            "ifunc frame of format version 1 (ucx-ifunc 0.1) "
                            "from source 0x%08x dropped: it names its code "
                            "by a hash that is not cryptographic, which this "
                            "target does not trust; rebuild the source with "
                            "this ucx-ifunc release",
                            source);
    } else {
        ucx_ifunc_peer_warn(log, PeerProblem::unknown_version, source,
                            "ifunc frame of format version %u from source "
                            "0x%08x dropped: this target reads versions %u "
                            "and %u (build source and target with "
                            "compatible ucx-ifunc releases)",
                            version, source, unsigned(kFrameVersion),
                            unsigned(kRefFrameVersion));
    }
    return UCS_ERR_UNSUPPORTED;
}

/* A reference frame (frame.h): complete once its header carries its seal,
 * which the sender writes after the rest; taken as a full frame is, then
 * run with code the target holds. */
ucs_status_t poll_ref(ucp_context_h context, ContextState *state, void *buffer,
                      size_t buffer_size, void *target_args, RunPath path)
{
    RefHeader hdr;
    if ((slot_word(buffer, offsetof(RefHeader, seal))
                 ->load(std::memory_order_acquire) == 0) ||
        (read_ref_header(buffer, &hdr) != Seen::sealed) ||
        !claim(buffer, sizeof(hdr), hdr.seal)) {
        return UCS_ERR_NO_MESSAGE; /* not all there yet */
    }
    ClaimedSlot    slot(buffer, buffer_size);
    RunningMessage running;
    ContextState  &target = state_of(context, state);
    ucs_status_t   status = ref_validate(hdr, buffer_size, target.peer_log);
    if (status != UCS_OK) {
        target.counters.count_reject(frame_reject(status));
        report_drop(hdr.report, frame_reject(status));
        return status;
    }
    return run_reference(target, path, hdr,
                         static_cast<char *>(buffer) + sizeof(hdr),
                         target_args);
}

} // namespace

/* The context's state is looked up only once there is a frame: an empty
 * poll, the common case of a busy-polling target, costs no more than its
 * two loads. */
ucs_status_t poll_slot(ucp_context_h context, ContextState *state, void *buffer,
                       size_t buffer_size, void *target_args, RunPath path,
                       PeerPins *pins, RanCode *ran)
{
    std::atomic<uint64_t> *word0_p = slot_word(buffer, 0);
    uint64_t               word0   = word0_p->load(std::memory_order_acquire);
    if (!frame_started(word0)) {
        uint64_t empty = empty_slot_word(buffer_size);
        if (word0 != empty) {
            /* Tell senders how large this slot is as polled now: over an
             * empty-slot word of another size, zeros, or whatever the
             * memory held. No frame has started here (its first word
             * would say so), and one that starts meanwhile makes the
             * exchange fail, harmlessly. */
            word0_p->compare_exchange_strong(word0, empty,
                                             std::memory_order_relaxed);
        }
        return UCS_ERR_NO_MESSAGE;
    }
    if (word0 == ref_magic_word()) {
        return poll_ref(context, state, buffer, buffer_size, target_args, path);
    }
    if (word0 != frame_magic_word()) {
        return reject_foreign_frame(context, state, buffer, buffer_size, word0);
    }

    FrameHeader hdr;
    uint64_t frame_size = slot_word(buffer, offsetof(FrameHeader, frame_size))
                                  ->load(std::memory_order_relaxed);
    if ((frame_size < kMinFrameSize) || (frame_size > buffer_size) ||
        (frame_size % 8)) {
        /* No seal to look for. A sealed header with such a size is a frame
         * that can never be run: reject it; anything else is still being
         * written (or garbage), which is not a message. */
        if ((read_header(buffer, &hdr) != Seen::sealed) ||
            (hdr.frame_size != frame_size) || !claim(buffer, hdr)) {
            return UCS_ERR_NO_MESSAGE;
        }
        ClaimedSlot    slot(buffer, buffer_size);
        RunningMessage running;
        ContextState  &target = state_of(context, state);
        ucs_status_t status = frame_validate(hdr, buffer_size, target.peer_log);
        target.counters.count_reject(frame_reject(status));
        return (status != UCS_OK) ? status : UCS_ERR_INVALID_PARAM;
    }

    /* The trailer first: a header read after it is at least as new. */
    std::atomic<uint64_t> *seal_p = slot_word(buffer, frame_size - kSealSize);
    uint64_t               seal   = seal_p->load(std::memory_order_acquire);
    snapshot_header(buffer, &hdr);
    if (!frame_complete(hdr, seal, frame_size)) {
        return UCS_ERR_NO_MESSAGE; /* not all there yet */
    }

    /* Complete. Claim it, and erase the trailing seal too: the same message
     * sent into this slot again must not look complete before it is. */
    if (!claim(buffer, hdr)) {
        return UCS_ERR_NO_MESSAGE;
    }
    ClaimedSlot slot(buffer, buffer_size);
    seal_p->store(0, std::memory_order_relaxed);
    RunningMessage running;
    ContextState  &target = state_of(context, state);
    ucs_status_t   status = frame_validate(hdr, buffer_size, target.peer_log);
    if (status != UCS_OK) {
        target.counters.count_bytes(frame_size);
        target.counters.count_reject(frame_reject(status));
        report_drop(hdr.report, frame_reject(status));
        return status;
    }
    char    *bytes     = static_cast<char *>(buffer);
    uint64_t announced = 0;
    status             = run_message(target, path, frame_size, hdr, bytes,
                                     bytes + hdr.payload_offset, target_args, pins,
                                     &announced);
    if ((status == UCS_OK) && (announced != 0)) {
        ran->id    = header_code_id(hdr);
        ran->index = announced;
    }
    return status;
}

} // namespace ucx_ifunc

using namespace ucx_ifunc;

namespace ucx_ifunc {

ucs_status_t poll_ifunc(ucp_context_h context, void *buffer, size_t buffer_size,
                        void *target_args)
{
    if ((context == nullptr) || (buffer == nullptr) ||
        (reinterpret_cast<uintptr_t>(buffer) % 8) ||
        (buffer_size < kMinFrameSize)) {
        ucs_error("ucp_poll_ifunc: need a context and an 8-byte aligned "
                  "buffer of at least %zu bytes (got context %p buffer "
                  "%p size %zu)",
                  kMinFrameSize, static_cast<void *>(context), buffer,
                  buffer_size);
        return UCS_ERR_INVALID_PARAM;
    }
    return poll_slot(context, nullptr, buffer, buffer_size, target_args,
                     RunPath::raw);
}

} // namespace ucx_ifunc
