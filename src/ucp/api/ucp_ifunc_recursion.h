/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Recursive ifuncs: ucp_ifunc_code_get, ucp_ifunc_msg_build. Part of
 * <ucp/api/ucp_ifunc.h>, which includes every part: programs include that.
 */
#ifndef UCP_API_UCP_IFUNC_RECURSION_H_
#define UCP_API_UCP_IFUNC_RECURSION_H_

#include <ucp/api/ucp_ifunc_raw.h>

BEGIN_C_DECLS

/**
 * @addtogroup UCP_IFUNC_RECURSION
 * @{
 *
 * Code running in @c NAME_main on a target gets a handle of itself with
 * @ref ucp_ifunc_code_get (or of other code the process holds, by name),
 * builds a message from a new payload with @ref ucp_ifunc_msg_build, and
 * sends it on with the ordinary send calls, typically
 * @ref ucp_ifunc_am_send_nbx to an AM endpoint, or
 * @ref ucp_ifunc_peer_send_nbx to a peer, found in its @a target_args.
 * The targets need no copy of the library, only a trust policy that admits
 * the code: every process that receives it applies its own
 * (@c UCX_IFUNC_TRUST), so sign such code and list the key on every
 * process. How to write one, and its limits: docs/applications.md.
 */


/**
 * @brief A handle of code this process received, to send it on.
 *
 * Made for recursive ifuncs: code running in @c NAME_main on a target
 * creates messages of its own ifunc, or of another whose code the target
 * holds, with @ref ucp_ifunc_msg_build and sends them to other processes
 * (an AM endpoint or channel endpoint it finds in its @a target_args),
 * where they run and may do the same. The target needs no @c NAME.so: the
 * handle holds a copy of the code image as it was received (the image of
 * this process's ISA only, with its signature, if it had one). Every
 * process that receives the code applies its own trust policy
 * (@c UCX_IFUNC_TRUST) to it, as to any message.
 *
 * Without @ref UCP_IFUNC_CODE_PARAM_FIELD_NAME, the handle is the code of
 * the innermost message whose @c NAME_main runs on the calling thread;
 * @a context may then be NULL (the message's own context is used). With
 * it, the code of that name which @a context linked most recently, or
 * the library @a context registered with @ref ucp_register_ifunc.
 *
 * A handle of received code has no payload functions:
 * @ref ucp_ifunc_msg_create refuses it; build its messages from a payload
 * with @ref ucp_ifunc_msg_build. The handle stays valid after the code is
 * evicted or the message returns; release it with
 * @ref ucp_deregister_ifunc. A @c NAME_main that forwards on every message
 * may keep the handle in a static variable: statics of shipped code live as
 * long as the code stays linked in its context.
 *
 * @param [in]  context   The UCP context; NULL only without a name.
 * @param [in]  params    Parameters (@ref UCP_IFUNC_CODE_PARAM_FIELD_NAME
 *                        only); NULL for none.
 * @param [out] ifunc_p   The handle.
 *
 * @return UCS_OK                 @a *ifunc_p is set.
 * @return UCS_ERR_NO_ELEM        No message runs on this thread, or
 *                                @a context holds no code of that name
 *                                (one debug line).
 * @return UCS_ERR_INVALID_PARAM  A bad argument or unknown field.
 */
ucs_status_t ucp_ifunc_code_get(ucp_context_h                  context,
                                const ucp_ifunc_code_params_t *params,
                                ucp_ifunc_h                   *ifunc_p);


/**
 * @brief Fields of @ref ucp_ifunc_msg_params_t that are set.
 */
typedef enum {
    /** payload and payload_size */
    UCP_IFUNC_MSG_FIELD_PAYLOAD = UCS_BIT(0),
    /** source_args and source_args_size */
    UCP_IFUNC_MSG_FIELD_SOURCE_ARGS = UCS_BIT(1)
} ucp_ifunc_msg_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_msg_build.
 */
typedef struct ucp_ifunc_msg_params {
    /** Fields of this structure that are set
     *  (@ref ucp_ifunc_msg_field_t): exactly one of
     *  @ref UCP_IFUNC_MSG_FIELD_PAYLOAD and
     *  @ref UCP_IFUNC_MSG_FIELD_SOURCE_ARGS. */
    uint64_t field_mask;
    /** The payload, copied into the message as it is. */
    const void *payload;
    /** Bytes of @a payload. */
    size_t payload_size;
    /** Arguments of the library's payload functions, as in
     *  @ref ucp_ifunc_msg_create. */
    void *source_args;
    /** Bytes of @a source_args. */
    size_t source_args_size;
} ucp_ifunc_msg_params_t;


/**
 * @brief Create a message from a payload, or as @ref ucp_ifunc_msg_create.
 *
 * With @ref UCP_IFUNC_MSG_FIELD_PAYLOAD the payload is copied into the
 * message, and no payload function runs: this is how shipped code
 * (@ref ucp_ifunc_code_get) makes messages, and how a source sends a
 * payload it already has. With @ref UCP_IFUNC_MSG_FIELD_SOURCE_ARGS it is
 * @ref ucp_ifunc_msg_create. The message is like any other: send it with
 * any send call, release it with @ref ucp_ifunc_msg_free when its sends
 * have completed. Callable from @c NAME_main (it allocates, and never
 * progresses a worker).
 *
 * @param [in]  ifunc_h  A registered ifunc or a handle of received code.
 * @param [in]  params   Parameters.
 * @param [out] msg_p    The message.
 *
 * @return UCS_OK                 The message is ready to send.
 * @return UCS_ERR_INVALID_PARAM  A bad argument, not exactly one of the two
 *                                fields, source arguments for a handle
 *                                without payload functions, or
 *                                @c NAME_payload_init failed.
 * @return UCS_ERR_EXCEEDS_LIMIT  The payload is more than a frame can
 *                                hold, or as @ref ucp_ifunc_msg_create.
 * @return UCS_ERR_UNSUPPORTED    Source arguments for a handle of
 *                                @ref ucp_ifunc_code_register.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 */
ucs_status_t ucp_ifunc_msg_build(ucp_ifunc_h                   ifunc_h,
                                 const ucp_ifunc_msg_params_t *params,
                                 ucp_ifunc_msg_t              *msg_p);


/** @} */

END_C_DECLS

#endif
