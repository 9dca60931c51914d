/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Distributed pointer chase: 2^n nodes spread over the processes of an MPI
 * job, linked in one random cycle, chased from rank 0 in three ways:
 *   get    rank 0 reads every node from its owner (ucp_get_nbx);
 *   am     an active-message handler on every process walks its own nodes
 *          and forwards the chase to the next owner;
 *   ifunc  the same walk as shipped code (chase.c): rank 0 injects it, and
 *          each process sends it on to the next; only rank 0 has chase.so.
 *
 *     mpirun -np N ucx_ifunc_chase [-l 16,256,4096] [-c 1,64]
 *         [-i get,am,ifunc] [-n LOG2NODES] [-t SECONDS | -t COUNTc] [-v]
 *         [-d LIBDIR] [-k KEY.pub] [-s SEED] [-y 0|1]
 *
 * Every result is checked on rank 0 against a walk of its own full copy of
 * the nodes; the exit status is non-zero if any differs.
 */
#include "chase_build.h"
#include "chase_shared.h"

#include <ucx_ifunc_mpi.h>

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHASE_AM_ID 10      /* a chase on its way, or its result */
#define CHASE_AM_STOP_ID 11 /* rank 0 is done: stop serving */
#define CHASE_MAX_CONC 1024
#define CHASE_MAX_LIST 16
#define CHASE_SEND_RING 8192 /* more than the chase messages in flight */
#define CHASE_STALL_SEC 30   /* no chase finished this long: one was lost */

enum { IMPL_GET, IMPL_AM, IMPL_IFUNC, IMPL_COUNT };
static const char *impl_names[IMPL_COUNT] = {"get", "am", "ifunc"};

typedef struct options {
    unsigned    lengths[CHASE_MAX_LIST], nlengths;
    unsigned    concs[CHASE_MAX_LIST], nconcs;
    int         impls[IMPL_COUNT], nimpls;
    unsigned    log2nodes;
    double      seconds; /* time each case this long ... */
    uint64_t    count;   /* ... or run this many chases (if non-zero) */
    int         csv;
    int         yield;
    uint64_t    seed;
    const char *lib_dir;
    const char *pub_key;
} options_t;

/* One of rank 0's chases in flight. */
typedef struct chase_slot {
    uint64_t start;
    uint64_t t_start;
    /* get only: position, links still to follow, the node being read */
    uint64_t     index;
    uint32_t     hops;
    chase_node_t node;
} chase_slot_t;

/* What the handlers of every process and the ifunc need. */
static struct {
    ucp_worker_h       worker;
    ucp_ifunc_worker_h iworker; /* the default path, for the ifunc */
    ucp_ifunc_peer_h  *peers;   /* by rank */
    ucp_ep_h          *eps;
    uint32_t           rank, nprocs;
    chase_node_t      *nodes; /* own part, in mapped memory */
    uint64_t           local_count;
    chase_results_t    results;
    uint32_t          *ready; /* get: chases whose node arrived */
    uint32_t           nready;
    volatile int       stop;
    int                yield; /* more processes here than cores */
    uint64_t           errors;
    /* AM headers must live until their send completes */
    chase_msg_t         ring[CHASE_SEND_RING];
    unsigned char       ring_busy[CHASE_SEND_RING];
    unsigned            ring_head;
    chase_target_args_t ifunc_args;
} g;


static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Oversubscribed, a busy loop would keep the process that must answer
 * from running until the scheduler's time slice ends (milliseconds per
 * hop): give the core away whenever there was nothing to do. */
static void progress(void)
{
    unsigned count = (g.iworker != NULL) ? ucp_ifunc_worker_progress(g.iworker)
                                         : ucp_worker_progress(g.worker);
    if ((count == 0) && g.yield) {
        sched_yield();
    }
}

/* --- the AM path, on every process --------------------------------------- */

static void am_ring_sent(void *request, ucs_status_t status, void *user_data)
{
    if (status != UCS_OK) {
        ++g.errors;
    }
    *(unsigned char *)user_data = 0;
    ucp_request_free(request);
}

/* Sends a chase message. Its 24 bytes go as the AM header, which must stay
 * valid until the send completes: a ring slot, reused at once when the send
 * completed inline (the usual case), so no send allocates. */
