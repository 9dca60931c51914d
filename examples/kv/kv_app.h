/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The program logic both key-value services share, so that they differ
 * only in how messages travel: the options, the target's table and when it
 * is done, and the whole client (the three timed phases, the barriers
 * between them, every check, the output). A client program supplies a
 * kv_transport_t: send one message, progress.
 */
#ifndef KV_APP_H_
#define KV_APP_H_

#include "kv.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define KV_COUNTERS 64 /* the keys all clients increment */
#define KV_KEY_COUNTER 0x1000ULL
#define KV_KEY_SYNC 0x5000ULL /* barrier n: this + n */
#define KV_KEY_DONE 0x6000ULL /* clients that finished */
#define KV_TIMEOUT_S 30.0     /* without a reply: fail */
#define KV_LINGER_S 0.5       /* the target's progress after the last client */
#define KV_DONE_EVERY 1024    /* progress calls between the target's checks */
#define KV_BAD_MSGS 3         /* client 0 sends them; the target refuses them */

typedef struct kv_options {
    const char *address; /* client: HOST:PORT; target: PORT */
    unsigned    id;      /* this client, 0..clients-1 */
    unsigned    clients;
    uint64_t    ops; /* per client and operation */
    unsigned    log2_slots;
} kv_options_t;

static inline int kv_options_parse(int argc, char **argv, int target,
                                   kv_options_t *o)
{
    int c;

    *o = (kv_options_t){target ? "0" : NULL, 0, 4, 100000, 22};
    while ((c = getopt(argc, argv, "c:i:n:s:")) != -1) {
        switch (c) {
            case 'c':
                o->clients = (unsigned)atoi(optarg);
                break;
            case 'i':
                o->id = (unsigned)atoi(optarg);
                break;
            case 'n':
                o->ops = strtoull(optarg, NULL, 0);
                break;
            case 's':
                o->log2_slots = (unsigned)atoi(optarg);
                break;
            default:
                return -1;
        }
    }
    if (optind < argc) {
        o->address = argv[optind];
    }
    if ((o->address == NULL) || (o->clients == 0) || (o->id >= o->clients) ||
        (o->ops == 0) || (o->log2_slots < 10) || (o->log2_slots > 30)) {
        fprintf(stderr,
                "usage: %s [-c CLIENTS] [-s LOG2_SLOTS] [PORT]\n"
                "       %s [-c CLIENTS] [-i ID] [-n OPS] HOST:PORT\n",
                argv[0], argv[0]);
        return -1;
    }
    return 0;
}

static inline double kv_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- target ---- */

static inline kv_table_t *kv_table_create(unsigned log2_slots)
{
    size_t      n = (size_t)1 << log2_slots;
    kv_table_t *t = calloc(1, sizeof(*t) + n * sizeof(kv_slot_t));
    size_t      i;

    if (t != NULL) {
        t->mask = n - 1;
        for (i = 0; i < n; i += 256) { /* the pages now, not in the puts */
            *(volatile uint64_t *)&t->slot[i].key = 0;
        }
    }
    return t;
}

/* Whether every client has said it is done (checked every KV_DONE_EVERY
 * calls, so that the loop costs the same in both services). */
static inline int kv_target_done(kv_table_t *t, unsigned clients,
                                 unsigned *calls)
{
    kv_slot_t *s;

    if (++*calls % KV_DONE_EVERY) {
        return 0;
    }
    s = kv_find(t, KV_KEY_DONE);
    return (s != NULL) && (s->key == KV_KEY_DONE) && (s->value >= clients);
}

/* The target's last line; its exit status. */
static inline int kv_target_report(const char *name, const kv_table_t *t)
{
    printf("%s target: %llu keys, %llu refused, %llu replies failed\n", name,
           (unsigned long long)t->count, (unsigned long long)t->refused,
           (unsigned long long)t->replies_failed);
    return (t->refused != KV_BAD_MSGS) || (t->replies_failed != 0);
}

/* ---- client ---- */

typedef struct kv_transport {
    const char *name; /* "kv-ifunc", "kv-am" */
    /* 0: sent or queued (msg may be reused); 1: no room, progress and send
     * again; -1: failed. */
    int (*send)(void *arg, const kv_msg_t *msg);
    void (*progress)(void *arg);
    void *arg;
} kv_transport_t;

typedef struct kv_run {
    const kv_transport_t *tr;
    const kv_options_t   *o;
    kv_client_t          *c;
    unsigned              next_tag;
    int                   failed;
} kv_run_t;

static inline uint64_t kv_put_key(unsigned id, uint64_t i)
{
    return ((uint64_t)(id + 1) << 32) + i;
}

static inline uint64_t kv_put_value(uint64_t key)
{
    return kv_hash(~key);
}

static inline void kv_send(kv_run_t *r, uint32_t op, uint32_t tag, uint64_t key,
                           uint64_t value)
{
    kv_msg_t msg = {op, tag, key, value};
    int      ret;

    while ((ret = r->tr->send(r->tr->arg, &msg)) == 1) {
        r->tr->progress(r->tr->arg);
        sched_yield(); /* to a client on this CPU that has room */
    }
    if (ret != 0) {
        r->failed = 1;
    }
}

/* Progress until at most max gets are in flight; 0, or -1 on a timeout. */
static inline int kv_wait(kv_run_t *r, unsigned max)
{
    double   start   = kv_now();
    uint64_t replies = r->c->replies;

    while ((r->c->in_flight > max) && !r->failed) {
        r->tr->progress(r->tr->arg);
        if (r->c->replies != replies) {
            replies = r->c->replies;
            start   = kv_now();
            continue;
        }
        sched_yield(); /* to a client on this CPU that has replies */
        if (kv_now() - start > KV_TIMEOUT_S) {
            fprintf(stderr, "%s client %u: no reply in %.0f s\n", r->tr->name,
                    r->o->id, KV_TIMEOUT_S);
            r->failed = 1;
        }
    }
    return r->failed ? -1 : 0;
}

