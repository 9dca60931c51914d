/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The victim of test/attack/ucx_wire_probe: a UCP context with
 * UCP_FEATURE_AM only (no RMA), the UCX configuration the environment gives
 * (UCX_TLS as set, default all), listening on 127.0.0.1. It accepts every
 * connection request, takes active messages on id 0 and drops them, and
 * keeps a canary in its data segment. On start it prints, one per line:
 *
 *     listener 127.0.0.1:PORT     the sockaddr listener (ucp_listener_create)
 *     iface 127.0.0.1:PORT        each UCT TCP iface listening on loopback
 *     canary 0xADDRESS 0xVALUE    where the canary lives and its value
 *     heap 0xADDRESS              the end of the heap at start (sbrk)
 *     ready
 *
 * then progresses until SIGTERM or SIGINT, printing "canary changed ..."
 * when the canary changes and "am N bytes" for each message it receives.
 * When UCX aborts it (a failed assertion) it writes "canary at abort
 * 0xVALUE" to stderr first, so a write just before the abort is seen.
 * It is a plain UCX program: nothing of the ifunc layer runs in it, so what
 * the probes do to it is what UCX lets a network peer do.
 *
 *     am_only_target [LISTEN_PORT]      (0 or none: an ephemeral port)
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CANARY_VALUE 0x0123456789abcdefull
#define MAX_EPS 256
#define MAX_SOCKETS 256

/* volatile: the probes write it from outside the compiler's view. */
static volatile uint64_t     canary = CANARY_VALUE;
static volatile sig_atomic_t stop;

struct target {
    ucp_context_h  context;
    ucp_worker_h   worker;
    ucp_listener_h listener;
    ucp_ep_h       eps[MAX_EPS];
    unsigned       ep_count;
};

static void on_signal(int signo)
{
    (void)signo;
    stop = 1;
}

/* Async-signal-safe: formats the canary by hand and write(2)s it. */
static void on_abort(int signo)
{
    static const char digits[] = "0123456789abcdef";
    char              line[]   = "canary at abort 0x0000000000000000\n";
    uint64_t          value    = canary;
    char             *end      = line + sizeof(line) - 2;
    int               i;

    for (i = 0; i < 16; ++i, value >>= 4) {
        end[-1 - i] = digits[value & 0xf];
    }
    if (write(STDERR_FILENO, line, sizeof(line) - 1) < 0) {
        /* nothing more to do: the process is dying */
    }
    signal(signo, SIG_DFL);
    raise(signo);
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg;
    (void)ep;
    (void)status;
}

static void on_conn_request(ucp_conn_request_h request, void *arg)
{
    struct target  *target = arg;
    ucp_ep_params_t params;
    ucp_ep_h        ep;

    if (target->ep_count == MAX_EPS) {
        ucp_listener_reject(target->listener, request);
        return;
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.conn_request    = request;
    params.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb  = on_ep_error;
    params.err_handler.arg = NULL;
    if (ucp_ep_create(target->worker, &params, &ep) == UCS_OK) {
        target->eps[target->ep_count++] = ep;
    }
}

static ucs_status_t on_am(void *arg, const void *header, size_t header_length,
                          void *data, size_t length,
                          const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)header;
    (void)header_length;
    (void)data;
    (void)param;
    printf("am %zu bytes\n", length);
    fflush(stdout);
    return UCS_OK;
}

/* The inodes of this process's sockets, from /proc/self/fd. */
static size_t own_socket_inodes(unsigned long *inodes, size_t max)
{
    char           path[300], link[64];
    struct dirent *entry;
    unsigned long  inode;
    size_t         count = 0;
    ssize_t        length;
    DIR           *dir;

    dir = opendir("/proc/self/fd");
    if (dir == NULL) {
        return 0;
    }
    while ((entry = readdir(dir)) != NULL && count < max) {
        snprintf(path, sizeof(path), "/proc/self/fd/%s", entry->d_name);
        length = readlink(path, link, sizeof(link) - 1);
        if (length <= 0) {
            continue;
        }
        link[length] = '\0';
        if (sscanf(link, "socket:[%lu]", &inode) == 1) {
            inodes[count++] = inode;
        }
    }
    closedir(dir);
    return count;
}

/* Prints "iface 127.0.0.1:PORT" for each socket of this process listening
 * on 127.0.0.1, other than the sockaddr listener's. */
