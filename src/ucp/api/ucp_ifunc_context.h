/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Configuration, state, version and counters: ucp_ifunc_context_*,
 * ucp_ifunc_get_version*. Part of <ucp/api/ucp_ifunc.h>, which includes every
 * part: programs include that.
 */
#ifndef UCP_API_UCP_IFUNC_CONTEXT_H_
#define UCP_API_UCP_IFUNC_CONTEXT_H_

#include <ucp/api/ucp_ifunc_def.h>

BEGIN_C_DECLS

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

END_C_DECLS

#endif
