/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * A recursive ifunc: each run mixes its rank into the chain's checksum and
 * sends its own code on, with the new payload, to the next rank, until the
 * chain's hops are spent; the last run sends hop_done (found by name among
 * the code this process holds) to the origin. The processes it runs in have
 * no hop.so: they run it because it is signed by a key they trust.
 */
#include "hop.h"

#include <string.h>

size_t hop_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int hop_payload_init(void *source_args, size_t source_args_size, void *payload,
                     size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

/* The message goes when its send completes: user_data is its frame. */
static void sent(void *request, ucs_status_t status, void *user_data)
{
    ucp_ifunc_msg_t msg = {user_data, 0};
    (void)status; /* a lost chain shows at the origin */
    ucp_ifunc_msg_free(msg);
    ucp_request_free(request);
}

static void send_to(struct hop_target_args *args, ucp_ifunc_h code, int rank,
                    const void *payload, size_t size)
{
    ucp_ifunc_msg_params_t params;
    ucp_ifunc_msg_t        msg;
    ucp_request_param_t    request;
    ucs_status_ptr_t       status_ptr;

    params.field_mask   = UCP_IFUNC_MSG_FIELD_PAYLOAD;
    params.payload      = payload;
    params.payload_size = size;
    if (ucp_ifunc_msg_build(code, &params, &msg) != UCS_OK) {
        ++args->failures;
        return;
    }
    request.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    request.cb.send   = sent;
    request.user_data = msg.frame;
    status_ptr = ucp_ifunc_am_send_nbx(args->eps[rank], msg, &request, NULL);
    if (UCS_PTR_IS_ERR(status_ptr)) {
        ++args->failures;
        ucp_ifunc_msg_free(msg);
    } else if (status_ptr == NULL) {
        ucp_ifunc_msg_free(msg); /* completed at once */
    }
    ++args->sends;
}

void hop_main(void *payload, size_t payload_size, void *target_args)
{
    /* Handles of code this process received, kept for the next runs:
     * statics live as long as the code stays linked. */
    static ucp_ifunc_h      self, done;
    struct hop_target_args *args = (struct hop_target_args *)target_args;
    struct hop_payload      p;

    if (payload_size != sizeof(p)) {
        ++args->failures;
        return;
    }
    memcpy(&p, payload, sizeof(p));
    ++args->runs;
    p.checksum = hop_mix(p.checksum, (uint64_t)args->rank);
    ++p.hops_done;

    if (self == NULL) {
        ucp_ifunc_code_params_t by_name;
        ucp_ifunc_msg_t         msg;
        if (ucp_ifunc_code_get(NULL, NULL, &self) != UCS_OK) {
            ++args->failures;
            return;
        }
        /* Received code has no payload functions to call. */
        if (ucp_ifunc_msg_create(self, &p, sizeof(p), &msg) !=
            UCS_ERR_INVALID_PARAM) {
            ++args->api_checks_failed;
        }
        by_name.field_mask = UCP_IFUNC_CODE_PARAM_FIELD_NAME;
        by_name.name       = "hop_done";
        /* Held since the origin's warm-up message. */
        if (ucp_ifunc_code_get(args->context, &by_name, &done) != UCS_OK) {
            ++args->failures;
            return;
        }
    }

    if (p.hops_left > 0) {
        int next = hop_next_rank(&p, args->rank, args->nprocs);
        --p.hops_left;
        send_to(args, self, next, &p, sizeof(p));
    } else {
        struct hop_done_payload d = {p.chain, p.hops_done, p.checksum};
        if (args->rank == args->origin) {
            args->done_hops[d.chain % HOP_MAX_CHAINS]     = d.hops_done;
            args->done_checksum[d.chain % HOP_MAX_CHAINS] = d.checksum;
            ++args->completed;
            ++args->done_here;
        } else {
            send_to(args, done, args->origin, &d, sizeof(d));
        }
    }
}
