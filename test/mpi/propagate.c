/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Recursive propagation across N processes started by mpirun: the origin
 * (rank 0) injects hop chains; every other process runs them without
 * having hop.so (they trust the key it is signed with), and the chain's
 * code sends itself from process to process over ifunc active messages
 * until its hops are spent, then reports to the origin with hop_done, code
 * the processes hold by name. The origin checks that every chain came back
 * with exactly its hops and the checksum of the ranks it should have
 * passed, computed here from the same rule. Nothing lost, nothing run
 * twice, nothing run where it should not have.
 *
 *   mpirun -np 4 propagate LIB_DIR PUBLIC_KEY [chains] [hops] [distrust]
 *
 * LIB_DIR holds hop.so and hop_done.so (signed); only the origin sets
 * UCX_IFUNC_LIB_DIR to it. With a rank as @a distrust, that process trusts
 * only code of libraries it has (UCX_IFUNC_TRUST=library), and it has none:
 * chains that reach it must end there, unrun, and every other chain must
 * still come back. Exit status 0 only if everything checked out.
 */
#include "hop.h"

#include <ucx_ifunc_mpi.h>

#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Progresses until *@a value reaches @a target or @a timeout seconds pass.
 * Yields when idle: the test may run more processes than cores. */
static int progress_until(ucp_worker_h worker, const uint64_t *value,
                          uint64_t target, double timeout)
{
    double deadline = now() + timeout;
    while (*(volatile const uint64_t *)value < target) {
        if (ucp_worker_progress(worker) == 0) {
            sched_yield();
        }
        if (now() > deadline) {
            return 0;
        }
    }
    return 1;
}

/* Sends one message of @a ifunc built from @a payload; waits for it. */
static int send_wait(ucx_ifunc_mpi_h mpi, ucp_ifunc_am_ep_h am_ep,
                     ucp_ifunc_h ifunc, const void *payload, size_t size)
{
    ucp_ifunc_msg_params_t params;
    ucp_ifunc_msg_t        msg;
    ucs_status_t           status;

    params.field_mask   = UCP_IFUNC_MSG_FIELD_PAYLOAD;
    params.payload      = payload;
    params.payload_size = size;
    status              = ucp_ifunc_msg_build(ifunc, &params, &msg);
    if (status == UCS_OK) {
        status = ucx_ifunc_mpi_wait(
                mpi, ucp_ifunc_am_send_nbx(am_ep, msg, NULL, NULL));
        ucp_ifunc_msg_free(msg);
    }
    return status == UCS_OK;
}

static int fail(int rank, const char *what)
{
    fprintf(stderr, "propagate: rank %d: %s\n", rank, what);
    return 0;
}

/* The origin's part: checks the API's answers outside a message, warms
 * every process up with hop_done, then runs @a chains chains of @a hops
 * sends at once and checks what came back. */
/* Walks chain @a chain here as the processes do; returns whether it
 * passes @a avoid (a rank, or -1), and its hops and checksum at the end. */
static int walk(const struct hop_target_args *args, uint64_t chain,
                uint64_t hops, int avoid, struct hop_payload *end)
{
    struct hop_payload p    = {chain, hops - 1, 1, hop_mix(0, 0)};
    int                rank = 0;
    int                hit  = 0;
    while (1) {
        rank = hop_next_rank(&p, rank, args->nprocs);
        hit |= (rank == avoid);
        p.checksum = hop_mix(p.checksum, (uint64_t)rank);
        ++p.hops_done;
        if (p.hops_left == 0) {
            break;
        }
        --p.hops_left;
    }
    *end = p;
    return hit;
}

