/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The exported calls of ucp_ifunc_peer.h, the default path: each catches
 * what its body throws (api_guard.h) and calls the peer layer in peer/.
 */
#include "ucp/ifunc/peer/peer.h"

#include "ucp/ifunc/base/api_guard.h"

#include <ucp/api/ucp_ifunc.h>

using namespace ucx_ifunc;

ucs_status_t ucp_ifunc_worker_create(ucp_context_h context, ucp_worker_h worker,
                                     const ucp_ifunc_worker_params_t *params,
                                     ucp_ifunc_worker_h              *iworker_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::worker_create(context, worker, params, iworker_p);
    });
}

unsigned ucp_ifunc_worker_progress(ucp_ifunc_worker_h iw)
{
    return api_call_count(__func__, [&]() {
        return (iw != nullptr) ? ucx_ifunc::worker_progress(*iw) : 0u;
    });
}

ucs_status_t ucp_ifunc_worker_query(ucp_ifunc_worker_h       iw,
                                    ucp_ifunc_worker_attr_t *attr)
{
    return api_call(__func__,
                    [&]() { return ucx_ifunc::worker_query(iw, attr); });
}

ucs_status_t ucp_ifunc_source_query(ucp_ifunc_source_attr_t *attr)
{
    return api_call(__func__, [&]() { return ucx_ifunc::source_query(attr); });
}

void ucp_ifunc_worker_destroy(ucp_ifunc_worker_h iw)
{
    api_call_void(__func__, [&]() { ucx_ifunc::worker_destroy(iw); });
}

ucs_status_t ucp_ifunc_listen(ucp_ifunc_worker_h                 iw,
                              const ucp_ifunc_listener_params_t *params,
                              ucp_ifunc_listener_h              *listener_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::listener_create(iw, params, listener_p);
    });
}

ucs_status_t ucp_ifunc_listener_query(ucp_ifunc_listener_h       listener,
                                      ucp_ifunc_listener_attr_t *attr)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::listener_query(listener, attr);
    });
}

void ucp_ifunc_listener_destroy(ucp_ifunc_listener_h listener)
{
    api_call_void(__func__, [&]() { ucx_ifunc::listener_destroy(listener); });
}

ucs_status_t ucp_ifunc_peer_connect(ucp_ifunc_worker_h             iw,
                                    const ucp_ifunc_peer_params_t *params,
                                    ucp_ifunc_peer_h              *peer_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::peer_connect(iw, params, peer_p);
    });
}

ucs_status_t ucp_ifunc_peer_send_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                                     const void *payload, size_t length,
                                     const ucp_ifunc_peer_send_params_t *params)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::peer_send_nbx(peer, ifunc_h, payload, length, params);
    });
}

ucs_status_t
ucp_ifunc_peer_send_array_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                              const void *payloads, size_t length, size_t count,
                              size_t                             *sent_p,
                              const ucp_ifunc_peer_send_params_t *params)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::peer_send_array_nbx(peer, ifunc_h, payloads, length,
                                              count, sent_p, params);
    });
}

ucs_status_t ucp_ifunc_peer_query(ucp_ifunc_peer_h       peer,
                                  ucp_ifunc_peer_attr_t *attr)
{
    return api_call(__func__,
                    [&]() { return ucx_ifunc::peer_query(peer, attr); });
}

void ucp_ifunc_peer_close(ucp_ifunc_peer_h peer)
{
    api_call_void(__func__, [&]() { ucx_ifunc::peer_close(peer); });
}

ucs_status_t ucp_ifunc_sandbox_peer_grant(
        ucp_ifunc_peer_h peer, const char *ifunc_name,
        const ucp_ifunc_sandbox_peer_grant_params_t *params,
        ucp_ifunc_peer_h                            *handle_p)
{
    return api_call(__func__, [&]() {
        return ucx_ifunc::sandbox_peer_grant(peer, ifunc_name, params,
                                             handle_p);
    });
}
