/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The exported calls of ucp_ifunc_sandbox.h that a program makes for its
 * sandboxed code: each catches what its body throws (api_guard.h) and
 * calls the sandbox's runtime.
 */
#include "ucp/ifunc/sandbox/sandbox.h"

#include "ucp/ifunc/base/api_guard.h"

#include <ucp/api/ucp_ifunc.h>

using namespace ucx_ifunc;

ucs_status_t
ucp_ifunc_sandbox_mem_alloc(size_t                                length,
                            const ucp_ifunc_sandbox_mem_params_t *params,
                            void                                **address_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::sandbox_mem_alloc(length, params, address_p);
    });
}

ucs_status_t ucp_ifunc_sandbox_mem_free(void *address)
{
    return api_call(__func__,
                    [&]() { return ucx_ifunc::sandbox_mem_free(address); });
}

ucs_status_t
ucp_ifunc_sandbox_grant(void *address, size_t length, unsigned rights,
                        const char                             *ifunc_name,
                        const ucp_ifunc_sandbox_grant_params_t *params)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::sandbox_grant(address, length, rights, ifunc_name,
                                        params);
    });
}
