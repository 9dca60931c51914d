/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * A plain UCP listener for the tests of the AM service without the peer
 * layer (test_am_edge.cc, test_peer_death.cc): it accepts every connection
 * on 127.0.0.1 with peer error handling, as a server does, closes an
 * endpoint once UCX reports it failed, and closes one when the test says.
 */
#ifndef UCX_IFUNC_TEST_UCP_LISTENER_H_
#define UCX_IFUNC_TEST_UCP_LISTENER_H_

#include "../../tools/common/ucx.h"

#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace test {

class UcpListener {
public:
    explicit UcpListener(ucp_worker_h worker) : worker_(worker)
    {
        sockaddr_in addr             = {};
        addr.sin_family              = AF_INET;
        addr.sin_addr.s_addr         = htonl(INADDR_LOOPBACK);
        ucp_listener_params_t params = {};
        params.field_mask            = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                            UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
        params.sockaddr.addr    = reinterpret_cast<sockaddr *>(&addr);
        params.sockaddr.addrlen = sizeof(addr);
        params.conn_handler.cb  = accept;
        params.conn_handler.arg = this;
        ucx_util::check(ucp_listener_create(worker, &params, &listener_),
                        "ucp_listener_create");
        ucp_listener_attr_t attr = {};
        attr.field_mask          = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
        ucx_util::check(ucp_listener_query(listener_, &attr),
                        "ucp_listener_query");
        port_ = ntohs(
                reinterpret_cast<sockaddr_in *>(&attr.sockaddr)->sin_port);
    }

    ~UcpListener()
    {
        ucp_listener_destroy(listener_);
        for (ucp_ep_h ep : open_) {
            close(ep, true);
        }
    }

    UcpListener(const UcpListener &)            = delete;
    UcpListener &operator=(const UcpListener &) = delete;

    uint16_t port() const { return port_; }
    /* Every endpoint accepted, in order. */
    const std::vector<ucp_ep_h> &accepted() const { return accepted_; }

    /* Closes accepted endpoint @a ep, unless it failed and was closed. */
    void close_accepted(ucp_ep_h ep)
    {
        if (forget(ep)) {
            close(ep, true);
        }
    }

private:
    static void accept(ucp_conn_request_h request, void *arg)
    {
        auto           *self   = static_cast<UcpListener *>(arg);
        ucp_ep_params_t params = {};
        params.field_mask      = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                            UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                            UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.conn_request    = request;
        params.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
        params.err_handler.cb  = failed;
        params.err_handler.arg = self;
        ucp_ep_h ep;
        if (ucp_ep_create(self->worker_, &params, &ep) == UCS_OK) {
            self->accepted_.push_back(ep);
            self->open_.push_back(ep);
        }
    }

    /* In UCX's callback: closed without waiting, which would progress. */
    static void failed(void *arg, ucp_ep_h ep, ucs_status_t)
    {
        auto *self = static_cast<UcpListener *>(arg);
        if (self->forget(ep)) {
            self->close(ep, false);
        }
    }

    bool forget(ucp_ep_h ep)
    {
        auto it = std::find(open_.begin(), open_.end(), ep);
        if (it == open_.end()) {
            return false;
        }
        open_.erase(it);
        return true;
    }

    void close(ucp_ep_h ep, bool wait)
    {
        ucp_request_param_t param = {};
        param.op_attr_mask        = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags               = UCP_EP_CLOSE_FLAG_FORCE;
        ucs_status_ptr_t request  = ucp_ep_close_nbx(ep, &param);
        while (wait && UCS_PTR_IS_PTR(request) &&
               (ucp_request_check_status(request) == UCS_INPROGRESS)) {
            ucp_worker_progress(worker_);
        }
        if (UCS_PTR_IS_PTR(request)) {
            ucp_request_free(request);
        }
    }

    ucp_worker_h          worker_;
    ucp_listener_h        listener_ = nullptr;
    uint16_t              port_     = 0;
    std::vector<ucp_ep_h> accepted_, open_;
};

} // namespace test

#endif
