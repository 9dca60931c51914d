/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The end of a hop chain, at the origin: records what arrived. The origin
 * first sends it to every process (chain HOP_WARM_UP), so that they hold
 * its code and hop can send it by name.
 */
#include "hop.h"

#include <string.h>

size_t hop_done_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int hop_done_payload_init(void *source_args, size_t source_args_size,
                          void *payload, size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

void hop_done_main(void *payload, size_t payload_size, void *target_args)
{
    struct hop_target_args *args = (struct hop_target_args *)target_args;
    struct hop_done_payload d;

    if (payload_size != sizeof(d)) {
        ++args->failures;
        return;
    }
    memcpy(&d, payload, sizeof(d));
    if (d.chain == HOP_WARM_UP) {
        ++args->warm_ups;
        return;
    }
    args->done_hops[d.chain % HOP_MAX_CHAINS]     = d.hops_done;
    args->done_checksum[d.chain % HOP_MAX_CHAINS] = d.checksum;
    ++args->completed;
}