static void am_send(uint32_t dest, unsigned am_id, const chase_msg_t *msg)
{
    ucp_request_param_t param = {0};
    unsigned            slot  = g.ring_head;
    ucs_status_ptr_t    request;

    if (g.ring_busy[slot]) {
        ++g.errors; /* more sends pending than the ring holds */
        return;
    }
    g.ring[slot]       = *msg;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send   = am_ring_sent;
    param.user_data = &g.ring_busy[slot];
    param.flags     = UCP_AM_SEND_FLAG_EAGER;
    request = ucp_am_send_nbx(g.eps[dest], am_id, &g.ring[slot], sizeof(*msg),
                              NULL, 0, &param);
    if (UCS_PTR_IS_PTR(request)) {
        g.ring_busy[slot] = 1;
        g.ring_head       = (slot + 1) % CHASE_SEND_RING;
    } else if (UCS_PTR_IS_ERR(request)) {
        ++g.errors;
    }
}

static void record_result(const chase_msg_t *msg)
{
    g.results.value[msg->chase_id]         = msg->index;
    g.results.completed[g.results.count++] = msg->chase_id;
}

/* Walks the chase here, then forwards it or returns its result. */
static void am_continue(chase_msg_t *msg)
{
    if (msg->done || chase_walk_local(g.nodes, g.rank, g.nprocs, msg)) {
        if (msg->origin == g.rank) {
            record_result(msg);
        } else {
            am_send(msg->origin, CHASE_AM_ID, msg);
        }
        return;
    }
    am_send((uint32_t)(msg->index % g.nprocs), CHASE_AM_ID, msg);
}

static ucs_status_t am_chase_handler(void *arg, const void *header,
                                     size_t header_length, void *data,
                                     size_t                     length,
                                     const ucp_am_recv_param_t *param)
{
    chase_msg_t msg;

    (void)arg;
    (void)data;
    (void)length;
    (void)param;
    if (header_length != sizeof(msg)) {
        ++g.errors;
        return UCS_OK;
    }
    memcpy(&msg, header, sizeof(msg));
    am_continue(&msg);
    return UCS_OK;
}

static ucs_status_t am_stop_handler(void *arg, const void *header,
                                    size_t header_length, void *data,
                                    size_t                     length,
                                    const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)header;
    (void)header_length;
    (void)data;
    (void)length;
    (void)param;
    g.stop = 1;
    return UCS_OK;
}

static ucs_status_t set_am_handler(unsigned id, ucp_am_recv_callback_t cb)
{
    ucp_am_handler_param_t param = {0};

    param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                       UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                       UCP_AM_HANDLER_PARAM_FIELD_CB;
    param.id    = id;
    param.flags = UCP_AM_FLAG_WHOLE_MSG;
    param.cb    = cb;
    return ucp_worker_set_am_recv_handler(g.worker, &param);
}

/* --- rank 0: the three implementations ----------------------------------- */

typedef struct chase_run {
    int                           impl;
    unsigned                      length;
    unsigned                      conc;
    chase_slot_t                 *slots;
    uint64_t                      total; /* nodes */
    uint64_t                      rng;
    const ucx_ifunc_mpi_remote_t *remotes; /* get */
    ucp_ifunc_h                   code;    /* ifunc */
    uint64_t                      launched;
    /* every result, checked after the case */
    uint64_t *log_start, *log_value;
    uint64_t  log_size, log_cap;
    uint64_t  errors;
} chase_run_t;

static void get_done(void *request, ucs_status_t status, void *user_data)
{
    if (status != UCS_OK) {
        ++g.errors;
    }
    g.ready[g.nready++] = (uint32_t)(uintptr_t)user_data;
    ucp_request_free(request);
}

/* Reads node s->index into s->node: directly if it is ours, else with a
 * get. Returns 1 when the node is there, 0 when a get is under way. */
static int get_fetch(chase_run_t *run, uint32_t id)
{
    chase_slot_t       *s     = &run->slots[id];
    uint32_t            owner = (uint32_t)(s->index % g.nprocs);
    uint64_t            slot  = s->index / g.nprocs;
    ucp_request_param_t param;
    ucs_status_ptr_t    request;

    if (owner == g.rank) {
        s->node = g.nodes[slot];
        return 1;
    }
    param.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send   = get_done;
    param.user_data = (void *)(uintptr_t)id;
    request         = ucp_get_nbx(g.eps[owner], &s->node, sizeof(s->node),
                                  run->remotes[owner].address + slot * sizeof(s->node),
                                  run->remotes[owner].rkey, &param);
    if (UCS_PTR_IS_ERR(request)) {
        ++run->errors;
        memset(&s->node, 0, sizeof(s->node));
        s->hops = 0; /* give up: the check reports it */
        return 1;
    }
    return request == NULL;
}

/* Follows links from the node that has arrived. Returns 1 when the chase
 * is finished (its value is s->node.value). */
