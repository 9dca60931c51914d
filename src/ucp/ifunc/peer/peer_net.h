/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "peers", the UCP contexts an ifunc worker owns. A network peer
 * reaches the target only through a context with active messages alone:
 * UCP sets its handlers of remote memory access (the software puts, gets
 * and atomics it runs over transports without memory keys, TCP among
 * them) only on workers of contexts with UCP_FEATURE_RMA or
 * UCP_FEATURE_AMO, so no put from a network peer is carried out there,
 * whatever context the application made. The channels' memory is mapped
 * by a second context, with remote memory access, restricted to UCX's
 * shared-memory transports, which only processes on this host reach.
 * Both read the UCX configuration (UCX_* variables) when the ifunc worker
 * is made; the shared-memory one keeps of UCX_TLS only its shared-memory
 * transports (shm_transports()).
 */
#ifndef UCP_IFUNC_PEER_NET_H_
#define UCP_IFUNC_PEER_NET_H_

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

namespace ucx_ifunc {

/* A UCP context with one worker, both owned. */
class OwnedWorker {
public:
    OwnedWorker()                               = default;
    OwnedWorker(const OwnedWorker &)            = delete;
    OwnedWorker &operator=(const OwnedWorker &) = delete;
    ~OwnedWorker();

    /* Makes one with @a features, UCX_TLS replaced by @a tls unless it is
     * empty, workers of @a thread_mode; @a what names it in errors. */
    static ucs_status_t create(const char *what, uint64_t features,
                               const std::string            &tls,
                               ucs_thread_mode_t             thread_mode,
                               std::unique_ptr<OwnedWorker> *owned_p);

    ucp_context_h context() const { return context_; }
    ucp_worker_h  worker() const { return worker_; }
    /* The worker's address, for peers on this host. */
    const std::vector<char> &address() const { return address_; }

private:
    ucp_context_h     context_ = nullptr;
    ucp_worker_h      worker_  = nullptr;
    std::vector<char> address_;
};

/* The shared-memory transports of a UCX_TLS value (@a tls; "" or "all":
 * every one), as a UCX_TLS value with "self" added; "" where it names
 * none. */
std::string shm_transports(const std::string &tls);

/* The UCX_TLS of the network-facing context for a UCX_TLS value @a tls:
 * @a tls itself where it lets tcp in ("" where it is "" or "all"), else
 * @a tls with tcp let in. UCX connects by address only through a
 * transport on the network device the address routes through (TCP on
 * "lo" for a peer on this host), whatever transports then carry the
 * messages: with UCX_TLS=sm alone no connect would ever succeed, and on
 * one host the messages still go by shared memory. */
std::string net_transports(const std::string &tls);

} // namespace ucx_ifunc

#endif
