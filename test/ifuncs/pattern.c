/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Integrity probe of the default path (test/peer/ifunc_peer_node.cc): the
 * payload is the caller's, a sequence number followed by a byte pattern of
 * it; main checks every byte and counts the runs of each sequence number,
 * so that a message that ran twice, or before all of it arrived, shows.
 * No imports.
 */
#include "test_ifunc.h"

#include <string.h>

size_t pattern_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int pattern_payload_init(void *source_args, size_t source_args_size,
                         void *payload, size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    return 0;
}

void pattern_main(void *payload, size_t payload_size, void *target_args)
{
    struct pattern_result *result = target_args;
    const uint8_t         *bytes  = payload;
    uint64_t               seq, stream, index;
    size_t                 i;

    result->executed++;
    if (payload_size < sizeof(seq)) {
        result->corrupt++;
        return;
    }
    memcpy(&seq, payload, sizeof(seq));
    for (i = sizeof(seq); i < payload_size; ++i) {
        if (bytes[i] != pattern_byte(seq, i)) {
            result->corrupt++;
            return;
        }
    }
    stream = seq >> PATTERN_STREAM_SHIFT;
    index  = seq & ((1ull << PATTERN_STREAM_SHIFT) - 1);
    if ((stream >= PATTERN_STREAMS) || (index >= PATTERN_STREAM_CAPACITY)) {
        result->unknown++;
        return;
    }
    result->per_stream[stream]++;
    if (result->seen[stream * PATTERN_STREAM_CAPACITY + index]++ != 0) {
        result->duplicate++;
    }
}
