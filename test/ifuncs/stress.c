/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Integrity probe for the stress tests: the payload carries a sequence
 * number, a length and a checksum of random bytes; main checks all three
 * on the target, so a frame that ran before all of it arrived is counted.
 * With a run-counter array in the result it also counts messages that ran
 * twice (test/netns, where messages may be lost).
 */
#include "test_ifunc.h"

#include <string.h>

struct stress_header {
    uint64_t seq;
    uint64_t size;
    uint64_t checksum;
};

size_t stress_payload_bound(void *source_args, size_t source_args_size)
{
    const struct stress_args *args = source_args;
    (void)source_args_size;
    return sizeof(struct stress_header) + args->size;
}

int stress_payload_init(void *source_args, size_t source_args_size,
                        void *payload, size_t *payload_size)
{
    const struct stress_args *args = source_args;
    struct stress_header      hdr  = {args->seq, args->size,
                                      test_hash64(args->bytes, args->size)};
    (void)source_args_size;
    memcpy(payload, &hdr, sizeof(hdr));
    if (args->size > 0) {
        memcpy((char *)payload + sizeof(hdr), args->bytes, args->size);
    }
    *payload_size = sizeof(hdr) + args->size;
    return 0;
}

void stress_main(void *payload, size_t payload_size, void *target_args)
{
    struct stress_result *result = target_args;
    struct stress_header  hdr;

    result->executed++;
    if (payload_size < sizeof(hdr)) {
        result->corrupt++;
        return;
    }
    memcpy(&hdr, payload, sizeof(hdr));
    if ((hdr.size != payload_size - sizeof(hdr)) ||
        (hdr.checksum != test_hash64((char *)payload + sizeof(hdr),
                                     payload_size - sizeof(hdr)))) {
        result->corrupt++;
    }
    if (result->seen != NULL) {
        uint64_t index = hdr.seq - result->seen_base;
        if (index >= result->seen_count) {
            result->unknown++;
        } else if (result->seen[index]++ != 0) {
            result->duplicate++;
        }
    }
    if (hdr.seq != result->next_seq) {
        result->out_of_order++;
    }
    result->next_seq = hdr.seq + 1;
}
