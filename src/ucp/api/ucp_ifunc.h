/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#ifndef UCP_IFUNC_H_
#define UCP_IFUNC_H_

/* The ifunc API, one header per audience, the default path first;
 * programs include this one. */
#include <ucp/api/ucp_ifunc_def.h>
#include <ucp/api/ucp_ifunc_peer.h>
#include <ucp/api/ucp_ifunc_raw.h>
#include <ucp/api/ucp_ifunc_channel.h>
#include <ucp/api/ucp_ifunc_am.h>
#include <ucp/api/ucp_ifunc_recursion.h>
#include <ucp/api/ucp_ifunc_sandbox.h>
#include <ucp/api/ucp_ifunc_context.h>

BEGIN_C_DECLS


/**
 * @defgroup UCP_IFUNC UCP injected functions (ifunc)
 * @ingroup UCP_API
 *
 * An ifunc ships the machine code of a small C function together with its
 * payload to a target process in one message. The target links the code
 * against its own address space and runs it; the handler does not have to
 * exist on the target in advance.
 *
 * Which path to use:
 *
 * | path                     | use it                                    |
 * | ------------------------ | ----------------------------------------- |
 * | @ref UCP_IFUNC_PEER      | first: connect by address, send a payload |
 * | @ref UCP_IFUNC_RAW       | for the paper's flow, a buffer you manage |
 * | @ref UCP_IFUNC_CHANNEL   | to stream into one target's ring, no peer |
 * | @ref UCP_IFUNC_AM        | without a buffer; sources that may die    |
 * | @ref UCP_IFUNC_RECURSION | in shipped code that sends itself on      |
 *
 * The default path, peers, picks a channel on shared memory and active
 * messages elsewhere, sends the code once, queues when there is no room
 * and isolates a peer that dies; the others are the layers it is built on,
 * for when their trade-offs are wanted (each group says when). The default
 * path in short (contexts with @c UCP_FEATURE_AM only: the ifunc worker
 * makes its own for the network and for channels; the complete programs
 * are examples/hello):
 * @code
 * // Target: accept peers, run what they send.
 * ucp_ifunc_worker_create(context, worker, &params, &iworker);
 * ucp_ifunc_listen(iworker, &listener_params, &listener);   // "13337"
 * for (;;)
 *     ucp_ifunc_worker_progress(iworker);   // NAME_main runs in here
 *
 * // Source: connect, send a payload that NAME_main of NAME.so runs there.
 * ucp_ifunc_worker_create(context, worker, NULL, &iworker);
 * ucp_ifunc_peer_connect(iworker, &peer_params, &peer);   // "host:13337"
 * ucp_register_ifunc(context, "NAME", &ifunc);   // $UCX_IFUNC_LIB_DIR/NAME.so
 * ucp_ifunc_peer_send_nbx(peer, ifunc, payload, length, NULL);
 * ucp_ifunc_peer_close(peer);   // what is under way arrives first
 * @endcode
 *
 * An ifunc library NAME.so, built with @c ucx-ifunc-cc, defines two payload
 * functions and @c NAME_main, in one of two conventions, both by the ifunc
 * authors. The paper's (and its prototype's):
 * @code
 * size_t NAME_payload_get_max_size(void *source_args, size_t source_args_size);
 * int    NAME_payload_init(void *payload, size_t payload_size,
 *                          void *source_args, size_t source_args_size);
 * void   NAME_main(void *payload, size_t payload_size, void *target_args);
 * @endcode
 * The workshop slides':
 * @code
 * size_t NAME_payload_bound(void *source_args, size_t source_args_size);
 * int    NAME_payload_init(void *source_args, size_t source_args_size,
 *                          void *payload, size_t *payload_size);
 * void   NAME_main(void *payload, size_t payload_size, void *target_args);
 * @endcode
 * The runtime tells them apart by the bound function the library defines;
 * a library that defines both is refused. The bound function returns the
 * largest payload the arguments need. @c NAME_payload_init fills the
 * payload in place: in the paper's convention the payload is always that
 * size (@a payload_size is the bound); in the slides', @a *payload_size is
 * the bound on entry and the number of bytes used on return, and the
 * message shrinks to it. Payload bytes it does not write are zero. A
 * non-zero result is a failure. Both run on the source as ordinary code;
 * @c ucx-ifunc-cc checks their prototypes against the convention of the
 * bound function the sources define. @c NAME_main runs on the target, once
 * per message. The paths that send a payload from the caller's memory
 * (@ref ucp_ifunc_peer_send_nbx, and @ref ucp_ifunc_msg_build with a
 * payload) do not call the payload functions.
 *
 * Both sides find libraries as @c $UCX_IFUNC_LIB_DIR/NAME.so.
 *
 * Thread safety: all calls may be made from several threads at once, except
 * where a group says otherwise (channels and peers: one thread at a time per
 * handle). Registration is serialised internally. Several threads may poll
 * different buffers concurrently, and several threads may poll the same
 * buffer: each message runs exactly once, in one of them. A message handle
 * may be sent by one thread at a time.
 */

/**
 * @defgroup UCP_IFUNC_PEER The default path: peers
 * @ingroup UCP_IFUNC
 */

/**
 * @defgroup UCP_IFUNC_RAW The paper's calls: a frame put into a buffer
 * @ingroup UCP_IFUNC
 */

/**
 * @defgroup UCP_IFUNC_CHANNEL Channels: streams of ifunc messages
 * @ingroup UCP_IFUNC
 */

/**
 * @defgroup UCP_IFUNC_AM Delivery by active message
 * @ingroup UCP_IFUNC
 */

/**
 * @defgroup UCP_IFUNC_RECURSION Recursive ifuncs: code that sends itself on
 * @ingroup UCP_IFUNC
 */

/**
 * @defgroup UCP_IFUNC_CONFIG Configuration, state and version
 * @ingroup UCP_IFUNC
 */

END_C_DECLS

#endif
