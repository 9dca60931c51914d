/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "paths", channels: what the peer layer (peer.cc) uses of a channel
 * endpoint besides the public calls. A peer sends its payload from the
 * caller's memory: the reference frame is made in the slot, not in a
 * message.
 */
#ifndef UCP_IFUNC_CHANNEL_H_
#define UCP_IFUNC_CHANNEL_H_

#include "ucp/ifunc/format/code_id.h"
#include "ucp/ifunc/deliver/code_once.h"
#include "ucp/ifunc/deliver/send_core.h"

#include <ucp/api/ucp_ifunc.h>

#include <cstddef>
#include <cstdint>

namespace ucx_ifunc {

/* ucp_ifunc_channel_create, the ring mapped by @a mem_context (the peer
 * layer's shared-memory context, peer_net.h) and its messages run with
 * @a context's ifunc state. */
ucs_status_t channel_create_mapped_by(ucp_context_h context,
                                      ucp_context_h mem_context,
                                      const ucp_ifunc_channel_params_t *params,
                                      ucp_ifunc_channel_h *channel_p);

/* From now on the messages @a channel runs count as the default path's
 * (RunPath::peer, counters.h): a peer's channel. */
void channel_count_as_peer(ucp_ifunc_channel &channel);

/* Releases a channel endpoint that never sent (no flush, no progress):
 * one the peer layer opened and will not use. */
void channel_ep_discard(ucp_ifunc_channel_ep *chep);

/* Whether the ring is mapped here (the source stores into it directly). */
bool channel_ep_direct(const ucp_ifunc_channel_ep &chep);

/* The largest frame a slot takes. */
size_t channel_ep_slot_size(const ucp_ifunc_channel_ep &chep);

/* From now on the channel endpoint learns into, and decides from, @a codes
 * (a peer's one table for its target, which its active messages use too),
 * which then also reads the ring's held[] where it is mapped here; until
 * the channel endpoint goes. */
void channel_ep_share_codes(ucp_ifunc_channel_ep &chep, TargetCodes &codes);

/* A channel endpoint as a path of the send core (send_core.h): each write
 * goes into the next slot, UCS_ERR_NO_RESOURCE when none is free, and
 * fails for good after an earlier write failed. @a function names the
 * public call in what it logs. */
class ChannelPath final : public SendPath {
public:
    ChannelPath(ucp_ifunc_channel_ep &chep, const char *function)
        : chep_(chep), function_(function)
    {
    }
    ucs_status_t write_ref(const Outgoing &out) override;
    ucs_status_t write_full(const Outgoing &out) override;

private:
    /* Whether the message with its code fits a slot (logged if not). */
    bool whole_fits(const Outgoing &out) const;

    ucp_ifunc_channel_ep &chep_;
    const char           *function_;
};

/* What the exported channel calls do (api/channel_api.cc catches what
 * they throw): ucp_ifunc_channel_NAME is NAME here, with the same
 * arguments and results. */
ucs_status_t channel_create(ucp_context_h                     context,
                            const ucp_ifunc_channel_params_t *params,
                            ucp_ifunc_channel_h              *channel_p);
ucs_status_t channel_pack(ucp_ifunc_channel_h channel, void **blob_p,
                          size_t *blob_size_p);
void         channel_blob_release(void *blob);
ucs_status_t channel_poll(ucp_ifunc_channel_h channel, unsigned max_count,
                          void *target_args, unsigned *count_p);
void         channel_destroy(ucp_ifunc_channel_h channel);
ucs_status_t channel_open(ucp_worker_h worker, ucp_ep_h ep, const void *blob,
                          size_t                                 blob_size,
                          const ucp_ifunc_channel_open_params_t *params,
                          ucp_ifunc_channel_ep_h                *channel_ep_p);
/* Sends @a msg, a sealed message, on @a chep (the arguments of
 * ucp_ifunc_channel_send_nbx, checked by its shim). */
ucs_status_t channel_send(ucp_ifunc_channel_ep_h chep,
                          const ucp_ifunc_msg_t &msg, bool with_code);

ucs_status_t channel_ep_query(ucp_ifunc_channel_ep_h chep,
                              ucp_ifunc_ep_attr_t   *attr);
void         channel_close(ucp_ifunc_channel_ep_h chep);

} // namespace ucx_ifunc

#endif