static int get_step(chase_run_t *run, uint32_t id)
{
    chase_slot_t *s = &run->slots[id];

    for (;;) {
        if (s->hops == 0) {
            return 1;
        }
        s->index = s->node.next;
        --s->hops;
        if (!get_fetch(run, id)) {
            return 0;
        }
    }
}

static void ifunc_inject(chase_run_t *run, const chase_msg_t *chase)
{
    if (ucp_ifunc_peer_send_nbx(g.peers[chase->index % g.nprocs], run->code,
                                chase, sizeof(*chase), NULL) != UCS_OK) {
        ++run->errors;
    }
}

/* Starts chase @a id at a pseudo-random node. A chase that finishes at once
 * (all its nodes are here, or gets that complete inline) is queued as
 * completed, not handled here: that would recurse once per chase. */
static void launch(chase_run_t *run, uint32_t id)
{
    chase_slot_t *s = &run->slots[id];
    chase_msg_t   msg;

    s->start   = splitmix64(&run->rng) % run->total;
    s->t_start = now_ns();
    ++run->launched;

    if (run->impl == IMPL_GET) {
        s->index = s->start;
        s->hops  = run->length;
        if (get_fetch(run, id) && get_step(run, id)) {
            g.results.value[id]                    = s->node.value;
            g.results.completed[g.results.count++] = id;
        }
        return;
    }

    memset(&msg, 0, sizeof(msg));
    msg.index    = s->start;
    msg.chase_id = id;
    msg.hops     = run->length;
    msg.origin   = (uint16_t)g.rank;
    if (run->impl == IMPL_AM) {
        am_continue(&msg);
    } else if (chase_walk_local(g.nodes, g.rank, g.nprocs, &msg)) {
        record_result(&msg);
    } else {
        ifunc_inject(run, &msg);
    }
}

static int log_result(chase_run_t *run, uint64_t start, uint64_t value)
{
    uint64_t *p;

    if (run->log_size == run->log_cap) {
        run->log_cap = run->log_cap ? 2 * run->log_cap : 4096;
        p            = realloc(run->log_start, run->log_cap * sizeof(*p));
        if (p == NULL) {
            return -1;
        }
        run->log_start = p;
        p              = realloc(run->log_value, run->log_cap * sizeof(*p));
        if (p == NULL) {
            return -1;
        }
        run->log_value = p;
    }
    run->log_start[run->log_size] = start;
    run->log_value[run->log_size] = value;
    ++run->log_size;
    return 0;
}

/* Keeps run->conc chases in flight until @a seconds have passed or
 * @a count have been launched (count 0: by time), then lets the last ones
 * finish. Returns the elapsed time. */
