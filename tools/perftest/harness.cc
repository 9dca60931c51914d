/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "harness.h"

#include <poll.h>
#include <sys/socket.h>

namespace perftest {

namespace {

constexpr double kSetupTimeout = 60;

/* Registering before the worker exists reads UCX_IFUNC_LIB_DIR, which main()
 * may have just set, before UCX checks for unused variables. */
ucp_ifunc_h register_perf_bump(ucp_context_h context)
{
    ucp_ifunc_h ifunc;
    ucx_util::check(ucp_register_ifunc(context, "perf_bump", &ifunc),
                    "ucp_register_ifunc(perf_bump) (see -L)");
    return ifunc;
}

} // namespace

Peer::Peer(ucx_util::OobChannel oob, uint64_t features)
    : oob_(std::move(oob)), context_(features),
      ifunc_(register_perf_bump(context_.get())), worker_(context_.get())
{
    oob_.send(worker_.address());
    std::vector<char> remote = oob_.recv(ucx_util::deadline_in(kSetupTimeout));
    ep_ = std::make_unique<ucx_util::Endpoint>(worker_, remote);
}

Peer::~Peer()
{
    ucp_ifunc_worker_destroy(ifunc_worker_);
    ucp_ifunc_am_disable(ifunc_am_);
    ucp_deregister_ifunc(context(), bigcode_ifunc_);
    ucp_deregister_ifunc(context(), ifunc_);
}

ucp_ifunc_h Peer::bigcode_ifunc()
{
    if (bigcode_ifunc_ == nullptr) {
        ucp_ifunc_h ifunc;
        ucx_util::check(ucp_register_ifunc(context(), "perf_bigcode", &ifunc),
                        "ucp_register_ifunc(perf_bigcode) (see -L)");
        bigcode_ifunc_ = ifunc;
    }
    return bigcode_ifunc_;
}

ucp_ifunc_am_h Peer::ifunc_am()
{
    if (ifunc_am_ == nullptr) {
        ucp_ifunc_am_params_t params = {};
        params.field_mask =
                UCP_IFUNC_AM_FIELD_AM_ID | UCP_IFUNC_AM_FIELD_TARGET_ARGS;
        params.am_id       = kIfuncAmId;
        params.target_args = &ifunc_am_runs_;
        ucx_util::check(ucp_ifunc_am_enable(context(), worker_.get(), &params,
                                            &ifunc_am_),
                        "ucp_ifunc_am_enable");
    }
    return ifunc_am_;
}

ucp_ifunc_worker_h Peer::ifunc_worker()
{
    if (ifunc_worker_ == nullptr) {
        ucp_ifunc_worker_params_t params = {};
        params.field_mask                = UCP_IFUNC_WORKER_FIELD_AM_ID |
                            UCP_IFUNC_WORKER_FIELD_TARGET_ARGS |
                            UCP_IFUNC_WORKER_FIELD_PEER_CB;
        params.am_id       = kIfuncAutoAmId;
        params.target_args = &ifunc_auto_runs_;
        params.peer_cb     = [](ucp_ifunc_peer_h peer, ucs_status_t status,
                            void *arg) {
            if (status == UCS_OK) {
                *static_cast<ucp_ifunc_peer_h *>(arg) = peer;
            }
        };
        params.peer_cb_arg = &ifunc_peer_;
        ucx_util::check(ucp_ifunc_worker_create(context(), worker_.get(),
                                                &params, &ifunc_worker_),
                        "ucp_ifunc_worker_create");
    }
    return ifunc_worker_;
}

ucp_ifunc_peer_h Peer::ifunc_peer(bool client)
{
    if (ifunc_peer_ != nullptr) {
        return ifunc_peer_;
    }
    ucp_ifunc_worker_h iworker  = ifunc_worker();
    auto               deadline = ucx_util::deadline_in(kSetupTimeout);
    if (client) {
        uint16_t    port    = oob_recv<uint16_t>(oob_, deadline);
        std::string address = server_host_ + ":" + std::to_string(port);
        ucp_ifunc_peer_params_t params = {};
        params.field_mask              = UCP_IFUNC_PEER_FIELD_ADDRESS;
        params.address                 = address.c_str();
        ucx_util::check(ucp_ifunc_peer_connect(iworker, &params, &ifunc_peer_),
                        "ucp_ifunc_peer_connect");
        return ifunc_peer_;
    }
    ucp_ifunc_listener_h listener;
    ucx_util::check(ucp_ifunc_listen(iworker, nullptr, &listener),
                    "ucp_ifunc_listen");
    ucp_ifunc_listener_attr_t attr = {};
    attr.field_mask                = UCP_IFUNC_LISTENER_ATTR_FIELD_PORT;
    ucx_util::check(ucp_ifunc_listener_query(listener, &attr),
                    "ucp_ifunc_listener_query");
    oob_send(oob_, attr.port);
    /* The client's peer comes through peer_cb. */
    while (ifunc_peer_ == nullptr) {
        ucp_ifunc_worker_progress(iworker);
        if (ucx_util::Clock::now() > deadline) {
            throw std::runtime_error("the client did not connect");
        }
    }
    ucp_ifunc_listener_destroy(listener);
    /* Set up on both sides (the path chosen: neither side needs the
     * other's progress from then on) before this side waits on the
     * out-of-band channel without progressing. */
    ucp_ifunc_peer_attr_t peer_attr = {};
    peer_attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_PATH;
    do {
        ucp_ifunc_worker_progress(iworker);
        ucx_util::check(ucp_ifunc_peer_query(ifunc_peer_, &peer_attr),
                        "ucp_ifunc_peer_query");
        if (ucx_util::Clock::now() > deadline) {
            throw std::runtime_error("the client did not answer");
        }
    } while (peer_attr.path == UCP_IFUNC_PATH_AUTO);
    return ifunc_peer_;
}

bool Peer::other_side_gone() const
{
    /* Readable with nothing to read: the connection was closed. A pending
     * message (a barrier token sent early) is not taken out. */
    struct pollfd pfd = {oob_.fd(), POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0) {
        return false;
    }
    char byte;
    return ::recv(oob_.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void Peer::barrier()
{
    uint64_t token = 0;
    oob_send(oob_, token);
    auto deadline = ucx_util::deadline_in(kSetupTimeout);
    while (!oob_.readable()) {
        worker_.progress();
        if (ucx_util::Clock::now() > deadline) {
            throw std::runtime_error("the other side did not answer");
        }
    }
    oob_recv<uint64_t>(oob_, deadline);
}

void Peer::flush()
{
    ucx_util::check(ep_->flush(ucx_util::deadline_in(kSetupTimeout)),
                    "ucp_ep_flush_nbx");
}

Regions::Regions(Peer &peer, size_t local_size)
    : memory_(peer.context(), kSlotsOffset + local_size)
{
    auto deadline = ucx_util::deadline_in(kSetupTimeout);
    oob_send(peer.oob(), reinterpret_cast<uint64_t>(memory_.address()));
    peer.oob().send(memory_.packed_rkey());
    remote_ = oob_recv<uint64_t>(peer.oob(), deadline);
    rkey_   = std::make_unique<ucx_util::RemoteKey>(peer.ep(),
                                                  peer.oob().recv(deadline));
}

} // namespace perftest
