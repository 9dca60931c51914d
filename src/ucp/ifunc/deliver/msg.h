/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "deliver", building a message: what ucp_ifunc_msg_create,
 * ucp_ifunc_msg_build and ucp_ifunc_msg_free do (api/raw_api.cc catches
 * what they throw); the peer layer builds its messages with them.
 */
#ifndef UCP_IFUNC_MSG_H_
#define UCP_IFUNC_MSG_H_

#include <ucp/api/ucp_ifunc.h>

#include <cstddef>

namespace ucx_ifunc {

ucs_status_t msg_create(ucp_ifunc_h ifunc_h, void *source_args,
                        size_t source_args_size, ucp_ifunc_msg_t *msg_p);
void         msg_free(ucp_ifunc_msg_t msg);
ucs_status_t msg_build(ucp_ifunc_h                   ifunc_h,
                       const ucp_ifunc_msg_params_t *params,
                       ucp_ifunc_msg_t              *msg_p);

} // namespace ucx_ifunc

#endif
