/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "send": writing a frame into the target's buffer so that the seal
 * (its last 8 bytes) becomes visible only after everything before it, by
 * nothing but what the hardware or UCP documents:
 *
 * - The target's memory is mapped here (shared memory, ucp_rkey_ptr): store
 *   the body, a store fence, then the seal as one 8-byte store. The CPU's
 *   memory ordering makes the seal the last thing the target can see. No
 *   UCP call, no round trip.
 * - Otherwise the body is put, then ordered before the seal by one of the
 *   two orderings UCP documents:
 *   - the caller named the endpoint's worker (ucp_ifunc_send_nbx) and, in
 *     this UCX configuration, ucp_worker_fence() is a cheap fence that
 *     keeps its promise (what was issued before it completes before what is
 *     issued after it; see ucx_compat.h for where it does not, or blocks):
 *     body, fence, seal;
 *   - otherwise the endpoint is flushed, and the seal is put from the
 *     flush's completion, when the body is complete in the target's memory.
 *     That costs a round trip, and the seal's put happens in a later
 *     ucp_worker_progress() of the endpoint's worker.
 *   Lanes, protocol engines and transports do not matter to either: UCP
 *   keeps these promises on all of them.
 */
#include "ucp/ifunc/deliver/send.h"

#include "ucp/ifunc/base/api_guard.h"
#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/base/ucx_compat.h"

#include <ucs/debug/log_def.h>

#include <cstring>
#include <memory>
#include <vector>

namespace ucx_ifunc {

bool msg_sealed(const ucp_ifunc_msg_t &msg)
{
    if ((msg.frame == nullptr) || (msg.frame_size < kMinFrameSize) ||
        (msg.frame_size % 8)) {
        return false;
    }
    const auto *hdr  = static_cast<const FrameHeader *>(msg.frame);
    uint64_t    seal = *reinterpret_cast<const uint64_t *>(
            static_cast<const char *>(msg.frame) + msg.frame_size - kSealSize);
    /* Cheap checks only: this runs for every message. */
    return (hdr->magic_word == frame_magic_word()) &&
           (hdr->frame_size == msg.frame_size) && (hdr->seal == seal) &&
           (seal != 0);
}

OutFrame full_frame(const ucp_ifunc_msg_t &msg)
{
    const char *frame     = static_cast<const char *>(msg.frame);
    size_t      body_size = msg.frame_size - kSealSize;
    OutFrame    out       = {};
    out.parts[0]          = {frame, body_size, 0};
    out.n_parts           = 1;
    out.seal        = reinterpret_cast<const uint64_t *>(frame + body_size);
    out.seal_offset = body_size;
    out.size        = msg.frame_size;
    return out;
}

OutFrame ref_frame(const ucp_ifunc_msg_t &msg, const RefHeader &hdr,
                   const uint64_t &seal)
{
    const char *frame = static_cast<const char *>(msg.frame);
    const auto *full  = reinterpret_cast<const FrameHeader *>(frame);
    OutFrame    out   = {};
    /* The payload, then the header (its seal word 0), then the seal. */
    out.parts[0]    = {frame + full->payload_offset, full->payload_size,
                       sizeof(RefHeader)};
    out.parts[1]    = {&hdr, sizeof(RefHeader), 0};
    out.n_parts     = 2;
    out.seal        = &seal;
    out.seal_offset = offsetof(RefHeader, seal);
    out.size        = hdr.frame_size;
    return out;
}

void store_direct(void *slot, const OutFrame &out)
{
    char *dst = static_cast<char *>(slot);
    for (size_t i = 0; i < out.n_parts; ++i) {
        std::memcpy(dst + out.parts[i].offset, out.parts[i].data,
                    out.parts[i].size);
    }
    arch::store_fence();
    slot_word(slot, out.seal_offset)
            ->store(*out.seal, std::memory_order_release);
}

/* A put that completes on its own: ucp_put_nbi's meaning, with the call
 * that is not deprecated. UCS_OK: done locally; UCS_INPROGRESS: under way;
 * otherwise the error. */
ucs_status_t put(ucp_ep_h ep, const void *data, size_t size, uint64_t address,
                 ucp_rkey_h rkey)
{
    ucp_request_param_t param;
    param.op_attr_mask = 0;
    ucs_status_ptr_t request =
            ucp_put_nbx(ep, data, size, address, rkey, &param);
    if (!UCS_PTR_IS_PTR(request)) {
        return UCS_PTR_STATUS(request);
    }
    ucp_request_free(request); /* it still completes; we need no callback */
    return UCS_INPROGRESS;
}

namespace {

/* A seal waiting for the endpoint flush that follows its body. It owns the
 * seal's 8 bytes until the seal's own put has completed locally, and counts
 * itself in @a tracker (if any) until then. */
struct PendingSeal {
    ucp_ep_h     ep;
    ucp_rkey_h   rkey;
    uint64_t     address;
    uint64_t     seal;
    SealTracker *tracker;
    /* The body, where the caller's message may be gone before it is put
     * (a guarded send): its put completes before the flush does. */
    std::vector<char> body;