static int run_origin(ucx_ifunc_mpi_h mpi, ucp_context_h context,
                      ucp_worker_h worker, struct hop_target_args *args,
                      uint64_t chains, uint64_t hops, int distrust)
{
    ucp_ifunc_h             hop, hop_done, handle;
    ucp_ifunc_code_params_t by_name = {
            .field_mask = UCP_IFUNC_CODE_PARAM_FIELD_NAME, .name = "hop"};
    struct hop_done_payload warm = {HOP_WARM_UP, 0, 0};
    int                     ok   = 1;
    double                  start;
    uint64_t                c, expected = 0;
    int                     r;

    if ((ucp_register_ifunc(context, "hop", &hop) != UCS_OK) ||
        (ucp_register_ifunc(context, "hop_done", &hop_done) != UCS_OK)) {
        return fail(0, "cannot register hop and hop_done");
    }
    /* Outside NAME_main there is no running code; by name, a source finds
     * what it registered. */
    if (ucp_ifunc_code_get(context, NULL, &handle) != UCS_ERR_NO_ELEM) {
        ok = fail(0, "ucp_ifunc_code_get outside a message did not say "
                     "UCS_ERR_NO_ELEM");
    }
    if (ucp_ifunc_code_get(context, &by_name, &handle) != UCS_OK) {
        ok = fail(0, "ucp_ifunc_code_get by name found no registered hop");
    } else {
        ucp_deregister_ifunc(context, handle);
    }

    for (c = 0; c < chains; ++c) {
        struct hop_payload end;
        expected += !walk(args, c, hops, distrust, &end);
    }
    for (r = 1; r < args->nprocs; ++r) {
        if (!send_wait(mpi, args->eps[r], hop_done, &warm, sizeof(warm))) {
            ok = fail(0, "warm-up send failed");
        }
    }
    ucx_ifunc_mpi_barrier(mpi); /* everyone holds hop_done's code */

    start = now();
    for (c = 0; c < chains; ++c) {
        struct hop_payload p = {c, hops, 0, 0};
        /* The origin's own run comes first, as the chain's first hop. */
        p.checksum  = hop_mix(0, 0);
        p.hops_done = 1;
        --p.hops_left;
        if (!send_wait(mpi, args->eps[hop_next_rank(&p, 0, args->nprocs)], hop,
                       &p, sizeof(p))) {
            ok = fail(0, "first send of a chain failed");
        }
    }
    if (!progress_until(worker, &args->completed, expected, 180)) {
        fprintf(stderr, "propagate: only %llu of %llu chains came back\n",
                (unsigned long long)args->completed,
                (unsigned long long)expected);
        ok = 0;
    }
    if (expected < chains) {
        /* The chains the distrusting process stopped must stay away. */
        progress_until(worker, &args->completed, UINT64_MAX, 0.5);
    }
    for (c = 0; c < chains; ++c) {
        struct hop_payload end;
        int                stopped = walk(args, c, hops, distrust, &end);
        if (stopped ? (args->done_hops[c] != 0)
                    : ((args->done_hops[c] != end.hops_done) ||
                       (args->done_checksum[c] != end.checksum))) {
            fprintf(stderr,
                    "propagate: chain %llu: %llu hops, checksum %016llx; "
                    "expected %llu, %016llx\n",
                    (unsigned long long)c,
                    (unsigned long long)args->done_hops[c],
                    (unsigned long long)args->done_checksum[c],
                    (unsigned long long)(stopped ? 0 : end.hops_done),
                    (unsigned long long)(stopped ? 0 : end.checksum));
            ok = 0;
        }
    }
    printf("propagate: %d processes, %llu chains of %llu hops: %llu of "
           "%llu came back verified in %.2f s (%llu expected)\n",
           args->nprocs, (unsigned long long)chains, (unsigned long long)hops,
           (unsigned long long)args->completed, (unsigned long long)chains,
           now() - start, (unsigned long long)expected);
    ucp_deregister_ifunc(context, hop);
    ucp_deregister_ifunc(context, hop_done);
    return ok;
}