static double run_phase(chase_run_t *run, double seconds, uint64_t count,
                        uint64_t *completed_p, uint64_t *latency_p)
{
    uint64_t t0       = now_ns();
    uint64_t deadline = t0 + (uint64_t)(seconds * 1e9);
    uint64_t first = run->launched, done = 0, latency = 0, t;
    uint64_t last_done = t0, rounds = 0;
    unsigned in_flight = 0, id;
    int      more      = 1;

    for (id = 0; (id < run->conc) && (!count || (id < count)); ++id) {
        ++in_flight;
        launch(run, id);
    }
    while (in_flight > 0) {
        progress();
        /* A message a target rejected (untrusted code, say) ends its chase
         * there: say so and end the job rather than wait forever. */
        if (((++rounds & 0xffff) == 0) &&
            (now_ns() - last_done > CHASE_STALL_SEC * 1000000000ull)) {
            fprintf(stderr,
                    "ucx_ifunc_chase: %s: no chase finished for %d s; one "
                    "was lost (see the messages above)\n",
                    impl_names[run->impl], CHASE_STALL_SEC);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        while (g.nready > 0) {
            id = g.ready[--g.nready];
            if (get_step(run, id)) {
                g.results.value[id] = run->slots[id].node.value;
                g.results.completed[g.results.count++] = id;
            }
        }
        /* A chase may finish inside launch() (all its nodes local, or
         * gets that complete inline): the clock is read per completion. */
        while (g.results.count > 0) {
            id        = g.results.completed[--g.results.count];
            t         = now_ns();
            last_done = t;
            latency += t - run->slots[id].t_start;
            ++done;
            if (log_result(run, run->slots[id].start, g.results.value[id])) {
                ++run->errors;
            }
            if (more) {
                more = count ? ((run->launched - first) < count)
                             : (t < deadline);
            }
            if (more) {
                launch(run, id);
            } else {
                --in_flight;
            }
        }
    }
    *completed_p = done;
    *latency_p   = latency;
    return (double)(now_ns() - t0) / 1e9;
}

typedef struct case_result {
    int      impl;
    unsigned length, conc;
    uint64_t chases;
    double   rate, us_per_hop;
    int      verified;
} case_result_t;

static int verify(const chase_run_t *run, const chase_node_t *full)
{
    uint64_t i, expected;

    for (i = 0; i < run->log_size; ++i) {
        expected = walk_full(full, run->log_start[i], run->length);
        if (expected != run->log_value[i]) {
            fprintf(stderr,
                    "ucx_ifunc_chase: %s L=%u: the chase from node %lu "
                    "returned %lu, expected %lu\n",
                    impl_names[run->impl], run->length,
                    (unsigned long)run->log_start[i],
                    (unsigned long)run->log_value[i], (unsigned long)expected);
            return 0;
        }
    }
    return 1;
}

static void run_case(chase_run_t *run, const options_t *opt,
                     const chase_node_t *full, case_result_t *res)
{
    uint64_t errors_before = g.errors + g.ifunc_args.errors;
    uint64_t done, latency;
    double   elapsed;

    run->log_size = 0;
    run->errors   = 0;
    /* Warm-up (connections, the code's first trip, caches): a tenth. */
    run_phase(run, opt->count ? 0 : opt->seconds / 10,
              opt->count ? (opt->count + 9) / 10 : 0, &done, &latency);
    elapsed = run_phase(run, opt->seconds, opt->count, &done, &latency);

    res->impl   = run->impl;
    res->length = run->length;
    res->conc   = run->conc;
    res->chases = done;
    res->rate   = done / elapsed;
    /* Mean latency of a chase per link it followed. */
    res->us_per_hop = done ? (double)latency / 1e3 / done / run->length : 0;
    res->verified   = (run->errors == 0) &&
                    (g.errors + g.ifunc_args.errors == errors_before) &&
                    (run->log_size > 0) && verify(run, full);
}

/* --- options ---------------------------------------------------------------- */

static void usage(FILE *stream)
{
    fprintf(stream,
            "usage: mpirun -np N ucx_ifunc_chase [-l L1,L2,...] "
            "[-c C1,C2,...] [-i get,am,ifunc]\n"
            "           [-n LOG2NODES] [-t SECONDS | -t COUNTc] [-v] "
            "[-d LIBDIR] [-k KEY.pub] [-s SEED] [-y 0|1]\n"
            "       ucx_ifunc_chase -h | --help | --version\n"
            "  -l  chase lengths, links followed (default 16,256,4096)\n"
            "  -c  chases in flight at once (default 1,64; at most %d)\n"
            "  -i  implementations (default am,ifunc; get, the RDMA GET\n"
            "      chase, needs a context with remote memory access, which\n"
            "      over TCP any peer that reaches it can write)\n"
            "  -n  log2 of the number of nodes (default 20)\n"
            "  -t  seconds per case (default 1), or a number of chases "
            "with a c suffix (200c)\n"
            "  -v  also print the results as CSV\n"
            "  -d  directory of chase.so and chase.pub (default: the "
            "program's own in the build tree, else %s)\n"
            "  -k  public key that signed chase.so (default "
            "LIBDIR/chase.pub)\n"
            "  -s  seed of the structure and of the start nodes\n"
            "  -y  1: yield the core when idle, 0: never (default: yield "
            "when this host has more processes than cores)\n"
            "  -h, --help  print this help and exit\n"
            "  --version   print the version and exit\n",
            CHASE_MAX_CONC, CHASE_LIB_DIR);
}

/* -h, --help and --version, answered before MPI_Init: they work without
 * mpirun, and print once. The values of the options that take one are
 * skipped. Returns 1 when one was answered. */
static int early_option(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("ucx_ifunc_chase %s\n", PACKAGE_VERSION);
            return 1;
        }
        if (!strcmp(argv[i], "--")) {
            break;
        }
        if ((argv[i][0] == '-') && (argv[i][1] != '\0') &&
            (argv[i][2] == '\0') && strchr("lcintdksy", argv[i][1])) {
            ++i;
        }
    }
    return 0;
}

