/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Owned state: what the library keeps for each UCP context (its settings,
 * loaded libraries, linked code, and which peers it already warned about),
 * created on the context's first ifunc call and released by
 * ucp_ifunc_context_release() or, for a context that only sends, when its
 * last registration goes. Two contexts in one process (an MPI library's and
 * the application's) share nothing but the process-wide pieces named in
 * ucp_ifunc.h.
 */
#ifndef UCP_IFUNC_CONTEXT_H_
#define UCP_IFUNC_CONTEXT_H_

#include "ucp/ifunc/base/counters.h"
#include "ucp/ifunc/load/link.h"
#include "ucp/ifunc/load/registry.h"
#include "ucp/ifunc/base/tls.h"

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>

namespace ucx_ifunc {

struct ContextState {
    /* Tells this state from a later one of the same context handle. */
    const uint64_t      id;
    const ucp_context_h context;
    Registry            registry;
    /* Warnings about what peers send, within limits (peer_log.h). */
    PeerLog   peer_log;
    CodeCache code{registry, peer_log};
    /* Messages run, bytes received, messages dropped (counters.h). */
    Counters counters;
    /* Guarded by the table of states in context.cc. */
    size_t handles  = 0;     /* registrations not yet released */
    bool   targeted = false; /* polled: holds code a peer relies on */

    ContextState(uint64_t state_id, ucp_context_h context_h)
        : id(state_id), context(context_h)
    {
    }
};

/* While one lives, this thread is running a message: a state the thread
 * lets go of meanwhile (NAME_main may poll another context, or release its
 * own) stays alive until the outermost message returns, so the code on the
 * stack stays mapped. Create one before target_state(). The one made
 * around the call of NAME_main also names the code that runs (@a code, in
 * context @a state), for ucp_ifunc_code_get. */
class RunningMessage {
public:
    RunningMessage() : RunningMessage(nullptr, nullptr) {}
    RunningMessage(ContextState &state, const CodeUse &code)
        : RunningMessage(&state, &code)
    {
    }
    ~RunningMessage();
    RunningMessage(const RunningMessage &)            = delete;
    RunningMessage &operator=(const RunningMessage &) = delete;

    /* The innermost one on this thread that names its code, or nullptr. */
    static const RunningMessage *innermost_code();

    ContextState *const   state;
    const CodeUse *const  code;
    RunningMessage *const outer; /* the one this one runs inside */
    /* The source of the message as the path that delivered it names it
     * (DeliveringFrom), or nullptr where it does not. */
    const void *const source;
    /* Its hop count (frame.h), and the sends its code made so far: what
     * bounds the sends of sandboxed code (peer.cc). */
    uint16_t         hop_count = 0;
    mutable unsigned sends     = 0;

private:
    RunningMessage(ContextState *state, const CodeUse *code);
};

/* What the innermost DeliveringFrom of this thread says (context.cc). */
extern UCX_IFUNC_TLS const void *delivering_from;

/* While one lives, the messages that this thread runs came from
 * @a source: a path that knows their source says so (the active-message
 * service the UCP endpoint back to it, the default path the peer whose
 * channel it polls), for the code that may send back to it. Inline: the
 * default path makes one per channel it polls. */
class DeliveringFrom {
public:
    explicit DeliveringFrom(const void *source) : outer_(delivering_from)
    {
        delivering_from = source;
    }
    ~DeliveringFrom() { delivering_from = outer_; }
    DeliveringFrom(const DeliveringFrom &)            = delete;
    DeliveringFrom &operator=(const DeliveringFrom &) = delete;

private:
    const void *outer_;
};

/* Delivery reports (docs/design.md, "Delivery reports"): a message whose
 * source asked for one carries a report id (frame.h: the headers'
 * report; am.cc: a reference's longer AM header). When such a message has
 * run, or was dropped, the path says so here, with the status its source
 * hears; the default path (peer.cc), which alone knows to whom and how to
 * answer, takes it through the hook it set, by the message's source as
 * the innermost DeliveringFrom names it. Without a hook, or for a message
 * whose source is no peer, nothing happens. */
using ReportHook = void (*)(const void *source, uint16_t report,
                            ucs_status_t status);
void set_report_hook(ReportHook hook);
void report_delivery(uint16_t report, ucs_status_t status);
/* The same for a message of @a source (RunningMessage::source: the code of
 * a message clears DeliveringFrom while it runs). */
void report_delivery_from(const void *source, uint16_t report,
                          ucs_status_t status);

/* The state of @a context for a target's poll, created on first use and
 * marked as one that must not go with the last registration (it holds code
 * a peer relies on). Valid until ucp_ifunc_context_release(context), and
 * within a RunningMessage until it ends; cheap when the same thread asks
 * for the same context again. */
ContextState &target_state(ucp_context_h context);

/* The state of @a context for an object that runs messages for as long as
 * it lives (a channel, an active-message target): created if needed and
 * marked as holding code a peer relies on. The object's reference keeps the
 * code it ran linked even past ucp_ifunc_context_release(). */
std::shared_ptr<ContextState> share_target_state(ucp_context_h context);

/* In a host call of sandboxed code: the handle of its own code if @a value
 * is the one it got from ucp_ifunc_code_get, else nullptr. */
ucp_ifunc_h sandbox_code_handle(uint64_t value);

/* What the exported registration and context calls do
 * (api/context_api.cc catches what they throw): ucp_ifunc_NAME and
 * ucp_NAME are NAME here, with the same arguments and results. */
ucs_status_t register_ifunc(ucp_context_h context, const char *ifunc_name,
                            ucp_ifunc_h *ifunc_p);
void         deregister_ifunc(ucp_ifunc_h ifunc_h);
void         context_release(ucp_context_h context);
ucs_status_t code_get(ucp_context_h                  context,
                      const ucp_ifunc_code_params_t *params,
                      ucp_ifunc_h                   *ifunc_p);
ucs_status_t code_register(ucp_context_h                  context,
                           const ucp_ifunc_code_params_t *params,
                           ucp_ifunc_h                   *ifunc_p);
ucs_status_t context_query(ucp_context_h             context,
                           ucp_ifunc_context_attr_t *attr);

} // namespace ucx_ifunc

#endif