int main(int argc, char **argv)
{
    static struct hop_target_args args;
    ucx_ifunc_mpi_h               mpi;
    ucx_ifunc_mpi_attr_t          attr;
    ucp_ifunc_am_params_t         am_params;
    ucp_ifunc_am_h                am;
    uint64_t                      chains, hops, totals[5], sums[5];
    int                           rank, r, distrust, ok = 1;

    /* mpirun may put its processes in process groups of their own, where
     * a timeout that kills it does not reach them: a process waiting for
     * a peer that died must not spin on forever. */
    alarm(240);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 3) {
        if (rank == 0) {
            fprintf(stderr, "usage: propagate LIB_DIR PUBLIC_KEY [chains] "
                            "[hops]\n");
        }
        MPI_Finalize();
        return 2;
    }
    chains   = (argc > 3) ? strtoull(argv[3], NULL, 0) : 16;
    hops     = (argc > 4) ? strtoull(argv[4], NULL, 0) : 1000;
    distrust = (argc > 5) ? atoi(argv[5]) : -1;
    if ((chains == 0) || (chains > HOP_MAX_CHAINS) || (hops == 0)) {
        fprintf(stderr, "propagate: 1 to %d chains of at least 1 hop\n",
                HOP_MAX_CHAINS);
        MPI_Finalize();
        return 2;
    }
    if (ucx_ifunc_mpi_init(NULL, &mpi) != UCS_OK) {
        fprintf(stderr, "propagate: rank %d: setup failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    attr.field_mask =
            UCX_IFUNC_MPI_ATTR_FIELD_RANK | UCX_IFUNC_MPI_ATTR_FIELD_SIZE |
            UCX_IFUNC_MPI_ATTR_FIELD_CONTEXT | UCX_IFUNC_MPI_ATTR_FIELD_WORKER |
            UCX_IFUNC_MPI_ATTR_FIELD_EPS;
    ucx_ifunc_mpi_query(mpi, &attr);
    if (attr.size < 2) {
        fprintf(stderr, "propagate: needs at least 2 processes\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* Only the origin has the libraries; the others run signed code.
     * Set here, after the worker exists (UCX reports variables it has not
     * seen used when the first worker is created) and before the first
     * ifunc call of the context, which reads them. */
    if (attr.rank == 0) {
        setenv("UCX_IFUNC_LIB_DIR", argv[1], 1);
    } else {
        unsetenv("UCX_IFUNC_LIB_DIR");
    }
    setenv("UCX_IFUNC_TRUST", (attr.rank == distrust) ? "library" : "signed",
           1);
    setenv("UCX_IFUNC_TRUSTED_KEYS", argv[2], 1);

    args.rank    = attr.rank;
    args.nprocs  = attr.size;
    args.origin  = 0;
    args.context = attr.context;
    args.eps     = calloc((size_t)attr.size, sizeof(*args.eps));

    am_params.field_mask  = UCP_IFUNC_AM_FIELD_TARGET_ARGS;
    am_params.target_args = &args;
    if (ucp_ifunc_am_enable(attr.context, attr.worker, &am_params, &am) !=
        UCS_OK) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (r = 0; r < attr.size; ++r) {
        if ((r != attr.rank) &&
            (ucp_ifunc_am_ep_create(am, attr.eps[r], &args.eps[r]) != UCS_OK)) {
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    ucx_ifunc_mpi_barrier(mpi);

    if (attr.rank == 0) {
        ok = run_origin(mpi, attr.context, attr.worker, &args, chains, hops,
                        distrust);
    } else if (attr.rank == distrust) {
        /* Its hop_done warm-up is refused too. */
        ucx_ifunc_mpi_barrier(mpi);
    } else {
        ok = progress_until(attr.worker, &args.warm_ups, 1, 120) ||
             fail(attr.rank, "no warm-up message came");
        ucx_ifunc_mpi_barrier(mpi);
    }
    /* The others serve chains until the origin says it is done. */
    ucx_ifunc_mpi_barrier(mpi);

    /* Each chain's hops ran once each, and every run sent exactly one
     * message, but a last hop at the origin, which records its result
     * there. */
    totals[0] = args.runs;
    totals[1] = args.sends;
    totals[2] = args.failures;
    totals[3] = args.api_checks_failed;
    totals[4] = args.done_here;
    MPI_Reduce(totals, sums, 5, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if ((attr.rank == distrust) && ((args.runs != 0) || (args.warm_ups != 0))) {
        ok = fail(attr.rank, "ran code it does not trust");
    }
    if (attr.rank == 0) {
        printf("propagate: %llu runs of hop, %llu messages sent by shipped "
               "code, %llu chains ended at the origin, %llu failures, %llu "
               "API checks failed\n",
               (unsigned long long)sums[0], (unsigned long long)sums[1],
               (unsigned long long)sums[4], (unsigned long long)sums[2],
               (unsigned long long)sums[3]);
        /* Chains that reached the distrusting process ended there. */
        int counted = (distrust < 0) ? ((sums[0] == chains * hops) &&
                                        (sums[1] + sums[4] == sums[0]))
                                     : (sums[1] + sums[4] >= sums[0]);
        if (!counted || (sums[2] != 0) || (sums[3] != 0)) {
            ok = fail(0, "runs, sends or failures are not as expected");
        }
    }

    for (r = 0; r < attr.size; ++r) {
        ucp_ifunc_am_ep_destroy(args.eps[r]);
    }
    ucx_ifunc_mpi_barrier(mpi);
    ucp_ifunc_am_disable(am);
    ucp_ifunc_context_release(attr.context);
    ucx_ifunc_mpi_finalize(mpi);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if ((attr.rank == 0) && ok) {
        printf("propagate: PASS\n");
    }
    MPI_Finalize();
    free(args.eps);
    return ok ? 0 : 1;
}
