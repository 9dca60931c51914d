/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#ifndef UCP_IFUNC_H_
#define UCP_IFUNC_H_

#include <ucp/api/ucp.h>

#include <stddef.h>
#include <stdint.h>

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


/**
 * @addtogroup UCP_IFUNC_CONFIG
 * @{
 *
 * Configuration: the @c UCX_IFUNC_* environment variables, read through
 * UCX's configuration parser (so @c UCX_LOG_LEVEL controls the log and a
 * misspelt variable draws UCX's "unused env variable" warning). They are
 * listed, with their defaults and when each is read, in the configuration
 * table of README.md; <tt>ucx-ifunc-info -c</tt> lists them with their
 * values and defaults. Set them
 * before the program starts; a program that sets one with @c setenv after
 * starting should call @ref ucp_register_ifunc before creating its first
 * worker, or UCX reports the variable as unused.
 *
 * State: the library keeps what it loads and links per UCP context: the
 * context's settings (the @c UCX_IFUNC_* variables as the context last read
 * them), the ifunc libraries it loaded, and the code it linked, with the
 * static variables of that code. Two contexts in one process share none of
 * it. The state is created on a context's first ifunc call and released by
 * @ref ucp_ifunc_context_release; a context that only sends (it never ran a
 * message) also drops it when its last registration is released. Two pieces
 * stay process-wide: @c UCX_IFUNC_SHM_DIRECT (the send calls receive an
 * endpoint, not a context) and the random source id in every message's
 * nonce, which identifies the sending process to its targets.
 *
 * Version: @ref UCP_IFUNC_API_MAJOR and @ref UCP_IFUNC_API_MINOR of the
 * header an application was built with, @ref ucp_ifunc_get_version of the
 * library it runs with.
 */


/** Major version of the ifunc API; changes when a call's meaning or
 *  signature changes. */
#define UCP_IFUNC_API_MAJOR 0

/** Minor version of the ifunc API; changes when calls are added. */
#define UCP_IFUNC_API_MINOR 3

/** Construct an ifunc API version identifier from major and minor numbers,
 *  comparable with @ref UCP_IFUNC_API_VERSION. */
#define UCP_IFUNC_VERSION(_major, _minor) (((_major) << 16) | (_minor))

/** The ifunc API version of this header. */
#define UCP_IFUNC_API_VERSION                                                  \
    UCP_IFUNC_VERSION(UCP_IFUNC_API_MAJOR, UCP_IFUNC_API_MINOR)

/** @} */


/**
 * @addtogroup UCP_IFUNC_RAW
 * @{
 *
 * The six calls of the paper, with its names and signatures:
 * @ref ucp_register_ifunc, @ref ucp_ifunc_msg_create,
 * @ref ucp_ifunc_send_nbix (a frame written into a buffer the target mapped,
 * with one-sided puts), @ref ucp_poll_ifunc (the target runs it),
 * @ref ucp_ifunc_msg_free and @ref ucp_deregister_ifunc; and
 * @ref ucp_ifunc_send_nbx, which may be told the endpoint's worker and the
 * size of the target's buffer. Contexts need @c UCP_FEATURE_RMA only. Use
 * them for code written for the paper's API, to manage the target's buffer
 * yourself, or to measure the paper's mode. Over TCP that RMA context lets
 * any peer that reaches it write any of the target's memory (UCX checks
 * no key there): use this path over TCP only among trusted hosts.
 *
 * Every message carries its code (there is no way back from the target;
 * the other paths send it once), and the application hands the buffer's
 * address and remote key to the source out of band. Write a slot again only after the target's
 * @ref ucp_poll_ifunc has taken the message in it (acknowledge through your
 * own channel): over shared memory the source refuses a slot still in use,
 * over other transports it cannot see it. A channel
 * (@ref UCP_IFUNC_CHANNEL) does that bookkeeping on every transport.
 * @code
 * // Target: a buffer mapped with ucp_mem_map, its rkey sent to the source.
 * do {
 *     ucp_worker_progress(worker);
 *     status = ucp_poll_ifunc(context, buffer, buffer_size, &my_state);
 * } while (status == UCS_ERR_NO_MESSAGE);   // UCS_OK: one message ran
 *
 * // Source
 * ucp_register_ifunc(context, "NAME", &ifunc);          // loads NAME.so
 * ucp_ifunc_msg_create(ifunc, args, args_size, &msg);   // code + payload
 * ucp_ifunc_send_nbix(ep, msg, remote_buffer, rkey);    // one-sided puts
 * // flush the endpoint, progress until the target acknowledged, then:
 * ucp_ifunc_msg_free(msg);
 * ucp_deregister_ifunc(context, ifunc);
 * @endcode
 */


/** Longest ifunc name, in characters (the terminating NUL not counted). */
#define UCP_IFUNC_NAME_MAX 63


/**
 * @brief Handle of a registered ifunc library, returned by
 * @ref ucp_register_ifunc.
 */
typedef struct ucp_ifunc *ucp_ifunc_h;


/**
 * @brief An ifunc message ready to be sent.
 *
 * Created by @ref ucp_ifunc_msg_create and released by
 * @ref ucp_ifunc_msg_free. The frame is self-contained: it stays valid after
 * the ifunc is deregistered, and it may be sent any number of times, to one
 * or several targets; every delivery runs once.
 */
typedef struct ucp_ifunc_msg {
    /** The frame that @ref ucp_ifunc_send_nbix writes to the target: header,
     *  code image, payload and seal. Owned by the message. */
    void *frame;
    /** Number of bytes of @a frame written to the target. The target's
     *  buffer must be at least this large. */
    size_t frame_size;
} ucp_ifunc_msg_t;


/**
 * @brief Register the ifunc library @a ifunc_name on the source.
 *
 * Loads @c $UCX_IFUNC_LIB_DIR/NAME.so (NAME: @a ifunc_name), looks up its
 * payload functions and its shippable code image. Registering a name again
 * returns a new handle; each handle is released with
 * @ref ucp_deregister_ifunc. Once all handles of a library are released it
 * is unloaded, so registering it again picks up a rebuilt library.
 *
 * @param [in]  context     UCP context.
 * @param [in]  ifunc_name  Name of the ifunc: a C identifier of 1 to
 *                          @ref UCP_IFUNC_NAME_MAX characters.
 * @param [out] ifunc_p     Handle of the registered ifunc.
 *
 * @return UCS_OK                 Registered; @a *ifunc_p is set.
 * @return UCS_ERR_INVALID_PARAM  A bad name or argument, or a library that
 *                                defines the bound functions of both
 *                                conventions (@c NAME_payload_get_max_size
 *                                and @c NAME_payload_bound).
 * @return UCS_ERR_NO_ELEM        The library cannot be loaded or is not an
 *                                ifunc library.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 */
ucs_status_t ucp_register_ifunc(ucp_context_h context, const char *ifunc_name,
                                ucp_ifunc_h *ifunc_p);


/**
 * @brief Release a handle returned by @ref ucp_register_ifunc.
 *
 * Messages created from the handle stay valid.
 *
 * @param [in] context  UCP context the ifunc was registered with.
 * @param [in] ifunc_h  Handle to release; NULL is ignored.
 */
void ucp_deregister_ifunc(ucp_context_h context, ucp_ifunc_h ifunc_h);


/**
 * @brief Create a message of a registered ifunc.
 *
 * Calls the library's bound function to size the frame, allocates it,
 * copies the header and the code image into it, zeroes the payload, and
 * lets @c NAME_payload_init write the payload in place (no extra copy), in
 * the library's convention (see @ref UCP_IFUNC):
 * - the paper's (the library defines @c NAME_payload_get_max_size):
 *   @c NAME_payload_init(payload, bound, source_args, source_args_size);
 *   the payload is the bound's size;
 * - the workshop slides' (@c NAME_payload_bound):
 *   @c NAME_payload_init(source_args, source_args_size, payload,
 *   &payload_size), with @a payload_size the bound on entry; the frame
 *   shrinks to the size it reports.
 *
 * Bytes of the payload that @c NAME_payload_init leaves unwritten are
 * zero, never what the memory held before.
 *
 * @param [in]  ifunc_h           Registered ifunc.
 * @param [in]  source_args       Arguments passed to the payload functions.
 * @param [in]  source_args_size  Size of @a source_args.
 * @param [out] msg_p             The message; release it with
 *                                @ref ucp_ifunc_msg_free.
 *
 * @return UCS_OK                 The message is ready to send.
 * @return UCS_ERR_INVALID_PARAM  A bad argument, a handle of received code
 *                                (it has no payload functions: see
 *                                @ref ucp_ifunc_msg_build), or
 *                                @c NAME_payload_init failed.
 * @return UCS_ERR_EXCEEDS_LIMIT  @c NAME_payload_init reported more than
 *                                the bound allowed, or the bound is more
 *                                than a frame can hold.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 */
ucs_status_t ucp_ifunc_msg_create(ucp_ifunc_h ifunc_h, void *source_args,
                                  size_t           source_args_size,
                                  ucp_ifunc_msg_t *msg_p);


/**
 * @brief Release a message created by @ref ucp_ifunc_msg_create.
 *
 * Call it only when no send of the message is in flight any more, that is
 * after the endpoint was flushed (see @ref ucp_ifunc_send_nbix).
 *
 * @param [in] msg  Message to release. A message whose frame is NULL is
 *                  ignored.
 */
void ucp_ifunc_msg_free(ucp_ifunc_msg_t msg);

/** @} */


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
 * @brief Fields of @ref ucp_ifunc_code_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_CODE_FIELD_NAME = UCS_BIT(0) /**< name */
} ucp_ifunc_code_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_code_get.
 */
typedef struct ucp_ifunc_code_params {
    /** Fields of this structure that are set
     *  (@ref ucp_ifunc_code_field_t). */
    uint64_t field_mask;
    /** The ifunc whose code the context holds, by name. Without it: the
     *  code of the message that is running on the calling thread. */
    const char *name;
} ucp_ifunc_code_params_t;


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
 * Without @ref UCP_IFUNC_CODE_FIELD_NAME, the handle is the code of the
 * innermost message whose @c NAME_main runs on the calling thread;
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
 * @param [in]  params    Parameters; NULL for none.
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
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 */
ucs_status_t ucp_ifunc_msg_build(ucp_ifunc_h                   ifunc_h,
                                 const ucp_ifunc_msg_params_t *params,
                                 ucp_ifunc_msg_t              *msg_p);


/** @} */


