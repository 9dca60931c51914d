/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Code that sends itself on through the default path: each run mixes its
 * node into the chain's checksum and sends its own code (a handle of the
 * running message, kept in a static) with the new payload to the other
 * node with ucp_ifunc_peer_send_nbx, until the hops are spent; the last run
 * tells the other node to stop (test/peer/ifunc_peer_node.cc).
 */
#include "test_ifunc.h"

#include <ucp/api/ucp_ifunc.h>

#include <string.h>

size_t relay_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int relay_payload_init(void *source_args, size_t source_args_size,
                       void *payload, size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

void relay_main(void *payload, size_t payload_size, void *target_args)
{
    /* Statics of shipped code live as long as the code stays linked. */
    static ucp_ifunc_h   self;
    struct relay_args   *args = target_args;
    struct relay_payload p;

    if (payload_size != sizeof(p)) {
        ++args->failures;
        return;
    }
    memcpy(&p, payload, sizeof(p));
    if (!relay_step(args, &p)) {
        /* The chain is over: the handle goes (a leak otherwise, which
         * the sanitizer build reports when the node exits). */
        ucp_deregister_ifunc(NULL, self);
        self = NULL;
        return;
    }
    if ((self == NULL) && (ucp_ifunc_code_get(NULL, NULL, &self) != UCS_OK)) {
        ++args->failures;
        return;
    }
    if (ucp_ifunc_peer_send_nbx((ucp_ifunc_peer_h)args->peer, self, &p,
                                sizeof(p), NULL) == UCS_OK) {
        ++args->sends;
    } else {
        ++args->failures;
    }
    if (p.stop) {
        ucp_deregister_ifunc(NULL, self); /* its last send is made */
        self = NULL;
    }
}
