/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What the source and the target of examples/record_insert agree on: the
 * record text, the compressed payload, the table, and the code that
 * decompresses and inserts one record. The ifunc (record_insert.c) and the
 * target's own active-message handlers (main.cc) include the same
 * functions, so the three variants differ only in how a record travels.
 */
#ifndef RECORD_FORMAT_H_
#define RECORD_FORMAT_H_

#include <sqlite3.h>
#include <zstd.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Longest record text, in bytes; the generator stays well below it. */
#define RECORD_MAX 1024

/* Records per transaction, in every variant. */
#define RECORD_BATCH 1000

/* zstd level of the source: its default, fast and still worth the wire. */
#define RECORD_ZSTD_LEVEL 3

#define RECORD_TABLE_SQL                                                       \
    "CREATE TABLE records (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "       \
    "city TEXT NOT NULL, body TEXT NOT NULL)"
#define RECORD_INSERT_SQL                                                      \
    "INSERT INTO records (id, name, city, body) VALUES (?, ?, ?, ?)"

/* The compressed payload: this header, then one zstd frame. */
typedef struct record_payload_header {
    uint32_t raw_size; /* bytes of the record text */
    uint32_t reserved; /* 0; keeps the zstd frame 8-byte aligned */
} record_payload_header_t;

/* The target's state, passed as target_args to every insert. */
typedef struct record_target {
    sqlite3      *db;
    sqlite3_stmt *insert;
    sqlite3_stmt *begin;
    sqlite3_stmt *commit;
    ZSTD_DCtx    *dctx; /* created by the first decompression */
    uint64_t      inserted;
    uint64_t      failed;
    char          text[RECORD_MAX];
} record_target_t;

/* A record is "ID\tNAME\tCITY\tBODY": ID decimal, the others without tabs. */
typedef struct record_fields {
    int64_t     id;
    const char *name, *city, *body;
    size_t      name_size, city_size, body_size;
} record_fields_t;

/* 0 on success, -1 if @a text is not a record. */
static inline int record_parse(const char *text, size_t size,
                               record_fields_t *f)
{
    const char *end = text + size, *p = text, *tab;
    f->id = 0;
    for (; (p < end) && (*p >= '0') && (*p <= '9'); ++p) {
        f->id = f->id * 10 + (*p - '0');
    }
    if ((p == text) || (p == end) || (*p++ != '\t')) {
        return -1;
    }
    if ((tab = (const char *)memchr(p, '\t', (size_t)(end - p))) == NULL) {
        return -1;
    }
    f->name      = p;
    f->name_size = (size_t)(tab - p);
    p            = tab + 1;
    if ((tab = (const char *)memchr(p, '\t', (size_t)(end - p))) == NULL) {
        return -1;
    }
    f->city      = p;
    f->city_size = (size_t)(tab - p);
    f->body      = tab + 1;
    f->body_size = (size_t)(end - f->body);
    return 0;
}

/* Runs a BEGIN or COMMIT statement; 0 on success. */
static inline int record_exec(sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return (rc == SQLITE_DONE) ? 0 : -1;
}

/* Inserts one record, opening a transaction before every RECORD_BATCH-th
 * and committing after it; the caller commits the last, partial batch. */
static inline void record_insert_text(record_target_t *t, const char *text,
                                      size_t size)
{
    record_fields_t f;
    int             rc;

    if (record_parse(text, size, &f) != 0) {
        ++t->failed;
        return;
    }
    if (((t->inserted % RECORD_BATCH) == 0) && (record_exec(t->begin) != 0)) {
        ++t->failed;
        return;
    }
    /* SQLITE_STATIC: the step below copies the text into the row. */
    sqlite3_bind_int64(t->insert, 1, f.id);
    sqlite3_bind_text(t->insert, 2, f.name, (int)f.name_size, SQLITE_STATIC);
    sqlite3_bind_text(t->insert, 3, f.city, (int)f.city_size, SQLITE_STATIC);
    sqlite3_bind_text(t->insert, 4, f.body, (int)f.body_size, SQLITE_STATIC);
    rc = sqlite3_step(t->insert);
    sqlite3_reset(t->insert);
    if (rc != SQLITE_DONE) {
        ++t->failed;
        return;
    }
    if ((++t->inserted % RECORD_BATCH) == 0) {
        if (record_exec(t->commit) != 0) {
            ++t->failed;
        }
    }
}