/**
 * @addtogroup UCP_IFUNC_RAW
 * @{
 */

/**
 * @brief Write a message into the target's buffer.
 *
 * Writes the frame to @a remote_addr, which must lie in memory the target
 * mapped with @c ucp_mem_map and is 8-byte aligned; the target picks it up
 * with @ref ucp_poll_ifunc. The seal (the frame's last 8 bytes) becomes
 * visible only after the rest of the frame, so the target runs the message
 * only once all of it has arrived (docs/design.md, "Completion protocol",
 * says how on each transport):
 * - where the target's memory is directly reachable (shared memory, see
 *   @c ucp_rkey_ptr, and @c UCX_IFUNC_SHM_DIRECT=y), the frame is stored
 *   there directly, and the call returns UCS_OK;
 * - otherwise (TCP) the source first reads the slot's first word with a get
 *   to learn the size the target last polled the slot with: a frame that
 *   does not fit is refused with an error line, nothing written; a slot
 *   still in use, or not polled yet, is read again for up to 10 s, then the
 *   send is given up with an error line. Only then is the frame put, from
 *   a copy, the endpoint flushed, and the seal put when the flush
 *   completes. That costs two round trips, in later @c ucp_worker_progress
 *   calls of the endpoint's worker. @ref ucp_ifunc_send_nbx told the slot's
 *   size skips the read, and told the worker it may order the seal with
 *   @c ucp_worker_fence instead of the flush
 *   (@ref ucp_ifunc_send_params_t::worker).
 *
 * The call does not wait. Keep the message until a flush of the endpoint
 * (@c ucp_ep_flush_nbx) posted after this call has completed; keep the
 * endpoint and @a rkey, and keep progressing the worker, until the target
 * has run the message: over the put path the seal may still be on its way
 * when your flush completes. The message must fit in the target's buffer
 * (@c msg.frame_size bytes): the source refuses a larger frame when it
 * knows the slot's size: the size the target last polled it with (read
 * directly over shared memory, with a get over TCP), or the remote size
 * given to @ref ucp_ifunc_send_nbx. Over shared memory a slot the target
 * has not polled yet is written as the paper's rings do (ahead of the
 * target): poll a buffer once before handing out its rkey, or give the
 * remote size, to have every frame checked.
 *
 * After a put error part of the frame may still be on its way: flush the
 * endpoint before releasing the message. The target never runs a frame
 * whose seal did not arrive; over a put path the next frame written to the
 * slot replaces it, with direct stores the target clears it (zero its first
 * 8 bytes). A source told the remote size does not read the slot over TCP:
 * a frame written into a slot still in use then corrupts that message.
 * Channels (@ref ucp_ifunc_channel_send_nbx) rule that out on every
 * transport.
 *
 * @param [in] ep           Endpoint to the target.
 * @param [in] msg          Message to send.
 * @param [in] remote_addr  Address of the target's buffer (or ring slot).
 * @param [in] rkey         Remote key of that buffer, unpacked on @a ep.
 *
 * @return UCS_OK                 The frame is in the target's buffer (direct
 *                                stores): the target can run it now.
 * @return UCS_INPROGRESS         The frame was handed to UCP (any put path,
 *                                TCP included): it is in the target's
 *                                buffer only once the seal's put completed
 *                                remotely. Over TCP a frame that turns out
 *                                not to fit is refused later, with an error
 *                                line.
 * @return UCS_ERR_INVALID_PARAM  A bad argument or a damaged message.
 * @return UCS_ERR_EXCEEDS_LIMIT  The source sees at once that the frame
 *                                does not fit the target's buffer (shared
 *                                memory, or the remote size given); nothing
 *                                was written.
 * @return UCS_ERR_NO_RESOURCE    The source sees at once that the buffer
 *                                still holds a message the target has not
 *                                taken (shared memory); nothing was
 *                                written: send again after the target
 *                                polled it.
 * @return other                  The error of the underlying put.
 */
ucs_status_t ucp_ifunc_send_nbix(ucp_ep_h ep, ucp_ifunc_msg_t msg,
                                 uint64_t remote_addr, ucp_rkey_h rkey);


/**
 * @brief Fields of @ref ucp_ifunc_send_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_SEND_FIELD_WORKER      = UCS_BIT(0), /**< worker */
    UCP_IFUNC_SEND_FIELD_REMOTE_SIZE = UCS_BIT(1), /**< remote_size */
    UCP_IFUNC_SEND_FIELD_MACHINE     = UCS_BIT(2)  /**< machine */
} ucp_ifunc_send_field_t;


/**
 * @brief Optional parameters of @ref ucp_ifunc_send_nbx.
 */
typedef struct ucp_ifunc_send_params {
    /** Which fields below are set: bits of @ref ucp_ifunc_send_field_t.
     *  Fields not set take their defaults. */
    uint64_t field_mask;
    /** The worker @a ep was created on. Over a put path the seal may then
     *  be ordered after the body with @c ucp_worker_fence, without the
     *  round trip of a flush, where UCX's configuration makes that fence
     *  cheap and sound: the classic protocol engine
     *  (@c UCX_PROTO_ENABLE=n, the default of UCX 1.13 to 1.15) with one
     *  RMA lane (docs/design.md says why only there). Elsewhere the send
     *  uses the endpoint flush as without the worker. Default: not known. */
    ucp_worker_h worker;
    /** Bytes at @a remote_addr that the target polls (its buffer or slot
     *  size). A larger frame is refused before anything is written, on
     *  every transport, and over TCP the slot is not read first (one round
     *  trip less): the caller vouches for the size. Default: not known. */
    size_t remote_size;
    /** The target's ISA, as an ELF machine number (@c EM_X86_64,
     *  @c EM_AARCH64 of @c <elf.h>). The paper's raw path cannot ask the
     *  target what it runs, so the user says it: the frame then carries
     *  the library's code for that ISA (ucx-ifunc-cc --target lists the
     *  ISAs a library carries), or the send fails with
     *  UCS_ERR_UNSUPPORTED, nothing written, if it has none. Channels and
     *  AM learn it from the target. Default: this process's ISA. */
    uint16_t machine;
} ucp_ifunc_send_params_t;


/**
 * @brief Write a message into the target's buffer, with parameters.
 *
 * Does what @ref ucp_ifunc_send_nbix does, with the same rules for how
 * long the message, endpoint and rkey must live; @a params may name the
 * endpoint's worker (a cheaper ordering of the seal on put paths, where
 * UCX's configuration allows it) and the size of the target's buffer (a
 * frame too large is refused on every transport, nothing written).
 *
 * @param [in] ep           Endpoint to the target.
 * @param [in] msg          Message to send.
 * @param [in] remote_addr  Address of the target's buffer (or ring slot).
 * @param [in] rkey         Remote key of that buffer, unpacked on @a ep.
 * @param [in] params       Optional parameters; NULL for none.
 *
 * @return UCS_OK                 As @ref ucp_ifunc_send_nbix.
 * @return UCS_INPROGRESS         As @ref ucp_ifunc_send_nbix.
 * @return UCS_ERR_INVALID_PARAM  As @ref ucp_ifunc_send_nbix, and for
 *                                unknown bits in @a params->field_mask.
 * @return UCS_ERR_EXCEEDS_LIMIT  As @ref ucp_ifunc_send_nbix; with
 *                                @ref ucp_ifunc_send_params_t::remote_size
 *                                on every transport.
 * @return UCS_ERR_NO_RESOURCE    As @ref ucp_ifunc_send_nbix.
 * @return UCS_ERR_UNSUPPORTED    The library has no code for
 *                                @ref ucp_ifunc_send_params_t::machine;
 *                                nothing was written.
 * @return other                  The error of the underlying put.
 */
ucs_status_t ucp_ifunc_send_nbx(ucp_ep_h ep, ucp_ifunc_msg_t msg,
                                uint64_t remote_addr, ucp_rkey_h rkey,
                                const ucp_ifunc_send_params_t *params);


/**
 * @brief Run the message in @a buffer, if a complete one is there.
 *
 * Checks the buffer for a complete message and returns at once if there is
 * none; it never waits for the rest of a frame, and it does not progress
 * UCX: call @c ucp_worker_progress in the same loop (over TCP the frame only
 * lands in the buffer while the worker progresses).
 *
 * A complete message is validated: every size and offset is checked against
 * @a buffer_size before use. The ifunc is found by the name in the message;
 * an unknown name is registered from the target's own
 * @c $UCX_IFUNC_LIB_DIR/NAME.so, whose scope resolves the code's imports
 * (the library's dependencies and the symbols this program exports). The
 * code is linked once per code image into private executable memory, then
 * @c NAME_main(payload, payload_size, target_args) runs with the payload in
 * place in @a buffer. When it returns, the buffer is cleared and may receive
 * the next message. Static variables of the ifunc persist between messages
 * that carry the same code image to the same context, as in a loaded
 * library.
 *
 * @param [in] context      UCP context.
 * @param [in] buffer       The receive buffer (or one ring slot); 8-byte
 *                          aligned.
 * @param [in] buffer_size  Size of @a buffer: no frame larger than this is
 *                          read or run.
 * @param [in] target_args  Passed to @c NAME_main.
 *
 * A complete message that cannot run is rejected: the buffer is cleared,
 * one log line says why, and later messages work. A rejected message is
 * the peer's doing and is logged as a warning; a local failure as an
 * error.
 *
 * @return UCS_OK                 One message ran.
 * @return UCS_ERR_NO_MESSAGE     No complete message is there.
 * @return UCS_ERR_EXCEEDS_LIMIT  Rejected: the frame is larger than
 *                                @a buffer_size.
 * @return UCS_ERR_INVALID_PARAM  Rejected: a malformed frame; or a bad
 *                                argument.
 * @return UCS_ERR_NO_ELEM        Rejected: the library or a symbol is
 *                                missing on the target.
 * @return UCS_ERR_REJECTED       Rejected: the trust policy
 *                                (@c UCX_IFUNC_TRUST) does not admit the
 *                                code; or sandboxed code faulted and its
 *                                message was ended.
 * @return UCS_ERR_TIMED_OUT      Sandboxed code ran over
 *                                @c UCX_IFUNC_SANDBOX_BUDGET and its
 *                                message was ended.
 * @return UCS_ERR_UNSUPPORTED    Rejected: code for another architecture,
 *                                or a frame format version this target does
 *                                not read (one warning per source names
 *                                both versions).
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 */
ucs_status_t ucp_poll_ifunc(ucp_context_h context, void *buffer,
                            size_t buffer_size, void *target_args);

