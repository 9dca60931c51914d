/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * kv_ifunc_target [-c CLIENTS] [-s LOG2_SLOTS] [PORT]: the key-value
 * service on the default path. It holds the table and listens; the code
 * that reads and writes the table comes from the clients (kv.c, signed by
 * a key of UCX_IFUNC_TRUSTED_KEYS). Exits when CLIENTS clients are done.
 */
#include "kv_app.h"

#include <ucp/api/ucp_ifunc.h>

int main(int argc, char **argv)
{
    ucp_params_t              params  = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                         .features   = UCP_FEATURE_AM};
    ucp_worker_params_t       wparams = {0};
    kv_side_t                 side    = {NULL, NULL};
    ucp_ifunc_worker_params_t iparams = {
            .field_mask  = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS,
            .target_args = &side};
    ucp_ifunc_listener_params_t lparams = {
            .field_mask = UCP_IFUNC_LISTENER_FIELD_ADDRESS};
    ucp_ifunc_listener_attr_t attr = {
            .field_mask = UCP_IFUNC_LISTENER_ATTR_FIELD_PORT};
    ucp_context_h        context;
    ucp_worker_h         worker;
    ucp_ifunc_worker_h   iworker;
    ucp_ifunc_listener_h listener;
    kv_options_t         o;
    unsigned             calls = 0;
    double               end;
    int                  ret = 1;

    if ((kv_options_parse(argc, argv, 1, &o) != 0) ||
        ((side.table = kv_table_create(o.log2_slots)) == NULL)) {
        return 2;
    }
    lparams.address = o.address;
    if ((ucp_init(&params, NULL, &context) == UCS_OK) &&
        (ucp_worker_create(context, &wparams, &worker) == UCS_OK) &&
        (ucp_ifunc_worker_create(context, worker, &iparams, &iworker) ==
         UCS_OK) &&
        (ucp_ifunc_listen(iworker, &lparams, &listener) == UCS_OK) &&
        (ucp_ifunc_listener_query(listener, &attr) == UCS_OK)) {
        printf("kv-ifunc target: listening on port %u\n", attr.port);
        fflush(stdout);
        while (!kv_target_done(side.table, o.clients, &calls)) {
            ucp_ifunc_worker_progress(iworker); /* kv_main runs in here */
        }
        for (end = kv_now() + KV_LINGER_S; kv_now() < end;) {
            ucp_ifunc_worker_progress(iworker); /* the clients close */
        }
        ret = kv_target_report("kv-ifunc", side.table);
        ucp_ifunc_worker_destroy(iworker);
        ucp_worker_destroy(worker);
        ucp_cleanup(context);
    }
    free(side.table);
    return ret;
}