/* Decompresses one payload into t->text and inserts it. */
static inline void record_insert_compressed(record_target_t *t,
                                            const void *payload, size_t size)
{
    record_payload_header_t hdr;
    size_t                  raw;

    if (size < sizeof(hdr)) {
        ++t->failed;
        return;
    }
    memcpy(&hdr, payload, sizeof(hdr));
    /* One context for all records: ZSTD_decompress would set up a new one
     * for every record, about 15 us each. */
    if ((t->dctx == NULL) && ((t->dctx = ZSTD_createDCtx()) == NULL)) {
        ++t->failed;
        return;
    }
    raw = ZSTD_decompressDCtx(t->dctx, t->text, sizeof(t->text),
                              (const char *)payload + sizeof(hdr),
                              size - sizeof(hdr));
    if (ZSTD_isError(raw) || (raw != hdr.raw_size)) {
        ++t->failed;
        return;
    }
    record_insert_text(t, t->text, raw);
}

/* What the source compresses a record with: the record and a compression
 * context that the caller keeps from one record to the next (ZSTD_compress
 * would set up a new one for every record, about 15 us each). */
typedef struct record_source_args {
    const char *text;
    size_t      size;
    ZSTD_CCtx  *cctx;
} record_source_args_t;

/* Largest payload of a record of @a size bytes. */
static inline size_t record_payload_bound(size_t size)
{
    return sizeof(record_payload_header_t) + ZSTD_compressBound(size);
}

/* Compresses a record into @a payload (capacity @a *payload_size); 0 on
 * success, with the bytes used in @a *payload_size. */
static inline int record_compress(const record_source_args_t *args,
                                  void *payload, size_t *payload_size)
{
    record_payload_header_t hdr = {(uint32_t)args->size, 0};
    size_t                  n;

    if ((args->size > RECORD_MAX) || (*payload_size < sizeof(hdr))) {
        return -1;
    }
    n = ZSTD_compressCCtx(args->cctx, (char *)payload + sizeof(hdr),
                          *payload_size - sizeof(hdr), args->text, args->size,
                          RECORD_ZSTD_LEVEL);
    if (ZSTD_isError(n)) {
        return -1;
    }
    memcpy(payload, &hdr, sizeof(hdr));
    *payload_size = sizeof(hdr) + n;
    return 0;
}

/* The checksum of a set of rows, independent of their order: the count,
 * the bytes of the text fields, and the sum of each row's FNV-1a hash. */
typedef struct record_checksum {
    uint64_t count;
    uint64_t bytes;
    uint64_t hash;
} record_checksum_t;

static inline uint64_t record_fnv1a(uint64_t h, const void *data, size_t size)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < size; ++i) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

static inline void record_checksum_add(record_checksum_t     *sum,
                                       const record_fields_t *f)
{
    uint64_t h = 0xcbf29ce484222325ull, id = (uint64_t)f->id;
    h = record_fnv1a(h, &id, sizeof(id));
    h = record_fnv1a(h, f->name, f->name_size);
    h = record_fnv1a(h, "\t", 1);
    h = record_fnv1a(h, f->city, f->city_size);
    h = record_fnv1a(h, "\t", 1);
    h = record_fnv1a(h, f->body, f->body_size);
    sum->count += 1;
    sum->bytes += f->name_size + f->city_size + f->body_size;
    sum->hash += h;
}

#endif
