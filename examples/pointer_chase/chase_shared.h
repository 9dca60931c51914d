/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What the pointer-chase program and its ifunc (chase.c) share: the node
 * layout, where a global index lives, the chase message, and the target
 * arguments the ifunc finds on every process.
 */
#ifndef CHASE_SHARED_H_
#define CHASE_SHARED_H_

#include <ucp/api/ucp_ifunc.h>

#include <stdint.h>

/* One node of the linked structure. Global index g lives on rank g % nprocs
 * at local slot g / nprocs. */
typedef struct chase_node {
    uint64_t key;   /* the global index itself */
    uint64_t value; /* what a chase ending here returns */
    uint64_t next;  /* global index of the next node */
} chase_node_t;

/* A chase in flight: at node @a index, @a hops links still to follow. With
 * @a done set it is the result on its way back: @a index holds the final
 * node's value. 24 bytes, the payload of both the AM and the ifunc path. */
typedef struct chase_msg {
    uint64_t index;
    uint32_t chase_id; /* the origin's slot of this chase */
    uint32_t hops;
    uint16_t origin;
    uint16_t done;
    uint32_t reserved;
} chase_msg_t;

/* Where the origin's completed chases are reported, by whichever path
 * finishes them (the AM handler or chase_main, both inside
 * ucp_worker_progress on the origin's only thread). */
typedef struct chase_results {
    uint64_t *value;     /* by chase id */
    uint32_t *completed; /* chase ids completed since the origin last looked */
    uint32_t  count;     /* entries of completed */
} chase_results_t;

/* target_args of the chase ifunc on every process. */
typedef struct chase_target_args {
    const chase_node_t *nodes; /* this rank's part of the nodes */
    uint32_t            rank;
    uint32_t            nprocs;
    ucp_ifunc_peer_h   *peers;   /* by rank: where to forward */
    chase_results_t    *results; /* the origin's; NULL elsewhere */
    uint64_t            sent;    /* messages this rank forwarded */
    uint64_t            errors;  /* sends that failed here */
} chase_target_args_t;

/* Follows links while they stay on @a rank. Returns 1 when the chase is
 * finished (msg->index then holds the value, msg->done is set), 0 when it
 * must go on at the owner of msg->index. */
static inline int chase_walk_local(const chase_node_t *nodes, uint32_t rank,
                                   uint32_t nprocs, chase_msg_t *msg)
{
    uint64_t index = msg->index;
    uint32_t hops  = msg->hops;

    while ((index % nprocs) == rank) {
        const chase_node_t *node = &nodes[index / nprocs];
        if (hops == 0) {
            msg->index = node->value;
            msg->hops  = 0;
            msg->done  = 1;
            return 1;
        }
        index = node->next;
        --hops;
    }
    msg->index = index;
    msg->hops  = hops;
    return 0;
}

#endif
