/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * kv_am_client [-c CLIENTS] [-i ID] [-n OPS] HOST:PORT: one client of the
 * key-value service on UCX active messages, the baseline of
 * kv_ifunc_client. Every operation is one active message to the target's
 * handler; a get asks for a reply endpoint, and the answer comes back by
 * AM to a handler here that records it. The phases and checks are
 * kv_app.h's, as for kv_ifunc_client.
 */
#include "kv_am.h"

#include <netdb.h>

static struct {
    ucp_worker_h worker;
    ucp_ep_h     ep;
    kv_client_t  client;
    kv_am_pool_t requests;
} kv;

static ucs_status_t kv_am_reply(void *arg, const void *header,
                                size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param)
{
    kv_msg_t msg;

    (void)arg, (void)header, (void)header_length;
    if ((length != sizeof(msg)) ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        ++kv.client.bad;
        return UCS_OK;
    }
    memcpy(&msg, data, sizeof(msg));
    kv_answer(&kv.client, &msg);
    return UCS_OK;
}

/* At most 256 sends in flight, as the ifunc library's window by AM. */
static int kv_am_client_send(void *arg, const kv_msg_t *msg)
{
    (void)arg;
    return kv_am_send(&kv.requests, kv.ep, KV_AM_REQUEST, msg,
                      (msg->op == KV_OP_GET) ? UCP_AM_SEND_FLAG_REPLY : 0);
}

static void kv_am_client_progress(void *arg)
{
    (void)arg;
    ucp_worker_progress(kv.worker);
}

/* An endpoint to HOST:PORT through UCX's connection manager. */
static ucs_status_t kv_am_connect(const char *address, ucp_ep_h *ep)
{
    char             host[256], *port;
    struct addrinfo *ai, hints = {.ai_socktype = SOCK_STREAM};
    ucp_ep_params_t  params = {.field_mask = UCP_EP_PARAM_FIELD_FLAGS |
                                             UCP_EP_PARAM_FIELD_SOCK_ADDR,
                               .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER};
    ucs_status_t     status;

    snprintf(host, sizeof(host), "%s", address);
    if (((port = strrchr(host, ':')) == NULL) ||
        (*port = '\0', getaddrinfo(host, port + 1, &hints, &ai) != 0)) {
        return UCS_ERR_INVALID_ADDR;
    }
    params.sockaddr = (ucs_sock_addr_t){ai->ai_addr, ai->ai_addrlen};
    status          = ucp_ep_create(kv.worker, &params, ep);
    freeaddrinfo(ai);
    return status;
}

int main(int argc, char **argv)
{
    ucp_params_t           params  = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                      .features   = UCP_FEATURE_AM};
    ucp_worker_params_t    wparams = {0};
    ucp_am_handler_param_t hparams = {.field_mask =
                                              UCP_AM_HANDLER_PARAM_FIELD_ID |
                                              UCP_AM_HANDLER_PARAM_FIELD_CB,
                                      .id = KV_AM_REPLY,
                                      .cb = kv_am_reply};
    kv_transport_t tr = {"kv-am", kv_am_client_send, kv_am_client_progress,
                         NULL};
    kv_options_t   o;
    ucp_context_h  context;
    int            ret = 1;

    if (kv_options_parse(argc, argv, 0, &o) != 0) {
        return 2;
    }
    kv_am_pool_init(&kv.requests, 256);
    if ((ucp_init(&params, NULL, &context) == UCS_OK) &&
        (ucp_worker_create(context, &wparams, &kv.worker) == UCS_OK) &&
        (ucp_worker_set_am_recv_handler(kv.worker, &hparams) == UCS_OK) &&
        (kv_am_connect(o.address, &kv.ep) == UCS_OK)) {
        ret = kv_client_run(&tr, &o, &kv.client);
        kv_am_close_ep(kv.worker, kv.ep, 0); /* flush first */
        ucp_worker_destroy(kv.worker);
        ucp_cleanup(context);
    }
    return ret;
}