/* Starts a get, once fewer than KV_WINDOW are in flight; its tag. */
static inline unsigned kv_get(kv_run_t *r, uint64_t key, int check,
                              uint64_t expect)
{
    kv_pending_t *p;

    if (kv_wait(r, KV_WINDOW - 1) != 0) {
        return 0; /* every tag may be busy: send nothing */
    }
    while (r->c->pending[r->next_tag].busy) {
        r->next_tag = (r->next_tag + 1) % KV_WINDOW;
    }
    p  = &r->c->pending[r->next_tag];
    *p = (kv_pending_t){key, expect, 0, 1, check, 0};
    ++r->c->in_flight;
    kv_send(r, KV_OP_GET, r->next_tag, key, 0);
    return r->next_tag;
}

/* A get that waits for its reply: the value, 0 if missing. Replies come in
 * order, so it also tells that what was sent before it has run. */
static inline uint64_t kv_get_now(kv_run_t *r, uint64_t key)
{
    unsigned tag = kv_get(r, key, 0, 0);

    return (kv_wait(r, 0) == 0) ? r->c->pending[tag].value : 0;
}

/* Every client's messages up to here have run on the target. */
static inline void kv_barrier(kv_run_t *r, unsigned n)
{
    kv_send(r, KV_OP_INCR, 0, KV_KEY_SYNC + n, 1);
    while (!r->failed && (kv_get_now(r, KV_KEY_SYNC + n) < r->o->clients)) {
        usleep(50); /* leave the CPU to clients still at work */
    }
}

/* The times are CLOCK_MONOTONIC, the same in every process of the host:
 * run.sh takes the service's rate from the first start to the last end. */
static inline void kv_report(kv_run_t *r, const char *op, double start)
{
    double end = kv_now();

    if (r->failed) {
        return;
    }
    printf("%s client %u: %s %llu ops %.6f s %.0f ops/s from %.6f to %.6f\n",
           r->tr->name, r->o->id, op, (unsigned long long)r->o->ops,
           end - start, (double)r->o->ops / (end - start), start, end);
}

/* The whole client: increments, puts and gets, each timed from a barrier
 * to the moment this client knows its operations ran, and checked. Returns
 * the exit status. */
static inline int kv_client_run(const kv_transport_t *tr, const kv_options_t *o,
                                kv_client_t *c)
{
    kv_run_t r = {tr, o, c, 0, 0};
    uint64_t i, k, n = o->ops, wrong_counters = 0;
    double   start;

    kv_barrier(&r, 0);
    start = kv_now();
    for (i = 0; i < n; ++i) {
        kv_send(&r, KV_OP_INCR, 0, KV_KEY_COUNTER + i % KV_COUNTERS, 1);
    }
    kv_get_now(&r, KV_KEY_COUNTER); /* all of them ran */
    kv_report(&r, "incr", start);

    kv_barrier(&r, 1); /* every client's increments ran: exact counts */
    for (k = 0; k < KV_COUNTERS; ++k) {
        uint64_t per = n / KV_COUNTERS + (k < n % KV_COUNTERS);
        kv_get(&r, KV_KEY_COUNTER + k, 1, per * o->clients);
    }
    kv_wait(&r, 0);
    wrong_counters = c->wrong;

    kv_barrier(&r, 2);
    start = kv_now();
    for (i = 0; i < n; ++i) {
        kv_send(&r, KV_OP_PUT, 0, kv_put_key(o->id, i),
                kv_put_value(kv_put_key(o->id, i)));
    }
    kv_get_now(&r, KV_KEY_COUNTER);
    kv_report(&r, "put", start);

    kv_barrier(&r, 3);
    start = kv_now();
    for (i = 0; i < n; ++i) { /* the values put, read back */
        kv_get(&r, kv_put_key(o->id, i), 1, kv_put_value(kv_put_key(o->id, i)));
    }
    kv_wait(&r, 0);
    kv_report(&r, "get", start);

    k = kv_get(&r, kv_put_key(o->id, n), 0, 0); /* never put */
    if ((kv_wait(&r, 0) == 0) && c->pending[k].found) {
        ++c->wrong;
    }
    if (o->id == 0) { /* what a hostile client may send: refused, no effect */
        kv_send(&r, 0, 0, KV_KEY_COUNTER, 1);           /* no operation */
        kv_send(&r, KV_OP_REPLY, 0, KV_KEY_COUNTER, 1); /* a target's answer */
        kv_send(&r, KV_OP_INCR, 0, 0, 1);               /* key 0 */
        kv_get(&r, KV_KEY_COUNTER, 1,
               (n / KV_COUNTERS + (n % KV_COUNTERS != 0)) * o->clients);
        kv_wait(&r, 0);
    }
    kv_send(&r, KV_OP_INCR, 0, KV_KEY_DONE, 1);
    if (r.failed || c->wrong || c->bad) {
        printf("%s client %u: FAILED: %llu counters wrong, %llu values "
               "wrong, %llu bad replies%s\n",
               tr->name, o->id, (unsigned long long)wrong_counters,
               (unsigned long long)(c->wrong - wrong_counters),
               (unsigned long long)c->bad, r.failed ? ", a send failed" : "");
        return 1;
    }
    printf("%s client %u: checked %u counters = %u x %llu increments, "
           "%llu values read back, 1 missing key%s\n",
           tr->name, o->id, KV_COUNTERS, o->clients, (unsigned long long)n,
           (unsigned long long)n,
           (o->id == 0) ? ", 3 bad messages without effect" : "");
    return 0;
}

#endif
