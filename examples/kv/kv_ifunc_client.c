/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * kv_ifunc_client [-c CLIENTS] [-i ID] [-n OPS] HOST:PORT: one client of
 * the key-value service on the default path. Every operation is one
 * message of the ifunc kv (kv.c; UCX_IFUNC_LIB_DIR names the directory of
 * kv.so); the target answers a get with the same code, which runs here in
 * ucp_ifunc_worker_progress and records the value. The phases and checks
 * are kv_app.h's.
 */
#include "kv_app.h"

#include <ucp/api/ucp_ifunc.h>

typedef struct {
    ucp_ifunc_worker_h iworker;
    ucp_ifunc_peer_h   peer;
    ucp_ifunc_h        kv;
} kv_ifunc_t;

/* The library copies what it cannot send at once, up to its queue's
 * bound; then the driver progresses and sends again. */
static int kv_ifunc_send(void *arg, const kv_msg_t *msg)
{
    kv_ifunc_t  *x = arg;
    ucs_status_t status;

    status = ucp_ifunc_peer_send_nbx(x->peer, x->kv, msg, sizeof(*msg), NULL);
    return (status == UCS_OK) ? 0 : (status == UCS_ERR_NO_RESOURCE) ? 1 : -1;
}

static void kv_ifunc_progress(void *arg)
{
    ucp_ifunc_worker_progress(((kv_ifunc_t *)arg)->iworker);
}

int main(int argc, char **argv)
{
    ucp_params_t              params  = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                         .features   = UCP_FEATURE_AM};
    ucp_worker_params_t       wparams = {0};
    kv_client_t               client  = {0};
    kv_side_t                 side    = {NULL, &client};
    ucp_ifunc_worker_params_t iparams = {
            .field_mask  = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS,
            .target_args = &side};
    ucp_ifunc_peer_params_t pparams = {.field_mask =
                                               UCP_IFUNC_PEER_FIELD_ADDRESS};
    kv_ifunc_t              x;
    kv_transport_t tr = {"kv-ifunc", kv_ifunc_send, kv_ifunc_progress, &x};
    kv_options_t   o;
    ucp_context_h  context;
    ucp_worker_h   worker;
    int            ret = 1;

    if (kv_options_parse(argc, argv, 0, &o) != 0) {
        return 2;
    }
    pparams.address = o.address;
    if ((ucp_init(&params, NULL, &context) == UCS_OK) &&
        (ucp_worker_create(context, &wparams, &worker) == UCS_OK) &&
        (ucp_ifunc_worker_create(context, worker, &iparams, &x.iworker) ==
         UCS_OK) &&
        (ucp_ifunc_peer_connect(x.iworker, &pparams, &x.peer) == UCS_OK) &&
        (ucp_register_ifunc(context, "kv", &x.kv) == UCS_OK)) {
        ret = kv_client_run(&tr, &o, &client);
        ucp_ifunc_peer_close(x.peer); /* what is under way arrives first */
        ucp_deregister_ifunc(context, x.kv);
        ucp_ifunc_worker_destroy(x.iworker);
        ucp_worker_destroy(worker);
        ucp_cleanup(context);
    }
    return ret;
}
