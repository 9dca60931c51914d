/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The two sides of a benchmark connection and the memory a run uses.
 */
#ifndef UCX_IFUNC_PERFTEST_HARNESS_H_
#define UCX_IFUNC_PERFTEST_HARNESS_H_

#include "perftest.h"

#include "../common/ucx.h"

#include <ucp/api/ucp_ifunc.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace perftest {

using ucx_util::oob_recv;
using ucx_util::oob_send;

/* The first of the two active message ids of the ifunc AM tests (messages,
 * then the targets' replies); the AM tests' own id is 17. */
constexpr unsigned kIfuncAmId = UCP_IFUNC_AM_ID_DEFAULT;
/* The default path's three ids, apart from the AM service's two. */
constexpr unsigned kIfuncAutoAmId = UCP_IFUNC_AM_ID_DEFAULT + 4;

/* One side: a UCP context with AM (and RMA where a test of the run needs
 * it: needs_rma()), its worker, an endpoint to the other side, the
 * out-of-band channel, and the benchmark's ifuncs. */
class Peer {
public:
    Peer(ucx_util::OobChannel oob, uint64_t features);
    ~Peer();
    Peer(const Peer &)            = delete;
    Peer &operator=(const Peer &) = delete;

    ucp_context_h         context() const { return context_.get(); }
    ucx_util::Worker     &worker() { return worker_; }
    ucp_ep_h              ep() const { return ep_->get(); }
    ucx_util::OobChannel &oob() { return oob_; }
    ucp_ifunc_h           ifunc() const { return ifunc_; }

    /* perf_bigcode, registered by the first test that uses it; throws if
     * its library cannot be (an older installation, say), so that only the
     * tests that use it fail. */
    ucp_ifunc_h bigcode_ifunc();

    /* The ifunc active-message service of this worker, started by the first
     * test that needs it and kept until the end: stopping it between tests
     * would drop a reply still on its way. NAME_main of the messages it runs
     * bumps ifunc_am_runs(). */
    ucp_ifunc_am_h ifunc_am();
    uint64_t       ifunc_am_runs() const { return ifunc_am_runs_; }

    /* The default path as an application gets it: this side's ifunc
     * worker, and the other side as a peer (the server listens, the client
     * connects to it by address), made by the first test that needs them
     * and kept. NAME_main of the messages the worker runs bumps
     * ifunc_auto_runs(). set_server_host() tells the client where. */
    ucp_ifunc_worker_h ifunc_worker();
    ucp_ifunc_peer_h   ifunc_peer(bool client);
    uint64_t           ifunc_auto_runs() const { return ifunc_auto_runs_; }
    void set_server_host(const std::string &host) { server_host_ = host; }

    /* Whether the other side closed the out-of-band connection (it quit or
     * failed): a run that waits for it would otherwise wait in vain. */
    bool other_side_gone() const;

    /* Exchanges a token with the other side, progressing meanwhile (the
     * other side may need our progress to complete its operations). */
    void barrier();

    /* Completes every operation posted on the endpoint. */
    void flush();

private:
    ucx_util::OobChannel                oob_;
    ucx_util::Context                   context_;
    ucp_ifunc_h                         ifunc_;
    ucp_ifunc_h                         bigcode_ifunc_ = nullptr;
    ucx_util::Worker                    worker_;
    std::unique_ptr<ucx_util::Endpoint> ep_;
    ucp_ifunc_am_h                      ifunc_am_        = nullptr;
    uint64_t                            ifunc_am_runs_   = 0;
    ucp_ifunc_worker_h                  ifunc_worker_    = nullptr;
    ucp_ifunc_peer_h                    ifunc_peer_      = nullptr;
    uint64_t                            ifunc_auto_runs_ = 0;
    std::string                         server_host_     = "localhost";
};

/* The memory of one run: this side's region, mapped for remote writes, and
 * the address and key of the other side's. Word 0 of a region receives
 * credits; slots follow at kSlotsOffset. */
class Regions {
public:
    static constexpr size_t kSlotsOffset = 64;

    Regions(Peer &peer, size_t local_size);
    Regions(const Regions &)            = delete;
    Regions &operator=(const Regions &) = delete;

    char *local_slot(size_t offset) const
    {
        return memory_.address() + kSlotsOffset + offset;
    }
    uint64_t remote_slot(size_t offset) const
    {
        return remote_ + kSlotsOffset + offset;
    }
    uint64_t   remote_credits() const { return remote_; }
    ucp_rkey_h rkey() const { return rkey_->get(); }

    /* Word 0, where credits arrive (by put, or by a report of
     * reports_by_am() tests that a handler stores). */
    std::atomic<uint64_t> *local_credits() const
    {
        return reinterpret_cast<std::atomic<uint64_t> *>(memory_.address());
    }

    /* Credits the other side has put into word 0 of this region. */
    uint64_t credits() const
    {
        return reinterpret_cast<std::atomic<uint64_t> *>(memory_.address())
                ->load(std::memory_order_acquire);
    }

private:
    ucx_util::Memory                     memory_;
    uint64_t                             remote_ = 0;
    std::unique_ptr<ucx_util::RemoteKey> rkey_;
};

/* A test that one of the sides could not set up (a call the transport or
 * the installation does not support, say); both sides skip it and go on. */
class SetupError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/* Runs one test with one payload size; the client measures. Both throw
 * SetupError when either side could not set the test up. */
Result run_client(Peer &peer, const RunParams &params);
void   run_server(Peer &peer, const RunParams &params);

} // namespace perftest

#endif
