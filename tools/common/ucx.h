/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Small RAII wrappers over the UCP objects the tests and the benchmark use.
 * Errors throw std::runtime_error naming the call and the UCX status.
 */
#ifndef UCX_IFUNC_TOOLS_UCX_H_
#define UCX_IFUNC_TOOLS_UCX_H_

#include "oob.h"

#include <ucp/api/ucp.h>

#include <vector>

namespace ucx_util {

void check(ucs_status_t status, const char *what);

/* Posts a put that completes by itself, as the deprecated ucp_put_nbi did:
 * UCS_OK when done, UCS_INPROGRESS when under way (a flush completes it),
 * or the error. */
ucs_status_t put_posted(ucp_ep_h ep, const void *data, size_t size,
                        uint64_t remote_addr, ucp_rkey_h rkey);

/* A UCP context; releases its ifunc state before ucp_cleanup, as every
 * ifunc program should. */
class Context {
public:
    explicit Context(uint64_t features = UCP_FEATURE_RMA);
    ~Context();
    Context(const Context &)                 = delete;
    Context      &operator=(const Context &) = delete;
    ucp_context_h get() const { return context_; }

private:
    ucp_context_h context_ = nullptr;
};

/* A UCP worker, UCS_THREAD_MODE_SINGLE unless told otherwise: one thread
 * uses it (UCX 1.18 and later assert so where built with assertions). */
class Worker {
public:
    explicit Worker(ucp_context_h     context,
                    ucs_thread_mode_t thread_mode = UCS_THREAD_MODE_SINGLE);
    ~Worker();
    Worker(const Worker &)                      = delete;
    Worker           &operator=(const Worker &) = delete;
    ucp_worker_h      get() const { return worker_; }
    std::vector<char> address() const;
    unsigned          progress() { return ucp_worker_progress(worker_); }

    /* Progresses until @a request completes; releases it. */
    ucs_status_t wait(ucs_status_ptr_t request, Deadline deadline);

private:
    ucp_worker_h worker_ = nullptr;
};

class Endpoint {
public:
    Endpoint(Worker &worker, const std::vector<char> &remote_address);
    /* Takes over @a ep, created on @a worker with other parameters. */
    Endpoint(Worker &worker, ucp_ep_h ep) : worker_(worker), ep_(ep) {}
    ~Endpoint();
    Endpoint(const Endpoint &)            = delete;
    Endpoint &operator=(const Endpoint &) = delete;
    ucp_ep_h  get() const { return ep_; }

    /* Completes every operation posted on the endpoint. */
    ucs_status_t flush(Deadline deadline);

private:
    Worker  &worker_;
    ucp_ep_h ep_ = nullptr;
};

/* Memory mapped for remote access (ucp_mem_map with ALLOCATE). */
class Memory {
public:
    Memory(ucp_context_h context, size_t size);
    ~Memory();
    Memory(const Memory &)                      = delete;
    Memory           &operator=(const Memory &) = delete;
    char             *address() const { return address_; }
    size_t            size() const { return size_; }
    std::vector<char> packed_rkey() const;

private:
    ucp_context_h context_;
    ucp_mem_h     memh_    = nullptr;
    char         *address_ = nullptr;
    size_t        size_    = 0;
};

/* Memory of ucp_ifunc_sandbox_mem_alloc, for grants to sandboxed code. */
class SandboxMemory {
public:
    explicit SandboxMemory(size_t size);
    ~SandboxMemory();
    SandboxMemory(const SandboxMemory &)            = delete;
    SandboxMemory &operator=(const SandboxMemory &) = delete;
    char          *address() const { return address_; }

    /* Grants [address() + @a offset, + @a length) to the code of
     * @a ifunc_name with @a rights (UCP_IFUNC_SANDBOX_GRANT_*). */
    void grant(size_t offset, size_t length, unsigned rights,
               const char *ifunc_name);

private:
    char *address_ = nullptr;
};

class RemoteKey {
public:
    RemoteKey(ucp_ep_h ep, const std::vector<char> &packed);
    ~RemoteKey();
    RemoteKey(const RemoteKey &)            = delete;
    RemoteKey &operator=(const RemoteKey &) = delete;
    ucp_rkey_h get() const { return rkey_; }

private:
    ucp_rkey_h rkey_ = nullptr;
};

} // namespace ucx_util

#endif
