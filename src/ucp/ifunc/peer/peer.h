/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "peer", the default path: what the exported calls of
 * ucp_ifunc_peer.h do (api/peer_api.cc catches what they throw):
 * ucp_ifunc_NAME is NAME here, with the same arguments and results, but
 * ucp_ifunc_listen, which is listener_create.
 */
#ifndef UCP_IFUNC_PEER_H_
#define UCP_IFUNC_PEER_H_

#include <ucp/api/ucp_ifunc.h>

#include <cstddef>

namespace ucx_ifunc {

ucs_status_t worker_create(ucp_context_h context, ucp_worker_h worker,
                           const ucp_ifunc_worker_params_t *params,
                           ucp_ifunc_worker_h              *iworker_p);
unsigned     worker_progress(ucp_ifunc_worker &iw);
ucs_status_t worker_query(ucp_ifunc_worker_h iw, ucp_ifunc_worker_attr_t *attr);
ucs_status_t source_query(ucp_ifunc_source_attr_t *attr);
void         worker_destroy(ucp_ifunc_worker_h iw);
ucs_status_t listener_create(ucp_ifunc_worker_h                 iw,
                             const ucp_ifunc_listener_params_t *params,
                             ucp_ifunc_listener_h              *listener_p);
ucs_status_t listener_query(ucp_ifunc_listener_h       listener,
                            ucp_ifunc_listener_attr_t *attr);
void         listener_destroy(ucp_ifunc_listener_h listener);
ucs_status_t peer_connect(ucp_ifunc_worker_h             iw,
                          const ucp_ifunc_peer_params_t *params,
                          ucp_ifunc_peer_h              *peer_p);
ucs_status_t peer_send_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                           const void *payload, size_t length,
                           const ucp_ifunc_peer_send_params_t *params);
ucs_status_t peer_send_array_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                                 const void *payloads, size_t length,
                                 size_t count, size_t *sent_p,
                                 const ucp_ifunc_peer_send_params_t *params);
ucs_status_t peer_query(ucp_ifunc_peer_h peer, ucp_ifunc_peer_attr_t *attr);
void         peer_close(ucp_ifunc_peer_h peer);
ucs_status_t
sandbox_peer_grant(ucp_ifunc_peer_h peer, const char *ifunc_name,
                   const ucp_ifunc_sandbox_peer_grant_params_t *params,
                   ucp_ifunc_peer_h                            *handle_p);

} // namespace ucx_ifunc

#endif
