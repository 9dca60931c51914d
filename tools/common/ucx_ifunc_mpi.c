/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The MPI launch helper (ucx_ifunc_mpi.h). Every collective is a
 * non-blocking MPI call completed while the UCP worker is progressed: a
 * process blocked in MPI would stall peers whose UCP operations need its
 * progress (TCP, rendezvous, endpoint close).
 */
#include "ucx_ifunc_mpi.h"

#include <stdlib.h>
#include <string.h>

struct ucx_ifunc_mpi {
    MPI_Comm      comm;
    int           rank;
    int           size;
    ucp_context_h context;
    ucp_worker_h  worker;
    ucp_ep_h     *eps;
    int           own_context;
};

struct ucx_ifunc_mpi_mem {
    ucx_ifunc_mpi_h         mpi;
    ucp_mem_h               memh;
    void                   *address;
    ucx_ifunc_mpi_remote_t *remotes;
};

/* Progress UCP until an MPI request completes. MPI_Test runs on every 16th
 * round only: it costs far more than a UCP progress, and peers' latency
 * depends on how fast this loop answers them. */
static ucs_status_t mpi_wait_progress(ucx_ifunc_mpi_h mpi, MPI_Request *req)
{
    unsigned rounds = 0;
    int      done   = 0;

    for (;;) {
        ucp_worker_progress(mpi->worker);
        if ((++rounds & 15) == 0) {
            if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                return UCS_ERR_IO_ERROR;
            }
            if (done) {
                return UCS_OK;
            }
        }
    }
}

/* The most severe status of all processes (errors are negative). */
static ucs_status_t agree(ucx_ifunc_mpi_h mpi, ucs_status_t status)
{
    int         mine = (int)status, all = 0;
    MPI_Request req;

    if ((MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN, mpi->comm, &req) !=
         MPI_SUCCESS) ||
        (mpi_wait_progress(mpi, &req) != UCS_OK)) {
        return UCS_ERR_IO_ERROR;
    }
    return (ucs_status_t)all;
}

/* Gathers a blob of any size from every process: sizes first, then the
 * blobs. On success *all_p holds them back to back and offsets[r] says
 * where rank r's starts (offsets has size + 1 entries). */
static ucs_status_t allgather_blobs(ucx_ifunc_mpi_h mpi, const void *blob,
                                    size_t blob_size, char **all_p,
                                    int **offsets_p)
{
    int         *sizes = calloc((size_t)mpi->size, sizeof(int));
    int         *offs  = calloc((size_t)mpi->size + 1, sizeof(int));
    char        *all   = NULL;
    int          mine  = (int)blob_size, r;
    MPI_Request  req;
    ucs_status_t status = UCS_ERR_NO_MEMORY;

    if ((sizes == NULL) || (offs == NULL) || (blob_size > INT32_MAX)) {
        goto err;
    }
    status = UCS_ERR_IO_ERROR;
    if ((MPI_Iallgather(&mine, 1, MPI_INT, sizes, 1, MPI_INT, mpi->comm,
                        &req) != MPI_SUCCESS) ||
        (mpi_wait_progress(mpi, &req) != UCS_OK)) {
        goto err;
    }
    for (r = 0; r < mpi->size; ++r) {
        if (offs[r] > INT32_MAX - sizes[r]) {
            status = UCS_ERR_EXCEEDS_LIMIT;
            goto err;
        }
        offs[r + 1] = offs[r] + sizes[r];
    }
    all = malloc((size_t)offs[mpi->size] + 1);
    if (all == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto err;
    }
    if ((MPI_Iallgatherv(blob, mine, MPI_BYTE, all, sizes, offs, MPI_BYTE,
                         mpi->comm, &req) != MPI_SUCCESS) ||
        (mpi_wait_progress(mpi, &req) != UCS_OK)) {
        goto err;
    }
    free(sizes);
    *all_p     = all;
    *offsets_p = offs;
    return UCS_OK;

err:
    free(all);
    free(offs);
    free(sizes);
    return status;
}

ucs_status_t ucx_ifunc_mpi_wait(ucx_ifunc_mpi_h mpi, ucs_status_ptr_t request)
{
    ucs_status_t status;

    if (request == NULL) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(request)) {
        return UCS_PTR_STATUS(request);
    }
    while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
        ucp_worker_progress(mpi->worker);
    }
    ucp_request_free(request);
    return status;
}

static void close_eps(ucx_ifunc_mpi_h mpi)
{
    ucp_request_param_t param = {0};
    int                 r;

    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = 0; /* flush mode: whatever is posted arrives */
    for (r = 0; r < mpi->size; ++r) {
        if (mpi->eps[r] != NULL) {
            ucx_ifunc_mpi_wait(mpi, ucp_ep_close_nbx(mpi->eps[r], &param));
            mpi->eps[r] = NULL;
        }
    }
}