/** @} */


/**
 * @addtogroup UCP_IFUNC_CONFIG
 * @{
 */

/* Calls about a context's ifunc state as a whole (its release, queries,
 * counters) and about the library's version belong in this group: declare
 * them in this block. */


/**
 * @brief Release what the ifunc library keeps for @a context.
 *
 * Unloads the libraries the context loaded and unmaps the code it linked
 * (the static variables of that code are lost), and forgets its settings.
 * Call it when the context makes no more ifunc calls, before
 * @c ucp_cleanup: UCP may give a later context the same handle, and it must
 * not find this one's state. Registered handles and messages stay valid and
 * are released as usual. A thread that ran messages of the context keeps
 * the state until it runs a message of any context again or exits, and the
 * last one to let go frees it. A context that never ran a message releases
 * its state by itself when its last registration is released.
 *
 * @param [in] context  UCP context; one without ifunc state, or NULL, is
 *                      ignored.
 */
void ucp_ifunc_context_release(ucp_context_h context);


/**
 * @brief The version of the ifunc library in use.
 *
 * Compare @a major_version and @a minor_version with
 * @ref UCP_IFUNC_API_MAJOR and @ref UCP_IFUNC_API_MINOR of the header the
 * application was built with.
 *
 * @param [out] major_version   API major version.
 * @param [out] minor_version   API minor version.
 * @param [out] release_number  Release number within the API version.
 */
void ucp_ifunc_get_version(unsigned *major_version, unsigned *minor_version,
                           unsigned *release_number);


/**
 * @brief The version of the ifunc library in use, as a string
 *        "major.minor.release".
 *
 * @return A static string.
 */
const char *ucp_ifunc_get_version_string(void);

/** @} */


/**
 * @defgroup UCP_IFUNC_COUNTERS Runtime counters of a context
 * @ingroup UCP_IFUNC
 * @{
 *
 * What the ifunc state of a UCP context counted since the context's first
 * ifunc call: the messages it ran, by the path that delivered them; the
 * bytes of the messages it took; the messages it dropped, by reason (each
 * drop is also a warning in UCX's log, within limits); the code images it
 * linked and evicted. Counting takes no lock and no atomic operation on
 * the path of a message that runs. @ref ucp_ifunc_context_query reads the
 * counters at any time; with @c UCX_IFUNC_PRINT_COUNTERS=y,
 * @ref ucp_ifunc_context_release prints them to stdout, one
 * <tt>#   NAME VALUE</tt> line per field below, before it drops the state
 * (and the counters with it). A context that only sends counts nothing.
 * @code
 * ucp_ifunc_context_attr_t attr = {
 *         .field_mask = UCP_IFUNC_CONTEXT_ATTR_FIELD_RUN |
 *                       UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED};
 * if (ucp_ifunc_context_query(context, &attr) == UCS_OK)
 *     printf("%lu ran, %lu untrusted\n", attr.run_peer, attr.rejected_untrusted);
 * @endcode
 */


/**
 * @brief Fields of @ref ucp_ifunc_context_attr_t, by group.
 */
typedef enum {
    /** @a run_raw, @a run_channel, @a run_am, @a run_peer */
    UCP_IFUNC_CONTEXT_ATTR_FIELD_RUN = UCS_BIT(0),
    /** @a bytes_received */
    UCP_IFUNC_CONTEXT_ATTR_FIELD_BYTES = UCS_BIT(1),
    /** Every @a rejected_ field */
    UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED = UCS_BIT(2),
    /** @a codes_linked, @a codes_evicted, @a codes_held, @a code_memory */
    UCP_IFUNC_CONTEXT_ATTR_FIELD_CODES = UCS_BIT(3)
} ucp_ifunc_context_attr_field_t;


/**
 * @brief What @ref ucp_ifunc_context_query reports: the counters of a
 *        context's ifunc state.
 *
 * A message counts as run when its code was found or linked and its
 * @c NAME_main is about to be called; as rejected when it was dropped
 * instead, under one reason.
 */
typedef struct ucp_ifunc_context_attr {
    /** Bits of @ref ucp_ifunc_context_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** Messages run that @ref ucp_poll_ifunc took from a buffer (the
     *  paper's raw puts). */
    uint64_t run_raw;
    /** Messages run that @ref ucp_ifunc_channel_poll took from a channel. */
    uint64_t run_channel;
    /** Messages run that came by active message to a service of
     *  @ref ucp_ifunc_am_enable. */
    uint64_t run_am;
    /** Messages run that came from peers (the default path, by channel
     *  or active message). */
    uint64_t run_peer;
    /** Bytes of the messages taken from buffers, slots and active
     *  messages, run or dropped, as they arrived: header, code image and
     *  payload (a frame whose size field is not valid counts nothing). */
    uint64_t bytes_received;
    /** Dropped: code the trust policy refused (@c UCX_IFUNC_TRUST,
     *  @c UCX_IFUNC_TRUSTED_KEYS). */
    uint64_t rejected_untrusted;
    /** Dropped: a malformed frame or active message (sizes, offsets,
     *  seal, a header that is not an ifunc message's). */
    uint64_t rejected_bad_frame;
    /** Dropped: a frame format version this target does not read. */
    uint64_t rejected_bad_version;
    /** Dropped: a malformed code image, or one whose digest is not the
     *  code id its frame names. */
    uint64_t rejected_bad_code;
    /** Dropped: code for another ISA. */
    uint64_t rejected_wrong_isa;
    /** Dropped: code that imports a symbol or needs a library this
     *  process does not have. */
    uint64_t rejected_missing_import;
    /** Dropped: beyond a limit of this target (@c UCX_IFUNC_MAX_AM_MESSAGE,
     *  @c UCX_IFUNC_MAX_IMAGE_SIZE, @c UCX_IFUNC_MAX_LINKED_CODES or
     *  @c _MEMORY, a frame larger than its buffer). */
    uint64_t rejected_too_large;
    /** Dropped: a reference to code this target does not hold (evicted,
     *  or never linked). */
    uint64_t rejected_unknown_code;
    /** Refused: a rendezvous active message that found no room to wait
     *  for its receive; its source's send fails, and the default path
     *  sends it again. */
    uint64_t rejected_busy;
    /** Dropped: an active message whose data never arrived (its source
     *  failed, or @c UCX_IFUNC_AM_RECEIVE_TIMEOUT passed), or that still
     *  waited when its service was disabled. */
    uint64_t rejected_lost;
    /** Dropped: a local failure (memory, mappings). */
    uint64_t rejected_other;
    /** Code images linked. */
    uint64_t codes_linked;
    /** Code images evicted to make room (@c UCX_IFUNC_MAX_LINKED_CODES,
     *  @c UCX_IFUNC_MAX_LINKED_MEMORY). */
    uint64_t codes_evicted;
    /** Code images linked now. */
    uint64_t codes_held;
    /** Bytes the code linked now takes (its mappings and the received
     *  copy of each image). */
    uint64_t code_memory;
    /** Ended early (@ref UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED): sandboxed
     *  code that faulted or made a host call with a pointer outside its
     *  memory. */
    uint64_t rejected_sandbox_fault;
    /** Ended early (@ref UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED): sandboxed
     *  code that ran longer than @c UCX_IFUNC_SANDBOX_BUDGET. */
    uint64_t rejected_sandbox_budget;
} ucp_ifunc_context_attr_t;


/**
 * @brief Read the counters of @a context's ifunc state.
 *
 * Fills the fields that @a attr->field_mask asks for; bits it does not know
 * are ignored. The counts of messages that other threads run meanwhile
 * may be missed by a few. A context without ifunc state (no ifunc call
 * yet, or released by @ref ucp_ifunc_context_release) reports zeros.
 *
 * @param [in]     context  UCP context.
 * @param [in,out] attr     Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  @a context or @a attr is NULL.
 */
ucs_status_t ucp_ifunc_context_query(ucp_context_h             context,
                                     ucp_ifunc_context_attr_t *attr);

/** @} */


/**
 * @addtogroup UCP_IFUNC_CHANNEL
 * @{
 *
 * A channel is a ring of slots in memory the target maps, with flow control
 * by credits: the source streams messages without managing slots or
 * acknowledgements, and can neither write a slot that is still in use nor
 * write past the ring, on any transport. A channel also sends each ifunc's
 * code once: once the target has run a message that carried a code image,
 * the source's later messages of that code carry only the header, the
 * payload and the seal, and name the code by its id. The source sends such
 * a reference only after the channel has told it that the target holds the
 * code (docs/design.md explains why no message can miss its code).
 *
 * Use a channel to stream into one target without the set-up of peers:
 * over shared memory it stores directly, faster than active messages. Over
 * TCP a channel writes with puts, which are slower than active messages
 * there, and a source that dies mid-frame can make UCX abort the target
 * (docs/known-issues.md): take such sources by active message. A channel
 * over TCP needs @c UCP_FEATURE_RMA there, which lets any peer that
 * reaches the context write any of the target's memory: among trusted
 * hosts only.
 *
 * Target: @ref ucp_ifunc_channel_create, @ref ucp_ifunc_channel_pack (a
 * blob to hand to the source out of band), @ref ucp_ifunc_channel_poll,
 * @ref ucp_ifunc_channel_destroy. Source: @ref ucp_ifunc_channel_open from
 * the blob, @ref ucp_ifunc_channel_send_nbx, @ref ucp_ifunc_channel_close.
 * One source writes to a channel; a target that serves several sources
 * creates one channel for each. One thread at a time polls a channel, and
 * one thread at a time sends on a channel endpoint or progresses its
 * worker. @c NAME_main must not poll the channel that runs it.
 */


/** @brief The target's end of a channel. */
typedef struct ucp_ifunc_channel *ucp_ifunc_channel_h;


/** @brief The source's end of a channel. */
typedef struct ucp_ifunc_channel_ep *ucp_ifunc_channel_ep_h;


/**
 * @brief Fields of @ref ucp_ifunc_channel_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_CHANNEL_FIELD_SLOTS     = UCS_BIT(0), /**< slots */
    UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE = UCS_BIT(1)  /**< slot_size */
} ucp_ifunc_channel_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_channel_create.
 */
