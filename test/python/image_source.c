/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * A C source for ifuncs written in Python (test/python-builder-tests.sh):
 * registers the code images of IMAGES (a file: images back to back, as
 * ucx_ifunc.PythonIfunc.images() returns them) as ifunc NAME with
 * ucp_ifunc_code_register, and sends it to HOST:PORT once with the bytes
 * of PAYLOAD (a file) as its payload.
 *
 *     image_source HOST:PORT NAME IMAGES PAYLOAD
 */
#include <ucp/api/ucp_ifunc.h>
#include <stdio.h>
#include <stdlib.h>

static void *read_file(const char *path, size_t *size_p)
{
    FILE *stream = fopen(path, "rb");
    char *data   = NULL;
    long  size;

    if ((stream != NULL) && (fseek(stream, 0, SEEK_END) == 0) &&
        ((size = ftell(stream)) >= 0) && (fseek(stream, 0, SEEK_SET) == 0) &&
        ((data = malloc((size_t)size + 1)) != NULL) &&
        (fread(data, 1, (size_t)size, stream) == (size_t)size)) {
        *size_p = (size_t)size;
    } else {
        fprintf(stderr, "image_source: cannot read %s\n", path);
        free(data);
        data = NULL;
    }
    if (stream != NULL) {
        fclose(stream);
    }
    return data;
}

int main(int argc, char **argv)
{
    ucp_params_t            params  = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                                       .features   = UCP_FEATURE_AM};
    ucp_worker_params_t     wparams = {0};
    ucp_ifunc_peer_params_t pparams = {.field_mask =
                                               UCP_IFUNC_PEER_FIELD_ADDRESS};
    ucp_ifunc_code_params_t cparams = {
            .field_mask = UCP_IFUNC_CODE_PARAM_FIELD_NAME |
                          UCP_IFUNC_CODE_PARAM_FIELD_IMAGES};
    ucs_status_t       status = UCS_ERR_NO_RESOURCE;
    size_t             payload_size;
    void              *payload;
    ucp_context_h      context;
    ucp_worker_h       worker;
    ucp_ifunc_worker_h iworker;
    ucp_ifunc_peer_h   peer;
    ucp_ifunc_h        code;

    if (argc != 5) {
        fprintf(stderr, "usage: image_source HOST:PORT NAME IMAGES PAYLOAD\n");
        return 2;
    }
    pparams.address = argv[1];
    cparams.name    = argv[2];
    cparams.images  = read_file(argv[3], &cparams.images_size);
    payload         = read_file(argv[4], &payload_size);
    if ((cparams.images == NULL) || (payload == NULL)) {
        return 2;
    }
    if ((ucp_init(&params, NULL, &context) == UCS_OK) &&
        (ucp_worker_create(context, &wparams, &worker) == UCS_OK) &&
        (ucp_ifunc_worker_create(context, worker, NULL, &iworker) == UCS_OK) &&
        (ucp_ifunc_peer_connect(iworker, &pparams, &peer) == UCS_OK) &&
        ((status = ucp_ifunc_code_register(context, &cparams, &code)) ==
         UCS_OK)) {
        status = ucp_ifunc_peer_send_nbx(peer, code, payload, payload_size,
                                         NULL);
        ucp_ifunc_peer_close(peer); /* what is under way arrives first */
        ucp_deregister_ifunc(context, code);
        ucp_ifunc_worker_destroy(iworker);
        ucp_worker_destroy(worker);
        ucp_cleanup(context);
    }
    printf("image_source: %s\n", ucs_status_string(status));
    free((void *)cparams.images);
    free(payload);
    return status != UCS_OK;
}
