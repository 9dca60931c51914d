/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The paper's raw path, step by step (the hello example on the default
 * path: hello_source.c). The source of the raw example: it registers the "hello" ifunc, builds a
 * message carrying the function's code and a greeting, and writes it into
 * the target's buffer with one-sided puts. The paper's flow, step by step.
 *
 *     UCX_IFUNC_LIB_DIR=<dir of hello.so> ./hello_raw_source HOST [-p PORT] [TEXT]
 */
#include "hello_common.h"

#include <ucp/api/ucp_ifunc.h>

#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

static int connect_target(const char *host, int port)
{
    struct addrinfo hints = {0}, *res, *ai;
    char            service[16];
    int             fd = -1;

    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof(service), "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0) {
        fprintf(stderr, "hello_raw_source: unknown host %s\n", host);
        return -1;
    }
    /* The target may still be starting: retry for a few seconds. */
    for (int attempt = 0; (fd < 0) && (attempt < 50); ++attempt) {
        for (ai = res; ai != NULL; ai = ai->ai_next) {
            fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
            if ((fd >= 0) && (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)) {
                break;
            }
            if (fd >= 0) {
                close(fd);
                fd = -1;
            }
        }
        if (fd < 0) {
            usleep(100000);
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* Progresses the worker until a flush of the endpoint completes. */
static ucs_status_t flush_ep(ucp_worker_h worker, ucp_ep_h ep)
{
    ucp_request_param_t param = {0};
    void               *req   = ucp_ep_flush_nbx(ep, &param);
    ucs_status_t        status;
    if (!UCS_PTR_IS_PTR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
    }
    ucp_request_free(req);
    return status;
}

/* Reads the target's one-byte acknowledgement, progressing the worker
 * meanwhile: UCX completes what is still on its way only while it is
 * progressed. 0 on success. */
static int wait_ack(ucp_worker_h worker, int conn, char *ack)
{
    struct pollfd readable = {.fd = conn, .events = POLLIN};
    do {
        ucp_worker_progress(worker);
    } while (poll(&readable, 1, 1) == 0);
    return read_all(conn, ack, 1);
}

int main(int argc, char **argv)
{
    const char         *host = NULL, *text = "hello from the source process";
    int                 port = HELLO_DEFAULT_PORT, ret = 1, conn;
    ucp_params_t        params  = {0};
    ucp_worker_params_t wparams = {0};
    ucp_ep_params_t     eparams = {0};
    ucp_context_h       context;
    ucp_worker_h        worker;
    ucp_ep_h            ep;
    ucp_rkey_h          rkey;
    ucp_ifunc_h         ifunc;
    ucp_ifunc_msg_t     msg;
    ucp_ifunc_send_params_t send_params;
    void                   *address, *rkey_buf, *info;
    uint64_t                size, buffer_address, buffer_size, machine;
    ucs_status_t            status;
    char                    ack;

    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-p") && (i + 1 < argc)) {
            port = atoi(argv[++i]);
        } else if (host == NULL) {
            host = argv[i];
        } else {
            text = argv[i];
        }
    }
    if (host == NULL) {
        fprintf(stderr, "usage: %s HOST [-p PORT] [TEXT]\n", argv[0]);
        return 2;
    }

    conn = connect_target(host, port);
    if ((conn < 0) || !(address = blob_recv(conn, &size)) ||
        !(info = blob_recv(conn, &size)) || (size != 3 * sizeof(uint64_t)) ||
        !(rkey_buf = blob_recv(conn, &size))) {
        fprintf(stderr, "hello_raw_source: cannot get the target's address\n");
        return 1;
    }
    memcpy(&buffer_address, info, sizeof(buffer_address));
    memcpy(&buffer_size, (char *)info + sizeof(uint64_t), sizeof(buffer_size));
    memcpy(&machine, (char *)info + 2 * sizeof(uint64_t), sizeof(machine));

    params.field_mask  = UCP_PARAM_FIELD_FEATURES;
    params.features    = UCP_FEATURE_RMA;
    eparams.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    eparams.address    = address;
    if ((ucp_init(&params, NULL, &context) != UCS_OK) ||
        (ucp_worker_create(context, &wparams, &worker) != UCS_OK) ||
        (ucp_ep_create(worker, &eparams, &ep) != UCS_OK) ||
        (ucp_ep_rkey_unpack(ep, rkey_buf, &rkey) != UCS_OK)) {
        fprintf(stderr, "hello_raw_source: cannot connect to the target\n");
        return 1;
    }

    /* 1. register: loads $UCX_IFUNC_LIB_DIR/hello.so */
    status = ucp_register_ifunc(context, "hello", &ifunc);
    if (status != UCS_OK) {
        fprintf(stderr, "hello_raw_source: register: %s\n",
                ucs_status_string(status));
        goto out;
    }
    /* 2. create: header + code image + payload, in one frame */
    status = ucp_ifunc_msg_create(ifunc, (void *)text, strlen(text), &msg);
    if (status == UCS_OK) {
        /* 3. send with one-sided puts (naming the worker orders the seal
         * with a fence; the target's buffer size lets the source refuse a
         * frame that does not fit; its ISA picks the code, when hello.so
         * was built for several), 4. flush, 5. wait for the target's
         * acknowledgement while progressing the worker. */
        send_params.field_mask = UCP_IFUNC_SEND_FIELD_WORKER |
                                 UCP_IFUNC_SEND_FIELD_REMOTE_SIZE |
                                 UCP_IFUNC_SEND_FIELD_MACHINE;
        send_params.worker      = worker;
        send_params.remote_size = buffer_size;
        send_params.machine     = (uint16_t)machine;
        status =
                ucp_ifunc_send_nbx(ep, msg, buffer_address, rkey, &send_params);
        if (!UCS_STATUS_IS_ERR(status)) {
            status = flush_ep(worker, ep);
        }
        if (status == UCS_OK) {
            printf("hello_raw_source: process %d sent a frame (code for ELF "
                   "machine %u + payload) to the target\n",
                   (int)getpid(), (unsigned)machine);
            ret = wait_ack(worker, conn, &ack) ? 1 : 0;
        } else {
            fprintf(stderr, "hello_raw_source: send: %s\n",
                    ucs_status_string(status));
        }
        ucp_ifunc_msg_free(msg);
    } else {
        fprintf(stderr, "hello_raw_source: create: %s\n",
                ucs_status_string(status));
    }
    ucp_deregister_ifunc(context, ifunc);

out:
    close(conn);
    ucp_rkey_destroy(rkey);
    ucp_ep_destroy(ep);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    free(address);
    free(info);
    free(rkey_buf);
    return ret;
}
