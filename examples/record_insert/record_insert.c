/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The ifunc of examples/record_insert: the source compresses one text
 * record with zstd into the payload; the target decompresses it with its
 * own libzstd and inserts it into its SQLite database. Built with
 *     ucx-ifunc-cc -O2 -o record_insert.so record_insert.c -lzstd -lsqlite3
 * which records both sonames in the image, so a target that trusts the
 * signature needs no copy of this library.
 */
#include "record_format.h"

/* The payload functions every ifunc library defines (ucp_register_ifunc
 * binds them; ucp_ifunc_msg_create calls them): source_args is a
 * record_source_args_t, the record and the source's compression context.
 * The example's source sends on the default path, where the payload is the
 * caller's: it compresses with the same record_compress into its own buffer
 * and hands that to ucp_ifunc_peer_send_nbx, so these do not run there. */
size_t record_insert_payload_bound(void *source_args, size_t source_args_size)
{
    if (source_args_size != sizeof(record_source_args_t)) {
        return 0;
    }
    return record_payload_bound(((record_source_args_t *)source_args)->size);
}

int record_insert_payload_init(void *source_args, size_t source_args_size,
                               void *payload, size_t *payload_size)
{
    if (source_args_size != sizeof(record_source_args_t)) {
        return -1;
    }
    return record_compress(source_args, payload, payload_size);
}

/* target_args is the target's record_target_t. Runs inside the target's
 * ucp_ifunc_worker_progress: it only touches the database, never the
 * worker. */
void record_insert_main(void *payload, size_t payload_size, void *target_args)
{
    record_insert_compressed((record_target_t *)target_args, payload,
                             payload_size);
}