static ucs_status_t connect_all(ucx_ifunc_mpi_h mpi)
{
    ucp_ep_params_t ep_params = {0};
    ucp_address_t  *address   = NULL;
    size_t          address_len;
    char           *all     = NULL;
    int            *offsets = NULL;
    ucs_status_t    status;
    int             r;

    status = ucp_worker_get_address(mpi->worker, &address, &address_len);
    status = agree(mpi, status);
    if (status != UCS_OK) {
        goto out;
    }
    status = agree(mpi,
                   allgather_blobs(mpi, address, address_len, &all, &offsets));
    if (status != UCS_OK) {
        goto out;
    }
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    for (r = 0; (r < mpi->size) && (status == UCS_OK); ++r) {
        ep_params.address = (const ucp_address_t *)(all + offsets[r]);
        status = ucp_ep_create(mpi->worker, &ep_params, &mpi->eps[r]);
    }
    status = agree(mpi, status);

out:
    free(all);
    free(offsets);
    if (address != NULL) {
        ucp_worker_release_address(mpi->worker, address);
    }
    return status;
}

/* Releases the worker, the context if the setup made it, the communicator
 * and the setup itself; the endpoints are closed already. */
static void destroy(ucx_ifunc_mpi_h mpi)
{
    if (mpi->worker != NULL) {
        ucp_worker_destroy(mpi->worker);
    }
    if (mpi->own_context) {
        ucp_cleanup(mpi->context);
    }
    MPI_Comm_free(&mpi->comm);
    free(mpi->eps);
    free(mpi);
}

ucs_status_t ucx_ifunc_mpi_init(const ucx_ifunc_mpi_params_t *params,
                                ucx_ifunc_mpi_h              *mpi_p)
{
    const uint64_t known =
            UCX_IFUNC_MPI_FIELD_COMM | UCX_IFUNC_MPI_FIELD_FEATURES |
            UCX_IFUNC_MPI_FIELD_UCP_PARAMS | UCX_IFUNC_MPI_FIELD_WORKER_PARAMS |
            UCX_IFUNC_MPI_FIELD_CONTEXT;
    uint64_t            mask    = (params != NULL) ? params->field_mask : 0;
    MPI_Comm            comm    = MPI_COMM_WORLD;
    ucp_params_t        uparams = {0};
    ucp_worker_params_t wparams = {0};
    const ucp_params_t *up      = &uparams;
    ucx_ifunc_mpi_h     mpi     = NULL;
    ucs_status_t        status;
    int                 initialised = 0;

    if ((mpi_p == NULL) || (mask & ~known) ||
        (MPI_Initialized(&initialised) != MPI_SUCCESS) || !initialised) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (mask & UCX_IFUNC_MPI_FIELD_COMM) {
        comm = params->comm;
    }
    uparams.field_mask = UCP_PARAM_FIELD_FEATURES;
    uparams.features   = (mask & UCX_IFUNC_MPI_FIELD_FEATURES)
                                 ? params->features
                                 : (UCP_FEATURE_RMA | UCP_FEATURE_AM);
    if (mask & UCX_IFUNC_MPI_FIELD_UCP_PARAMS) {
        up = params->ucp_params;
    }
    wparams.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (mask & UCX_IFUNC_MPI_FIELD_WORKER_PARAMS) {
        wparams = *params->worker_params;
    }

    mpi = calloc(1, sizeof(*mpi));
    if (mpi == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    if (MPI_Comm_dup(comm, &mpi->comm) != MPI_SUCCESS) {
        free(mpi);
        return UCS_ERR_IO_ERROR;
    }
    MPI_Comm_rank(mpi->comm, &mpi->rank);
    MPI_Comm_size(mpi->comm, &mpi->size);
    mpi->eps = calloc((size_t)mpi->size, sizeof(*mpi->eps));
    if (mpi->eps == NULL) {
        status = UCS_ERR_NO_MEMORY;
    } else if (mask & UCX_IFUNC_MPI_FIELD_CONTEXT) {
        mpi->context = params->context;
        status       = (mpi->context != NULL) ? UCS_OK : UCS_ERR_INVALID_PARAM;
    } else {
        status           = ucp_init(up, NULL, &mpi->context);
        mpi->own_context = (status == UCS_OK);
    }
    if (status == UCS_OK) {
        status = ucp_worker_create(mpi->context, &wparams, &mpi->worker);
    }
    /* Without a worker agree() cannot progress one: agree by a plain
     * collective, nothing is in flight yet. */
    {
        int mine = (int)status, all = 0;
        if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, mpi->comm) !=
            MPI_SUCCESS) {
            all = UCS_ERR_IO_ERROR;
        }
        status = (ucs_status_t)all;
    }
    if (status == UCS_OK) {
        status = connect_all(mpi);
        if (status == UCS_OK) {
            *mpi_p = mpi;
            return UCS_OK;
        }
        close_eps(mpi);
    }
    destroy(mpi);
    return status;
}

