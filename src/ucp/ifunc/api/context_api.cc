/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The exported calls of ucp_ifunc_context.h and the registration of
 * ucp_ifunc_def.h: each catches what its body throws (api_guard.h) and
 * calls the per-context state in load/.
 */
#include "ucp/ifunc/load/context.h"

#include "ucp/ifunc/base/api_guard.h"

#include <ucp/api/ucp_ifunc.h>

using namespace ucx_ifunc;

ucs_status_t ucp_register_ifunc(ucp_context_h context, const char *ifunc_name,
                                ucp_ifunc_h *ifunc_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::register_ifunc(context, ifunc_name, ifunc_p);
    });
}

void ucp_deregister_ifunc(ucp_context_h, ucp_ifunc_h ifunc_h)
{
    api_call_void(__func__, [&]() { ucx_ifunc::deregister_ifunc(ifunc_h); });
}

void ucp_ifunc_context_release(ucp_context_h context)
{
    api_call_void(__func__, [&]() { ucx_ifunc::context_release(context); });
}

ucs_status_t ucp_ifunc_code_get(ucp_context_h                  context,
                                const ucp_ifunc_code_params_t *params,
                                ucp_ifunc_h                   *ifunc_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::code_get(context, params, ifunc_p);
    });
}

ucs_status_t ucp_ifunc_code_register(ucp_context_h                  context,
                                     const ucp_ifunc_code_params_t *params,
                                     ucp_ifunc_h                   *ifunc_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::code_register(context, params, ifunc_p);
    });
}

ucs_status_t ucp_ifunc_context_query(ucp_context_h             context,
                                     ucp_ifunc_context_attr_t *attr)
{
    return api_call(__func__,
                    [&]() { return ucx_ifunc::context_query(context, attr); });
}
