/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Memory and peers for sandboxed code: ucp_ifunc_sandbox_*. Part of
 * <ucp/api/ucp_ifunc.h>, which includes every part: programs include that.
 */
#ifndef UCP_API_UCP_IFUNC_SANDBOX_H_
#define UCP_API_UCP_IFUNC_SANDBOX_H_

#include <ucp/api/ucp_ifunc_peer.h>

BEGIN_C_DECLS

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
