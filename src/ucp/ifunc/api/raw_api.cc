/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The exported calls of ucp_ifunc_raw.h and the message calls of
 * ucp_ifunc_def.h: each catches what its body throws (api_guard.h) and
 * calls the core in deliver/.
 */
#include "ucp/ifunc/deliver/msg.h"
#include "ucp/ifunc/paths/raw.h"
#include "ucp/ifunc/deliver/poll.h"

#include "ucp/ifunc/base/api_guard.h"

#include <ucp/api/ucp_ifunc.h>

using namespace ucx_ifunc;

ucs_status_t ucp_ifunc_msg_create(ucp_ifunc_h ifunc_h, void *source_args,
                                  size_t           source_args_size,
                                  ucp_ifunc_msg_t *msg_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::msg_create(ifunc_h, source_args, source_args_size,
                                     msg_p);
    });
}

void ucp_ifunc_msg_free(ucp_ifunc_msg_t msg)
{
    api_call_void(__func__, [&]() { ucx_ifunc::msg_free(msg); });
}

ucs_status_t ucp_ifunc_msg_build(ucp_ifunc_h                   ifunc_h,
                                 const ucp_ifunc_msg_params_t *params,
                                 ucp_ifunc_msg_t              *msg_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::msg_build(ifunc_h, params, msg_p);
    });
}
ucs_status_t ucp_ifunc_send_nbix(ucp_ep_h ep, ucp_ifunc_msg_t msg,
                                 uint64_t remote_addr, ucp_rkey_h rkey)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::send_nbix(ep, msg, remote_addr, rkey);
    });
}

ucs_status_t ucp_ifunc_send_nbx(ucp_ep_h ep, ucp_ifunc_msg_t msg,
                                uint64_t remote_addr, ucp_rkey_h rkey,
                                const ucp_ifunc_send_params_t *params)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::send_nbx(ep, msg, remote_addr, rkey, params);
    });
}
ucs_status_t ucp_poll_ifunc(ucp_context_h context, void *buffer,
                            size_t buffer_size, void *target_args)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::poll_ifunc(context, buffer, buffer_size, target_args);
    });
}
