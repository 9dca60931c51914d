/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The key-value service's one ifunc, shipped by the clients to the target:
 * kv_main runs an increment, a put or a get on the target's table (its
 * target_args), and answers a get by sending its own code back to the
 * message's source (UCP_IFUNC_PEER_SOURCE) with the value. On the client
 * the same kv_main records the answer. The target has no copy of this
 * library: it runs the code because it is signed by a key it trusts.
 */
#include "kv.h"

#include <ucp/api/ucp_ifunc.h>

/* This code as this process received it, to answer with: fetched on the
 * first get; statics live as long as the code stays linked. */
static ucp_ifunc_h kv_code;

/* Every ifunc library defines these; on the default path the client sends
 * its own kv_msg_t and they do not run. */
size_t kv_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int kv_payload_init(void *source_args, size_t source_args_size, void *payload,
                    size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

void kv_main(void *payload, size_t payload_size, void *target_args)
{
    kv_side_t *side = target_args;
    kv_msg_t   msg, reply;

    if (payload_size != sizeof(msg)) {
        if (side->table != NULL) {
            ++side->table->refused;
        }
        return;
    }
    memcpy(&msg, payload, sizeof(msg));
    if (side->client != NULL) { /* a client: the answer to its get */
        kv_answer(side->client, &msg);
        return;
    }
    if ((side->table == NULL) || !kv_apply(side->table, &msg, &reply)) {
        return;
    }
    if (((kv_code == NULL) &&
         (ucp_ifunc_code_get(NULL, NULL, &kv_code) != UCS_OK)) ||
        (ucp_ifunc_peer_send_nbx(UCP_IFUNC_PEER_SOURCE, kv_code, &reply,
                                 sizeof(reply), NULL) != UCS_OK)) {
        ++side->table->replies_failed;
    }
}
