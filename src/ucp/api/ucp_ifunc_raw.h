/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The paper's calls: messages, ucp_ifunc_send_nbix/_nbx, ucp_poll_ifunc. Part
 * of <ucp/api/ucp_ifunc.h>, which includes every part: programs include that.
 */
#ifndef UCP_API_UCP_IFUNC_RAW_H_
#define UCP_API_UCP_IFUNC_RAW_H_

#include <ucp/api/ucp_ifunc_def.h>

BEGIN_C_DECLS

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
 * @return UCS_ERR_UNSUPPORTED    A handle of @ref ucp_ifunc_code_register
 *                                (code without payload functions).
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

END_C_DECLS

#endif
