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
 * @{
 *
 * An ifunc ships the machine code of a small C function together with its
 * payload to a target process in one message, written with one-sided puts
 * into a buffer of the target. The target links the code against its own
 * address space and runs it; the handler does not have to exist on the
 * target in advance.
 *
 * An ifunc library NAME.so, built with @c ucx-ifunc-cc, defines:
 * @code
 * size_t NAME_payload_bound(void *source_args, size_t source_args_size);
 * int    NAME_payload_init(void *source_args, size_t source_args_size,
 *                          void *payload, size_t *payload_size);
 * void   NAME_main(void *payload, size_t payload_size, void *target_args);
 * @endcode
 * @c NAME_payload_bound returns the largest payload the arguments need.
 * @c NAME_payload_init fills the payload in place; @a *payload_size is the
 * capacity on entry and the number of bytes used on return; a non-zero
 * result is a failure. Both run on the source as ordinary code.
 * @c NAME_main runs on the target, once per message.
 *
 * Both sides find libraries as @c $UCX_IFUNC_LIB_DIR/NAME.so.
 *
 * Thread safety: all calls may be made from several threads at once.
 * Registration is serialised internally. Several threads may poll different
 * buffers concurrently, and several threads may poll the same buffer: each
 * message runs exactly once, in one of them. A message handle may be sent by
 * one thread at a time.
 *
 * State: the library keeps what it loads and links per UCP context: the
 * context's settings (the @c UCX_IFUNC_* variables as the context last read
 * them), the ifunc libraries it loaded, and the code it linked, with the
 * static variables of that code. Two contexts in one process share none of
 * it. The state is created on a context's first ifunc call and released by
 * @ref ucp_ifunc_context_release; a context that only sends (it never ran a
 * message) also drops it when its last registration is released. Two pieces
 * stay process-wide: @c UCX_IFUNC_SHM_DIRECT, because
 * @ref ucp_ifunc_send_nbix receives an endpoint and UCP offers no way from an
 * endpoint to its context; and the random source id in every message's
 * nonce, which identifies the sending process to its targets.
 */


/** Major version of the ifunc API; changes when a call's meaning or
 *  signature changes. */
#define UCP_IFUNC_API_MAJOR 0

/** Minor version of the ifunc API; changes when calls are added. */
#define UCP_IFUNC_API_MINOR 2

/** Construct an ifunc API version identifier from major and minor numbers,
 *  comparable with @ref UCP_IFUNC_API_VERSION. */
#define UCP_IFUNC_VERSION(_major, _minor) (((_major) << 16) | (_minor))

/** The ifunc API version of this header. */
#define UCP_IFUNC_API_VERSION                                                  \
    UCP_IFUNC_VERSION(UCP_IFUNC_API_MAJOR, UCP_IFUNC_API_MINOR)


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
 * Loads @c $UCX_IFUNC_LIB_DIR/<ifunc_name>.so, looks up its payload
 * functions and its shippable code image. Registering a name again returns a
 * new handle; each handle is released with @ref ucp_deregister_ifunc. Once
 * all handles of a library are released it is unloaded, so registering it
 * again picks up a rebuilt library.
 *
 * @param [in]  context     UCP context.
 * @param [in]  ifunc_name  Name of the ifunc: a C identifier of 1 to
 *                          @ref UCP_IFUNC_NAME_MAX characters.
 * @param [out] ifunc_p     Handle of the registered ifunc.
 *
 * @return UCS_OK, UCS_ERR_INVALID_PARAM for a bad name or argument,
 *         UCS_ERR_NO_ELEM if the library cannot be loaded or is not an ifunc
 *         library, UCS_ERR_NO_MEMORY.
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
 * Calls @c NAME_payload_bound to size the frame, allocates it, copies the
 * header and the code image into it, and lets @c NAME_payload_init write the
 * payload in place (no extra copy). The frame shrinks to the payload size
 * that @c NAME_payload_init reports.
 *
 * @param [in]  ifunc_h           Registered ifunc.
 * @param [in]  source_args       Arguments passed to the payload functions.
 * @param [in]  source_args_size  Size of @a source_args.
 * @param [out] msg_p             The message; release it with
 *                                @ref ucp_ifunc_msg_free.
 *
 * @return UCS_OK, UCS_ERR_INVALID_PARAM if an argument is bad or
 *         @c NAME_payload_init fails, UCS_ERR_EXCEEDS_LIMIT if
 *         @c NAME_payload_init uses more than @c NAME_payload_bound
 *         allowed, UCS_ERR_NO_MEMORY.
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


