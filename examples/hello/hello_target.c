/* Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 * hello_target [PORT]: listen, run what sources send. No hello.so here: the
 * code comes with the message, signed by a key of UCX_IFUNC_TRUSTED_KEYS. */
#include <ucp/api/ucp_ifunc.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    ucp_params_t              params  = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                         .features   = UCP_FEATURE_AM};
    ucp_worker_params_t       wparams = {0};
    int                       greeted = 0; /* hello_main sets it */
    ucp_ifunc_worker_params_t iparams = {
            .field_mask  = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS,
            .target_args = &greeted};
    ucp_ifunc_listener_params_t lparams = {
            .field_mask = UCP_IFUNC_LISTENER_FIELD_ADDRESS,
            .address    = (argc > 1) ? argv[1] : "13337"};
    ucp_context_h        context;
    ucp_worker_h         worker;
    ucp_ifunc_worker_h   iworker;
    ucp_ifunc_listener_h listener;

    if ((ucp_init(&params, NULL, &context) == UCS_OK) &&
        (ucp_worker_create(context, &wparams, &worker) == UCS_OK) &&
        (ucp_ifunc_worker_create(context, worker, &iparams, &iworker) ==
         UCS_OK) &&
        (ucp_ifunc_listen(iworker, &lparams, &listener) == UCS_OK)) {
        printf("hello_target: listening on port %s\n", lparams.address);
        fflush(stdout);
        while (!greeted)
            ucp_ifunc_worker_progress(iworker);
        printf("hello_target: ifunc ran\n");
        ucp_ifunc_worker_destroy(iworker); /* with its listener and peers */
        ucp_worker_destroy(worker);
        ucp_cleanup(context);
    }
    return !greeted;
}
