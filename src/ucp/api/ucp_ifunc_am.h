/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Delivery by active message: ucp_ifunc_am_*. Part of <ucp/api/ucp_ifunc.h>,
 * which includes every part: programs include that.
 */
#ifndef UCP_API_UCP_IFUNC_AM_H_
#define UCP_API_UCP_IFUNC_AM_H_

#include <ucp/api/ucp_ifunc_channel.h>

BEGIN_C_DECLS

/**
 * @addtogroup UCP_IFUNC_AM
 * @{
 *
 * Messages sent with UCP active messages need no buffer on the target and
 * no polling call: they run inside @c ucp_worker_progress of the target's
 * worker. Same libraries, same frames: the first message of each ifunc to
 * a target carries the code; once the target has replied that it holds it,
 * later messages name it by reference. Large payloads travel by UCX's own
 * rendezvous. Both sides call @ref ucp_ifunc_am_enable on their worker
 * (the target runs messages, the source receives the target's replies);
 * both contexts need @c UCP_FEATURE_AM.
 *
 * NAME_main runs inside a UCP callback here: it must not call
 * @c ucp_worker_progress or wait for a UCP operation; it may send.
 *
 * Use it where the target should keep no buffer and make no polling call,
 * for large payloads, and for sources that may die: it sends no put, so
 * over TCP a dying source cannot make UCX abort the target as it can on
 * the put paths (docs/known-issues.md). Over TCP it is also faster than
 * the put paths.
 */


/** The first of the two active message ids the AM path uses by default
 *  (messages on it, the target's replies on the next one). */
#define UCP_IFUNC_AM_ID_DEFAULT 240


/** @brief The ifunc active-message service of one worker. */
typedef struct ucp_ifunc_am *ucp_ifunc_am_h;


/** @brief The source's view of one target over the AM path. */
typedef struct ucp_ifunc_am_ep *ucp_ifunc_am_ep_h;


/**
 * @brief Fields of @ref ucp_ifunc_am_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_AM_FIELD_AM_ID       = UCS_BIT(0), /**< am_id */
    UCP_IFUNC_AM_FIELD_TARGET_ARGS = UCS_BIT(1)  /**< target_args */
} ucp_ifunc_am_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_am_enable.
 */
typedef struct ucp_ifunc_am_params {
    /** Bits of @ref ucp_ifunc_am_field_t. */
    uint64_t field_mask;
    /** Active message id for messages; replies use @a am_id + 1. Both
     *  sides must use the same. Default @ref UCP_IFUNC_AM_ID_DEFAULT. */
    unsigned am_id;
    /** Passed to @c NAME_main of every message this worker runs. Default
     *  NULL. */
    void *target_args;
} ucp_ifunc_am_params_t;


/**
 * @brief Start the ifunc active-message service on a worker.
 *
 * Sets (and replaces any existing) handlers of the worker for
 * @a params->am_id (messages, which run
 * during @c ucp_worker_progress with the code and statics of @a context's
 * ifunc state) and @a params->am_id + 1 (the targets' replies, telling a
 * source which code they hold).
 *
 * @param [in]  context  UCP context of @a worker, with @c UCP_FEATURE_AM.
 * @param [in]  worker   The worker.
 * @param [in]  params   Parameters; NULL for the defaults.
 * @param [out] am_p     The service; stop it with @ref ucp_ifunc_am_disable.
 *
 * @return UCS_OK                 The service runs.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return other                  The error of
 *                                @c ucp_worker_set_am_recv_handler (for
 *                                example when the context lacks
 *                                @c UCP_FEATURE_AM).
 */
ucs_status_t ucp_ifunc_am_enable(ucp_context_h context, ucp_worker_h worker,
                                 const ucp_ifunc_am_params_t *params,
                                 ucp_ifunc_am_h              *am_p);


/**
 * @brief Stop the ifunc active-message service of a worker.
 *
 * Removes its handlers; messages that arrive later are dropped by UCP.
 * Large messages whose data the service has not started to receive (it
 * receives at most a few by rendezvous at once) are dropped, with one
 * warning; those being received are completed and run first. Call it from
 * the thread that progresses the worker, after destroying the service's AM
 * endpoints.
 *
 * @param [in] am  The service; NULL is ignored.
 */
void ucp_ifunc_am_disable(ucp_ifunc_am_h am);


