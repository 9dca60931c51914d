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

KERNEL_PAYLOAD_IS_SOURCE_ARGS

void KERNEL_FN(_main)(void *payload, size_t payload_size, void *target_args)
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
