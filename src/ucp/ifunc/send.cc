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
#include "api_guard.h"
#include "arch.h"
#include "config.h"
#include "frame.h"
#include "ucx_compat.h"

#include <ucs/debug/log_def.h>

#include <memory>

namespace ucx_ifunc {
namespace {

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

ucs_status_t store_direct(void *slot, const ucp_ifunc_msg_t &msg)
{
    /* The target leaves its capacity in word 0 of an empty slot: refuse a
     * frame that would not fit before writing any of it. The line is
     * fetched for writing, as the copy below will write it anyway: reading
     * it first must not cost a second transfer between the cores. */
    arch::prefetch_for_write(slot);
    uint64_t word0 = slot_word(slot, 0)->load(std::memory_order_relaxed);
    if (is_empty_slot_word(word0) &&
        (msg.frame_size > empty_slot_capacity(word0))) {
        ucs_error("ifunc send: frame of %zu bytes does not fit the "
                  "target's %zu-byte buffer; nothing was written",
                  msg.frame_size, empty_slot_capacity(word0));
        return UCS_ERR_EXCEEDS_LIMIT;
    }

    size_t body_size = msg.frame_size - kSealSize;
    std::memcpy(slot, msg.frame, body_size);
    arch::store_fence();
    uint64_t seal = static_cast<const FrameHeader *>(msg.frame)->seal;
    slot_word(slot, body_size)->store(seal, std::memory_order_release);
    return UCS_OK;
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

/* A seal waiting for the endpoint flush that follows its body. It owns the
 * seal's 8 bytes until the seal's own put has completed locally. */
struct PendingSeal {
    ucp_ep_h   ep;
    ucp_rkey_h rkey;
    uint64_t   address;
    uint64_t   seal;
};

void seal_put_done(void *request, ucs_status_t status, void *user_data)
{
    std::unique_ptr<PendingSeal> pending(static_cast<PendingSeal *>(user_data));
    if (status != UCS_OK) {
        ucs_error("ifunc send: put of the seal failed: %s; the "
                  "target will not run that message",
                  ucs_status_string(status));
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
        return;
    }
    status = put_pending_seal(std::move(pending));
    if (status != UCS_OK) {
        ucs_error("ifunc send: put of the seal failed: %s; the target will "
                  "not run that message",
                  ucs_status_string(status));
    }
}

/* Puts the seal once the endpoint's flush says the body is in the target's
 * memory. */
ucs_status_t seal_after_flush(ucp_ep_h ep, const ucp_ifunc_msg_t &msg,
                              uint64_t seal_address, ucp_rkey_h rkey)
{
    auto pending = std::make_unique<PendingSeal>();
    *pending     = {ep, rkey, seal_address,
                    static_cast<const FrameHeader *>(msg.frame)->seal};

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

/* Puts body and seal, the seal ordered after the body by a fence of
 * @a worker, or by a flush of @a ep when the worker is not known. */
ucs_status_t put_frame(ucp_ep_h ep, ucp_worker_h worker,
                       const ucp_ifunc_msg_t &msg, uint64_t remote_addr,
                       ucp_rkey_h rkey)
{
    size_t      body_size = msg.frame_size - kSealSize;
    const char *frame     = static_cast<const char *>(msg.frame);

    ucs_status_t status = put(ep, frame, body_size, remote_addr, rkey);
    if (UCS_STATUS_IS_ERR(status)) {
        ucs_error("ifunc send: put of the frame failed: %s",
                  ucs_status_string(status));
        return status;
    }
    if ((worker == nullptr) || !compat::worker_fence_orders_puts()) {
        status = seal_after_flush(ep, msg, remote_addr + body_size, rkey);
    } else {
        status = ucp_worker_fence(worker);
        if (status == UCS_OK) {
            status = put(ep, frame + body_size, kSealSize,
                         remote_addr + body_size, rkey);
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

template <typename T>
T param_value(const ucp_ifunc_send_params_t *params, uint64_t field,
              T ucp_ifunc_send_params_t::*member, T fallback)
{
    return ((params != nullptr) && (params->field_mask & field))
                   ? params->*member
                   : fallback;
}

ucs_status_t send_frame(const char *function, ucp_ep_h ep,
                        const ucp_ifunc_msg_t &msg, uint64_t remote_addr,
                        ucp_rkey_h rkey, const ucp_ifunc_send_params_t *params)
{
    if ((ep == nullptr) || (rkey == nullptr) || (remote_addr % 8)) {
        ucs_error("%s: need an endpoint, an rkey and an 8-byte aligned "
                  "remote address (got ep %p rkey %p address 0x%llx)",
                  function, static_cast<void *>(ep), static_cast<void *>(rkey),
                  static_cast<unsigned long long>(remote_addr));
        return UCS_ERR_INVALID_PARAM;
    }
    if (!msg_sealed(msg)) {
        ucs_error("%s: not a message from ucp_ifunc_msg_create, or it was "
                  "modified after creation",
                  function);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params != nullptr) &&
        (params->field_mask & ~uint64_t(UCP_IFUNC_SEND_FIELD_WORKER |
                                        UCP_IFUNC_SEND_FIELD_REMOTE_SIZE))) {
        ucs_error("%s: unknown bits 0x%llx in field_mask", function,
                  static_cast<unsigned long long>(params->field_mask));
        return UCS_ERR_INVALID_PARAM;
    }

    size_t remote_size =
            param_value(params, UCP_IFUNC_SEND_FIELD_REMOTE_SIZE,
                        &ucp_ifunc_send_params_t::remote_size, SIZE_MAX);
    if (msg.frame_size > remote_size) {
        ucs_error("%s: frame of %zu bytes does not fit the target's %zu-byte "
                  "buffer; nothing was written",
                  function, msg.frame_size, remote_size);
        return UCS_ERR_EXCEEDS_LIMIT;
    }

    void *slot;
    if (config_shm_direct() &&
        (ucp_rkey_ptr(rkey, remote_addr, &slot) == UCS_OK)) {
        return store_direct(slot, msg);
    }
    ucp_worker_h worker = param_value(params, UCP_IFUNC_SEND_FIELD_WORKER,
                                      &ucp_ifunc_send_params_t::worker,
                                      static_cast<ucp_worker_h>(nullptr));
    return put_frame(ep, worker, msg, remote_addr, rkey);
}

} // namespace
} // namespace ucx_ifunc

using namespace ucx_ifunc;

ucs_status_t ucp_ifunc_send_nbix(ucp_ep_h ep, ucp_ifunc_msg_t msg,
                                 uint64_t remote_addr, ucp_rkey_h rkey)
{
    return api_call(__func__, [&]() {
        return send_frame("ucp_ifunc_send_nbix", ep, msg, remote_addr, rkey,
                          nullptr);
    });
}

ucs_status_t ucp_ifunc_send_nbx(ucp_ep_h ep, ucp_ifunc_msg_t msg,
                                uint64_t remote_addr, ucp_rkey_h rkey,
                                const ucp_ifunc_send_params_t *params)
{
    return api_call(__func__, [&]() {
        return send_frame("ucp_ifunc_send_nbx", ep, msg, remote_addr, rkey,
                          params);
    });
}