    PendingSeal(ucp_ep_h e, ucp_rkey_h r, uint64_t a, uint64_t s,
                SealTracker *t)
        : ep(e), rkey(r), address(a), seal(s), tracker(t)
    {
        if (tracker != nullptr) {
            tracker->pending.fetch_add(1, std::memory_order_relaxed);
        }
    }
    ~PendingSeal()
    {
        if (tracker != nullptr) {
            tracker->pending.fetch_sub(1, std::memory_order_release);
        }
    }

    void failed(ucs_status_t status)
    {
        int ok = UCS_OK;
        if (tracker != nullptr) {
            tracker->failure.compare_exchange_strong(ok, status);
        }
    }
    PendingSeal(const PendingSeal &)            = delete;
    PendingSeal &operator=(const PendingSeal &) = delete;
};

void seal_put_done(void *request, ucs_status_t status, void *user_data)
{
    std::unique_ptr<PendingSeal> pending(static_cast<PendingSeal *>(user_data));
    if (status != UCS_OK) {
        ucs_error("ifunc send: put of the seal failed: %s; the "
                  "target will not run that message",
                  ucs_status_string(status));
        pending->failed(status);
    }
    ucp_request_free(request);
}

/* UCS_OK when the seal's put is posted or done, else its error (the caller
 * logs it). */
ucs_status_t put_pending_seal(std::unique_ptr<PendingSeal> pending)
{
    ucp_request_param_t param;
    param.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send      = seal_put_done;
    param.user_data    = pending.get();
    PendingSeal     &p = *pending;
    ucs_status_ptr_t request =
            ucp_put_nbx(p.ep, &p.seal, kSealSize, p.address, p.rkey, &param);
    if (UCS_PTR_IS_PTR(request)) {
        pending.release(); /* seal_put_done() owns it now */
        return UCS_OK;
    }
    return UCS_PTR_STATUS(request);
}

void body_flushed(void *request, ucs_status_t status, void *user_data)
{
    std::unique_ptr<PendingSeal> pending(static_cast<PendingSeal *>(user_data));
    ucp_request_free(request);
    if (status != UCS_OK) {
        /* The body alone never runs: the target waits for a seal. */
        ucs_error("ifunc send: endpoint flush before the seal "
                  "failed: %s; the target will not run that message",
                  ucs_status_string(status));
        pending->failed(status);
        return;
    }
    SealTracker *tracker = pending->tracker;
    status               = put_pending_seal(std::move(pending));
    if (status != UCS_OK) {
        ucs_error("ifunc send: put of the seal failed: %s; the target will "
                  "not run that message",
                  ucs_status_string(status));
        int ok = UCS_OK;
        if (tracker != nullptr) {
            tracker->failure.compare_exchange_strong(ok, status);
        }
    }
}

} // namespace

/* Puts the seal once the endpoint's flush says the body is in the target's
 * memory; @a body, if any, lives until then. */
ucs_status_t seal_after_flush(ucp_ep_h ep, uint64_t seal, uint64_t seal_address,
                              ucp_rkey_h rkey, SealTracker *tracker,
                              std::vector<char> body)
{
    auto pending  = std::make_unique<PendingSeal>(ep, rkey, seal_address, seal,
                                                 tracker);
    pending->body = std::move(body);

    ucp_request_param_t param;
    param.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send            = body_flushed;
    param.user_data          = pending.get();
    ucs_status_ptr_t request = ucp_ep_flush_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(request)) {
        pending.release(); /* body_flushed() owns it now */
        return UCS_OK;
    }
    ucs_status_t status = UCS_PTR_STATUS(request);
    return (status == UCS_OK) ? put_pending_seal(std::move(pending)) /* done */
                              : status;
}

ucs_status_t put_frame(ucp_ep_h ep, ucp_worker_h worker, const OutFrame &out,
                       uint64_t remote_addr, ucp_rkey_h rkey,
                       SealTracker *tracker)
{
    ucs_status_t status = UCS_OK;
    for (size_t i = 0; (i < out.n_parts) && !UCS_STATUS_IS_ERR(status); ++i) {
        if (out.parts[i].size > 0) {
            status = put(ep, out.parts[i].data, out.parts[i].size,
                         remote_addr + out.parts[i].offset, rkey);
        }
    }
    if (UCS_STATUS_IS_ERR(status)) {
        ucs_error("ifunc send: put of the frame failed: %s",
                  ucs_status_string(status));
        return status;
    }
    uint64_t seal_address = remote_addr + out.seal_offset;
    if ((worker == nullptr) || !compat::worker_fence_orders_puts()) {
        status = seal_after_flush(ep, *out.seal, seal_address, rkey, tracker);
    } else {
        status = ucp_worker_fence(worker);
        if (status == UCS_OK) {
            status = put(ep, out.seal, kSealSize, seal_address, rkey);
        }
    }
    if (UCS_STATUS_IS_ERR(status)) {
        /* The body alone never runs: the target waits for a seal. */
        ucs_error("ifunc send: ordering or putting the seal failed: %s",
                  ucs_status_string(status));
        return status;
    }
    /* Handed to UCP: only a flush tells when the frame is in the target's
     * buffer. */
    return UCS_INPROGRESS;
}

} // namespace ucx_ifunc
