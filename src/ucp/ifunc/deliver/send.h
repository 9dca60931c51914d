/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "send": writing a frame so that its seal becomes visible only after
 * the rest of it (send.cc says how). ucp_ifunc_send_nbix/nbx and the
 * channels (channel.cc) share it.
 */
#ifndef UCP_IFUNC_SEND_H_
#define UCP_IFUNC_SEND_H_

#include "ucp/ifunc/format/frame.h"

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ucx_ifunc {

/* What a sender that writes many frames (a channel) learns of seals that
 * wait for a flush: how many are under way, and the first that failed. */
struct SealTracker {
    std::atomic<size_t> pending{0};
    std::atomic<int>    failure{UCS_OK}; /* ucs_status_t */
};

/* Parameters of the code-once sends (channels, AM): whether they hold only
 * known fields, and whether the code must go with the message. */
inline bool send_params_known(const ucp_ifunc_channel_send_params_t *params)
{
    return (params == nullptr) ||
           !(params->field_mask &
             ~uint64_t(UCP_IFUNC_CHANNEL_SEND_FIELD_FLAGS));
}

inline bool send_with_code(const ucp_ifunc_channel_send_params_t *params)
{
    return (params != nullptr) &&
           (params->field_mask & UCP_IFUNC_CHANNEL_SEND_FIELD_FLAGS) &&
           (params->flags & UCP_IFUNC_SEND_FLAG_WITH_CODE);
}

/* Whether @a msg looks like a frame of ucp_ifunc_msg_create (cheap checks). */
bool msg_sealed(const ucp_ifunc_msg_t &msg);

/* The full frame of @a msg, code included. */
OutFrame full_frame(const ucp_ifunc_msg_t &msg);

/* The template of @a msg's reference header (frame.h: ref_header()). */
inline const RefHeader &msg_ref_template(const ucp_ifunc_msg_t &msg)
{
    return *reinterpret_cast<const RefHeader *>(
            static_cast<const char *>(msg.frame) +
            msg_ref_offset(msg.frame_size));
}

/* The reference frame of @a msg (frame.h) with header @a hdr and seal
 * @a seal (ref_header_for()), which must live until it is written: the
 * payload, then the header with seal 0, then the seal. */
OutFrame ref_frame(const ucp_ifunc_msg_t &msg, const RefHeader &hdr,
                   const uint64_t &seal);

/* Stores @a out into @a slot, mapped here: parts, store fence, seal. The
 * caller checked that it fits and that the slot is free. */
void store_direct(void *slot, const OutFrame &out);

/* Puts @a out to @a remote_addr, the seal ordered after the rest by a fence
 * of @a worker where that is cheap and sound, else by a flush of @a ep
 * (send.cc). A seal that waits for its flush counts itself in @a tracker
 * (if not NULL) until its put has completed locally, and records there a
 * failure of the flush or of its put. Returns UCS_INPROGRESS, or the error
 * of a put (logged). */
ucs_status_t put_frame(ucp_ep_h ep, ucp_worker_h worker, const OutFrame &out,
                       uint64_t remote_addr, ucp_rkey_h rkey,
                       SealTracker *tracker);

/* A put that completes on its own (ucp_put_nbi's meaning, with the call
 * that is not deprecated): UCS_OK when done locally, UCS_INPROGRESS when
 * under way, or the error. */
ucs_status_t put(ucp_ep_h ep, const void *data, size_t size, uint64_t address,
                 ucp_rkey_h rkey);

/* Puts the seal once the endpoint's flush says the body is in the
 * target's memory; @a body, if any, lives until then. */
ucs_status_t seal_after_flush(ucp_ep_h ep, uint64_t seal, uint64_t seal_address,
                              ucp_rkey_h rkey, SealTracker *tracker,
                              std::vector<char> body = {});

} // namespace ucx_ifunc

#endif
