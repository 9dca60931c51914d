/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What the two programs of the active-message twin share: the AM ids and a
 * pool of send buffers. UCP may keep a send's buffer until the send
 * completes, so a program of active messages keeps the messages in flight
 * somewhere: here, in a pool of buffers freed by the completion callback.
 */
#ifndef KV_AM_H_
#define KV_AM_H_

#include "kv_app.h"

#include <ucp/api/ucp.h>

#define KV_AM_REQUEST 10 /* client to target: a kv_msg_t */
#define KV_AM_REPLY 11   /* target to client: the answer to a get */
#define KV_AM_BUFS 4096  /* at most */

typedef struct kv_am_buf {
    kv_msg_t           msg;
    struct kv_am_pool *pool;
} kv_am_buf_t;

typedef struct kv_am_pool {
    kv_am_buf_t  buf[KV_AM_BUFS];
    kv_am_buf_t *free[KV_AM_BUFS];
    unsigned     nfree;
} kv_am_pool_t;

static inline void kv_am_pool_init(kv_am_pool_t *p, unsigned size)
{
    for (p->nfree = 0; p->nfree < size; ++p->nfree) {
        p->buf[p->nfree].pool = p;
        p->free[p->nfree]     = &p->buf[p->nfree];
    }
}

static void kv_am_sent(void *request, ucs_status_t status, void *user_data)
{
    kv_am_buf_t *b = user_data;

    (void)status;
    b->pool->free[b->pool->nfree++] = b;
    ucp_request_free(request);
}

/* Sends msg by AM id on ep from a buffer of the pool: 0 sent, 1 no buffer
 * free (progress and send again), -1 failed. */
static inline int kv_am_send(kv_am_pool_t *p, ucp_ep_h ep, unsigned id,
                             const kv_msg_t *msg, uint32_t flags)
{
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                 UCP_OP_ATTR_FIELD_USER_DATA |
                                                 UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags   = UCP_AM_SEND_FLAG_EAGER | flags,
                                 .cb.send = kv_am_sent};
    kv_am_buf_t        *b;
    void               *req;

    if (p->nfree == 0) {
        return 1;
    }
    b               = p->free[--p->nfree];
    b->msg          = *msg;
    param.user_data = b;
    req = ucp_am_send_nbx(ep, id, NULL, 0, &b->msg, sizeof(*msg), &param);
    if ((req == NULL) || UCS_PTR_IS_ERR(req)) {
        p->free[p->nfree++] = b;
    }
    return UCS_PTR_IS_ERR(req) ? -1 : 0;
}

/* Closes @a ep (by flush, or by force with UCP_EP_CLOSE_FLAG_FORCE in
 * @a flags), progressing @a worker until the close ends. */
static inline void kv_am_close_ep(ucp_worker_h worker, ucp_ep_h ep,
                                  unsigned flags)
{
    ucp_request_param_t close = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags        = flags};
    void               *req   = ucp_ep_close_nbx(ep, &close);

    while (UCS_PTR_IS_PTR(req) &&
           (ucp_request_check_status(req) == UCS_INPROGRESS)) {
        ucp_worker_progress(worker);
    }
    if (UCS_PTR_IS_PTR(req)) {
        ucp_request_free(req);
    }
}

#endif
