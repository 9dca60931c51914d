/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The paper's raw path, step by step (the hello example on the default
 * path: hello_target.c). The target of the raw example: it maps a buffer for remote writes,
 * hands its address and key to the source, and polls it until an ifunc has
 * run. It has no copy of the ifunc's code: the code arrives in the message,
 * signed by a key the target trusts (docs/security.md).
 *
 *     UCX_IFUNC_TRUSTED_KEYS=<dir of hello.so>/demo.pub ./hello_raw_target [-p PORT]
 */
#include "hello_common.h"

#include <ucp/api/ucp_ifunc.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#define BUFFER_SIZE (1 << 20)

static int accept_source(int port)
{
    struct sockaddr_in addr = {0};
    int                one  = 1, fd, conn;

    addr.sin_family      = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port        = htons((uint16_t)port);
    fd                   = socket(AF_INET, SOCK_STREAM, 0);
    if ((fd < 0) ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(fd, 1)) {
        perror("hello_raw_target: listen");
        return -1;
    }
    printf("hello_raw_target: waiting for the source on port %d\n", port);
    fflush(stdout);
    conn = accept(fd, NULL, NULL);
    close(fd);
    return conn;
}

int main(int argc, char **argv)
{
    int                  port    = HELLO_DEFAULT_PORT;
    int                  greeted = 0, ret = 1, conn;
    ucp_params_t         params  = {0};
    ucp_worker_params_t  wparams = {0};
    ucp_mem_map_params_t mparams = {0};
    ucp_mem_attr_t       mattr   = {0};
    ucp_context_h        context;
    ucp_worker_h         worker;
    ucp_mem_h            memh     = NULL;
    ucp_address_t       *address  = NULL;
    void                *rkey_buf = NULL;
    size_t               address_len, rkey_len;
    uint64_t             buffer_info[3];
    ucs_status_t         status;
    char                 ack = 1;

    if ((argc == 3) && !strcmp(argv[1], "-p")) {
        port = atoi(argv[2]);
    }

    /* Only RMA is needed: messages arrive as one-sided puts. */
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_RMA;
    if ((ucp_init(&params, NULL, &context) != UCS_OK) ||
        (ucp_worker_create(context, &wparams, &worker) != UCS_OK)) {
        fprintf(stderr, "hello_raw_target: cannot initialise UCX\n");
        return 1;
    }

    mparams.field_mask =
            UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mparams.length   = BUFFER_SIZE;
    mparams.flags    = UCP_MEM_MAP_ALLOCATE;
    mattr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    if ((ucp_mem_map(context, &mparams, &memh) != UCS_OK) ||
        (ucp_mem_query(memh, &mattr) != UCS_OK) ||
        (ucp_rkey_pack(context, memh, &rkey_buf, &rkey_len) != UCS_OK) ||
        (ucp_worker_get_address(worker, &address, &address_len) != UCS_OK)) {
        fprintf(stderr, "hello_raw_target: cannot map the receive buffer\n");
        goto out;
    }

    conn           = accept_source(port);
    buffer_info[0] = (uint64_t)(uintptr_t)mattr.address;
    buffer_info[1] = BUFFER_SIZE;
    buffer_info[2] = HELLO_ELF_MACHINE;
    if ((conn < 0) || blob_send(conn, address, address_len) ||
        blob_send(conn, buffer_info, sizeof(buffer_info)) ||
        blob_send(conn, rkey_buf, rkey_len)) {
        fprintf(stderr, "hello_raw_target: cannot reach the source\n");
        if (conn >= 0) {
            close(conn);
        }
        goto out;
    }

    /* Poll until the ifunc ran; over TCP the message only lands while the
     * worker is progressed, so do both in one loop. */
    do {
        ucp_worker_progress(worker);
        status = ucp_poll_ifunc(context, mattr.address, BUFFER_SIZE, &greeted);
    } while (status == UCS_ERR_NO_MESSAGE);

    if (status == UCS_OK) {
        printf("hello_raw_target: ifunc ran, greeted = %d\n", greeted);
        ret = write_all(conn, &ack, 1) ? 1 : 0;
    } else {
        fprintf(stderr, "hello_raw_target: message rejected: %s\n",
                ucs_status_string(status));
    }
    close(conn);

out:
    if (address != NULL) {
        ucp_worker_release_address(worker, address);
    }
    if (rkey_buf != NULL) {
        ucp_rkey_buffer_release(rkey_buf);
    }
    if (memh != NULL) {
        ucp_mem_unmap(context, memh);
    }
    ucp_worker_destroy(worker);
    /* Unmaps the code this context linked and unloads its libraries. */
    ucp_ifunc_context_release(context);
    ucp_cleanup(context);
    return ret;
}
