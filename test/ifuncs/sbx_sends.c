/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Code for the sandbox (ucx-ifunc-cc --sandbox) that sends from its
 * target through the host calls ucp_ifunc_code_get and
 * ucp_ifunc_peer_send_nbx, to the peers the target granted it and to its
 * message's source: a chain that never ends by itself, a flood of large
 * sends, sends through forged handles (test_ifunc.h, struct
 * sbx_sends_payload). What the calls returned is counted in its
 * target_args.
 */
#include "test_ifunc.h"

#include <ucp/api/ucp_ifunc.h>

#include <string.h>

size_t sbx_sends_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int sbx_sends_payload_init(void *source_args, size_t source_args_size,
                           void *payload, size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

static void count_send(struct sbx_sends_args *args, ucs_status_t status)
{
    if (status == UCS_OK) {
        ++args->sent;
    } else {
        ++args->refused;
        args->last_refusal = status;
    }
}

void sbx_sends_main(void *payload, size_t payload_size, void *target_args)
{
    static ucp_ifunc_h       self;
    struct sbx_sends_args   *args = target_args;
    struct sbx_sends_payload p;
    const char              *data;
    uint64_t                 i;

    if (payload_size < sizeof(p)) {
        return;
    }
    memcpy(&p, payload, sizeof(p));
    ++args->runs;
    if ((p.op == SBX_SENDS_COUNT) ||
        ((self == NULL) && (ucp_ifunc_code_get(NULL, NULL, &self) != UCS_OK))) {
        return;
    }
    switch (p.op) {
        case SBX_SENDS_ON:
            count_send(args,
                       ucp_ifunc_peer_send_nbx((ucp_ifunc_peer_h)p.peer, self,
                                               &p, sizeof(p), NULL));
            break;
        case SBX_SENDS_FLOOD:
            data = (const char *)target_args + SBX_SENDS_DATA_OFFSET;
            for (i = 0; i < p.count; ++i) {
                count_send(args,
                           ucp_ifunc_peer_send_nbx((ucp_ifunc_peer_h)p.peer,
                                                   self, data, p.length, NULL));
            }
            break;
        case SBX_SENDS_PROBE:
            p.op = SBX_SENDS_COUNT;
            for (i = 0; (i < p.count) && (i < SBX_SENDS_PROBES); ++i) {
                args->probe_status[i] = ucp_ifunc_peer_send_nbx(
                        (ucp_ifunc_peer_h)args->probes[i], self, &p, sizeof(p),
                        NULL);
            }
            break;
        default:
            break;
    }
}
