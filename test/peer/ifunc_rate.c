/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The C side of the Python package's rate benchmark
 * (contrib/py-rate-bench.py), the default path at its plainest:
 *
 *   ifunc_rate target ADDRESS COUNT
 *       listens ("port N"), runs counter.so's messages (each adds its
 *       8-byte payload to an int64 target_args) until the sum is COUNT or
 *       a peer closed or failed, prints "done sum=S".
 *   ifunc_rate source ADDRESS COUNT [BATCH]
 *       connects, waits until the peer's path is settled (the sends
 *       would go by active message until then), sends COUNT 8-byte
 *       payloads of 1 with
 *       ucp_ifunc_peer_send_nbx (no callback; a full queue: progress and
 *       send again), or BATCH at a time with ucp_ifunc_peer_send_array_nbx,
 *       closes the peer, which returns once the target has run them all,
 *       and prints "rate msgs=COUNT seconds=S" for the sends and the
 *       close.
 *
 * python/bench/rate_source.py is the same source in Python.
 */
#include <ucp/api/ucp_ifunc.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A peer that closed or failed ends the target's wait. */
static void peer_event(ucp_ifunc_peer_h peer, ucs_status_t status, void *arg)
{
    (void)peer;
    if (status != UCS_OK) {
        *(int *)arg = 1;
    }
}

static int fail(const char *what, ucs_status_t status)
{
    fprintf(stderr, "ifunc_rate: %s: %s\n", what, ucs_status_string(status));
    return 1;
}

int main(int argc, char **argv)
{
    ucp_params_t              params  = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                         .features   = UCP_FEATURE_AM};
    ucp_worker_params_t       wparams = {0};
    int64_t                   sum     = 0;
    int                       ended   = 0;
    ucp_ifunc_worker_params_t iparams = {
            .field_mask = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS |
                          UCP_IFUNC_WORKER_FIELD_PEER_CB,
            .target_args = &sum,
            .peer_cb     = peer_event,
            .peer_cb_arg = &ended};
    ucp_context_h      context;
    ucp_worker_h       worker;
    ucp_ifunc_worker_h iworker;
    ucs_status_t       status;
    int64_t            count;
    int                target;

    if ((argc != 4) && (argc != 5)) {
        fprintf(stderr,
                "usage: ifunc_rate target|source ADDRESS COUNT [BATCH]\n");
        return 2;
    }
    target = !strcmp(argv[1], "target");
    count  = strtoll(argv[3], NULL, 10);
    if (((status = ucp_init(&params, NULL, &context)) != UCS_OK) ||
        ((status = ucp_worker_create(context, &wparams, &worker)) != UCS_OK) ||
        ((status = ucp_ifunc_worker_create(context, worker, &iparams,
                                           &iworker)) != UCS_OK)) {
        return fail("setup", status);
    }
    if (target) {
        ucp_ifunc_listener_params_t lparams = {
                .field_mask = UCP_IFUNC_LISTENER_FIELD_ADDRESS,
                .address    = argv[2]};
        ucp_ifunc_listener_attr_t attr = {
                .field_mask = UCP_IFUNC_LISTENER_ATTR_FIELD_PORT};
        ucp_ifunc_listener_h listener;
        if (((status = ucp_ifunc_listen(iworker, &lparams, &listener)) !=
             UCS_OK) ||
            ((status = ucp_ifunc_listener_query(listener, &attr)) != UCS_OK)) {
            return fail("listen", status);
        }
        printf("port %u\n", (unsigned)attr.port);
        fflush(stdout);
        while ((sum < count) && !ended) {
            ucp_ifunc_worker_progress(iworker);
        }
        printf("done sum=%lld\n", (long long)sum);
    } else {
        ucp_ifunc_peer_params_t pparams = {
                .field_mask = UCP_IFUNC_PEER_FIELD_ADDRESS, .address = argv[2]};
        const int64_t         one = 1;
        int64_t               ones[256];
        int64_t               batch = (argc > 4) ? atoll(argv[4]) : 1;
        ucp_ifunc_peer_h      peer;
        ucp_ifunc_h           code;
        double                start;
        int64_t               i;
        size_t                sent;
        ucp_ifunc_peer_attr_t attr;
        if (((status = ucp_ifunc_peer_connect(iworker, &pparams, &peer)) !=
             UCS_OK) ||
            ((status = ucp_register_ifunc(context, "counter", &code)) !=
             UCS_OK)) {
            return fail("connect", status);
        }
        /* Timed from the settled path on, as the Python source is. */
        attr.field_mask = UCP_IFUNC_PEER_ATTR_FIELD_PATH;
        start           = now();
        do {
            ucp_ifunc_worker_progress(iworker);
            ucp_ifunc_peer_query(peer, &attr);
        } while ((attr.path == UCP_IFUNC_PATH_AUTO) && (now() - start < 10));
        if ((batch < 1) || (batch > 256)) {
            fprintf(stderr, "ifunc_rate: BATCH is 1 to 256\n");
            return 2;
        }
        for (i = 0; i < batch; ++i) {
            ones[i] = 1;
        }
        start = now();
        for (i = 0; (batch > 1) && (i < count); i += (int64_t)sent) {
            size_t n = (size_t)((count - i < batch) ? count - i : batch);
            status   = ucp_ifunc_peer_send_array_nbx(
                      peer, code, ones, sizeof(ones[0]), n, &sent, NULL);
            if (status == UCS_ERR_NO_RESOURCE) {
                ucp_ifunc_worker_progress(iworker);
            } else if (status != UCS_OK) {
                return fail("send", status);
            }
        }
        for (i = 0; (batch == 1) && (i < count); ++i) {
            while ((status = ucp_ifunc_peer_send_nbx(peer, code, &one,
                                                     sizeof(one), NULL)) ==
                   UCS_ERR_NO_RESOURCE) {
                ucp_ifunc_worker_progress(iworker);
            }
            if (status != UCS_OK) {
                return fail("send", status);
            }
        }
        ucp_ifunc_peer_close(peer);
        printf("rate msgs=%lld seconds=%.6f\n", (long long)count,
               now() - start);
        ucp_deregister_ifunc(context, code);
    }
    ucp_ifunc_worker_destroy(iworker);
    ucp_worker_destroy(worker);
    ucp_ifunc_context_release(context);
    ucp_cleanup(context);
    return 0;
}
