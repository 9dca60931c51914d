/* Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 * hello_source [HOST:PORT] [TEXT]: connect, send hello.so's ifunc with TEXT
 * (UCX_IFUNC_LIB_DIR names the directory of hello.so). */
#include <ucp/api/ucp_ifunc.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    ucp_params_t            params  = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                       .features   = UCP_FEATURE_AM};
    ucp_worker_params_t     wparams = {0};
    ucp_ifunc_peer_params_t pparams = {
            .field_mask = UCP_IFUNC_PEER_FIELD_ADDRESS,
            .address    = (argc > 1) ? argv[1] : "localhost:13337"};
    const char        *text   = (argc > 2) ? argv[2] : "hello";
    ucs_status_t       status = UCS_ERR_NO_RESOURCE;
    ucp_context_h      context;
    ucp_worker_h       worker;
    ucp_ifunc_worker_h iworker;
    ucp_ifunc_peer_h   peer;
    ucp_ifunc_h        hello;

    if ((ucp_init(&params, NULL, &context) == UCS_OK) &&
        (ucp_worker_create(context, &wparams, &worker) == UCS_OK) &&
        (ucp_ifunc_worker_create(context, worker, NULL, &iworker) == UCS_OK) &&
        (ucp_ifunc_peer_connect(iworker, &pparams, &peer) == UCS_OK) &&
        (ucp_register_ifunc(context, "hello", &hello) == UCS_OK)) {
        status = ucp_ifunc_peer_send_nbx(peer, hello, text, strlen(text) + 1,
                                         NULL);
        ucp_ifunc_peer_close(peer); /* what is under way arrives first */
        ucp_deregister_ifunc(context, hello);
        ucp_ifunc_worker_destroy(iworker);
        ucp_worker_destroy(worker);
        ucp_cleanup(context);
    }
    printf("hello_source: %s\n", ucs_status_string(status));
    return status != UCS_OK;
}
