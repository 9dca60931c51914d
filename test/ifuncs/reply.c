/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * A request that is answered: each run answers the source of its message
 * in one call, ucp_ifunc_peer_send_nbx(UCP_IFUNC_PEER_SOURCE, ...), with
 * its own code and the payload, value incremented, while answers are
 * left; the run with none left records what arrived. What it found and
 * did goes to the process's ifunc_test_reply (struct reply_record,
 * test/peer/ifunc_peer_node.cc).
 */
#include "test_ifunc.h"

#include <ucp/api/ucp_ifunc.h>

#include <stdint.h>
#include <string.h>

extern struct reply_record ifunc_test_reply;

size_t reply_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int reply_payload_init(void *source_args, size_t source_args_size,
                       void *payload, size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

/* 1 + the first byte of the key the source proved, 0 where it proved
 * none, -2 where the source is not known. */
static int64_t source_key(void)
{
    ucp_ifunc_source_attr_t attr;

    memset(&attr, 0, sizeof(attr));
    attr.field_mask =
            UCP_IFUNC_SOURCE_ATTR_FIELD_PEER | UCP_IFUNC_SOURCE_ATTR_FIELD_KEY;
    if ((ucp_ifunc_source_query(&attr) != UCS_OK) || (attr.peer == NULL)) {
        return -2;
    }
    return attr.key_verified ? (int64_t)attr.key[0] + 1 : 0;
}

void reply_main(void *payload, size_t payload_size, void *target_args)
{
    struct reply_payload p;
    ucp_ifunc_h          self;
    ucs_status_t         status;

    (void)target_args;
    if (payload_size < sizeof(p)) {
        ++ifunc_test_reply.failed;
        return;
    }
    memcpy(&p, payload, sizeof(p));
    if (p.answers == 0) {
        ++ifunc_test_reply.arrived;
        ifunc_test_reply.value_sum += p.value;
        ifunc_test_reply.key = p.key;
        return;
    }
    ++p.value;
    --p.answers;
    p.key = source_key();
    /* The payload is this message's to change while it runs. */
    memcpy(payload, &p, sizeof(p));
    status = ucp_ifunc_code_get(NULL, NULL, &self);
    if (status == UCS_OK) {
        status = ucp_ifunc_peer_send_nbx(UCP_IFUNC_PEER_SOURCE, self, payload,
                                         payload_size, NULL);
        ucp_deregister_ifunc(NULL, self); /* the send holds what it needs */
    }
    if (status == UCS_OK) {
        ++ifunc_test_reply.answered;
    } else {
        ++ifunc_test_reply.failed;
        ifunc_test_reply.status = status;
    }
}
