/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * kv_am_target [-c CLIENTS] [-s LOG2_SLOTS] [PORT]: the key-value service
 * on UCX active messages, the baseline of kv_ifunc_target. The code that
 * reads and writes the table is compiled in: a handler of KV_AM_REQUEST
 * (ucp_worker_set_am_recv_handler) runs kv_apply, the same function the
 * ifunc runs, and answers a get by AM on the reply endpoint. Clients
 * connect to a UCP listener. Exits when CLIENTS clients are done.
 */
#include "kv_am.h"

#include <netinet/in.h>

#define KV_AM_MAX_CLIENTS 1024

static struct {
    ucp_worker_h   worker;
    ucp_listener_h listener;
    kv_table_t    *table;
    ucp_ep_h       ep[KV_AM_MAX_CLIENTS];
    unsigned       neps;
    kv_am_pool_t   replies;
} kv;

static ucs_status_t kv_am_request(void *arg, const void *header,
                                  size_t header_length, void *data,
                                  size_t                     length,
                                  const ucp_am_recv_param_t *param)
{
    kv_msg_t msg, reply;
    int      ret;

    (void)arg, (void)header, (void)header_length;
    if ((length != sizeof(msg)) ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        ++kv.table->refused;
        return UCS_OK;
    }
    memcpy(&msg, data, sizeof(msg));
    if (!kv_apply(kv.table, &msg, &reply)) {
        return UCS_OK;
    }
    ret = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
                  ? kv_am_send(&kv.replies, param->reply_ep, KV_AM_REPLY,
                               &reply, 0)
                  : -1;
    if (ret != 0) { /* no reply endpoint, or every buffer in flight */
        ++kv.table->replies_failed;
    }
    return UCS_OK;
}

static void kv_am_connect(ucp_conn_request_h request, void *arg)
{
    ucp_ep_params_t params = {.field_mask   = UCP_EP_PARAM_FIELD_CONN_REQUEST,
                              .conn_request = request};

    (void)arg;
    if ((kv.neps == KV_AM_MAX_CLIENTS) ||
        (ucp_ep_create(kv.worker, &params, &kv.ep[kv.neps]) != UCS_OK)) {
        ucp_listener_reject(kv.listener, request);
        return;
    }
    ++kv.neps;
}

int main(int argc, char **argv)
{
    ucp_params_t           params  = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                      .features   = UCP_FEATURE_AM};
    ucp_worker_params_t    wparams = {0};
    struct sockaddr_in     sin     = {.sin_family = AF_INET};
    ucp_am_handler_param_t hparams = {.field_mask =
                                              UCP_AM_HANDLER_PARAM_FIELD_ID |
                                              UCP_AM_HANDLER_PARAM_FIELD_CB,
                                      .id = KV_AM_REQUEST,
                                      .cb = kv_am_request};
    ucp_listener_params_t  lparams = {
             .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                           UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
             .sockaddr     = {(struct sockaddr *)&sin, sizeof(sin)},
             .conn_handler = {kv_am_connect, NULL}};
    ucp_listener_attr_t attr = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    ucp_context_h       context;
    kv_options_t        o;
    unsigned            calls = 0, i;
    double              end;
    int                 ret = 1;

    if ((kv_options_parse(argc, argv, 1, &o) != 0) ||
        ((kv.table = kv_table_create(o.log2_slots)) == NULL)) {
        return 2;
    }
    kv_am_pool_init(&kv.replies, KV_AM_BUFS);
    sin.sin_port = htons((uint16_t)atoi(o.address));
    if ((ucp_init(&params, NULL, &context) == UCS_OK) &&
        (ucp_worker_create(context, &wparams, &kv.worker) == UCS_OK) &&
        (ucp_worker_set_am_recv_handler(kv.worker, &hparams) == UCS_OK) &&
        (ucp_listener_create(kv.worker, &lparams, &kv.listener) == UCS_OK) &&
        (ucp_listener_query(kv.listener, &attr) == UCS_OK)) {
        printf("kv-am target: listening on port %u\n",
               ntohs(((struct sockaddr_in *)&attr.sockaddr)->sin_port));
        fflush(stdout);
        while (!kv_target_done(kv.table, o.clients, &calls)) {
            ucp_worker_progress(kv.worker); /* kv_am_request runs in here */
        }
        for (end = kv_now() + KV_LINGER_S; kv_now() < end;) {
            ucp_worker_progress(kv.worker); /* the clients close */
        }
        ret = kv_target_report("kv-am", kv.table);
        ucp_listener_destroy(kv.listener);
        for (i = 0; i < kv.neps; ++i) {
            kv_am_close_ep(kv.worker, kv.ep[i], UCP_EP_CLOSE_FLAG_FORCE);
        }
        ucp_worker_destroy(kv.worker);
        ucp_cleanup(context);
    }
    free(kv.table);
    return ret;
}
