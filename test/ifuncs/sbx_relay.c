/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * relay (relay.c) built for the sandbox (ucx-ifunc-cc --sandbox): each run
 * mixes its node into the chain's checksum and sends its own code on to
 * the other node through the host calls ucp_ifunc_code_get and
 * ucp_ifunc_peer_send_nbx. Its per-process data (struct sbx_relay_args:
 * the handle of the peer the node granted to it with
 * ucp_ifunc_sandbox_peer_grant, the node, the counters) is the target_args, in memory
 * the node granted to it. A payload with a probe set makes the calls with
 * one forged argument instead and records what they returned.
 */
#include "test_ifunc.h"

#include <ucp/api/ucp_ifunc.h>

#include <string.h>

size_t sbx_relay_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int sbx_relay_payload_init(void *source_args, size_t source_args_size,
                           void *payload, size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

/* The refused calls: each with one bad argument, the rest good. */
static void probe(struct sbx_relay_args *args, ucp_ifunc_h self,
                  struct sbx_relay_payload *p)
{
    ucp_ifunc_peer_h peer = (ucp_ifunc_peer_h)args->relay.peer;
    ucp_ifunc_h      code;

    /* A peer handle that is no peer: the good one + 8. */
    args->probe_status[SBX_PROBE_PEER] = ucp_ifunc_peer_send_nbx(
            (ucp_ifunc_peer_h)((char *)args->relay.peer + 8), self, p,
            sizeof(*p), NULL);
    /* A live code handle of the host's, not one the sandbox got. */
    args->probe_status[SBX_PROBE_CODE] = ucp_ifunc_peer_send_nbx(
            peer, (ucp_ifunc_h)args->host_code, p, sizeof(*p), NULL);
    /* A payload in the slot's guard, outside the sandbox's memory. */
    args->probe_status[SBX_PROBE_PAYLOAD] = ucp_ifunc_peer_send_nbx(
            peer, self, (const void *)(uintptr_t)0x1000, sizeof(*p), NULL);
    /* A payload that starts on the stack and runs past it. */
    args->probe_status[SBX_PROBE_LENGTH] =
            ucp_ifunc_peer_send_nbx(peer, self, p, (size_t)1 << 30, NULL);
    /* The handle written outside the sandbox's memory. */
    args->probe_status[SBX_PROBE_CODE_OUT] =
            ucp_ifunc_code_get(NULL, NULL, (ucp_ifunc_h *)(uintptr_t)0x1000);
    /* Another context's code: not the sandbox's own. */
    args->probe_status[SBX_PROBE_CONTEXT] =
            ucp_ifunc_code_get((ucp_context_h)args->relay.peer, NULL, &code);
    args->probed = 1;
}

void sbx_relay_main(void *payload, size_t payload_size, void *target_args)
{
    static ucp_ifunc_h       self;
    struct sbx_relay_args   *args = target_args;
    struct sbx_relay_payload p;

    if (payload_size != sizeof(p)) {
        ++args->relay.failures;
        return;
    }
    memcpy(&p, payload, sizeof(p));
    if ((self == NULL) && (ucp_ifunc_code_get(NULL, NULL, &self) != UCS_OK)) {
        ++args->relay.failures;
        return;
    }
    if (p.probe) {
        probe(args, self, &p);
        return;
    }
    if (!relay_step(&args->relay, &p.relay)) {
        return;
    }
    if (ucp_ifunc_peer_send_nbx((ucp_ifunc_peer_h)args->relay.peer, self, &p,
                                sizeof(p), NULL) == UCS_OK) {
        ++args->relay.sends;
    } else {
        ++args->relay.failures;
    }
}
