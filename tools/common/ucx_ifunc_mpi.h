/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#ifndef UCX_IFUNC_MPI_H_
#define UCX_IFUNC_MPI_H_

#include <mpi.h>
#include <ucp/api/ucp.h>
#include <ucp/api/ucp_ifunc.h>

#include <stddef.h>
#include <stdint.h>

BEGIN_C_DECLS

/**
 * @defgroup UCX_IFUNC_MPI MPI launch helper
 * @{
 *
 * Sets up UCP for the processes of an MPI job (for example started by
 * @c mpirun): one context and one worker per process, an endpoint to every
 * process of the communicator (itself included), memory regions whose
 * addresses and remote keys every process learns, and a collective
 * teardown. MPI only carries the addresses and keys (collectives on the
 * communicator); all traffic afterwards is UCP's. Nothing assumes one host:
 * worker addresses carry every transport UCX selected (@c UCX_TLS,
 * @c UCX_NET_DEVICES), so the same program runs across the hosts of a
 * hostfile.
 *
 * Every call that takes a @ref ucx_ifunc_mpi_h and is marked collective
 * must be made by all processes of the communicator, in the same order.
 * Collective calls keep progressing the worker while they wait for the
 * others, so that peers whose operations need this process's progress
 * (TCP, for example) still complete. Calls are not thread safe.
 *
 * Link with @c -lucx_ifunc_mpi and the MPI library.
 */


/** @brief The UCP setup of one process of an MPI job. */
typedef struct ucx_ifunc_mpi *ucx_ifunc_mpi_h;


/** @brief A memory region mapped on every process of an MPI job. */
typedef struct ucx_ifunc_mpi_mem *ucx_ifunc_mpi_mem_h;


/**
 * @brief Fields of @ref ucx_ifunc_mpi_params_t that are set.
 */
typedef enum {
    UCX_IFUNC_MPI_FIELD_COMM          = UCS_BIT(0), /**< comm */
    UCX_IFUNC_MPI_FIELD_FEATURES      = UCS_BIT(1), /**< features */
    UCX_IFUNC_MPI_FIELD_UCP_PARAMS    = UCS_BIT(2), /**< ucp_params */
    UCX_IFUNC_MPI_FIELD_WORKER_PARAMS = UCS_BIT(3), /**< worker_params */
    UCX_IFUNC_MPI_FIELD_CONTEXT       = UCS_BIT(4)  /**< context */
} ucx_ifunc_mpi_field_t;


/**
 * @brief Parameters of @ref ucx_ifunc_mpi_init.
 */
typedef struct ucx_ifunc_mpi_params {
    /** Fields of this structure that are set
     *  (@ref ucx_ifunc_mpi_field_t). */
    uint64_t field_mask;
    /** Communicator of the processes to connect. It is duplicated: the
     *  helper's collectives never mix with the caller's. Default
     *  @c MPI_COMM_WORLD. */
    MPI_Comm comm;
    /** UCP features of the context (@c ucp_feature). Default
     *  @c UCP_FEATURE_RMA | @c UCP_FEATURE_AM. Ignored with
     *  @ref UCX_IFUNC_MPI_FIELD_UCP_PARAMS. */
    uint64_t features;
    /** Parameters of @c ucp_init, used as they are. */
    const ucp_params_t *ucp_params;
    /** Parameters of @c ucp_worker_create. Default: a single-threaded
     *  worker. */
    const ucp_worker_params_t *worker_params;
    /** A context the caller created: the helper creates the worker on it
     *  and never cleans it up (@a features and @a ucp_params are then
     *  ignored). For programs that must make calls on the context before
     *  its first worker exists, such as ifunc calls that read the
     *  @c UCX_IFUNC_* variables (UCX reports variables not read by then as
     *  unused). Default: the helper creates one. */
    ucp_context_h context;
} ucx_ifunc_mpi_params_t;


/**
 * @brief Fields of @ref ucx_ifunc_mpi_attr_t.
 */
typedef enum {
    UCX_IFUNC_MPI_ATTR_FIELD_RANK    = UCS_BIT(0), /**< rank */
    UCX_IFUNC_MPI_ATTR_FIELD_SIZE    = UCS_BIT(1), /**< size */
    UCX_IFUNC_MPI_ATTR_FIELD_COMM    = UCS_BIT(2), /**< comm */
    UCX_IFUNC_MPI_ATTR_FIELD_CONTEXT = UCS_BIT(3), /**< context */
    UCX_IFUNC_MPI_ATTR_FIELD_WORKER  = UCS_BIT(4), /**< worker */
    UCX_IFUNC_MPI_ATTR_FIELD_EPS     = UCS_BIT(5)  /**< eps */
} ucx_ifunc_mpi_attr_field_t;


