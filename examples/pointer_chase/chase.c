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

void chase_main(void *payload, size_t payload_size, void *target_args)
{
    chase_target_args_t *args = target_args;
    chase_msg_t          chase;
    uint32_t             dest;

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
    /* One call: the payload from this stack, the code named by a short
     * reference once the next process holds it. */
    if (ucp_ifunc_peer_send_nbx(args->peers[dest], chase_code, &chase,
                                sizeof(chase), NULL) == UCS_OK) {
        ++args->sent;
    } else {
        ++args->errors;
    }
}
