/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "send": writing a frame into the target's buffer so that the seal
 * (its last 8 bytes) becomes visible only after everything before it.
 *
 * - The target's memory is mapped here (shared memory, ucp_rkey_ptr): store
 *   the body, a store fence, then the seal as one 8-byte store. The CPU's
 *   memory ordering makes the seal the last thing the target can see.
 * - Otherwise two puts on the same endpoint and rkey: the body, then the
 *   seal. This relies on UCP sending all RMA to one rkey over one lane, and
 *   each transport applying a lane's operations in the order they were
 *   posted (a TCP stream, an RC queue pair). UCP does not promise that: with
 *   UCX's newer protocol engine over shared memory without direct stores
 *   the seal can overtake the body. ucp_worker_fence() needs the worker,
 *   which the API (an endpoint) does not give us. The extended send call of
 *   the fast-path work replaces this argument.
 */
#include "api_guard.h"
#include "arch.h"
#include "config.h"
#include "frame.h"

#include <ucs/debug/log_def.h>

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
        ucs_error("ucp_ifunc_send_nbix: frame of %zu bytes does not fit the "
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
 * that is not deprecated. UCS_OK: done; UCS_INPROGRESS: under way (a flush
 * completes it); otherwise the error. */
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

ucs_status_t put_frame(ucp_ep_h ep, const ucp_ifunc_msg_t &msg,
                       uint64_t remote_addr, ucp_rkey_h rkey)
{
    size_t      body_size = msg.frame_size - kSealSize;
    const char *frame     = static_cast<const char *>(msg.frame);

    ucs_status_t body = put(ep, frame, body_size, remote_addr, rkey);
    if (UCS_STATUS_IS_ERR(body)) {
        ucs_error("ucp_ifunc_send_nbix: put of the frame failed: %s",
                  ucs_status_string(body));
        return body;
    }
    ucs_status_t seal = put(ep, frame + body_size, kSealSize,
                            remote_addr + body_size, rkey);
    if (UCS_STATUS_IS_ERR(seal)) {
        /* The body alone never runs: the target waits for a seal. */
        ucs_error("ucp_ifunc_send_nbix: put of the seal failed: %s",
                  ucs_status_string(seal));
        return seal;
    }
    return ((body == UCS_OK) && (seal == UCS_OK)) ? UCS_OK : UCS_INPROGRESS;
}

} // namespace
} // namespace ucx_ifunc

using namespace ucx_ifunc;

ucs_status_t ucp_ifunc_send_nbix(ucp_ep_h ep, ucp_ifunc_msg_t msg,
                                 uint64_t remote_addr, ucp_rkey_h rkey)
{
    return api_call(__func__, [&]() {
        if ((ep == nullptr) || (rkey == nullptr) || (remote_addr % 8)) {
            ucs_error("ucp_ifunc_send_nbix: need an endpoint, an rkey and an "
                      "8-byte aligned remote address (got ep %p rkey %p "
                      "address 0x%llx)",
                      static_cast<void *>(ep), static_cast<void *>(rkey),
                      static_cast<unsigned long long>(remote_addr));
            return UCS_ERR_INVALID_PARAM;
        }
        if (!msg_sealed(msg)) {
            ucs_error("ucp_ifunc_send_nbix: not a message from "
                      "ucp_ifunc_msg_create, or it was modified after "
                      "creation");
            return UCS_ERR_INVALID_PARAM;
        }

        void *slot;
        if (config_shm_direct() &&
            (ucp_rkey_ptr(rkey, remote_addr, &slot) == UCS_OK)) {
            return store_direct(slot, msg);
        }
        return put_frame(ep, msg, remote_addr, rkey);
    });
}
