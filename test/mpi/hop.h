/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Shared by the recursive-propagation test (propagate.c) and its two ifuncs:
 * hop, which moves a chain from process to process by sending its own code
 * on, and hop_done, which the last hop sends to the origin by name (code the
 * processes hold, not code they run).
 */
#ifndef UCX_IFUNC_TEST_HOP_H_
#define UCX_IFUNC_TEST_HOP_H_

#include <ucp/api/ucp_ifunc.h>

#include <stdint.h>

/* The payload of hop: one chain on its way. */
struct hop_payload {
    uint64_t chain;     /* which chain, < HOP_MAX_CHAINS */
    uint64_t hops_left; /* sends still to make */
    uint64_t hops_done; /* processes that ran it so far */
    uint64_t checksum;  /* hop_mix() of every rank on the way */
};

/* The payload of hop_done: what reached the end of a chain, or (chain
 * HOP_WARM_UP) a message that only makes its code held. */
struct hop_done_payload {
    uint64_t chain;
    uint64_t hops_done;
    uint64_t checksum;
};

#define HOP_MAX_CHAINS 256
#define HOP_WARM_UP UINT64_MAX

/* What every process passes as target_args. */
struct hop_target_args {
    int                rank;
    int                nprocs;
    int                origin;
    ucp_context_h      context;  /* for ucp_ifunc_code_get by name */
    ucp_ifunc_am_ep_h *eps;      /* to every rank (NULL for itself) */
    uint64_t           runs;     /* hop_main calls here */
    uint64_t           warm_ups; /* hop_done warm-up messages here */
    uint64_t           sends;    /* messages sent by shipped code */
    uint64_t           failures; /* calls that failed in shipped code */
    uint64_t           api_checks_failed; /* see hop_main */
    uint64_t           completed;         /* chains reported, at the origin */
    uint64_t           done_here;         /* chains whose last hop ran here */
    uint64_t           done_hops[HOP_MAX_CHAINS];
    uint64_t           done_checksum[HOP_MAX_CHAINS];
};

static inline uint64_t hop_mix(uint64_t checksum, uint64_t rank)
{
    checksum ^=
            rank + 0x9e3779b97f4a7c15ull + (checksum << 6) + (checksum >> 2);
    return checksum * 0xff51afd7ed558ccdull;
}

/* A well-mixed 64-bit function of @a x (the finaliser of a multiplicative
 * hash): every bit of the input affects every bit of the result. */
static inline uint64_t hop_scramble(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The rank after @a rank for this step of the chain: never @a rank itself,
 * so that every hop is a message between two processes. */
static inline int hop_next_rank(const struct hop_payload *p, int rank,
                                int nprocs)
{
    uint64_t h = hop_scramble(p->chain * 0x9e3779b97f4a7c15ull + p->hops_done);
    return (int)((rank + 1 + h % (uint64_t)(nprocs - 1)) % (uint64_t)nprocs);
}

#endif
