/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucx.h"

#include <ucp/api/ucp_ifunc.h>

#include <stdexcept>
#include <string>

namespace ucx_util {

void check(ucs_status_t status, const char *what)
{
    if (status != UCS_OK) {
        throw std::runtime_error(std::string(what) + ": " +
                                 ucs_status_string(status));
    }
}

ucs_status_t put_posted(ucp_ep_h ep, const void *data, size_t size,
                        uint64_t remote_addr, ucp_rkey_h rkey)
{
    ucp_request_param_t no_callback = {};
    ucs_status_ptr_t    ptr =
            ucp_put_nbx(ep, data, size, remote_addr, rkey, &no_callback);
    if (UCS_PTR_IS_PTR(ptr)) {
        ucp_request_free(ptr); /* completes without us */
        return UCS_INPROGRESS;
    }
    return UCS_PTR_STATUS(ptr);
}

Context::Context(uint64_t features)
{
    ucp_params_t params = {};
    params.field_mask   = UCP_PARAM_FIELD_FEATURES;
    params.features     = features;
    check(ucp_init(&params, nullptr, &context_), "ucp_init");
}

Context::~Context()
{
    ucp_ifunc_context_release(context_);
    ucp_cleanup(context_);
}

Worker::Worker(ucp_context_h context, ucs_thread_mode_t thread_mode)
{
    ucp_worker_params_t params = {};
    params.field_mask          = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    params.thread_mode         = thread_mode;
    check(ucp_worker_create(context, &params, &worker_), "ucp_worker_create");
}

Worker::~Worker()
{
    ucp_worker_destroy(worker_);
}

std::vector<char> Worker::address() const
{
    ucp_address_t *address;
    size_t         length;
    check(ucp_worker_get_address(worker_, &address, &length),
          "ucp_worker_get_address");
    std::vector<char> result(reinterpret_cast<char *>(address),
                             reinterpret_cast<char *>(address) + length);
    ucp_worker_release_address(worker_, address);
    return result;
}

ucs_status_t Worker::wait(ucs_status_ptr_t request, Deadline deadline)
{
    if (!UCS_PTR_IS_PTR(request)) {
        return UCS_PTR_STATUS(request);
    }
    ucs_status_t status;
    while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
        progress();
        if (Clock::now() > deadline) {
            ucp_request_cancel(worker_, request);
            status = UCS_ERR_TIMED_OUT;
            while (ucp_request_check_status(request) == UCS_INPROGRESS) {
                progress();
            }
            break;
        }
    }
    ucp_request_free(request);
    return status;
}

Endpoint::Endpoint(Worker &worker, const std::vector<char> &remote_address)
    : worker_(worker)
{
    ucp_ep_params_t params = {};
    params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address =
            reinterpret_cast<const ucp_address_t *>(remote_address.data());
    check(ucp_ep_create(worker.get(), &params, &ep_), "ucp_ep_create");
}

Endpoint::~Endpoint()
{
    ucp_request_param_t param = {};
    param.op_attr_mask        = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags               = UCP_EP_CLOSE_FLAG_FORCE;
    worker_.wait(ucp_ep_close_nbx(ep_, &param), deadline_in(5));
}

ucs_status_t Endpoint::flush(Deadline deadline)
{
    ucp_request_param_t param = {};
    return worker_.wait(ucp_ep_flush_nbx(ep_, &param), deadline);
}

Memory::Memory(ucp_context_h context, size_t size) : context_(context)
{
    ucp_mem_map_params_t params = {};
    params.field_mask =
            UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    params.length = size;
    params.flags  = UCP_MEM_MAP_ALLOCATE;
    check(ucp_mem_map(context, &params, &memh_), "ucp_mem_map");

    ucp_mem_attr_t attr = {};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    check(ucp_mem_query(memh_, &attr), "ucp_mem_query");
    address_ = static_cast<char *>(attr.address);
    size_    = attr.length;
}

Memory::~Memory()
{
    ucp_mem_unmap(context_, memh_);
}

SandboxMemory::SandboxMemory(size_t size)
{
    void *address;
    check(ucp_ifunc_sandbox_mem_alloc(size, nullptr, &address),
          "ucp_ifunc_sandbox_mem_alloc");
    address_ = static_cast<char *>(address);
}

SandboxMemory::~SandboxMemory()
{
    ucp_ifunc_sandbox_mem_free(address_);
}

void SandboxMemory::grant(size_t offset, size_t length, unsigned rights,
                          const char *ifunc_name)
{
    check(ucp_ifunc_sandbox_grant(address_ + offset, length, rights, ifunc_name,
                                  nullptr),
          "ucp_ifunc_sandbox_grant");
}

std::vector<char> Memory::packed_rkey() const
{
    void  *buffer;
    size_t length;
    check(ucp_rkey_pack(context_, memh_, &buffer, &length), "ucp_rkey_pack");
    std::vector<char> result(static_cast<char *>(buffer),
                             static_cast<char *>(buffer) + length);
    ucp_rkey_buffer_release(buffer);
    return result;
}

RemoteKey::RemoteKey(ucp_ep_h ep, const std::vector<char> &packed)
{
    check(ucp_ep_rkey_unpack(ep, packed.data(), &rkey_), "ucp_ep_rkey_unpack");
}

RemoteKey::~RemoteKey()
{
    ucp_rkey_destroy(rkey_);
}

} // namespace ucx_util
