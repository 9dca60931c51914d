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

/* Out-of-band messages are plain structs. */
template <typename T>
void oob_send(ucx_util::OobChannel &oob, const T &value)
{
    oob.send(&value, sizeof(value));
}

template <typename T>
T oob_recv(ucx_util::OobChannel &oob, ucx_util::Deadline deadline)
{
    std::vector<char> data = oob.recv(deadline);
    if (data.size() != sizeof(T)) {
        throw std::runtime_error("out-of-band message of unexpected size");
    }
    T value;
    std::memcpy(&value, data.data(), sizeof(value));
    return value;
}

/* One side: a UCP context with RMA and AM, its worker, an endpoint to the
 * other side, the out-of-band channel, and the benchmark's ifunc. */
class Peer {
public:
    explicit Peer(ucx_util::OobChannel oob);
    ~Peer();
    Peer(const Peer &)            = delete;
    Peer &operator=(const Peer &) = delete;

    ucp_context_h         context() const { return context_.get(); }
    ucx_util::Worker     &worker() { return worker_; }
    ucp_ep_h              ep() const { return ep_->get(); }
    ucx_util::OobChannel &oob() { return oob_; }
    ucp_ifunc_h           ifunc() const { return ifunc_; }

    /* Exchanges a token with the other side, progressing meanwhile (the
     * other side may need our progress to complete its operations). */
    void barrier();

    /* Completes every operation posted on the endpoint. */
    void flush();

private:
    ucx_util::OobChannel                oob_;
    ucx_util::Context                   context_;
    ucp_ifunc_h                         ifunc_;
    ucx_util::Worker                    worker_;
    std::unique_ptr<ucx_util::Endpoint> ep_;
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

/* Runs one test with one payload size; the client measures. */
Result run_client(Peer &peer, const RunParams &params);
void   run_server(Peer &peer, const RunParams &params);

} // namespace perftest

#endif