/**
 * @brief Start sending ifunc messages to a target over the AM path.
 *
 * The AM endpoint remembers which code the target said it holds (learnt
 * from its replies, which progress of the worker reads). Create a new one
 * for a new endpoint (a restarted target, for instance): it starts by
 * sending code again. Over an endpoint made from a worker address (one
 * with no connection manager lane) every message goes eagerly, and the
 * source refuses one larger than its own @c UCX_IFUNC_MAX_AM_MESSAGE
 * (docs/design.md, "Delivery by active message", says why).
 *
 * @param [in]  am        The service of the worker @a ep belongs to.
 * @param [in]  ep        Endpoint to the target.
 * @param [out] am_ep_p   The AM endpoint; release it with
 *                        @ref ucp_ifunc_am_ep_destroy.
 *
 * @return UCS_OK                 @a *am_ep_p is ready.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 */
ucs_status_t ucp_ifunc_am_ep_create(ucp_ifunc_am_h am, ucp_ep_h ep,
                                    ucp_ifunc_am_ep_h *am_ep_p);


/**
 * @brief Release an AM endpoint.
 *
 * Sends in flight still complete (the service keeps what they need);
 * replies for it that arrive later are ignored.
 *
 * @param [in] am_ep  The AM endpoint; NULL is ignored.
 */
void ucp_ifunc_am_ep_destroy(ucp_ifunc_am_ep_h am_ep);


/**
 * @brief Send a message as an active message.
 *
 * With the code until the target has replied that it holds it, by
 * reference afterwards. The request semantics are those of
 * @c ucp_am_send_nbx: NULL when the send completed at once (@a msg may be
 * released), an error pointer, or a request that completes when @a msg may
 * be released; free it with @c ucp_request_free. A message that goes by
 * rendezvous completes with UCS_ERR_NO_RESOURCE when the target had no
 * room for it to wait (4 096 wait for a receive there): it did not run,
 * send it again (the default path, @ref ucp_ifunc_peer_send_nbx, does);
 * the target's other refusals are UCS_ERR_EXCEEDS_LIMIT (larger than
 * @c UCX_IFUNC_MAX_AM_MESSAGE). Over an endpoint made from a worker
 * address (sent eagerly) the source refuses that itself, by its own limit,
 * as an error pointer.
 *
 * @param [in] am_ep   The AM endpoint.
 * @param [in] msg     Message to send.
 * @param [in] param   Request parameters: of @c op_attr_mask, only
 *                     @c UCP_OP_ATTR_FIELD_CALLBACK, @c _USER_DATA,
 *                     @c _REQUEST and @c UCP_OP_ATTR_FLAG_NO_IMM_CMPL are
 *                     accepted; NULL for none.
 * @param [in] send_params  Parameters of the ifunc send; NULL for the
 *                     defaults.
 *
 * @return NULL                   The send completed at once: @a msg may be
 *                                released.
 * @return request                A request, completed when @a msg may be
 *                                released, with UCS_OK, or the target's
 *                                refusal of a rendezvous message:
 *                                UCS_ERR_NO_RESOURCE (no room to wait: it
 *                                did not run, send it again) or
 *                                UCS_ERR_EXCEEDS_LIMIT (larger than the
 *                                target's @c UCX_IFUNC_MAX_AM_MESSAGE), or
 *                                a UCP error; free it with
 *                                @c ucp_request_free.
 * @return UCS_ERR_INVALID_PARAM  (an error pointer) A bad argument or
 *                                message.
 * @return UCS_ERR_EXCEEDS_LIMIT  (an error pointer) Over an endpoint made
 *                                from a worker address: the message is
 *                                larger than this process's
 *                                @c UCX_IFUNC_MAX_AM_MESSAGE.
 * @return UCS_ERR_UNSUPPORTED    (an error pointer) The library has no code
 *                                for the target's ISA.
 * @return other                  (an error pointer) As
 *                                @c ucp_am_send_nbx.
 */
ucs_status_ptr_t
ucp_ifunc_am_send_nbx(ucp_ifunc_am_ep_h am_ep, ucp_ifunc_msg_t msg,
                      const ucp_request_param_t             *param,
                      const ucp_ifunc_channel_send_params_t *send_params);


/**
 * @brief Query an AM endpoint.
 *
 * @param [in]     am_ep  The AM endpoint.
 * @param [in,out] attr   Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 */
ucs_status_t ucp_ifunc_am_ep_query(ucp_ifunc_am_ep_h    am_ep,
                                   ucp_ifunc_ep_attr_t *attr);

/** @} */

END_C_DECLS

#endif