/**
 * @brief What @ref ucx_ifunc_mpi_query reports.
 */
typedef struct ucx_ifunc_mpi_attr {
    /** Bits of @ref ucx_ifunc_mpi_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** This process's rank in the communicator. */
    int rank;
    /** Number of processes in the communicator. */
    int size;
    /** The helper's duplicate of the communicator. */
    MPI_Comm comm;
    /** The UCP context (the caller's, if it passed one). */
    ucp_context_h context;
    /** The UCP worker. */
    ucp_worker_h worker;
    /** Endpoints by rank, @a size of them (the own rank's connects to this
     *  worker). Owned by the helper. */
    ucp_ep_h *eps;
} ucx_ifunc_mpi_attr_t;


/**
 * @brief Create a UCP context, a worker and endpoints to every process.
 *
 * Collective. MPI must be initialised. Creates the context and worker,
 * exchanges worker addresses with @c MPI_Allgather / @c MPI_Allgatherv and
 * creates an endpoint to every rank, its own included. Environment
 * variables that UCX reads (@c UCX_TLS, @c UCX_IFUNC_*) must be set before
 * this call.
 *
 * @param [in]  params  Parameters; NULL for the defaults.
 * @param [out] mpi_p   The setup; release it with
 *                      @ref ucx_ifunc_mpi_finalize.
 *
 * The status is agreed among all processes (one process's failure fails
 * the call everywhere), so that none goes on to wait for a peer that gave
 * up.
 *
 * @return UCS_OK                 Every process is connected to every other.
 * @return UCS_ERR_INVALID_PARAM  A bad argument or unknown field.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return UCS_ERR_IO_ERROR       An MPI call failed.
 * @return other                  The error of a UCP call.
 */
ucs_status_t ucx_ifunc_mpi_init(const ucx_ifunc_mpi_params_t *params,
                                ucx_ifunc_mpi_h              *mpi_p);


/**
 * @brief Query the setup.
 *
 * @param [in]     mpi   The setup.
 * @param [in,out] attr  Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 */
ucs_status_t ucx_ifunc_mpi_query(ucx_ifunc_mpi_h       mpi,
                                 ucx_ifunc_mpi_attr_t *attr);


/**
 * @brief Wait until every process has called it, progressing the worker.
 *
 * Collective: an @c MPI_Ibarrier completed while @c ucp_worker_progress
 * keeps running, so that peers still waiting for this process's UCP
 * progress complete their operations.
 *
 * @param [in] mpi  The setup.
 *
 * @return UCS_OK                 Every process has called it.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return UCS_ERR_IO_ERROR       An MPI call failed.
 */
ucs_status_t ucx_ifunc_mpi_barrier(ucx_ifunc_mpi_h mpi);


/**
 * @brief Progress the worker until a request completes, and release it.
 *
 * @param [in] mpi      The setup.
 * @param [in] request  What a UCP non-blocking call returned: NULL, an
 *                      error pointer or a request.
 *
 * @return The request's status.
 */
ucs_status_t ucx_ifunc_mpi_wait(ucx_ifunc_mpi_h mpi, ucs_status_ptr_t request);


/**
 * @brief Flush every endpoint, close them, and release the setup.
 *
 * Collective: each process first completes its own operations (a worker
 * flush), then waits in @ref ucx_ifunc_mpi_barrier until every process has
 * done so, closes its endpoints, waits again, and destroys the worker and
 * the context (not a context the caller passed). No process therefore tears down while a peer still reads
 * its memory or sends to it. Memory regions must have been released
 * (@ref ucx_ifunc_mpi_mem_release) before.
 *
 * @param [in] mpi  The setup; NULL is ignored.
 */
void ucx_ifunc_mpi_finalize(ucx_ifunc_mpi_h mpi);


/**
 * @brief Fields of @ref ucx_ifunc_mpi_mem_params_t that are set.
 */
typedef enum {
    UCX_IFUNC_MPI_MEM_FIELD_ADDRESS = UCS_BIT(0), /**< address */
    UCX_IFUNC_MPI_MEM_FIELD_LENGTH  = UCS_BIT(1)  /**< length */
} ucx_ifunc_mpi_mem_field_t;


/**
 * @brief Parameters of @ref ucx_ifunc_mpi_mem_map.
 */
typedef struct ucx_ifunc_mpi_mem_params {
    /** Fields of this structure that are set
     *  (@ref ucx_ifunc_mpi_mem_field_t); the length is required. */
    uint64_t field_mask;
    /** Memory of this process to map. Default: UCP allocates it. */
    void *address;
    /** Bytes to map on this process; may differ between processes and be
     *  0 (nothing mapped here; the others get address 0 and no key). */
    size_t length;
} ucx_ifunc_mpi_mem_params_t;


