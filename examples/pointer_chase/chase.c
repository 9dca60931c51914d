/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The pointer-chase ifunc. The origin injects it at the owner of the
 * chase's node; chase_main follows links while they stay on that process,
 * then sends its own code on to the next owner with the new position (a
 * 24-byte payload), and finally the value back to the origin. Processes
 * other than the origin have no copy of this library: they run the code
 * because it is signed by a key they trust.
 */
#include "chase_shared.h"

#include <string.h>

/* The code of this ifunc as this process received it: fetched on the first
 * forward; statics live as long as the code stays linked. */
static ucp_ifunc_h chase_code;

size_t chase_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int chase_payload_init(void *source_args, size_t source_args_size,
                       void *payload, size_t *payload_size)
{
    if ((source_args_size != sizeof(chase_msg_t)) ||
        (*payload_size < source_args_size)) {
        return -1;
    }
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

/* A send that did not complete at once: its message can go now. */
static void chase_sent(void *request, ucs_status_t status, void *user_data)
{
    ucp_ifunc_msg_t msg = {user_data, 0};

    (void)status;
    ucp_ifunc_msg_free(msg);
    ucp_request_free(request);
}

void chase_main(void *payload, size_t payload_size, void *target_args)
{
    chase_target_args_t   *args   = target_args;
    ucp_ifunc_msg_params_t params = {0};
    ucp_request_param_t    rparam = {0};
    ucp_ifunc_msg_t        msg;
    ucs_status_ptr_t       request;
    chase_msg_t            chase;
    uint32_t               dest;

    if (payload_size != sizeof(chase)) {
        ++args->errors;
        return;
    }
    memcpy(&chase, payload, sizeof(chase));
    if (chase.done ||
        chase_walk_local(args->nodes, args->rank, args->nprocs, &chase)) {
        if (chase.origin == args->rank) {
            args->results->value[chase.chase_id]             = chase.index;
            args->results->completed[args->results->count++] = chase.chase_id;
            return;
        }
        dest = chase.origin;
    } else {
        dest = (uint32_t)(chase.index % args->nprocs);
    }

    if ((chase_code == NULL) &&
        (ucp_ifunc_code_get(NULL, NULL, &chase_code) != UCS_OK)) {
        ++args->errors;
        return;
    }
    params.field_mask   = UCP_IFUNC_MSG_FIELD_PAYLOAD;
    params.payload      = &chase;
    params.payload_size = sizeof(chase);
    if (ucp_ifunc_msg_build(chase_code, &params, &msg) != UCS_OK) {
        ++args->errors;
        return;
    }
    rparam.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rparam.cb.send   = chase_sent;
    rparam.user_data = msg.frame;
    request = ucp_ifunc_am_send_nbx(args->am_eps[dest], msg, &rparam, NULL);
    if (UCS_PTR_IS_PTR(request)) {
        ++args->sent;
        return;
    }
    if (UCS_PTR_IS_ERR(request)) {
        ++args->errors;
    } else {
        ++args->sent;
    }
    ucp_ifunc_msg_free(msg);
}
