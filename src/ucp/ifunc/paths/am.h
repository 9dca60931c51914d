/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "paths", delivery by active message: what the peer layer (peer.cc)
 * uses of the AM service besides the public calls. A peer sends a
 * reference with the payload straight from the caller's memory.
 */
#ifndef UCP_IFUNC_AM_H_
#define UCP_IFUNC_AM_H_

#include "ucp/ifunc/format/code_id.h"
#include "ucp/ifunc/deliver/code_once.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/deliver/multi_isa.h"
#include "ucp/ifunc/deliver/send_core.h"

#include <ucp/api/ucp_ifunc.h>

#include <atomic>
#include <functional>

#include <cstddef>
#include <cstdint>

namespace ucx_ifunc {

/* From now on the messages @a am runs count as the default path's
 * (RunPath::peer, counters.h): a peer worker's service. */
void am_count_as_peer(ucp_ifunc_am &am);

/* What the source knows of the AM endpoint's target: a peer sets its ISA
 * where it learnt it otherwise than from a reply (the hello), so that the
 * first messages carry that ISA's code only, and shares the table with its
 * channel (channel_ep_share_codes). */
TargetCodes &am_ep_codes(ucp_ifunc_am_ep &am_ep);


/* The AM header of a reference whose source asked for a delivery report:
 * its word (the reference's header), then the report id as 32 bits; the
 * header's length tells it from the others (docs/design.md). */
constexpr size_t kReportedRefHeaderLength = 12;
using ReportedRefHeader                   = char[kReportedRefHeaderLength];
void am_reported_ref_header(uint64_t word, uint16_t report, char *header);

/* An AM endpoint as a path of the send core (send_core.h): each write is
 * one ucp_am_send_nbx with @a param and the endpoint's flags, and
 * request() is what it returned. A reference that carries a report id
 * needs a header that lives until its send completes: @a reported_header,
 * the caller's (a ReportedRefHeader). */
class AmPath final : public SendPath {
public:
    AmPath(ucp_ifunc_am_ep &am_ep, const ucp_request_param_t *param,
           char *reported_header = nullptr)
        : am_ep_(am_ep), param_(param), reported_header_(reported_header)
    {
    }
    ucs_status_t     write_ref(const Outgoing &out) override;
    ucs_status_t     write_full(const Outgoing &out) override;
    ucs_status_ptr_t request() const { return request_; }

private:
    ucp_request_param_t request_param() const;
    /* Keeps @a request and counts the send in @a counter once UCP has it
     * (a send that must complete at once and cannot, UCS_ERR_NO_RESOURCE,
     * is tried again). */
    ucs_status_t sent(ucs_status_ptr_t request, std::atomic<uint64_t> &counter)
    {
        request_ = request;
        if (!UCS_PTR_IS_ERR(request)) {
            counter.fetch_add(1, std::memory_order_relaxed);
        }
        return UCS_PTR_IS_PTR(request) ? UCS_INPROGRESS
                                       : UCS_PTR_STATUS(request);
    }

    ucp_ifunc_am_ep           &am_ep_;
    const ucp_request_param_t *param_;
    char                      *reported_header_;
    ucs_status_ptr_t           request_ = nullptr;
};

/* Releases what the service keeps for the sources whose messages arrive on
 * @a reply_ep (their ids, their pinned code): the endpoint goes, and UCX
 * may give its address to the next one, whose messages then come from a
 * new source (am.cc, KnownSource). */
void am_forget_source(ucp_ifunc_am &am, ucp_ep_h reply_ep);

/* Before the peer layer closes @a reply_ep: the messages that came on it
 * and wait for a receive are dropped, their descriptors handed back to UCX
 * while the endpoint lives. True where a receive that may be of it (or
 * of a source UCX did not name) is still under way, or waits: UCX 1.13
 * asserts when an endpoint closes by flush with a receive under way, so
 * the caller closes it by force (which cancels the receive). */
bool am_drop_waiting_of(ucp_ifunc_am &am, ucp_ep_h reply_ep);

/* From now on @a am runs only messages that came with the reply flag on
 * an endpoint @a admits accepts (a peer that proved its key); the others
 * are dropped unread and counted as untrusted. */
void am_admit_only(ucp_ifunc_am &am, std::function<bool(ucp_ep_h)> admits);

/* From now on every message of @a am_ep goes with the reply flag, so
 * that its target knows the endpoint it came on: the default path's
 * peers send so, and their targets run nothing else (am_need_source). */
void am_ep_always_reply(ucp_ifunc_am_ep &am_ep);

/* From now on @a am runs only messages whose source UCP names (the reply
 * flag); the others are dropped unread with a warning and counted as
 * untrusted: the code of every message it runs can learn and answer its
 * source (ucp_ifunc_source_query, UCP_IFUNC_PEER_SOURCE). */
void am_need_source(ucp_ifunc_am &am);


/* What the exported active-message calls do (api/am_api.cc catches what
 * they throw): ucp_ifunc_am_NAME is am_NAME here, with the same arguments
 * and results. */
ucs_status_t am_enable(ucp_context_h context, ucp_worker_h worker,
                       const ucp_ifunc_am_params_t *params,
                       ucp_ifunc_am_h              *am_p);
void         am_disable(ucp_ifunc_am_h am);
ucs_status_t am_ep_create(ucp_ifunc_am_h am, ucp_ep_h ep,
                          ucp_ifunc_am_ep_h *am_ep_p);
void         am_ep_destroy(ucp_ifunc_am_ep_h am_ep);
/* Sends @a msg, a sealed message, on @a am_ep with UCP's request
 * parameters @a param (the arguments of ucp_ifunc_am_send_nbx, checked by
 * its shim). */
ucs_status_ptr_t am_send(ucp_ifunc_am_ep_h am_ep, const ucp_ifunc_msg_t &msg,
                         const ucp_request_param_t *param, bool with_code);

ucs_status_t am_ep_query(ucp_ifunc_am_ep_h am_ep, ucp_ifunc_ep_attr_t *attr);

} // namespace ucx_ifunc

#endif
