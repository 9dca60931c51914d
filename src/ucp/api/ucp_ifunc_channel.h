/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Channels: ucp_ifunc_channel_*. Part of <ucp/api/ucp_ifunc.h>, which
 * includes every part: programs include that.
 */
#ifndef UCP_API_UCP_IFUNC_CHANNEL_H_
#define UCP_API_UCP_IFUNC_CHANNEL_H_

#include <ucp/api/ucp_ifunc_raw.h>

BEGIN_C_DECLS

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

END_C_DECLS

#endif
