/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Payload functions that misbehave on request, to test how
 * ucp_ifunc_msg_create reports it. The first byte of the source arguments
 * picks the fault: 'F' payload_init fails, 'O' it claims more than the bound.
 */
#include <stddef.h>
#include <string.h>

size_t faulty_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size;
}

int faulty_payload_init(void *source_args, size_t source_args_size,
                        void *payload, size_t *payload_size)
{
    const char *mode = source_args;
    if ((source_args_size > 0) && (mode[0] == 'F')) {
        return 7;
    }
    memcpy(payload, source_args, source_args_size);
    *payload_size = source_args_size;
    if ((source_args_size > 0) && (mode[0] == 'O')) {
        *payload_size = source_args_size + 1;
    }
    return 0;
}

void faulty_main(void *payload, size_t payload_size, void *target_args)
{
    (void)payload;
    (void)payload_size;
    (void)target_args;
}
