/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The pointer chase between two processes without MPI, for a pair of
 * processes of two ISAs (test/cross/run-ppc64el.sh: an x86-64 origin and a
 * ppc64el process under QEMU). The ifunc is the pointer chase's own
 * (examples/pointer_chase/chase.c, chase_shared.h, unchanged): rank 0, the
 * origin, connects to rank 1 over the default path (ucp_ifunc_listen and
 * ucp_ifunc_peer_connect, TCP), both build the same structure from the
 * same seed (as ucx_ifunc_chase does), and each chase goes back and forth
 * between them: each side runs chase_main on the code it received and
 * sends that code on (ucp_ifunc_code_get).
 *
 *   chase_two_isa serve PORT SEED NODES
 *   chase_two_isa origin HOST:PORT SEED NODES CHASES LENGTH
 *
 * The origin (UCX_IFUNC_LIB_DIR holds chase.so) checks every result
 * against a walk of its own copy of the structure and prints
 *
 *   chase_two_isa: CHASES chases of LENGTH hops: all equal to the local
 *   walk; digest HEX
 *
 * (the digest folds the values in chase order: equal seeds give equal
 * digests whatever the ISAs). The server (no chase.so: it trusts the
 * signer) runs until the origin closes. Both print what they sent and the
 * sends that failed. Exit status 0 when every chase came back with the
 * right value (origin) or nothing failed (server).
 */
#include "chase_build.h" /* the same nodes for the same seed */
#include "chase_shared.h"

#include <ucp/api/ucp_ifunc.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHASE_TIMEOUT_NS (120ull * 1000000000ull) /* QEMU JITs the chase */

static int peer_closed; /* the other side closed, or its peer failed */

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* This rank's part: global index g at slot g / 2 of rank g % 2. */
static chase_node_t *local_part(const chase_node_t *full, uint64_t total,
                                uint32_t rank)
{
    chase_node_t *part = calloc(total / 2 + 1, sizeof(*part));
    uint64_t      g;

    if (part != NULL) {
        for (g = rank; g < total; g += 2) {
            part[g / 2] = full[g];
        }
    }
    return part;
}

/* The server's peer is the one its listener accepted. */
static void peer_event(ucp_ifunc_peer_h peer, ucs_status_t status, void *arg)
{
    chase_target_args_t *args = arg;

    if (status == UCS_OK) {
        if (args->rank == 1) {
            args->peers[0] = peer;
        }
        return;
    }
    if (status != UCP_IFUNC_PEER_CLOSED) {
        fprintf(stderr, "chase_two_isa: peer failed: %s\n",
                ucs_status_string(status));
    }
    if (args->rank == 1) {
        args->peers[0] = NULL;
    }
    peer_closed = 1;
}

static int serve(ucp_ifunc_worker_h iworker, const char *port,
                 const chase_target_args_t *served)
{
    ucp_ifunc_listener_params_t lparams = {
            .field_mask = UCP_IFUNC_LISTENER_FIELD_ADDRESS, .address = port};
    ucp_ifunc_listener_h listener;

    if (ucp_ifunc_listen(iworker, &lparams, &listener) != UCS_OK) {
        return -1;
    }
    printf("chase_two_isa: listening on port %s\n", port);
    fflush(stdout);
    /* A send that failed here leaves a chase that never comes back: stop,
     * which the origin sees at once. */
    while (!peer_closed && (served->errors == 0)) {
        ucp_ifunc_worker_progress(iworker);
    }
    return 0;
}