typedef struct ucp_ifunc_channel_params {
    /** Which fields below are set: bits of @ref ucp_ifunc_channel_field_t. */
    uint64_t field_mask;
    /** Number of slots: messages that may be in flight at once. 1 to
     *  65536; default 64. */
    unsigned slots;
    /** Bytes per slot: the largest frame, code included, the channel
     *  carries. A multiple of 64, at least 256; default 16384. */
    size_t slot_size;
} ucp_ifunc_channel_params_t;


/**
 * @brief Create a channel on the target.
 *
 * Maps memory for the ring with @c ucp_mem_map on @a context (which needs
 * @c UCP_FEATURE_RMA) and prepares it. Messages that arrive run in
 * @ref ucp_ifunc_channel_poll, with the code and statics of @a context's
 * ifunc state; the channel keeps the code it ran linked for as long as it
 * lives.
 *
 * @param [in]  context    UCP context of the target.
 * @param [in]  params     Parameters; NULL for the defaults.
 * @param [out] channel_p  The channel; release it with
 *                         @ref ucp_ifunc_channel_destroy.
 *
 * @return UCS_OK                 The channel is ready; hand its blob to the
 *                                source (@ref ucp_ifunc_channel_pack).
 * @return UCS_ERR_INVALID_PARAM  A bad argument or parameter.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return other                  The error of @c ucp_mem_map.
 */
ucs_status_t ucp_ifunc_channel_create(ucp_context_h                     context,
                                      const ucp_ifunc_channel_params_t *params,
                                      ucp_ifunc_channel_h *channel_p);


/**
 * @brief Pack what a source needs to open the channel.
 *
 * The blob holds the ring's address, size and layout, its remote key and an
 * identifier of this channel. Hand it to the source out of band; the source
 * opens the channel from it with @ref ucp_ifunc_channel_open.
 *
 * @param [in]  channel      The channel.
 * @param [out] blob_p       The blob; release it with
 *                           @ref ucp_ifunc_channel_blob_release.
 * @param [out] blob_size_p  Its size in bytes.
 *
 * @return UCS_OK                 @a *blob_p and @a *blob_size_p are set.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return other                  The error of @c ucp_rkey_pack.
 */
ucs_status_t ucp_ifunc_channel_pack(ucp_ifunc_channel_h channel, void **blob_p,
                                    size_t *blob_size_p);


/**
 * @brief Release a blob returned by @ref ucp_ifunc_channel_pack.
 *
 * @param [in] blob  The blob; NULL is ignored.
 */
void ucp_ifunc_channel_blob_release(void *blob);


/**
 * @brief Run the messages that are ready in a channel.
 *
 * Takes complete messages out of the ring in the order they were sent, up
 * to @a max_count, runs each (as @ref ucp_poll_ifunc does) and returns
 * their slots to the source. It never waits and does not progress UCX: call
 * @c ucp_worker_progress in the same loop. A message rejected on arrival
 * (one log line says why) frees its slot like one that ran.
 *
 * @param [in]  channel      The channel.
 * @param [in]  max_count    Most messages to take in this call; at least 1.
 * @param [in]  target_args  Passed to @c NAME_main.
 * @param [out] count_p      Messages taken out of the ring (run or
 *                           rejected); may be NULL.
 *
 * @return UCS_OK                 Every message taken ran, or none was
 *                                ready.
 * @return UCS_ERR_NO_ELEM        A message named code the target does not
 *                                hold (it runs nothing in its place), or
 *                                as @ref ucp_poll_ifunc.
 * @return UCS_ERR_INVALID_PARAM  A bad argument (@a max_count 0), or as
 *                                @ref ucp_poll_ifunc.
 * @return other                  The status of the first message rejected,
 *                                as @ref ucp_poll_ifunc reports it; later
 *                                messages were taken all the same.
 */
ucs_status_t ucp_ifunc_channel_poll(ucp_ifunc_channel_h channel,
                                    unsigned max_count, void *target_args,
                                    unsigned *count_p);


/**
 * @brief Destroy a channel.
 *
 * Unmaps the ring. Sources must have closed the channel (or stopped
 * sending) before: their writes would land in released memory.
 *
 * @param [in] channel  The channel; NULL is ignored.
 */
void ucp_ifunc_channel_destroy(ucp_ifunc_channel_h channel);


/**
 * @brief Fields of @ref ucp_ifunc_channel_open_params_t that are set.
 *
 * None yet; the parameter struct is there for what may come.
 */
typedef enum {
    UCP_IFUNC_CHANNEL_OPEN_FIELD_RESERVED = 0 /**< No field yet. */
} ucp_ifunc_channel_open_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_channel_open.
 */
typedef struct ucp_ifunc_channel_open_params {
    /** Bits of @ref ucp_ifunc_channel_open_field_t; must be 0 for now. */
    uint64_t field_mask;
} ucp_ifunc_channel_open_params_t;


/**
 * @brief Open a channel on the source, from the target's blob.
 *
 * Unpacks the channel's remote key on @a ep. Over shared memory (and with
 * @c UCX_IFUNC_SHM_DIRECT=y) the ring is mapped here once, and messages are
 * stored into it directly; otherwise they are put. The channel endpoint
 * knows nothing of the target's code yet: its first message of each ifunc
 * carries the code.
 *
 * @param [in]  worker     Worker @a ep was created on; its progress
 *                         completes the channel's puts and credit reads.
 * @param [in]  ep         Endpoint to the target.
 * @param [in]  blob       Blob from @ref ucp_ifunc_channel_pack.
 * @param [in]  blob_size  Its size.
 * @param [in]  params     Parameters; NULL for the defaults.
 * @param [out] channel_ep_p  The channel endpoint; release it with
 *                         @ref ucp_ifunc_channel_close.
 *
 * @return UCS_OK                 @a *channel_ep_p is open.
 * @return UCS_ERR_INVALID_PARAM  A bad argument, or a blob that is not a
 *                                channel's (or of another release).
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return other                  The error of @c ucp_ep_rkey_unpack.
 */
ucs_status_t
ucp_ifunc_channel_open(ucp_worker_h worker, ucp_ep_h ep, const void *blob,
                       size_t                                 blob_size,
                       const ucp_ifunc_channel_open_params_t *params,
                       ucp_ifunc_channel_ep_h                *channel_ep_p);


/**
 * @brief Flags of @ref ucp_ifunc_channel_send_params_t.
 */
typedef enum {
    /** Send the code image with this message even if the target holds it
     *  (the paper's mode, for measurements). */
    UCP_IFUNC_SEND_FLAG_WITH_CODE = UCS_BIT(0)
} ucp_ifunc_send_flags_t;


/**
 * @brief Fields of @ref ucp_ifunc_channel_send_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_CHANNEL_SEND_FIELD_FLAGS = UCS_BIT(0) /**< flags */
} ucp_ifunc_channel_send_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_channel_send_nbx and
 *        @ref ucp_ifunc_am_send_nbx.
 */
typedef struct ucp_ifunc_channel_send_params {
    /** Bits of @ref ucp_ifunc_channel_send_field_t. */
    uint64_t field_mask;
    /** Bits of @ref ucp_ifunc_send_flags_t. Default: 0. */
    uint64_t flags;
} ucp_ifunc_channel_send_params_t;


/**
 * @brief Send a message on a channel.
 *
 * Writes the message into the next slot of the ring, if the target has
 * returned it: with the code image the first time (until the target has
 * said it holds the code), by reference afterwards. Never waits.
 *
 * @param [in] channel_ep  The channel endpoint.
 * @param [in] msg         Message to send.
 * @param [in] params      Parameters; NULL for the defaults.
 *
 * If a write could not be completed (a put or flush failed, for example
 * because the endpoint failed), the target waits on that slot forever: the
 * channel endpoint then fails every later send with that error (one log
 * line each); close it and open a new channel.
 *
 * @return UCS_OK                 The message is in the target's ring
 *                                (direct stores): @a msg may be released
 *                                now.
 * @return UCS_INPROGRESS         The message was handed to UCP: keep @a msg
 *                                until a flush of the endpoint posted after
 *                                this call has completed.
 * @return UCS_ERR_NO_RESOURCE    No slot is free; nothing was written:
 *                                progress the worker, let the target poll,
 *                                and send again (the channel has already
 *                                asked the target for credits).
 * @return UCS_ERR_EXCEEDS_LIMIT  The frame with its code does not fit a
 *                                slot.
 * @return UCS_ERR_UNSUPPORTED    The library has no code for the target's
 *                                ISA; nothing was written.
 * @return UCS_ERR_INVALID_PARAM  A bad argument or message.
 * @return other                  The error of a put, or the error that
 *                                failed an earlier write (see above).
 */
ucs_status_t
ucp_ifunc_channel_send_nbx(ucp_ifunc_channel_ep_h                 channel_ep,
                           ucp_ifunc_msg_t                        msg,
                           const ucp_ifunc_channel_send_params_t *params);


/**
 * @brief Fields of @ref ucp_ifunc_ep_attr_t.
 */
typedef enum {
    UCP_IFUNC_EP_ATTR_FIELD_FREE_SLOTS     = UCS_BIT(0), /**< free_slots */
    UCP_IFUNC_EP_ATTR_FIELD_SENT_WITH_CODE = UCS_BIT(1), /**< sent_with_code */
    UCP_IFUNC_EP_ATTR_FIELD_SENT_BY_REF    = UCS_BIT(2), /**< sent_by_ref */
    UCP_IFUNC_EP_ATTR_FIELD_MACHINE        = UCS_BIT(3)  /**< machine */
} ucp_ifunc_ep_attr_field_t;


/**
 * @brief What @ref ucp_ifunc_channel_ep_query and @ref ucp_ifunc_am_ep_query
 *        report.
 */
typedef struct ucp_ifunc_ep_attr {
    /** Bits of @ref ucp_ifunc_ep_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** Slots the source knows to be free (channels; 0 for the AM path). */
    unsigned free_slots;
    /** Messages sent with their code image. */
    uint64_t sent_with_code;
    /** Messages sent by reference to code the target holds. */
    uint64_t sent_by_ref;
    /** The target's ISA as an ELF machine number (@c EM_X86_64,
     *  @c EM_AARCH64 of @c <elf.h>): the ISA whose code the endpoint sends.
     *  A channel knows it from its blob; an AM endpoint from the target's
     *  first reply, and is 0 until then (it then sends the code of every
     *  ISA the library carries, and the target runs its own). */
    uint16_t machine;
} ucp_ifunc_ep_attr_t;


/**
 * @brief Query a channel endpoint.
 *
 * @param [in]     channel_ep  The channel endpoint.
 * @param [in,out] attr        Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 */
