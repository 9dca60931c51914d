/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "poll": taking a complete frame out of a buffer or slot and running
 * it. ucp_poll_ifunc and the channels (channel.cc) share it.
 */
#ifndef UCP_IFUNC_POLL_H_
#define UCP_IFUNC_POLL_H_

#include "ucp/ifunc/load/context.h"

namespace ucx_ifunc {

/* Code that a frame carried, that ran and was pinned for its peer: what
 * the target tells the source (its id, and its index, which references
 * name). index 0: none. */
struct RanCode {
    CodeId   id;
    uint64_t index = 0;
};

/* Runs the complete message in @a buffer of @a buffer_size bytes, if one is
 * there, and empties the buffer; it counts as delivered by @a path
 * (counters.h). @a state: the state of @a context, or NULL
 * to look it up (only when there is a frame). With @a pins (a channel's),
 * when a frame that carried its code ran and the code could be pinned for
 * that peer, it goes to @a ran: the caller then tells the source. Returns
 * what ucp_poll_ifunc documents. */
ucs_status_t poll_slot(ucp_context_h context, ContextState *state, void *buffer,
                       size_t buffer_size, void *target_args, RunPath path,
                       PeerPins *pins = nullptr, RanCode *ran = nullptr);

/* What ucp_poll_ifunc does (api/raw_api.cc catches what it throws). */
ucs_status_t poll_ifunc(ucp_context_h context, void *buffer, size_t buffer_size,
                        void *target_args);

} // namespace ucx_ifunc

#endif