/**
 * @brief Where one process's part of a region lies, as seen from this one.
 */
typedef struct ucx_ifunc_mpi_remote {
    /** Address of the region in that process. */
    uint64_t address;
    /** Its length in bytes. */
    size_t length;
    /** Its remote key, unpacked on the endpoint to that process; NULL if
     *  that process mapped nothing. */
    ucp_rkey_h rkey;
} ucx_ifunc_mpi_remote_t;


/**
 * @brief Map memory on every process and exchange addresses and keys.
 *
 * Collective. Maps the region with @c ucp_mem_map, packs its remote key,
 * gathers every process's address, length and key (@c MPI_Allgather /
 * @c MPI_Allgatherv) and unpacks each key on the endpoint to its process.
 *
 * @param [in]  mpi     The setup.
 * @param [in]  params  Parameters.
 * @param [out] mem_p   The region; release it with
 *                      @ref ucx_ifunc_mpi_mem_release.
 *
 * As for @ref ucx_ifunc_mpi_init, all processes return the same status.
 *
 * @return UCS_OK                 The region is mapped everywhere.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return UCS_ERR_IO_ERROR       An MPI call failed.
 * @return other                  The error of a UCP call.
 */
ucs_status_t ucx_ifunc_mpi_mem_map(ucx_ifunc_mpi_h                   mpi,
                                   const ucx_ifunc_mpi_mem_params_t *params,
                                   ucx_ifunc_mpi_mem_h              *mem_p);


/**
 * @brief This process's part of a region.
 *
 * @param [in] mem  The region.
 *
 * @return Its local address (NULL if this process mapped nothing).
 */
void *ucx_ifunc_mpi_mem_address(ucx_ifunc_mpi_mem_h mem);


/**
 * @brief Every process's part of a region.
 *
 * @param [in] mem  The region.
 *
 * @return An array indexed by rank, owned by the region.
 */
const ucx_ifunc_mpi_remote_t *
ucx_ifunc_mpi_mem_remotes(ucx_ifunc_mpi_mem_h mem);


/**
 * @brief Unmap a region everywhere.
 *
 * Collective: flushes the worker, waits in @ref ucx_ifunc_mpi_barrier
 * until no process accesses the region any more, then destroys the keys
 * and unmaps it.
 *
 * @param [in] mem  The region; NULL is ignored (then the call is not
 *                  collective).
 */
void ucx_ifunc_mpi_mem_release(ucx_ifunc_mpi_mem_h mem);


/**
 * @brief Connect an ifunc worker to every other process: the default path.
 *
 * Collective. Connects a peer (@c ucp_ifunc_peer_connect on the setup's
 * endpoint) to every process of the communicator but this one, so that
 * each process can send ifuncs to any other with
 * @c ucp_ifunc_peer_send_nbx, by channel on its host and by active message
 * elsewhere. The caller creates @a iworker (@c ucp_ifunc_worker_create on
 * the setup's context and worker) and progresses it with
 * @c ucp_ifunc_worker_progress from then on: the helper's own collectives
 * progress the UCP worker only, so messages on channels wait for it.
 *
 * @param [in]  mpi      The setup.
 * @param [in]  iworker  An ifunc worker on the setup's worker.
 * @param [out] peers    An array of one peer per rank, by rank; the entry
 *                       of this process is NULL. Release them with
 *                       @ref ucx_ifunc_mpi_close_peers.
 *
 * @return UCS_OK                 Every peer is connected.
 * @return other                  The most severe error of any process (each
 *                                process that failed logged why); no peer
 *                                is left open.
 */
ucs_status_t ucx_ifunc_mpi_connect_peers(ucx_ifunc_mpi_h    mpi,
                                         ucp_ifunc_worker_h iworker,
                                         ucp_ifunc_peer_h  *peers);


/**
 * @brief Close the peers of @ref ucx_ifunc_mpi_connect_peers.
 *
 * Collective: waits in @ref ucx_ifunc_mpi_barrier until every process has
 * stopped sending, then closes its peers (NULL entries are skipped) and
 * waits again. Destroy the ifunc worker afterwards.
 *
 * @param [in] mpi    The setup.
 * @param [in] peers  The array filled by @ref ucx_ifunc_mpi_connect_peers.
 */
void ucx_ifunc_mpi_close_peers(ucx_ifunc_mpi_h mpi, ucp_ifunc_peer_h *peers);

/** @} */

END_C_DECLS

#endif