ucs_status_t ucp_ifunc_channel_ep_query(ucp_ifunc_channel_ep_h channel_ep,
                                        ucp_ifunc_ep_attr_t   *attr);


/**
 * @brief Close a channel endpoint.
 *
 * Progresses the endpoint's worker until the channel's own operations
 * (seals waiting for a flush, a credit read) have completed, then releases
 * the remote key. Messages in flight still arrive. Call it before
 * destroying the endpoint. Over transports whose gets the target's worker
 * serves (TCP), a credit read completes only while the target progresses
 * its worker: keep the target progressing until its sources have closed.
 *
 * @param [in] channel_ep  The channel endpoint; NULL is ignored.
 */
void ucp_ifunc_channel_close(ucp_ifunc_channel_ep_h channel_ep);

/** @} */


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


/**
 * @addtogroup UCP_IFUNC_PEER
 * @{
 *
 * The simple way to use ifuncs, and the fast one on every transport. A
 * target listens on an address and a source connects to it, one call each
 * (UCX's client/server connection, with peer error handling: no socket
 * code, no address or key to exchange). A source then sends a payload from
 * its own memory with an ifunc handle in one call; the library sends the
 * code once and names it by a short index afterwards, sends the image for
 * the ISA the target said it runs, and picks the path per peer: a channel
 * stored into directly where the peer's memory is mapped here (shared
 * memory), delivery by active message elsewhere (TCP and any other
 * network). The target runs the messages of all its peers inside
 * @ref ucp_ifunc_worker_progress.
 *
 * Use it unless a layer below is wanted for itself. The layers below stay
 * available: the paper's calls (@ref UCP_IFUNC_RAW, a frame put into a
 * buffer), channels (@ref UCP_IFUNC_CHANNEL) and delivery by active message
 * (@ref UCP_IFUNC_AM); this API is built on the last two. UCX 1.13
 * connects peers by address over TCP: keep @c tcp in @c UCX_TLS
 * (@c UCX_TLS=sm,tcp still moves messages by shared memory). The complete
 * programs: examples/hello (hello_target.c, hello_source.c).
 *
 * Set-up trusts nothing a peer sends: each set-up message counts only on
 * its peer's own endpoint and with its random token, a channel (shared
 * memory) is made only for a peer that proved it runs on this host and
 * is opened only by the side that connected, connections being set up are
 * limited (@c UCX_IFUNC_PEER_PENDING, @c _PER_ADDRESS) and dropped after
 * @c UCX_IFUNC_PEER_SETUP_TIMEOUT, and with @c UCX_IFUNC_PEER_KEYS a peer
 * must prove an Ed25519 key of the list (its own from
 * @c UCX_IFUNC_IDENTITY_KEY, @c ucx-ifunc-keygen) before anything of it
 * runs (docs/security.md, "Peers at the network edge").
 *
 * Threads: one thread at a time calls the functions of one ifunc worker
 * and of its peers and listeners, as for a UCP worker of
 * @c UCS_THREAD_MODE_SINGLE; @c NAME_main of a message this worker runs may
 * call @ref ucp_ifunc_peer_send_nbx (code that sends itself on), nothing
 * else of this group.
 */


/** @brief The ifunc side of one UCP worker: its peers, the messages it runs. */
typedef struct ucp_ifunc_worker *ucp_ifunc_worker_h;


/** @brief A listening address that accepts peers. */
typedef struct ucp_ifunc_listener *ucp_ifunc_listener_h;


/** @brief Another process this worker exchanges ifunc messages with. */
typedef struct ucp_ifunc_peer *ucp_ifunc_peer_h;


/**
 * @brief How messages travel to a peer.
 */
typedef enum {
    /** Chosen per peer: @ref UCP_IFUNC_PATH_CHANNEL where this side
     *  connected to the peer, the peer proved that it runs on this host,
     *  and its memory can be mapped here (shared memory in @c UCX_TLS,
     *  @c UCX_IFUNC_SHM_DIRECT=y), else @ref UCP_IFUNC_PATH_AM. */
    UCP_IFUNC_PATH_AUTO = 0,
    /** A channel the source stores into directly; a message larger than a
     *  slot goes as an active message. Where the ring cannot be mapped, the
     *  peer uses @ref UCP_IFUNC_PATH_AM, as peers never send puts
     *  (docs/design.md, "The default path", says why). */
    UCP_IFUNC_PATH_CHANNEL = 1,
    /** Active messages (@ref UCP_IFUNC_AM). */
    UCP_IFUNC_PATH_AM = 2
} ucp_ifunc_path_t;


/**
 * @brief The status @c peer_cb hears, and sends to the peer return, once
 *        the peer was closed by the process behind it.
 *
 * That process called @ref ucp_ifunc_peer_close or
 * @ref ucp_ifunc_worker_destroy, which say so to this side before their
 * endpoint goes: everything it sent before has arrived (and run, where
 * this side progressed), and nothing more comes. A process that died, or
 * whose endpoint failed, gives a failure status instead (for example
 * UCS_ERR_CONNECTION_RESET or UCS_ERR_ENDPOINT_TIMEOUT), never this one.
 */
#define UCP_IFUNC_PEER_CLOSED UCS_ERR_NOT_CONNECTED


/**
 * @brief Called when a peer connects to a listener, or when a peer fails
 *        or is closed by the other side.
 *
 * @param [in] peer    The peer. After a failure, a peer this process
 *                     connected (@ref ucp_ifunc_peer_connect) stays valid
 *                     until @ref ucp_ifunc_peer_close, and its sends fail
 *                     with @a status; a peer a listener accepted belongs
 *                     to the worker, which releases it when the callback
 *                     returns: do not use or close it after that. (The
 *                     worker releases accepted peers that did not fail
 *                     when it is destroyed; the application may close one
 *                     earlier.)
 * @param [in] status  UCS_OK for a new peer; @ref UCP_IFUNC_PEER_CLOSED
 *                     when the other side closed it cleanly; else why it
 *                     failed (for example UCS_ERR_CONNECTION_RESET when
 *                     the process died). Not called from
 *                     @ref ucp_ifunc_worker_destroy.
 * @param [in] arg     @ref ucp_ifunc_worker_params_t::peer_cb_arg.
 */
typedef void (*ucp_ifunc_peer_cb_t)(ucp_ifunc_peer_h peer, ucs_status_t status,
                                    void *arg);


/**
 * @brief Fields of @ref ucp_ifunc_worker_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_WORKER_FIELD_TARGET_ARGS = UCS_BIT(0), /**< target_args */
    UCP_IFUNC_WORKER_FIELD_AM_ID       = UCS_BIT(1), /**< am_id */
    UCP_IFUNC_WORKER_FIELD_PATH        = UCS_BIT(2), /**< path */
    UCP_IFUNC_WORKER_FIELD_PEER_CB     = UCS_BIT(3) /**< peer_cb, peer_cb_arg */
} ucp_ifunc_worker_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_worker_create.
 */
typedef struct ucp_ifunc_worker_params {
    /** Bits of @ref ucp_ifunc_worker_field_t. */
    uint64_t field_mask;
    /** Passed to @c NAME_main of every message this worker runs. Default
     *  NULL. */
    void *target_args;
    /** The first of the three active message ids the worker uses (messages,
     *  replies, connection set-up). Every peer must use the same. Default
     *  @ref UCP_IFUNC_AM_ID_DEFAULT. */
    unsigned am_id;
    /** The path of peers this worker connects to or accepts, unless a peer
     *  asks for another. Default @ref UCP_IFUNC_PATH_AUTO. */
    ucp_ifunc_path_t path;
    /** Called from @ref ucp_ifunc_worker_progress when a peer connects to
     *  one of this worker's listeners, and when a peer fails. Default none. */
    ucp_ifunc_peer_cb_t peer_cb;
    /** Passed to @a peer_cb. */
    void *peer_cb_arg;
} ucp_ifunc_worker_params_t;


/**
 * @brief Make a UCP worker an ifunc worker.
 *
 * Starts the ifunc active-message service on @a worker (which replaces
 * active message handlers of the three ids the worker uses), for peers on
 * endpoints of @a worker (@ref ucp_ifunc_peer_params_t::ep), and prepares
 * to poll the channels of its peers. @a context needs @c UCP_FEATURE_AM;
 * its ifunc state runs the messages.
 *
 * Network peers never reach @a context: listeners and peers connected by
 * address use a UCP context and worker the ifunc worker makes for itself,
 * with @c UCP_FEATURE_AM only (UCP then carries out no put, get or atomic
 * of a peer, whatever transport), and channels are mapped by a second one,
 * with @c UCP_FEATURE_RMA, restricted to the shared-memory transports of
 * @c UCX_TLS (only processes on this host reach it). Both read the UCX
 * configuration (@c UCX_* variables, @c UCX_TLS among them) now, as
 * @c ucp_config_read does, and take @a worker's thread mode. They are made
 * when first needed (a listener, a connect by address, a channel).
 * @ref ucp_ifunc_worker_query names the network one. UCX's own transports
 * still let a peer that reaches their ports do more than UCP allows
 * (docs/security.md, "What UCX itself lets a network peer do"): keep UCX
 * ports reachable from trusted hosts only.
 *
 * @param [in]  context    UCP context of @a worker.
 * @param [in]  worker     The worker; it must outlive the ifunc worker.
 * @param [in]  params     Parameters; NULL for the defaults.
 * @param [out] iworker_p  The ifunc worker; release it with
 *                         @ref ucp_ifunc_worker_destroy.
 *
 * @return UCS_OK                 @a *iworker_p is ready.
 * @return UCS_ERR_INVALID_PARAM  A bad argument or parameter.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return other                  The error of
 *                                @c ucp_worker_set_am_recv_handler.
 */
ucs_status_t ucp_ifunc_worker_create(ucp_context_h context, ucp_worker_h worker,
                                     const ucp_ifunc_worker_params_t *params,
                                     ucp_ifunc_worker_h *iworker_p);


/**
 * @brief Progress an ifunc worker: run what arrived, send what waits.
 *
 * Progresses the UCP worker (messages that came by active message run
 * there), runs the messages that are ready in the channels of its peers,
 * completes sends that waited for room (@ref ucp_ifunc_peer_send_nbx), and
 * reports new and failed peers to the worker's @c peer_cb. Never waits.
 * Call it instead of @c ucp_worker_progress.
 *
 * @param [in] iworker  The ifunc worker.
 *
 * @return The number of events: messages run, sends completed, and what
 *         @c ucp_worker_progress counted.
 */
