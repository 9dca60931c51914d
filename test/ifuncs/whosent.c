/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Asks who sent the message it runs (ucp_ifunc_source_query) and leaves
 * the answer in a global of the target, ifunc_test_source
 * (test/peer/ifunc_peer_node.cc): 1 + the first byte of the key the
 * source proved, 0 where it proved none, -2 where the query failed.
 */
#include "test_ifunc.h"

#include <ucp/api/ucp_ifunc.h>

#include <stdint.h>
#include <string.h>

extern int64_t ifunc_test_source;

size_t whosent_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int whosent_payload_init(void *source_args, size_t source_args_size,
                         void *payload, size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

void whosent_main(void *payload, size_t payload_size, void *target_args)
{
    ucp_ifunc_source_attr_t attr;

    (void)payload;
    (void)payload_size;
    (void)target_args;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask =
            UCP_IFUNC_SOURCE_ATTR_FIELD_PEER | UCP_IFUNC_SOURCE_ATTR_FIELD_KEY;
    if ((ucp_ifunc_source_query(&attr) != UCS_OK) || (attr.peer == NULL)) {
        ifunc_test_source = -2;
        return;
    }
    ifunc_test_source = attr.key_verified ? (int64_t)attr.key[0] + 1 : 0;
}