/**
 * @brief Write a message into the target's buffer.
 *
 * Writes the frame to @a remote_addr, which must lie in memory the target
 * mapped with @c ucp_mem_map and is 8-byte aligned; the target picks it up
 * with @ref ucp_poll_ifunc. The seal (the frame's last 8 bytes) is written
 * after the rest of the frame is in the target's memory, so the target runs
 * the message only once all of it has arrived:
 * - when the target's memory is directly reachable (shared memory, see
 *   @c ucp_rkey_ptr, and @c UCX_IFUNC_SHM_DIRECT=y), the frame is stored
 *   there directly, body, store fence, seal;
 * - otherwise the body is put with @c ucp_put_nbx, the endpoint is flushed,
 *   and the seal is put when the flush completes, during a later
 *   @c ucp_worker_progress of the endpoint's worker. That costs a round
 *   trip; @ref ucp_ifunc_send_nbx with the worker orders the seal with
 *   @c ucp_worker_fence instead where UCX's configuration makes that fence
 *   cheap and sound.
 *
 * The call does not wait. Keep the message until a flush of the endpoint
 * (@c ucp_ep_flush_nbx) posted after this call has completed; keep the
 * endpoint and @a rkey, and keep progressing the worker, until the target
 * has run the message: over the put path the seal may still be on its way
 * when your flush completes. The message must fit in the target's buffer
 * (@c msg.frame_size bytes): the source refuses a larger frame when it can
 * see the buffer's size (shared memory, once the target has polled the
 * slot, or always with @ref ucp_ifunc_send_nbx and its remote size);
 * otherwise the target rejects it, but by then the bytes past its buffer
 * have been written.
 *
 * @param [in] ep           Endpoint to the target.
 * @param [in] msg          Message to send.
 * @param [in] remote_addr  Address of the target's buffer (or ring slot).
 * @param [in] rkey         Remote key of that buffer, unpacked on @a ep.
 *
 * @return UCS_OK if the frame is in the target's buffer (direct stores:
 *         the target can run it now), UCS_INPROGRESS if it was handed to
 *         UCP (any put path, TCP included: it is in the target's buffer
 *         only once the seal's put completed remotely),
 *         UCS_ERR_INVALID_PARAM for a bad argument or a damaged message,
 *         UCS_ERR_EXCEEDS_LIMIT if the source can see that the frame does not
 *         fit the target's buffer (nothing was written), or the error of the
 *         underlying put. After a put error part of the frame may still be
 *         on its way: flush the endpoint before releasing the message. The
 *         target never runs a frame whose seal did not arrive; the next
 *         frame written to the slot replaces it.
 */
ucs_status_t ucp_ifunc_send_nbix(ucp_ep_h ep, ucp_ifunc_msg_t msg,
                                 uint64_t remote_addr, ucp_rkey_h rkey);


/**
 * @brief Fields of @ref ucp_ifunc_send_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_SEND_FIELD_WORKER      = UCS_BIT(0), /**< worker */
    UCP_IFUNC_SEND_FIELD_REMOTE_SIZE = UCS_BIT(1)  /**< remote_size */
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
     *  round trip of a flush, where that fence is cheap and orders puts:
     *  UCX's classic protocol engine (@c UCX_PROTO_ENABLE=n, the default of
     *  UCX 1.13 to 1.15) with one RMA lane. Elsewhere the fence is either
     *  not enough or a blocking flush of the whole worker, and the send
     *  uses the endpoint flush as without the worker. Default: not known. */
    ucp_worker_h worker;
    /** Bytes at @a remote_addr that the target polls (its buffer or slot
     *  size). A larger frame is refused before anything is written, on
     *  every transport. Default: not known. */
    size_t remote_size;
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
 * @return As @ref ucp_ifunc_send_nbix; UCS_ERR_INVALID_PARAM also for
 *         unknown bits in @a params->field_mask.
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
 * @return UCS_OK if one message ran, UCS_ERR_NO_MESSAGE if no complete
 *         message is there, or the error for which a complete message was
 *         rejected (the buffer is then cleared, one log line says why, and
 *         later messages work): UCS_ERR_EXCEEDS_LIMIT (frame larger than
 *         @a buffer_size), UCS_ERR_INVALID_PARAM (malformed frame or bad
 *         argument), UCS_ERR_NO_ELEM (library or symbol missing on the
 *         target), UCS_ERR_UNSUPPORTED (code for another architecture, or a
 *         frame format version this target does not read: one warning per
 *         source names both versions), UCS_ERR_NO_MEMORY. A rejected
 *         message is the peer's doing and is logged as a warning; a local
 *         failure as an error.
 */
ucs_status_t ucp_poll_ifunc(ucp_context_h context, void *buffer,
                            size_t buffer_size, void *target_args);


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

END_C_DECLS

#endif