unsigned ucp_ifunc_worker_progress(ucp_ifunc_worker_h iworker);


/**
 * @brief Fields of @ref ucp_ifunc_worker_attr_t.
 */
typedef enum {
    UCP_IFUNC_WORKER_ATTR_FIELD_NET_WORKER = UCS_BIT(0) /**< net_worker */
} ucp_ifunc_worker_attr_field_t;


/**
 * @brief What @ref ucp_ifunc_worker_query reports.
 */
typedef struct ucp_ifunc_worker_attr {
    /** Bits of @ref ucp_ifunc_worker_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** The UCP worker of the listeners and of the peers connected by
     *  address (its context has @c UCP_FEATURE_AM only), made now if it was
     *  not yet: an application may set active message handlers of its own
     *  there, for messages it sends on those peers' endpoints
     *  (@ref UCP_IFUNC_PEER_ATTR_FIELD_EP). @ref ucp_ifunc_worker_progress
     *  progresses it; it goes with the ifunc worker. */
    ucp_worker_h net_worker;
} ucp_ifunc_worker_attr_t;


/**
 * @brief Query an ifunc worker.
 *
 * @param [in]     iworker  The ifunc worker.
 * @param [in,out] attr     Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return other                  The network worker could not be made.
 */
ucs_status_t ucp_ifunc_worker_query(ucp_ifunc_worker_h       iworker,
                                    ucp_ifunc_worker_attr_t *attr);


/**
 * @brief Fields of @ref ucp_ifunc_source_attr_t.
 */
typedef enum {
    UCP_IFUNC_SOURCE_ATTR_FIELD_PEER = UCS_BIT(0), /**< peer */
    UCP_IFUNC_SOURCE_ATTR_FIELD_KEY  = UCS_BIT(1)  /**< key, key_verified */
} ucp_ifunc_source_attr_field_t;


/**
 * @brief Who sent the message that runs now: @ref ucp_ifunc_source_query.
 */
typedef struct ucp_ifunc_source_attr {
    /** Bits of @ref ucp_ifunc_source_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** The peer that sent it. */
    ucp_ifunc_peer_h peer;
    /** Its Ed25519 public key, as it proved it at connect
     *  (@c UCX_IFUNC_PEER_KEYS); zeros where @a key_verified is 0. */
    uint8_t key[32];
    /** 1 if the peer proved @a key, else 0. */
    int key_verified;
} ucp_ifunc_source_attr_t;


/**
 * @brief Who sent the message whose @c NAME_main runs on this thread.
 *
 * Called from @c NAME_main of a message an ifunc worker runs in
 * @ref ucp_ifunc_worker_progress, this tells its source peer and the key
 * that peer proved at connect. The path that delivered the message names
 * its source, never the message itself, so no peer can pass its message
 * off as another's: a channel is one peer's alone, and every active
 * message of the default path comes with UCX's reply flag, which names
 * the endpoint it came on (the worker runs no active message without it).
 * The peer may be passed to @ref ucp_ifunc_peer_send_nbx, or the message
 * answered with @ref UCP_IFUNC_PEER_SOURCE.
 *
 * @param [in,out] attr  Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  @a attr is NULL.
 * @return UCS_ERR_NO_ELEM        No message of the default path runs on
 *                                this thread, or its source is no longer
 *                                a peer of the worker (closed).
 */
ucs_status_t ucp_ifunc_source_query(ucp_ifunc_source_attr_t *attr);


/**
 * @brief Destroy an ifunc worker.
 *
 * Safe in every state: never progressed (connection requests still
 * waiting in UCX), with peers being set up, and mid-message (sends queued
 * or in flight, receives under way). From the call on, connection
 * requests are rejected, an unknown endpoint's hello makes no peer, and
 * @c peer_cb is not called. The peers still open close together, as
 * @ref ucp_ifunc_peer_close closes one (each tells the other side,
 * which hears @ref UCP_IFUNC_PEER_CLOSED; what cannot be sent within a
 * peer's timeout is lost, counted in one warning for the whole worker);
 * so the call takes about the longest of its peers' closes, not their
 * sum. Then its listeners go (a connection request still waiting is
 * rejected) and its active message service stops. Handles of its peers
 * and listeners are invalid afterwards.
 *
 * @param [in] iworker  The ifunc worker; NULL is ignored.
 */
void ucp_ifunc_worker_destroy(ucp_ifunc_worker_h iworker);


/**
 * @brief Fields of @ref ucp_ifunc_listener_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_LISTENER_FIELD_ADDRESS = UCS_BIT(0) /**< address */
} ucp_ifunc_listener_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_listen.
 */
typedef struct ucp_ifunc_listener_params {
    /** Bits of @ref ucp_ifunc_listener_field_t. */
    uint64_t field_mask;
    /** Where to listen: "HOST:PORT", ":PORT" or "PORT" (every interface),
     *  HOST an IPv4 or IPv6 address or a name; port 0 lets the system pick
     *  one (@ref ucp_ifunc_listener_query tells it). Default "0". */
    const char *address;
} ucp_ifunc_listener_params_t;


/**
 * @brief Accept peers on an address.
 *
 * Peers that connect are accepted in @ref ucp_ifunc_worker_progress (with
 * peer error handling, so that a peer that dies fails alone); their
 * messages run in it from then on. The worker's @c peer_cb hears of each.
 *
 * @param [in]  iworker     The ifunc worker.
 * @param [in]  params      Parameters; NULL for the defaults.
 * @param [out] listener_p  The listener; release it with
 *                          @ref ucp_ifunc_listener_destroy.
 *
 * @return UCS_OK                 Listening.
 * @return UCS_ERR_INVALID_PARAM  A bad argument, or an address that cannot
 *                                be parsed or resolved.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return UCS_ERR_BUSY           The port is taken.
 * @return other                  The error of @c ucp_listener_create.
 */
ucs_status_t ucp_ifunc_listen(ucp_ifunc_worker_h                 iworker,
                              const ucp_ifunc_listener_params_t *params,
                              ucp_ifunc_listener_h              *listener_p);


/**
 * @brief Fields of @ref ucp_ifunc_listener_attr_t.
 */
typedef enum {
    UCP_IFUNC_LISTENER_ATTR_FIELD_PORT = UCS_BIT(0) /**< port */
} ucp_ifunc_listener_attr_field_t;


/**
 * @brief What @ref ucp_ifunc_listener_query reports.
 */
typedef struct ucp_ifunc_listener_attr {
    /** Bits of @ref ucp_ifunc_listener_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** The port it listens on. */
    uint16_t port;
} ucp_ifunc_listener_attr_t;


/**
 * @brief Query a listener.
 *
 * @param [in]     listener  The listener.
 * @param [in,out] attr      Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return other                  The error of @c ucp_listener_query.
 */
ucs_status_t ucp_ifunc_listener_query(ucp_ifunc_listener_h       listener,
                                      ucp_ifunc_listener_attr_t *attr);


/**
 * @brief Stop accepting peers. Peers already accepted stay.
 *
 * @param [in] listener  The listener; NULL is ignored.
 */
void ucp_ifunc_listener_destroy(ucp_ifunc_listener_h listener);


/**
 * @brief Fields of @ref ucp_ifunc_peer_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_PEER_FIELD_ADDRESS = UCS_BIT(0), /**< address */
    UCP_IFUNC_PEER_FIELD_EP      = UCS_BIT(1), /**< ep */
    UCP_IFUNC_PEER_FIELD_PATH    = UCS_BIT(2), /**< path */
    UCP_IFUNC_PEER_FIELD_TIMEOUT = UCS_BIT(3)  /**< timeout_ms */
} ucp_ifunc_peer_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_peer_connect, with exactly one of
 *        @a address and @a ep.
 */
typedef struct ucp_ifunc_peer_params {
    /** Bits of @ref ucp_ifunc_peer_field_t. */
    uint64_t field_mask;
    /** "HOST:PORT" of a peer's listener (@ref ucp_ifunc_listen). */
    const char *address;
    /** An endpoint to the peer the application made (for example from a
     *  worker address; use @c UCP_ERR_HANDLING_MODE_PEER so that a peer
     *  that dies fails alone). It must outlive the peer handle. The peer
     *  must be an ifunc worker with the same @c am_id. */
    ucp_ep_h ep;
    /** The path to this peer; default: the worker's. */
    ucp_ifunc_path_t path;
    /** How long to wait for the peer to listen and answer, in
     *  milliseconds; default 10 000. */
    unsigned timeout_ms;
} ucp_ifunc_peer_params_t;


/**
 * @brief Connect to a peer.
 *
 * Creates the endpoint (from @a address) or takes @a ep, tells the peer
 * this process's ISA and host, and progresses the worker until the peer
 * has answered with its own, the path is set up both ways, and both sides
 * have flushed their endpoints to each other (each says so), so that
 * either side may stop progressing for a while afterwards. Messages of the
 * peer that
 * arrive meanwhile run. An address where nothing listens yet (a target
 * still starting) is tried again every 50 ms until the timeout.
 *
 * @param [in]  iworker  The ifunc worker.
 * @param [in]  params   Parameters.
 * @param [out] peer_p   The peer; release it with @ref ucp_ifunc_peer_close.
 *
 * @return UCS_OK                 Connected, both ways.
 * @return UCS_ERR_INVALID_PARAM  A bad argument, or an address that cannot
 *                                be parsed or resolved.
 * @return UCS_ERR_UNREACHABLE    No listener there (one log line).
 * @return UCS_ERR_TIMED_OUT      No answer in time, for example from a peer
 *                                that is not an ifunc worker, or of another
 *                                @c am_id (one log line).
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return other                  The error of @c ucp_ep_create.
 */
ucs_status_t ucp_ifunc_peer_connect(ucp_ifunc_worker_h             iworker,
                                    const ucp_ifunc_peer_params_t *params,
                                    ucp_ifunc_peer_h              *peer_p);


/** @brief Called when a send of @ref ucp_ifunc_peer_send_nbx completes. */
typedef void (*ucp_ifunc_send_cb_t)(void *user_data, ucs_status_t status);