static int parse_list(const char *arg, unsigned *list, unsigned *n,
                      unsigned max_value)
{
    char         *end;
    unsigned long v;

    *n = 0;
    for (;;) {
        errno = 0;
        v     = strtoul(arg, &end, 10);
        if (errno || (end == arg) || (v == 0) || (v > max_value) ||
            (*n == CHASE_MAX_LIST)) {
            return -1;
        }
        list[(*n)++] = (unsigned)v;
        if (*end == '\0') {
            return 0;
        }
        if (*end != ',') {
            return -1;
        }
        arg = end + 1;
    }
}

static int parse_impls(const char *arg, options_t *opt)
{
    char *copy = strdup(arg), *tok, *save = NULL;
    int   i, ok = (copy != NULL);

    opt->nimpls = 0;
    for (tok = ok ? strtok_r(copy, ",", &save) : NULL; tok && ok;
         tok = strtok_r(NULL, ",", &save)) {
        ok = 0;
        for (i = 0; i < IMPL_COUNT; ++i) {
            if (!strcmp(tok, impl_names[i]) && (opt->nimpls < IMPL_COUNT)) {
                opt->impls[opt->nimpls++] = i;
                ok                        = 1;
            }
        }
    }
    free(copy);
    return (ok && opt->nimpls) ? 0 : -1;
}

static int parse_time(const char *arg, options_t *opt)
{
    char  *end;
    double v;

    errno = 0;
    v     = strtod(arg, &end);
    if (errno || (end == arg) || !(v > 0)) {
        return -1;
    }
    if (!strcmp(end, "c")) {
        opt->count = (uint64_t)v;
        return (opt->count > 0) ? 0 : -1;
    }
    opt->count   = 0;
    opt->seconds = v;
    return ((*end == '\0') || !strcmp(end, "s")) ? 0 : -1;
}

static int parse_options(int argc, char **argv, options_t *opt)
{
    int c;

    memset(opt, 0, sizeof(*opt));
    opt->lengths[0] = 16;
    opt->lengths[1] = 256;
    opt->lengths[2] = 4096;
    opt->nlengths   = 3;
    opt->concs[0]   = 1;
    opt->concs[1]   = 64;
    opt->nconcs     = 2;
    /* Not get by default: its context needs UCP_FEATURE_RMA, which over
     * TCP lets any peer that reaches this process write it. */
    opt->impls[0]  = IMPL_AM;
    opt->impls[1]  = IMPL_IFUNC;
    opt->nimpls    = 2;
    opt->log2nodes = 20;
    opt->seconds   = 1;
    opt->seed      = 0x5eed;
    opt->yield     = -1;
    while ((c = getopt(argc, argv, "l:c:i:n:t:vd:k:s:y:h")) != -1) {
        switch (c) {
            case 'l':
                if (parse_list(optarg, opt->lengths, &opt->nlengths,
                               1u << 30)) {
                    return -1;
                }
                break;
            case 'c':
                if (parse_list(optarg, opt->concs, &opt->nconcs,
                               CHASE_MAX_CONC)) {
                    return -1;
                }
                break;
            case 'i':
                if (parse_impls(optarg, opt)) {
                    return -1;
                }
                break;
            case 'n':
                opt->log2nodes = (unsigned)atoi(optarg);
                if ((opt->log2nodes < 1) || (opt->log2nodes > 32)) {
                    return -1;
                }
                break;
            case 't':
                if (parse_time(optarg, opt)) {
                    return -1;
                }
                break;
            case 'v':
                opt->csv = 1;
                break;
            case 'd':
                opt->lib_dir = optarg;
                break;
            case 'k':
                opt->pub_key = optarg;
                break;
            case 's':
                opt->seed = strtoull(optarg, NULL, 0);
                break;
            case 'y':
                opt->yield = atoi(optarg) != 0;
                break;
            default:
                return -1;
        }
    }
    return (optind == argc) ? 0 : -1;
}

/* --- setup ------------------------------------------------------------------ */

/* Where chase.so and chase.pub are: -d, else the program's directory or
 * its parent when it holds chase.so (the build tree; libtool runs the
 * program from .libs/), else the installed copy. */
static const char *find_lib_dir(const char *given)
{
    static char dir[PATH_MAX];
    char        probe[PATH_MAX + 16], *slash;
    ssize_t     len;
    int         up;

    if (given != NULL) {
        return given;
    }
    len = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
    if (len <= 0) {
        return CHASE_LIB_DIR;
    }
    dir[len] = '\0';
    for (up = 0; up < 2; ++up) {
        slash = strrchr(dir, '/');
        if (slash == NULL) {
            break;
        }
        *slash = '\0';
        snprintf(probe, sizeof(probe), "%s/chase.so", dir);
        if (access(probe, R_OK) == 0) {
            return dir;
        }
    }
    return CHASE_LIB_DIR;
}

