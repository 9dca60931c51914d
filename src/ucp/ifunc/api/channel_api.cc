/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The exported calls of ucp_ifunc_channel.h: each catches what its
 * body throws (api_guard.h) and calls the channel's code in paths/, which
 * the peer layer calls directly.
 */
#include "ucp/ifunc/paths/channel.h"

#include "ucp/ifunc/deliver/send.h"

#include "ucp/ifunc/base/api_guard.h"

#include <ucp/api/ucp_ifunc.h>

using namespace ucx_ifunc;

ucs_status_t ucp_ifunc_channel_create(ucp_context_h                     context,
                                      const ucp_ifunc_channel_params_t *params,
                                      ucp_ifunc_channel_h *channel_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::channel_create(context, params, channel_p);
    });
}

ucs_status_t ucp_ifunc_channel_pack(ucp_ifunc_channel_h channel, void **blob_p,
                                    size_t *blob_size_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::channel_pack(channel, blob_p, blob_size_p);
    });
}

void ucp_ifunc_channel_blob_release(void *blob)
{
    api_call_void(__func__, [&]() { ucx_ifunc::channel_blob_release(blob); });
}

ucs_status_t ucp_ifunc_channel_poll(ucp_ifunc_channel_h channel,
                                    unsigned max_count, void *target_args,
                                    unsigned *count_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::channel_poll(channel, max_count, target_args,
                                       count_p);
    });
}

void ucp_ifunc_channel_destroy(ucp_ifunc_channel_h channel)
{
    api_call_void(__func__, [&]() { ucx_ifunc::channel_destroy(channel); });
}

ucs_status_t
ucp_ifunc_channel_open(ucp_worker_h worker, ucp_ep_h ep, const void *blob,
                       size_t                                 blob_size,
                       const ucp_ifunc_channel_open_params_t *params,
                       ucp_ifunc_channel_ep_h                *channel_ep_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::channel_open(worker, ep, blob, blob_size, params,
                                       channel_ep_p);
    });
}

ucs_status_t
ucp_ifunc_channel_send_nbx(ucp_ifunc_channel_ep_h chep, ucp_ifunc_msg_t msg,
                           const ucp_ifunc_channel_send_params_t *params)
{
    return api_call(__func__, [&]() {
        if ((chep == nullptr) || !msg_sealed(msg) ||
            !send_params_known(params)) {
            ucs_error("ucp_ifunc_channel_send_nbx: need a channel endpoint, "
                      "a message from ucp_ifunc_msg_create, and no unknown "
                      "parameter");
            return UCS_ERR_INVALID_PARAM;
        }
        return channel_send(chep, msg, send_with_code(params));
    });
}

ucs_status_t ucp_ifunc_channel_ep_query(ucp_ifunc_channel_ep_h chep,
                                        ucp_ifunc_ep_attr_t   *attr)
{
    return api_call(__func__,
                    [&]() { return ucx_ifunc::channel_ep_query(chep, attr); });
}

void ucp_ifunc_channel_close(ucp_ifunc_channel_ep_h chep)
{
    api_call_void(__func__, [&]() { ucx_ifunc::channel_close(chep); });
}