/**
 * @brief Called once with what became of a message of
 *        @ref ucp_ifunc_peer_send_nbx that asked for a delivery report
 *        (@ref ucp_ifunc_peer_send_params_t::report).
 *
 * The target reports on the peer's own endpoint, whichever path the
 * message took; a report counts only on the endpoint of the peer the
 * message was sent to. @a status:
 *
 * - UCS_OK: the target ran it (@c NAME_main returned).
 * - UCS_ERR_REJECTED: the target does not trust its code
 *   (@c UCX_IFUNC_TRUST).
 * - UCS_ERR_EXCEEDS_LIMIT: beyond a limit of the target: the code's size
 *   (@c UCX_IFUNC_MAX_IMAGE_SIZE), the code it keeps linked
 *   (@c UCX_IFUNC_MAX_LINKED_*), a sandboxed code's memory. (A message
 *   larger than the peer's @c UCX_IFUNC_MAX_AM_MESSAGE is refused by
 *   @ref ucp_ifunc_peer_send_nbx itself.)
 * - UCS_ERR_NOT_IMPLEMENTED: its code imports a symbol or needs a library
 *   the target does not have.
 * - UCS_ERR_NO_ELEM: it named code the target no longer holds (a
 *   reference after the target's ifunc state was released).
 * - UCS_ERR_UNSUPPORTED: code for another ISA, or a frame format the
 *   target does not read.
 * - UCS_ERR_INVALID_PARAM: a malformed message or code image.
 * - UCS_ERR_IO_ERROR: sandboxed code faulted or made a refused host call.
 * - UCS_ERR_TIMED_OUT: sandboxed code ran over the target's
 *   @c UCX_IFUNC_SANDBOX_BUDGET.
 * - UCS_ERR_MESSAGE_TRUNCATED: its data never arrived whole.
 * - UCS_ERR_NO_MEMORY: the target failed locally (memory, mappings).
 * - UCS_ERR_CANCELED: the peer was closed (@ref ucp_ifunc_peer_close, or
 *   @ref ucp_ifunc_worker_destroy) before the report came.
 * - the peer's failure (for example UCS_ERR_CONNECTION_RESET): it failed
 *   before the report came; or the send's own failure, where the message
 *   never reached the target.
 *
 * Called from @ref ucp_ifunc_worker_progress (or the call that closes the
 * peer); it may send, but must not close the peer nor destroy the worker.
 */
typedef void (*ucp_ifunc_report_cb_t)(void *user_data, ucs_status_t status);


/**
 * @brief Fields of @ref ucp_ifunc_peer_send_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_PEER_SEND_FIELD_FLAGS     = UCS_BIT(0), /**< flags */
    UCP_IFUNC_PEER_SEND_FIELD_CALLBACK  = UCS_BIT(1), /**< cb */
    UCP_IFUNC_PEER_SEND_FIELD_USER_DATA = UCS_BIT(2), /**< user_data */
    UCP_IFUNC_PEER_SEND_FIELD_REPORT    = UCS_BIT(3)  /**< report */
} ucp_ifunc_peer_send_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_peer_send_nbx.
 */
typedef struct ucp_ifunc_peer_send_params {
    /** Bits of @ref ucp_ifunc_peer_send_field_t. */
    uint64_t field_mask;
    /** Bits of @ref ucp_ifunc_send_flags_t. Default: 0. */
    uint64_t flags;
    /** Called when the payload may be reused, if the send returned
     *  UCS_INPROGRESS: with UCS_OK once sent, UCS_ERR_CANCELED where
     *  @ref ucp_ifunc_peer_close (or @ref ucp_ifunc_worker_destroy) ended
     *  it unsent, else the peer's failure. Without it, a send never
     *  returns UCS_INPROGRESS: the library copies what the transport
     *  would still read. */
    ucp_ifunc_send_cb_t cb;
    /** Passed to @a cb and @a report. */
    void *user_data;
    /** Asks for a delivery report: called once with what became of the
     *  message (@ref ucp_ifunc_report_cb_t). The message then carries a
     *  report id (in a reference by active message, 4 bytes more and the
     *  reply flag; a message queued or sent before the peer said it holds
     *  the code carries its code). Without it, nothing is reported and
     *  nothing of it is sent. Default: none. */
    ucp_ifunc_report_cb_t report;
} ucp_ifunc_peer_send_params_t;


/**
 * @brief Send a payload to a peer, to be run by an ifunc there.
 *
 * The target runs @c NAME_main of @a ifunc_h's library on a copy of the
 * @a length bytes at @a payload (16-byte aligned there), once. The payload
 * functions of the library are not used: the payload is the caller's. The
 * code goes with the first messages until the peer has said it holds it;
 * later messages name it by a short index. Messages to one peer run in the
 * order they were sent when they take the same path (payloads that do not
 * fit a channel's slot take the active message path). @a ifunc_h may also
 * come from @ref ucp_ifunc_code_get (code that sends itself on), and the
 * call may be made from @c NAME_main.
 *
 * @c NAME_main, native or sandboxed, answers the message it runs in one
 * call with @ref UCP_IFUNC_PEER_SOURCE as @a peer, which names the peer
 * that sent that message, on whatever path it came (a request and its
 * reply: @c docs/guide.md, "Replying to the source").
 *
 * When the path has no room (a channel whose slots are all in use, or 256
 * active messages to the peer in flight), the send is queued, its payload
 * copied, and a later @ref ucp_ifunc_worker_progress sends it; at most
 * @c UCX_IFUNC_PEER_QUEUE sends wait per peer, and at most
 * @c UCX_IFUNC_PEER_QUEUE_BYTES bytes of messages wait or are in flight by
 * active message. Sandboxed code names the peer by a handle of
 * @ref ucp_ifunc_sandbox_peer_grant or @ref UCP_IFUNC_PEER_SOURCE, and its
 * sends are bounded as that call says. A message the target
 * refused for now (too many rendezvous messages waited there) is sent
 * again by progress; the callback hears only the final status.
 *
 * A returned UCS_OK says the message went (or waits to go), not that it
 * ran: what the target did with it, the source learns only by asking for
 * a delivery report (@ref ucp_ifunc_peer_send_params_t::report). A
 * message larger than the peer takes is refused here, at once: each side
 * tells the other its @c UCX_IFUNC_MAX_AM_MESSAGE at connect, and a
 * message that would go by active message (its payload, with its code
 * while the code goes with it) larger than the peer's is
 * UCS_ERR_EXCEEDS_LIMIT; one that fits a channel slot goes whatever its
 * size.
 *
 * @param [in] peer     The peer.
 * @param [in] ifunc_h  The ifunc.
 * @param [in] payload  The payload; may be NULL if @a length is 0.
 * @param [in] length   Its size in bytes.
 * @param [in] params   Parameters; NULL for the defaults.
 *
 * @return UCS_OK                 Sent or queued: the payload may be
 *                                reused.
 * @return UCS_INPROGRESS         (only with a callback) The payload is in
 *                                use until the callback.
 * @return UCS_ERR_NO_RESOURCE    The queue is full (in sends or bytes),
 *                                or 4 096 reports of this peer are
 *                                awaited (with a report), nothing sent:
 *                                progress and send again; from sandboxed
 *                                code, also its code's send rate used up.
 * @return UCS_ERR_UNSUPPORTED    The library has no code for the peer's
 *                                ISA.
 * @return UCS_ERR_EXCEEDS_LIMIT  The message is larger than the peer
 *                                takes by active message (its
 *                                @c UCX_IFUNC_MAX_AM_MESSAGE, which it told
 *                                at connect), nothing sent; from sandboxed
 *                                code, also its message's sends or hops
 *                                used up.
 * @return UCS_ERR_UNREACHABLE    @a peer is @ref UCP_IFUNC_PEER_SOURCE
 *                                and there is no source to answer: called
 *                                outside @c NAME_main of a message that
 *                                @ref ucp_ifunc_worker_progress runs (one
 *                                error line), or the source was closed
 *                                (one warning line, bounded per source);
 *                                nothing sent.
 * @return UCS_ERR_INVALID_PARAM  A bad argument (a report field without a
 *                                callback too).
 * @return UCS_ERR_CANCELED       The peer is being closed (a send from
 *                                code that runs during its close).
 * @return UCP_IFUNC_PEER_CLOSED  The other side closed the peer.
 * @return other                  The peer's failure (for example
 *                                UCS_ERR_CONNECTION_RESET), once it failed;
 *                                for @ref UCP_IFUNC_PEER_SOURCE also one
 *                                warning line (bounded per source). A
 *                                source that goes while its answer is in
 *                                flight, before this worker saw it go, is
 *                                not told: the answer is lost.
 */
ucs_status_t
ucp_ifunc_peer_send_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                        const void *payload, size_t length,
                        const ucp_ifunc_peer_send_params_t *params);


/**
 * @brief Fields of @ref ucp_ifunc_peer_attr_t.
 */
typedef enum {
    UCP_IFUNC_PEER_ATTR_FIELD_PATH    = UCS_BIT(0), /**< path */
    UCP_IFUNC_PEER_ATTR_FIELD_MACHINE = UCS_BIT(1), /**< machine */
    UCP_IFUNC_PEER_ATTR_FIELD_STATUS  = UCS_BIT(2), /**< status */
    UCP_IFUNC_PEER_ATTR_FIELD_SENT_WITH_CODE =
            UCS_BIT(3),                                 /**< sent_with_code */
    UCP_IFUNC_PEER_ATTR_FIELD_SENT_BY_REF = UCS_BIT(4), /**< sent_by_ref */
    UCP_IFUNC_PEER_ATTR_FIELD_EP          = UCS_BIT(5), /**< ep */
    UCP_IFUNC_PEER_ATTR_FIELD_QUEUED      = UCS_BIT(6), /**< queued */
    UCP_IFUNC_PEER_ATTR_FIELD_KEY         = UCS_BIT(7) /**< key, key_verified */
} ucp_ifunc_peer_attr_field_t;


/**
 * @brief What @ref ucp_ifunc_peer_query reports.
 */
typedef struct ucp_ifunc_peer_attr {
    /** Bits of @ref ucp_ifunc_peer_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** The path chosen: @ref UCP_IFUNC_PATH_CHANNEL or
     *  @ref UCP_IFUNC_PATH_AM; @ref UCP_IFUNC_PATH_AUTO until the set-up
     *  has ended on both sides (a peer a listener accepted, just after
     *  @c peer_cb: it sends by active message till then). A side that
     *  sees a path other than AUTO may stop progressing for a while: the
     *  other side needs nothing more of it. */
    ucp_ifunc_path_t path;
    /** The peer's ISA as an ELF machine number. */
    uint16_t machine;
    /** UCS_OK, or why the peer failed. */
    ucs_status_t status;
    /** Messages sent with their code image. */
    uint64_t sent_with_code;
    /** Messages sent naming code the peer holds. */
    uint64_t sent_by_ref;
    /** The UCP endpoint to the peer. */
    ucp_ep_h ep;
    /** Sends waiting for room. */
    unsigned queued;
    /** The Ed25519 public key the peer proved at connect (where this
     *  worker has @c UCX_IFUNC_PEER_KEYS); zeros where @a key_verified is
     *  0. */
    uint8_t key[32];
    /** 1 if the peer proved @a key, else 0. */
    int key_verified;
} ucp_ifunc_peer_attr_t;