/* The trust setup, per rank, before UCX reads it: rank 0 holds chase.so;
 * the others hold no library and run the code because it is signed by the
 * key they trust. */
static void set_ifunc_env(int rank, const char *lib_dir, const char *pub_key)
{
    static char key[PATH_MAX + 16];

    if (pub_key == NULL) {
        snprintf(key, sizeof(key), "%s/chase.pub", lib_dir);
        pub_key = key;
    }
    setenv("UCX_IFUNC_TRUSTED_KEYS", pub_key, 1);
    if (rank == 0) {
        setenv("UCX_IFUNC_LIB_DIR", lib_dir, 1);
    } else {
        unsetenv("UCX_IFUNC_LIB_DIR");
        setenv("UCX_IFUNC_TRUST", "signed", 1);
    }
}

static void print_row(const case_result_t *r, int nprocs, const char *tls,
                      int csv)
{
    if (csv) {
        /* A list of transports has commas: quote it, as CSV does. */
        printf(strchr(tls, ',') ? "%s,%d,\"%s\",%u,%u,%lu,%.1f,%.3f,%s\n"
                                : "%s,%d,%s,%u,%u,%lu,%.1f,%.3f,%s\n",
               impl_names[r->impl], nprocs, tls, r->length, r->conc,
               (unsigned long)r->chases, r->rate, r->us_per_hop,
               r->verified ? "yes" : "no");
    } else {
        printf("%-6s %5d  %-10s %6u %4u %9lu %12.1f %9.3f  %s\n",
               impl_names[r->impl], nprocs, tls, r->length, r->conc,
               (unsigned long)r->chases, r->rate, r->us_per_hop,
               r->verified ? "yes" : "NO");
    }
    fflush(stdout);
}

/* Rank 0: every case, then tells the others to stop. */
static int origin(const options_t *opt, const chase_node_t *full,
                  uint64_t total, const ucx_ifunc_mpi_remote_t *remotes,
                  ucp_ifunc_h code)
{
    const char    *tls     = getenv("UCX_TLS");
    unsigned       ncases  = opt->nimpls * opt->nlengths * opt->nconcs;
    case_result_t *results = calloc(ncases, sizeof(*results));
    chase_run_t    run     = {0};
    chase_msg_t    stop    = {0};
    unsigned       i, li, ci, n = 0;
    int            failed = 0;
    uint32_t       r;

    if ((tls == NULL) || (*tls == '\0')) {
        tls = "default";
    }
    run.slots   = calloc(CHASE_MAX_CONC, sizeof(*run.slots));
    run.total   = total;
    run.remotes = remotes;
    run.code    = code;
    run.rng     = opt->seed ^ 0x0123456789abcdefull;
    if ((results == NULL) || (run.slots == NULL)) {
        fprintf(stderr, "ucx_ifunc_chase: out of memory\n");
        failed = 1;
        goto out;
    }
    printf("# %lu nodes on %u processes, UCX_TLS=%s, %s per case\n",
           (unsigned long)total, g.nprocs, tls, opt->count ? "chases" : "time");
    printf("%-6s %5s  %-10s %6s %4s %9s %12s %9s  %s\n", "impl", "procs", "tls",
           "L", "c", "chases", "chases/s", "us/hop", "verified");
    fflush(stdout);
    /* Implementations alternate within each (L, c), so that a slow phase
     * of a shared machine hits all three alike. */
    for (li = 0; li < opt->nlengths; ++li) {
        for (ci = 0; ci < opt->nconcs; ++ci) {
            for (i = 0; i < (unsigned)opt->nimpls; ++i) {
                if ((opt->impls[i] == IMPL_IFUNC) && (code == NULL)) {
                    failed = 1; /* chase.so did not load: said so already */
                    continue;
                }
                run.impl   = opt->impls[i];
                run.length = opt->lengths[li];
                run.conc   = opt->concs[ci];
                run_case(&run, opt, full, &results[n]);
                print_row(&results[n], (int)g.nprocs, tls, 0);
                failed |= !results[n].verified;
                ++n;
            }
        }
    }
    if (opt->csv) {
        printf("impl,procs,tls,length,concurrency,chases,chases_per_s,"
               "us_per_hop,verified\n");
        for (i = 0; i < n; ++i) {
            print_row(&results[i], (int)g.nprocs, tls, 1);
        }
    }

out:
    for (r = 0; r < g.nprocs; ++r) {
        if (r != g.rank) {
            am_send(r, CHASE_AM_STOP_ID, &stop);
        }
    }
    free(run.log_start);
    free(run.log_value);
    free(run.slots);
    free(results);
    return failed;
}