ucs_status_t ucx_ifunc_mpi_query(ucx_ifunc_mpi_h       mpi,
                                 ucx_ifunc_mpi_attr_t *attr)
{
    if ((mpi == NULL) || (attr == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (attr->field_mask & UCX_IFUNC_MPI_ATTR_FIELD_RANK) {
        attr->rank = mpi->rank;
    }
    if (attr->field_mask & UCX_IFUNC_MPI_ATTR_FIELD_SIZE) {
        attr->size = mpi->size;
    }
    if (attr->field_mask & UCX_IFUNC_MPI_ATTR_FIELD_COMM) {
        attr->comm = mpi->comm;
    }
    if (attr->field_mask & UCX_IFUNC_MPI_ATTR_FIELD_CONTEXT) {
        attr->context = mpi->context;
    }
    if (attr->field_mask & UCX_IFUNC_MPI_ATTR_FIELD_WORKER) {
        attr->worker = mpi->worker;
    }
    if (attr->field_mask & UCX_IFUNC_MPI_ATTR_FIELD_EPS) {
        attr->eps = mpi->eps;
    }
    return UCS_OK;
}

ucs_status_t ucx_ifunc_mpi_barrier(ucx_ifunc_mpi_h mpi)
{
    MPI_Request req;

    if (mpi == NULL) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (MPI_Ibarrier(mpi->comm, &req) != MPI_SUCCESS) {
        return UCS_ERR_IO_ERROR;
    }
    return mpi_wait_progress(mpi, &req);
}

static void flush_worker(ucx_ifunc_mpi_h mpi)
{
    ucp_request_param_t param = {0};

    ucx_ifunc_mpi_wait(mpi, ucp_worker_flush_nbx(mpi->worker, &param));
}

void ucx_ifunc_mpi_finalize(ucx_ifunc_mpi_h mpi)
{
    if (mpi == NULL) {
        return;
    }
    flush_worker(mpi);
    ucx_ifunc_mpi_barrier(mpi);
    close_eps(mpi);
    /* A peer's close may still need this worker's progress. */
    ucx_ifunc_mpi_barrier(mpi);
    destroy(mpi);
}

static void mem_free(ucx_ifunc_mpi_mem_h mem)
{
    int r;

    if (mem->remotes != NULL) {
        for (r = 0; r < mem->mpi->size; ++r) {
            if (mem->remotes[r].rkey != NULL) {
                ucp_rkey_destroy(mem->remotes[r].rkey);
            }
        }
        free(mem->remotes);
    }
    if (mem->memh != NULL) {
        ucp_mem_unmap(mem->mpi->context, mem->memh);
    }
    free(mem);
}

ucs_status_t ucx_ifunc_mpi_mem_map(ucx_ifunc_mpi_h                   mpi,
                                   const ucx_ifunc_mpi_mem_params_t *params,
                                   ucx_ifunc_mpi_mem_h              *mem_p)
{
    const uint64_t known =
            UCX_IFUNC_MPI_MEM_FIELD_ADDRESS | UCX_IFUNC_MPI_MEM_FIELD_LENGTH;
    ucp_mem_map_params_t mparams  = {0};
    ucp_mem_attr_t       mattr    = {0};
    ucx_ifunc_mpi_mem_h  mem      = NULL;
    void                *rkey_buf = NULL;
    size_t               rkey_len = 0;
    char                *keys     = NULL;
    int                 *offsets  = NULL;
    uint64_t             info[2]  = {0, 0};
    uint64_t            *infos    = NULL;
    ucs_status_t         status   = UCS_OK;
    MPI_Request          req;
    int                  r;

    if ((mpi == NULL) || (params == NULL) || (mem_p == NULL) ||
        (params->field_mask & ~known) ||
        !(params->field_mask & UCX_IFUNC_MPI_MEM_FIELD_LENGTH)) {
        return UCS_ERR_INVALID_PARAM;
    }
    mem   = calloc(1, sizeof(*mem));
    infos = calloc((size_t)mpi->size * 2, sizeof(*infos));
    if ((mem == NULL) || (infos == NULL)) {
        status = UCS_ERR_NO_MEMORY;
    } else {
        mem->mpi     = mpi;
        mem->remotes = calloc((size_t)mpi->size, sizeof(*mem->remotes));
        if (mem->remotes == NULL) {
            status = UCS_ERR_NO_MEMORY;
        }
    }

    if ((status == UCS_OK) && (params->length > 0)) {
        mparams.field_mask =
                UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
        mparams.length = params->length;
        if (params->field_mask & UCX_IFUNC_MPI_MEM_FIELD_ADDRESS) {
            mparams.field_mask |= UCP_MEM_MAP_PARAM_FIELD_ADDRESS;
            mparams.address = params->address;
        } else {
            mparams.flags = UCP_MEM_MAP_ALLOCATE;
        }
        mattr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
        status           = ucp_mem_map(mpi->context, &mparams, &mem->memh);
        if (status == UCS_OK) {
            status = ucp_mem_query(mem->memh, &mattr);
        }
        if (status == UCS_OK) {
            mem->address = mattr.address;
            status       = ucp_rkey_pack(mpi->context, mem->memh, &rkey_buf,
                                         &rkey_len);
        }
        info[0] = (uint64_t)(uintptr_t)mem->address;
        info[1] = params->length;
    }
    status = agree(mpi, status);
    if (status != UCS_OK) {
        goto out;
    }

    if ((MPI_Iallgather(info, 2, MPI_UINT64_T, infos, 2, MPI_UINT64_T,
                        mpi->comm, &req) != MPI_SUCCESS) ||
        (mpi_wait_progress(mpi, &req) != UCS_OK)) {
        status = UCS_ERR_IO_ERROR;
    }
    status = agree(mpi, status);
    if (status == UCS_OK) {
        status = agree(
                mpi, allgather_blobs(mpi, rkey_buf, rkey_len, &keys, &offsets));
    }
    if (status != UCS_OK) {
        goto out;
    }
    for (r = 0; (r < mpi->size) && (status == UCS_OK); ++r) {
        mem->remotes[r].address = infos[2 * r];
        mem->remotes[r].length  = infos[2 * r + 1];
        if (offsets[r + 1] > offsets[r]) {
            status = ucp_ep_rkey_unpack(mpi->eps[r], keys + offsets[r],
                                        &mem->remotes[r].rkey);
        }
    }
    status = agree(mpi, status);

out:
    if (rkey_buf != NULL) {
        ucp_rkey_buffer_release(rkey_buf);
    }
    free(keys);
    free(offsets);
    free(infos);
    if (status != UCS_OK) {
        if (mem != NULL) {
            mem_free(mem);
        }
        return status;
    }
    *mem_p = mem;
    return UCS_OK;
}

void *ucx_ifunc_mpi_mem_address(ucx_ifunc_mpi_mem_h mem)
{
    return mem->address;
}

const ucx_ifunc_mpi_remote_t *ucx_ifunc_mpi_mem_remotes(ucx_ifunc_mpi_mem_h mem)
{
    return mem->remotes;
}

void ucx_ifunc_mpi_mem_release(ucx_ifunc_mpi_mem_h mem)
{
    if (mem == NULL) {
        return;
    }
    flush_worker(mem->mpi);
    ucx_ifunc_mpi_barrier(mem->mpi);
    mem_free(mem);
}

static void close_some_peers(ucx_ifunc_mpi_h mpi, ucp_ifunc_peer_h *peers)
{
    int r;

    for (r = 0; r < mpi->size; ++r) {
        ucp_ifunc_peer_close(peers[r]);
        peers[r] = NULL;
    }
}

ucs_status_t ucx_ifunc_mpi_connect_peers(ucx_ifunc_mpi_h    mpi,
                                         ucp_ifunc_worker_h iworker,
                                         ucp_ifunc_peer_h  *peers)
{
    ucp_ifunc_peer_params_t params = {0};
    ucs_status_t            status = UCS_OK;
    int                     r;

    if ((mpi == NULL) || (iworker == NULL) || (peers == NULL)) {
        return UCS_ERR_INVALID_PARAM;
    }
    memset(peers, 0, mpi->size * sizeof(*peers));
    /* Every ifunc worker's handlers are in place before any hello goes
     * out: one that came first (with the reply flag, before its target had
     * a handler) crashed UCX 1.13 over TCP in ucp_am_handler_reply. */
    status = ucx_ifunc_mpi_barrier(mpi);
    /* Every process connects in the same order; each connect progresses
     * the ifunc worker, which answers the others meanwhile. */
    params.field_mask = UCP_IFUNC_PEER_FIELD_EP;
    for (r = 0; (r < mpi->size) && (status == UCS_OK); ++r) {
        if (r != mpi->rank) {
            params.ep = mpi->eps[r];
            status    = ucp_ifunc_peer_connect(iworker, &params, &peers[r]);
        }
    }
    status = agree(mpi, status);
    if (status != UCS_OK) {
        close_some_peers(mpi, peers);
    }
    return status;
}

void ucx_ifunc_mpi_close_peers(ucx_ifunc_mpi_h mpi, ucp_ifunc_peer_h *peers)
{
    if ((mpi == NULL) || (peers == NULL)) {
        return;
    }
    ucx_ifunc_mpi_barrier(mpi);
    close_some_peers(mpi, peers);
    ucx_ifunc_mpi_barrier(mpi);
}