/**
 * @brief Query a peer.
 *
 * @param [in]     peer  The peer.
 * @param [in,out] attr  Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 */
ucs_status_t ucp_ifunc_peer_query(ucp_ifunc_peer_h       peer,
                                  ucp_ifunc_peer_attr_t *attr);


/**
 * @brief Close a peer.
 *
 * Sends what is queued for it and waits for sends in flight (progressing
 * the worker, for at most the peer's timeout:
 * @ref ucp_ifunc_peer_params_t::timeout_ms), then, if the peer is up,
 * tells the other side that it closes and waits (at most 1 s, or the
 * timeout if shorter) for its answer, which needs the other side's
 * progress: the other side's @c peer_cb then hears
 * @ref UCP_IFUNC_PEER_CLOSED, after what this side sent (on a channel
 * too) has run, and its sends to the peer return it. A side that does
 * not answer in time may hear of a failure instead. Then the endpoint
 * closes, if the library made it (by force where sends did not drain, a
 * receive is under way, or the answer did not come).
 *
 * Sends that are still queued or in flight then (the other side did not
 * take them in time, or the peer failed) are lost: one warning says how
 * many (never one per send), and the callback of each that had one
 * (@ref ucp_ifunc_peer_send_params_t::cb) hears UCS_ERR_CANCELED. Sends
 * that were queued returned UCS_OK and have no callback: the warning
 * counts them. Messages the peer sent that arrive later are not run, and
 * a send to the peer from code that runs meanwhile returns
 * UCS_ERR_CANCELED. On the target, peers accepted by a listener are
 * closed by @ref ucp_ifunc_worker_destroy, or here.
 *
 * @param [in] peer  The peer; NULL is ignored.
 */
void ucp_ifunc_peer_close(ucp_ifunc_peer_h peer);

/** @} */


/**
 * @defgroup UCP_IFUNC_SANDBOX Memory and peers for sandboxed code
 * @ingroup UCP_IFUNC
 *
 * Sandboxed code (@c UCX_IFUNC_TRUST with @c sandboxed, docs/security.md)
 * reaches only its own 4 GiB slot. A target gives it more with memory from
 * @ref ucp_ifunc_sandbox_mem_alloc, granted to the code of one ifunc with
 * @ref ucp_ifunc_sandbox_grant. The same pages then appear in each slot of
 * that code at the same low 32 bits of their address, so that pointers into
 * them mean the same bytes on the host and in the sandbox. Grants are
 * process-wide: they hold for the code of every context. The peers the
 * code may send to are granted per ifunc worker, with
 * @ref ucp_ifunc_sandbox_peer_grant.
 * @{
 */


/**
 * @brief Parameters of @ref ucp_ifunc_sandbox_mem_alloc.
 */
typedef struct ucp_ifunc_sandbox_mem_params {
    /** Must be 0 for now. */
    uint64_t field_mask;
} ucp_ifunc_sandbox_mem_params_t;


/**
 * @brief Allocate memory that may be granted to sandboxed code.
 *
 * The memory is zeroed, page-aligned and a whole number of pages. All such
 * memory of the process lies in one 2 GiB window.
 *
 * @param [in]  length     Bytes; rounded up to pages.
 * @param [in]  params     Parameters; NULL for the defaults.
 * @param [out] address_p  The memory; free it with
 *                         @ref ucp_ifunc_sandbox_mem_free.
 *
 * @return UCS_OK                 @a *address_p is allocated.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return UCS_ERR_NO_MEMORY      The window has no room, or the system none.
 */
ucs_status_t
ucp_ifunc_sandbox_mem_alloc(size_t                                length,
                            const ucp_ifunc_sandbox_mem_params_t *params,
                            void                                **address_p);


/**
 * @brief Free memory of @ref ucp_ifunc_sandbox_mem_alloc.
 *
 * Its grants end: the slots that had it lose it. Call it while no
 * sandboxed code that was granted it runs, or the code faults.
 *
 * @param [in] address  What @ref ucp_ifunc_sandbox_mem_alloc returned.
 *
 * @return UCS_OK                 Freed.
 * @return UCS_ERR_INVALID_PARAM  Not an address the allocator returned.
 */
ucs_status_t ucp_ifunc_sandbox_mem_free(void *address);


/**
 * @brief What sandboxed code may do with granted memory.
 */
typedef enum {
    UCP_IFUNC_SANDBOX_GRANT_READ  = UCS_BIT(0), /**< read it */
    UCP_IFUNC_SANDBOX_GRANT_WRITE = UCS_BIT(1)  /**< write it (with READ) */
} ucp_ifunc_sandbox_rights_t;


/**
 * @brief Fields of @ref ucp_ifunc_sandbox_grant_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_SANDBOX_GRANT_FIELD_SIGNER = UCS_BIT(0) /**< signer */
} ucp_ifunc_sandbox_grant_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_sandbox_grant.
 */
typedef struct ucp_ifunc_sandbox_grant_params {
    /** Bits of @ref ucp_ifunc_sandbox_grant_field_t. */
    uint64_t field_mask;
    /** Only code signed by this Ed25519 public key (32 bytes) gets the
     *  grant. Default: code of the ifunc however it was trusted. */
    const unsigned char *signer;
} ucp_ifunc_sandbox_grant_params_t;


/**
 * @brief Grant sandboxed code of one ifunc access to memory.
 *
 * Maps the pages into every slot of code named @a ifunc_name, now and for
 * code linked later, with @a rights. Never executable. Granting a range
 * again changes its rights.
 *
 * @param [in] address     Start, page-aligned, inside memory from
 *                         @ref ucp_ifunc_sandbox_mem_alloc.
 * @param [in] length      Bytes, a whole number of pages, inside the same
 *                         allocation.
 * @param [in] rights      @ref UCP_IFUNC_SANDBOX_GRANT_READ, or READ and
 *                         @ref UCP_IFUNC_SANDBOX_GRANT_WRITE.
 * @param [in] ifunc_name  The ifunc whose code gets the memory.
 * @param [in] params      Parameters; NULL for the defaults.
 *
 * @return UCS_OK                 Granted.
 * @return UCS_ERR_INVALID_PARAM  Memory not from the allocator (one error
 *                                line says what to do), or a bad argument.
 */
ucs_status_t
ucp_ifunc_sandbox_grant(void *address, size_t length, unsigned rights,
                        const char                             *ifunc_name,
                        const ucp_ifunc_sandbox_grant_params_t *params);


/**
 * @brief The peer handle with which the code of a message answers the
 * source of that message.
 *
 * @c NAME_main of a message that @ref ucp_ifunc_worker_progress runs,
 * native or sandboxed, passes it as the peer of
 * @ref ucp_ifunc_peer_send_nbx. The source is the one
 * @ref ucp_ifunc_source_query tells: the peer whose channel delivered the
 * message, or the one whose endpoint its active message came on (every
 * active message of the default path comes with UCX's reply flag, whatever
 * its size). The path names it, never the message, so a peer cannot make
 * an answer go to another peer. Outside such a message, or where the
 * source was closed, the send answers UCS_ERR_UNREACHABLE; where it
 * failed, its failure.
 */
#define UCP_IFUNC_PEER_SOURCE ((ucp_ifunc_peer_h) ~(uintptr_t)0)


/**
 * @brief Fields of @ref ucp_ifunc_sandbox_peer_grant_params_t.
 */
typedef enum {
    UCP_IFUNC_SANDBOX_PEER_GRANT_FIELD_SIGNER = UCS_BIT(0) /**< signer */
} ucp_ifunc_sandbox_peer_grant_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_sandbox_peer_grant.
 */
typedef struct ucp_ifunc_sandbox_peer_grant_params {
    /** Bits of @ref ucp_ifunc_sandbox_peer_grant_field_t. */
    uint64_t field_mask;
    /** Only code signed by this Ed25519 public key (32 bytes) may send
     *  to the peer. Default: code of the ifunc however it was trusted. */
    const unsigned char *signer;
} ucp_ifunc_sandbox_peer_grant_params_t;


/**
 * @brief Let sandboxed code of one ifunc send to a peer.
 *
 * Sandboxed code sends (@ref ucp_ifunc_peer_send_nbx, a host call) only to
 * the peers of the ifunc worker that runs it which were granted to its
 * ifunc, named by the handle this call returns, and to its message's
 * source (@ref UCP_IFUNC_PEER_SOURCE). The handle is a small number, a
 * place in the worker's table of the ifunc's grants: every value the code
 * can make names a peer granted to it or none, so it cannot be forged
 * into another peer. Granting a peer again returns the same handle; the
 * grant ends with the peer (@ref ucp_ifunc_peer_close). Only sandboxed
 * code's sends take the handle; pass it to the code (its target_args, a
 * payload).
 *
 * The sends are bounded whatever the grants: per message
 * (@c UCX_IFUNC_SANDBOX_SENDS), per code and second
 * (@c UCX_IFUNC_SANDBOX_SEND_RATE), by hops from the host that sent the
 * first message (@c UCX_IFUNC_SANDBOX_HOPS), and in bytes held for the peer
 * (@c UCX_IFUNC_PEER_QUEUE_BYTES).
 *
 * @param [in]  peer        A peer of an ifunc worker.
 * @param [in]  ifunc_name  The ifunc whose code may send to it.
 * @param [in]  params      Parameters; NULL for the defaults.
 * @param [out] handle_p    The handle the code names the peer by.
 *
 * @return UCS_OK                 Granted.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return UCS_ERR_EXCEEDS_LIMIT  The ifunc has 65 535 grants on this worker.
 */
ucs_status_t ucp_ifunc_sandbox_peer_grant(
        ucp_ifunc_peer_h peer, const char *ifunc_name,
        const ucp_ifunc_sandbox_peer_grant_params_t *params,
        ucp_ifunc_peer_h                            *handle_p);

/** @} */


END_C_DECLS

#endif
