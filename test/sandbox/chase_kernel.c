/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The pointer chase's ifunc (examples/pointer_chase/chase.c) as sandboxed
 * code can run it: that one forwards chases with ucp_ifunc_code_get and
 * ucp_ifunc_peer_send_nbx, which a target does not grant sandboxed code,
 * and reads the target's peers. On one rank a chase never leaves, so this
 * is its work: chase_walk_local over nodes in target memory. Build with
 * -DIFUNC_NAME=NAME.
 */
#include "overhead_kernels.h"

#include "../../examples/pointer_chase/chase_shared.h"

#include <stddef.h>
#include <string.h>

#define CHASE_CONCAT2(a, b) a##b
#define CHASE_CONCAT(a, b) CHASE_CONCAT2(a, b)
#define CHASE_FN(suffix) CHASE_CONCAT(IFUNC_NAME, suffix)

size_t CHASE_FN(_payload_bound)(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int CHASE_FN(_payload_init)(void *source_args, size_t source_args_size,
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

void CHASE_FN(_main)(void *payload, size_t payload_size, void *target_args)
{
    chase_kernel_args_t *args = target_args;
    chase_msg_t          chase;

    if (payload_size != sizeof(chase)) {
        return;
    }
    memcpy(&chase, payload, sizeof(chase));
    chase.index %= args->count;
    chase_walk_local(args->nodes, 0, 1, &chase);
    args->sum += chase.index;
}
