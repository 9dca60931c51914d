/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * A C target for ifuncs written in Python (test/python-builder-tests.sh):
 * listens on a port, gives the ifuncs target_args = int64_t[8] (zeroed),
 * and runs until one sets target_args[0], then prints "c_target: result R"
 * with R = target_args[1]; or until a message was rejected as untrusted
 * ("c_target: rejected N", exit status 1), or SECONDS (default 30) passed.
 *
 *     c_target PORT [SECONDS]
 */
#include <ucp/api/ucp_ifunc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    ucp_params_t              params  = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                         .features   = UCP_FEATURE_AM};
    ucp_worker_params_t       wparams = {0};
    int64_t                   args[8] = {0};
    ucp_ifunc_worker_params_t iparams = {
            .field_mask  = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS,
            .target_args = args};
    ucp_ifunc_listener_params_t lparams = {
            .field_mask = UCP_IFUNC_LISTENER_FIELD_ADDRESS,
            .address    = (argc > 1) ? argv[1] : "13337"};
    ucp_context_h            context;
    ucp_worker_h             worker;
    ucp_ifunc_worker_h       iworker;
    ucp_ifunc_listener_h     listener;
    ucp_ifunc_context_attr_t attr = {
            .field_mask = UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED};
    time_t end = time(NULL) + ((argc > 2) ? atoi(argv[2]) : 30);

    if ((ucp_init(&params, NULL, &context) != UCS_OK) ||
        (ucp_worker_create(context, &wparams, &worker) != UCS_OK) ||
        (ucp_ifunc_worker_create(context, worker, &iparams, &iworker) !=
         UCS_OK) ||
        (ucp_ifunc_listen(iworker, &lparams, &listener) != UCS_OK)) {
        return 1;
    }
    printf("c_target: listening on port %s\n", lparams.address);
    fflush(stdout);
    for (unsigned i = 1; !args[0] && (time(NULL) < end); ++i) {
        ucp_ifunc_worker_progress(iworker);
        if (((i % 1024) == 0) &&
            (ucp_ifunc_context_query(context, &attr) == UCS_OK) &&
            (attr.rejected_untrusted > 0)) {
            break;
        }
    }
    if (args[0]) {
        printf("c_target: result %lld\n", (long long)args[1]);
    } else if (attr.rejected_untrusted > 0) {
        printf("c_target: rejected %llu\n",
               (unsigned long long)attr.rejected_untrusted);
    } else {
        printf("c_target: no ifunc ran\n");
    }
    ucp_ifunc_worker_destroy(iworker);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    return !args[0];
}
