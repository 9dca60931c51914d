/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The pointer chase's structure, the same on every process for a seed:
 * built by ucx_ifunc_chase (pointer_chase.c) and by the two-ISA chase of
 * the cross tests (test/cross/chase_two_isa.c), whose digests must agree.
 * Not part of the ifunc (chase.c).
 */
#ifndef UCX_IFUNC_EXAMPLES_CHASE_BUILD_H_
#define UCX_IFUNC_EXAMPLES_CHASE_BUILD_H_

#include "chase_shared.h"

#include <stdint.h>
#include <stdlib.h>

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The whole structure, the same on every process: node g's successor is
 * the next index in a random order of all indices (one cycle through all
 * of them), its value a hash of g. */
static chase_node_t *build_nodes(uint64_t total, uint64_t seed)
{
    chase_node_t *nodes = malloc(total * sizeof(*nodes));
    uint64_t     *order = malloc(total * sizeof(*order));
    uint64_t      state = seed, i, j, tmp, h;

    if ((nodes == NULL) || (order == NULL)) {
        free(nodes);
        free(order);
        return NULL;
    }
    for (i = 0; i < total; ++i) {
        order[i] = i;
    }
    for (i = total - 1; i > 0; --i) {
        j        = splitmix64(&state) % (i + 1);
        tmp      = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    for (i = 0; i < total; ++i) {
        h                     = order[i] ^ seed;
        nodes[order[i]].key   = order[i];
        nodes[order[i]].value = splitmix64(&h);
        nodes[order[i]].next  = order[(i + 1) % total];
    }
    free(order);
    return nodes;
}

static uint64_t walk_full(const chase_node_t *full, uint64_t start,
                          unsigned length)
{
    uint64_t index = start;
    unsigned i;

    for (i = 0; i < length; ++i) {
        index = full[index].next;
    }
    return full[index].value;
}

#endif