static void print_loopback_ifaces(uint16_t listener_port)
{
    unsigned long inodes[MAX_SOCKETS], inode;
    unsigned      local_ip, local_port, state;
    size_t        count, i;
    char          line[512];
    FILE         *file;

    count = own_socket_inodes(inodes, MAX_SOCKETS);
    file  = fopen("/proc/self/net/tcp", "r");
    if (file == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), file) != NULL) {
        /* sl local_address rem_address st tx:rx tr:when retrnsmt uid
         * timeout inode */
        if (sscanf(line,
                   " %*u: %8X:%4X %*8X:%*4X %2X %*8X:%*8X %*2X:%*8X %*8X "
                   "%*u %*u %lu",
                   &local_ip, &local_port, &state, &inode) != 4) {
            continue;
        }
        /* 0x0A: TCP_LISTEN; the address as the kernel stores it. */
        if (state != 0x0A || local_ip != htonl(INADDR_LOOPBACK) ||
            local_port == listener_port) {
            continue;
        }
        for (i = 0; i < count; ++i) {
            if (inodes[i] == inode) {
                printf("iface 127.0.0.1:%u\n", local_port);
            }
        }
    }
    fclose(file);
}

static int create_target(struct target *target, uint16_t port)
{
    ucp_listener_params_t  listener_params;
    ucp_worker_params_t    worker_params;
    ucp_am_handler_param_t am_params;
    ucp_listener_attr_t    listener_attr;
    struct sockaddr_in     address;
    ucp_params_t           params;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_AM;
    if (ucp_init(&params, NULL, &target->context) != UCS_OK) {
        return -1;
    }

    memset(&worker_params, 0, sizeof(worker_params));
    worker_params.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (ucp_worker_create(target->context, &worker_params, &target->worker) !=
        UCS_OK) {
        return -1;
    }

    memset(&am_params, 0, sizeof(am_params));
    am_params.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                           UCP_AM_HANDLER_PARAM_FIELD_CB |
                           UCP_AM_HANDLER_PARAM_FIELD_ARG;
    am_params.id  = 0;
    am_params.cb  = on_am;
    am_params.arg = target;
    if (ucp_worker_set_am_recv_handler(target->worker, &am_params) != UCS_OK) {
        return -1;
    }

    memset(&address, 0, sizeof(address));
    address.sin_family      = AF_INET;
    address.sin_port        = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(&listener_params, 0, sizeof(listener_params));
    listener_params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                                 UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    listener_params.sockaddr.addr    = (const struct sockaddr *)&address;
    listener_params.sockaddr.addrlen = sizeof(address);
    listener_params.conn_handler.cb  = on_conn_request;
    listener_params.conn_handler.arg = target;
    if (ucp_listener_create(target->worker, &listener_params,
                            &target->listener) != UCS_OK) {
        return -1;
    }

    listener_attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    if (ucp_listener_query(target->listener, &listener_attr) != UCS_OK) {
        return -1;
    }
    port = ntohs(((struct sockaddr_in *)&listener_attr.sockaddr)->sin_port);
    printf("listener 127.0.0.1:%u\n", port);
    print_loopback_ifaces(port);
    printf("canary %p 0x%016" PRIx64 "\n", (void *)&canary, canary);
    printf("heap %p\n", sbrk(0));
    printf("ready\n");
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    const struct timespec idle = {0, 100000};
    struct target         target;
    uint64_t              seen = CANARY_VALUE;
    struct sigaction      action;
    unsigned long         port = 0;
    unsigned              i;

    if (argc > 2 || (argc == 2 && (port = strtoul(argv[1], NULL, 0)) > 65535)) {
        fprintf(stderr, "usage: %s [LISTEN_PORT]\n", argv[0]);
        return 2;
    }
    memset(&action, 0, sizeof(action));
    action.sa_handler = on_signal;
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    action.sa_handler = on_abort;
    sigaction(SIGABRT, &action, NULL);

    memset(&target, 0, sizeof(target));
    if (create_target(&target, (uint16_t)port) != 0) {
        fprintf(stderr, "am_only_target: UCX set-up failed\n");
        return 1;
    }

    while (!stop) {
        if (ucp_worker_progress(target.worker) == 0) {
            nanosleep(&idle, NULL);
        }
        if (canary != seen) {
            printf("canary changed 0x%016" PRIx64 " -> 0x%016" PRIx64 "\n",
                   seen, canary);
            fflush(stdout);
            seen = canary;
        }
    }

    printf("exiting\n");
    fflush(stdout);
    ucp_listener_destroy(target.listener);
    for (i = 0; i < target.ep_count; ++i) {
        ucp_request_param_t param;
        void               *request;

        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
        request            = ucp_ep_close_nbx(target.eps[i], &param);
        while (UCS_PTR_IS_PTR(request) &&
               ucp_request_check_status(request) == UCS_INPROGRESS) {
            ucp_worker_progress(target.worker);
        }
        if (UCS_PTR_IS_PTR(request)) {
            ucp_request_free(request);
        }
    }
    ucp_worker_destroy(target.worker);
    ucp_cleanup(target.context);
    return 0;
}
