/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "paths", raw puts (raw.cc).
 */
#ifndef UCP_IFUNC_RAW_H_
#define UCP_IFUNC_RAW_H_

#include <ucp/api/ucp_ifunc.h>

namespace ucx_ifunc {

/* What ucp_ifunc_send_nbix and ucp_ifunc_send_nbx do (api/raw_api.cc
 * catches what they throw). */
ucs_status_t send_nbix(ucp_ep_h ep, ucp_ifunc_msg_t msg, uint64_t remote_addr,
                       ucp_rkey_h rkey);
ucs_status_t send_nbx(ucp_ep_h ep, ucp_ifunc_msg_t msg, uint64_t remote_addr,
                      ucp_rkey_h rkey, const ucp_ifunc_send_params_t *params);

} // namespace ucx_ifunc

#endif