/* Whether this host runs more of the job's processes than it has cores. */
static int oversubscribed(void)
{
    MPI_Comm local;
    int      local_size = 1;

    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                            MPI_INFO_NULL, &local) == MPI_SUCCESS) {
        MPI_Comm_size(local, &local_size);
        MPI_Comm_free(&local);
    }
    return local_size > sysconf(_SC_NPROCESSORS_ONLN);
}

/* The same status on every rank: the worst. */
static ucs_status_t agree(ucs_status_t status)
{
    int mine = (int)status, all = 0;

    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return (ucs_status_t)all;
}

int main(int argc, char **argv)
{
    ucx_ifunc_mpi_params_t     mpi_params  = {0};
    ucx_ifunc_mpi_attr_t       attr        = {0};
    ucx_ifunc_mpi_mem_params_t mparams     = {0};
    ucp_ifunc_worker_params_t  iparams     = {0};
    ucp_ifunc_code_params_t    code_params = {0};
    ucp_params_t               uparams     = {0};
    ucp_context_h              context     = NULL;
    ucx_ifunc_mpi_h            mpi         = NULL;
    ucx_ifunc_mpi_mem_h        mem         = NULL;

    ucp_ifunc_h   code = NULL;
    chase_node_t *full = NULL;
    const char   *lib_dir;
    options_t     opt;
    uint64_t      total, i;
    ucs_status_t  status;
    int           rank, nprocs, ret = 1, all, want_ifunc = 0, want_get = 0;

    if (early_option(argc, argv)) {
        return 0;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (parse_options(argc, argv, &opt)) {
        if (rank == 0) {
            usage(stderr);
        }
        MPI_Finalize();
        return 2;
    }
    total = 1ull << opt.log2nodes;
    if ((nprocs > UINT16_MAX) || ((uint64_t)nprocs > total)) {
        if (rank == 0) {
            fprintf(stderr, "ucx_ifunc_chase: more processes than nodes\n");
        }
        MPI_Finalize();
        return 2;
    }
    for (i = 0; i < (uint64_t)opt.nimpls; ++i) {
        want_ifunc |= (opt.impls[i] == IMPL_IFUNC);
        want_get |= (opt.impls[i] == IMPL_GET);
    }
    g.yield = (opt.yield >= 0) ? opt.yield : oversubscribed();
    lib_dir = find_lib_dir(opt.lib_dir);
    if (want_ifunc) {
        set_ifunc_env(rank, lib_dir, opt.pub_key);
    }

    uparams.field_mask = UCP_PARAM_FIELD_FEATURES;
    /* Remote memory access only for the RDMA GET chase, which needs it:
     * over TCP it lets any peer that reaches this process write it. */
    uparams.features = UCP_FEATURE_AM | (want_get ? UCP_FEATURE_RMA : 0);
    status           = agree(ucp_init(&uparams, NULL, &context));
    if (status != UCS_OK) {
        fprintf(stderr, "ucx_ifunc_chase: rank %d: ucp_init failed: %s\n", rank,
                ucs_status_string(status));
        if (context != NULL) {
            ucp_cleanup(context);
        }
        MPI_Finalize();
        return 1;
    }
    /* Before the first worker exists, so that UCX sees the UCX_IFUNC_*
     * variables read (README, Configuration): rank 0 loads chase.so; the
     * others ask whether they hold its code (not yet), which reads them. */
    if (want_ifunc && (rank == 0)) {
        status = ucp_register_ifunc(context, "chase", &code);
        if (status != UCS_OK) {
            fprintf(stderr,
                    "ucx_ifunc_chase: cannot load %s/chase.so (-d): %s\n",
                    lib_dir, ucs_status_string(status));
        }
    } else if (want_ifunc) {
        code_params.field_mask = UCP_IFUNC_CODE_PARAM_FIELD_NAME;
        code_params.name       = "chase";
        if (ucp_ifunc_code_get(context, &code_params, &code) == UCS_OK) {
            ucp_deregister_ifunc(context, code);
            code = NULL;
        }
    }

    mpi_params.field_mask = UCX_IFUNC_MPI_FIELD_CONTEXT;
    mpi_params.context    = context;
    status                = ucx_ifunc_mpi_init(&mpi_params, &mpi);
    if (status != UCS_OK) {
        fprintf(stderr, "ucx_ifunc_chase: rank %d: UCP setup failed: %s\n",
                rank, ucs_status_string(status));
        goto out_context;
    }
    attr.field_mask =
            UCX_IFUNC_MPI_ATTR_FIELD_WORKER | UCX_IFUNC_MPI_ATTR_FIELD_EPS;
    ucx_ifunc_mpi_query(mpi, &attr);
    g.worker            = attr.worker;
    g.eps               = attr.eps;
    g.rank              = (uint32_t)rank;
    g.nprocs            = (uint32_t)nprocs;
    g.local_count       = (total - g.rank + g.nprocs - 1) / g.nprocs;
    g.results.value     = calloc(CHASE_MAX_CONC, sizeof(uint64_t));
    g.results.completed = calloc(CHASE_MAX_CONC, sizeof(uint32_t));
    g.ready             = calloc(CHASE_MAX_CONC, sizeof(uint32_t));
    g.peers             = calloc(g.nprocs, sizeof(*g.peers));

    /* Every process builds the same structure and keeps its part; rank 0
     * keeps all of it to check the results. */
    full   = build_nodes(total, opt.seed);
    status = ((full != NULL) && (g.results.value != NULL) &&
              (g.results.completed != NULL) && (g.ready != NULL) &&
              (g.peers != NULL))
                     ? UCS_OK
                     : UCS_ERR_NO_MEMORY;
    /* mem_map is collective: all ranks call it, or none. */
    if (agree(status) == UCS_OK) {
        mparams.field_mask = UCX_IFUNC_MPI_MEM_FIELD_LENGTH;
        mparams.length     = g.local_count * sizeof(chase_node_t);
        status             = ucx_ifunc_mpi_mem_map(mpi, &mparams, &mem);
    } else {
        status = UCS_ERR_NO_MEMORY;
    }
    if (status != UCS_OK) {
        fprintf(stderr, "ucx_ifunc_chase: rank %d: setup failed: %s\n", rank,
                ucs_status_string(status));
        goto out_mpi;
    }
    g.nodes = ucx_ifunc_mpi_mem_address(mem);
    for (i = 0; i < g.local_count; ++i) {
        g.nodes[i] = full[i * g.nprocs + g.rank];
    }
    if (rank != 0) {
        free(full);
        full = NULL;
    }

    /* Handlers on every process before rank 0 sends anything. */
    status = set_am_handler(CHASE_AM_ID, am_chase_handler);
    if (status == UCS_OK) {
        status = set_am_handler(CHASE_AM_STOP_ID, am_stop_handler);
    }
    g.ifunc_args.nodes   = g.nodes;
    g.ifunc_args.rank    = g.rank;
    g.ifunc_args.nprocs  = g.nprocs;
    g.ifunc_args.peers   = g.peers;
    g.ifunc_args.results = (rank == 0) ? &g.results : NULL;
    if ((status == UCS_OK) && want_ifunc) {
        /* The default path: a peer to every process, by channel on this
         * host and by active message elsewhere. */
        iparams.field_mask  = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS;
        iparams.target_args = &g.ifunc_args;
        status = ucp_ifunc_worker_create(context, g.worker, &iparams,
                                         &g.iworker);
        if (status == UCS_OK) {
            status = ucx_ifunc_mpi_connect_peers(mpi, g.iworker, g.peers);
        }
    }
    if (status != UCS_OK) {
        fprintf(stderr, "ucx_ifunc_chase: rank %d: setup failed: %s\n", rank,
                ucs_status_string(status));
    }
    ucx_ifunc_mpi_barrier(mpi);

    if (rank == 0) {
        ret = origin(&opt, full, total, ucx_ifunc_mpi_mem_remotes(mem), code);
        ret |= (status != UCS_OK);
    } else {
        /* Serve chases until rank 0 is done: no MPI call may block this
         * loop while cases run. */
        while (!g.stop) {
            progress();
        }
        ret = (status != UCS_OK) || (g.errors != 0) ||
              (g.ifunc_args.errors != 0);
    }

    ucx_ifunc_mpi_barrier(mpi);
    if (g.iworker != NULL) {
        ucx_ifunc_mpi_close_peers(mpi, g.peers);
        ucp_ifunc_worker_destroy(g.iworker);
    }
    ucx_ifunc_mpi_mem_release(mem);
out_mpi:
    ucx_ifunc_mpi_finalize(mpi);
out_context:
    ucp_deregister_ifunc(context, code);
    ucp_ifunc_context_release(context);
    ucp_cleanup(context);
    free(full);
    free(g.peers);
    free(g.results.value);
    free(g.results.completed);
    free(g.ready);
    MPI_Allreduce(&ret, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return all;
}
