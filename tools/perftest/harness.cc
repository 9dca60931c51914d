/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "harness.h"

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
    ucp_deregister_ifunc(context(), ifunc_);
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