static int origin(ucp_context_h context, ucp_ifunc_worker_h iworker,
                  chase_target_args_t *args, const chase_node_t *full,
                  uint64_t total, uint64_t seed, char **argv)
{
    ucp_ifunc_peer_params_t pparams = {
            .field_mask = UCP_IFUNC_PEER_FIELD_ADDRESS, .address = argv[2]};
    uint32_t        chases = (uint32_t)strtoul(argv[5], NULL, 0);
    unsigned        length = (unsigned)strtoul(argv[6], NULL, 0);
    uint64_t       *starts = calloc(chases + 1, sizeof(*starts));
    uint64_t        rng = seed ^ 0x0123456789abcdefull, digest = 0, deadline;
    uint32_t        i, done = 0, wrong = 0, local = 0;
    chase_results_t results = {calloc(chases + 1, sizeof(uint64_t)),
                               calloc(chases + 1, sizeof(uint32_t)), 0};
    ucp_ifunc_h     code;
    chase_msg_t     msg;

    if ((starts == NULL) || (results.value == NULL) ||
        (results.completed == NULL) ||
        (ucp_ifunc_peer_connect(iworker, &pparams, &args->peers[1]) !=
         UCS_OK) ||
        (ucp_register_ifunc(context, "chase", &code) != UCS_OK)) {
        return -1;
    }
    args->results = &results;
    for (i = 0; i < chases; ++i) {
        starts[i] = splitmix64(&rng) % total;
        memset(&msg, 0, sizeof(msg));
        msg.index    = starts[i];
        msg.chase_id = i;
        msg.hops     = length;
        msg.origin   = 0;
        if (chase_walk_local(args->nodes, 0, 2, &msg)) {
            results.value[i]                   = msg.index;
            results.completed[results.count++] = i;
            ++local;
        } else if (ucp_ifunc_peer_send_nbx(args->peers[1], code, &msg,
                                           sizeof(msg), NULL) != UCS_OK) {
            ++args->errors;
        }
    }
    deadline = now_ns() + CHASE_TIMEOUT_NS;
    while ((results.count < chases) && (args->errors == 0) && !peer_closed &&
           (now_ns() < deadline)) {
        ucp_ifunc_worker_progress(iworker);
    }
    done = results.count;
    for (i = 0; i < done; ++i) {
        uint32_t id = results.completed[i];
        if (results.value[id] != walk_full(full, starts[id], length)) {
            ++wrong;
        }
    }
    for (i = 0; (i < chases) && (done == chases); ++i) {
        digest = (digest ^ results.value[i]) * 0x100000001b3ull;
    }
    ucp_ifunc_peer_close(args->peers[1]); /* the server stops */
    if (peer_closed && (done != chases)) {
        printf("chase_two_isa: the server stopped (a send failed there)\n");
    }
    ucp_deregister_ifunc(context, code);
    printf("chase_two_isa: origin sent %" PRIu64 " (forwarded), %" PRIu64
           " sends failed; %u of %u chases back (%u finished here)\n",
           args->sent, args->errors, done, chases, local);
    if ((done != chases) || (wrong != 0)) {
        printf("chase_two_isa: FAILED: %u chases missing, %u wrong\n",
               chases - done, wrong);
        return -1;
    }
    printf("chase_two_isa: %u chases of %u hops: all equal to the local "
           "walk; digest %016" PRIx64 "\n",
           chases, length, digest);
    return 0;
}

int main(int argc, char **argv)
{
    ucp_params_t        params   = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                    .features   = UCP_FEATURE_AM};
    ucp_worker_params_t wparams  = {0};
    ucp_ifunc_peer_h    peers[2] = {NULL, NULL};
    chase_target_args_t args     = {0};
    int                 is_origin, ret = 1;
    uint64_t            seed, total;
    chase_node_t       *full, *part;
    ucp_context_h       context;
    ucp_worker_h        worker;
    ucp_ifunc_worker_h  iworker;

    is_origin = (argc == 7) && !strcmp(argv[1], "origin");
    if (!is_origin && ((argc != 5) || strcmp(argv[1], "serve"))) {
        fprintf(stderr, "usage: chase_two_isa serve PORT SEED NODES\n"
                        "       chase_two_isa origin HOST:PORT SEED NODES "
                        "CHASES LENGTH\n");
        return 2;
    }
    seed  = strtoull(argv[3], NULL, 0);
    total = strtoull(argv[4], NULL, 0);
    full  = (total >= 2) ? build_nodes(total, seed) : NULL;
    part  = full ? local_part(full, total, is_origin ? 0 : 1) : NULL;
    if (part == NULL) {
        fprintf(stderr, "chase_two_isa: no structure of %s nodes\n", argv[4]);
        return 2;
    }
    args.nodes  = part;
    args.rank   = is_origin ? 0 : 1;
    args.nprocs = 2;
    args.peers  = peers;

    ucp_ifunc_worker_params_t iparams = {
            .field_mask = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS |
                          UCP_IFUNC_WORKER_FIELD_PEER_CB,
            .target_args = &args,
            .peer_cb     = peer_event,
            .peer_cb_arg = &args};
    if ((ucp_init(&params, NULL, &context) == UCS_OK) &&
        (ucp_worker_create(context, &wparams, &worker) == UCS_OK)) {
        if (ucp_ifunc_worker_create(context, worker, &iparams, &iworker) ==
            UCS_OK) {
            ret = is_origin ? origin(context, iworker, &args, full, total, seed,
                                     argv)
                            : serve(iworker, argv[2], &args);
            if (!is_origin) {
                printf("chase_two_isa: server sent %" PRIu64 ", %" PRIu64
                       " sends failed\n",
                       args.sent, args.errors);
                ret = (ret == 0) && (args.errors == 0) ? 0 : -1;
            }
            ucp_ifunc_worker_destroy(iworker);
        }
        ucp_worker_destroy(worker);
        ucp_cleanup(context);
    }
    free(part);
    free(full);
    return ret ? 1 : 0;
}
