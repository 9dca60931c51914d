/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The exported calls of ucp_ifunc_am.h: each catches what its body throws
 * (api_guard.h) and calls the active-message path in paths/, which the
 * peer layer calls directly.
 */
#include "ucp/ifunc/paths/am.h"

#include "ucp/ifunc/deliver/send.h"

#include "ucp/ifunc/base/api_guard.h"

#include <ucp/api/ucp_ifunc.h>

using namespace ucx_ifunc;

ucs_status_t ucp_ifunc_am_enable(ucp_context_h context, ucp_worker_h worker,
                                 const ucp_ifunc_am_params_t *params,
                                 ucp_ifunc_am_h              *am_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::am_enable(context, worker, params, am_p);
    });
}

void ucp_ifunc_am_disable(ucp_ifunc_am_h am)
{
    api_call_void(__func__, [&]() { ucx_ifunc::am_disable(am); });
}

ucs_status_t ucp_ifunc_am_ep_create(ucp_ifunc_am_h am, ucp_ep_h ep,
                                    ucp_ifunc_am_ep_h *am_ep_p)
{
    return api_call(__func__,
                    [&]() { return ucx_ifunc::am_ep_create(am, ep, am_ep_p); });
}

void ucp_ifunc_am_ep_destroy(ucp_ifunc_am_ep_h am_ep)
{
    api_call_void(__func__, [&]() { ucx_ifunc::am_ep_destroy(am_ep); });
}

ucs_status_ptr_t
ucp_ifunc_am_send_nbx(ucp_ifunc_am_ep_h am_ep, ucp_ifunc_msg_t msg,
                      const ucp_request_param_t             *param,
                      const ucp_ifunc_channel_send_params_t *send_params)
{
    return api_call_ptr(__func__, [&]() {
        constexpr uint32_t accepted =
                UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        if ((am_ep == nullptr) || !msg_sealed(msg) ||
            ((param != nullptr) && (param->op_attr_mask & ~accepted)) ||
            !send_params_known(send_params)) {
            ucs_error("ucp_ifunc_am_send_nbx: need an AM endpoint, a message "
                      "from ucp_ifunc_msg_create, and only the request "
                      "fields callback, user_data, request and "
                      "no-immediate-completion");
            return UCS_STATUS_PTR(UCS_ERR_INVALID_PARAM);
        }
        return am_send(am_ep, msg, param, send_with_code(send_params));
    });
}

ucs_status_t ucp_ifunc_am_ep_query(ucp_ifunc_am_ep_h    am_ep,
                                   ucp_ifunc_ep_attr_t *attr)
{
    return api_call(__func__,
                    [&]() { return ucx_ifunc::am_ep_query(am_ep, attr); });
}
