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

Peer::Peer(ucx_util::OobChannel oob)
    : oob_(std::move(oob)), context_(UCP_FEATURE_RMA | UCP_FEATURE_AM),
      ifunc_(register_perf_bump(context_.get())), worker_(context_.get())
{
    oob_.send(worker_.address());
    std::vector<char> remote = oob_.recv(ucx_util::deadline_in(kSetupTimeout));
    ep_ = std::make_unique<ucx_util::Endpoint>(worker_, remote);
}

Peer::~Peer()
{
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
