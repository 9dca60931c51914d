/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What both key-value services share: the table of 64-bit keys and values
 * (open addressing), the 24-byte message, and what a client does with a
 * reply. The ifunc (kv.c, shipped to the target) and the active-message
 * handlers (kv_am_target.c, kv_am_client.c) run these same functions, so
 * the two services differ only in how a message travels and where its code
 * comes from.
 */
#ifndef KV_H_
#define KV_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
    KV_OP_INCR  = 1, /* value += msg.value */
    KV_OP_PUT   = 2, /* value = msg.value */
    KV_OP_GET   = 3, /* reply with the value */
    KV_OP_REPLY = 4, /* on the client: the answer to a get */
    KV_OP_NONE  = 5  /* on the client: the key is not in the table */
};

/* One request or reply, 24 bytes, the same on both services. */
typedef struct kv_msg {
    uint32_t op;
    uint32_t tag; /* the client's place for the reply, echoed */
    uint64_t key;
    uint64_t value;
} kv_msg_t;

typedef struct kv_slot {
    uint64_t key; /* 0: empty */
    uint64_t value;
} kv_slot_t;

/* The target's table: a power of two of slots, linear probing, no removal.
 * Key 0 marks an empty slot and is refused. */
typedef struct kv_table {
    uint64_t  mask;
    uint64_t  count;
    uint64_t  refused; /* key 0, table full, bad messages */
    uint64_t  replies_failed;
    kv_slot_t slot[];
} kv_table_t;

/* A get the client waits for. */
typedef struct kv_pending {
    uint64_t key;
    uint64_t expect; /* checked when check is set */
    uint64_t value;  /* the answer */
    int      busy;
    int      check;
    int      found;
} kv_pending_t;

#define KV_WINDOW 64 /* gets awaiting a reply, per client */

/* A client's side: the gets in flight and what their replies said. */
typedef struct kv_client {
    kv_pending_t pending[KV_WINDOW];
    unsigned     in_flight;
    uint64_t     replies;
    uint64_t     wrong; /* a value other than expected, or missing */
    uint64_t     bad;   /* a reply for no get in flight */
} kv_client_t;

/* What the ifunc's target_args points to on either side: the target has a
 * table, a client has its gets. */
typedef struct kv_side {
    kv_table_t  *table;
    kv_client_t *client;
} kv_side_t;

static inline uint64_t kv_hash(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The slot of key, or where it would go; NULL when the table is full. */
static inline kv_slot_t *kv_find(kv_table_t *t, uint64_t key)
{
    uint64_t i, n;

    for (i = kv_hash(key) & t->mask, n = 0; n <= t->mask;
         i = (i + 1) & t->mask, ++n) {
        if ((t->slot[i].key == key) || (t->slot[i].key == 0)) {
            return &t->slot[i];
        }
    }
    return NULL;
}

/* Runs a request on the target; returns 1 with *reply filled for a get. */
static inline int kv_apply(kv_table_t *t, const kv_msg_t *msg, kv_msg_t *reply)
{
    kv_slot_t *s = (msg->key != 0) ? kv_find(t, msg->key) : NULL;

    if (s == NULL) {
        ++t->refused;
        if (msg->op != KV_OP_GET) {
            return 0;
        }
    } else if ((s->key == 0) && (msg->op != KV_OP_GET)) {
        s->key = msg->key; /* a new key */
        ++t->count;
    }
    switch (msg->op) {
        case KV_OP_INCR:
            if (s != NULL) {
                s->value += msg->value;
            }
            return 0;
        case KV_OP_PUT:
            if (s != NULL) {
                s->value = msg->value;
            }
            return 0;
        case KV_OP_GET:
            reply->tag = msg->tag;
            reply->key = msg->key;
            reply->op =
                    ((s != NULL) && (s->key != 0)) ? KV_OP_REPLY : KV_OP_NONE;
            reply->value = (reply->op == KV_OP_REPLY) ? s->value : 0;
            return 1;
        default:
            ++t->refused;
            return 0;
    }
}

/* Records a reply on the client. The tag is the peer's word: checked. */
static inline void kv_answer(kv_client_t *c, const kv_msg_t *msg)
{
    kv_pending_t *p;

    if ((msg->tag >= KV_WINDOW) || !c->pending[msg->tag].busy ||
        (c->pending[msg->tag].key != msg->key) ||
        ((msg->op != KV_OP_REPLY) && (msg->op != KV_OP_NONE))) {
        ++c->bad;
        return;
    }
    p        = &c->pending[msg->tag];
    p->found = (msg->op == KV_OP_REPLY);
    p->value = msg->value;
    p->busy  = 0;
    if (p->check && (!p->found || (p->value != p->expect))) {
        ++c->wrong;
    }
    --c->in_flight;
    ++c->replies;
}

#endif
