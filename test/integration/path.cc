/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "path.h"

#include <algorithm>
#include <stdexcept>

namespace test {

PathEnd::PathEnd(Target &target, Path path, unsigned slots, size_t slot_size,
                 void *target_args)
    : target_(target), path_(path),
      target_args_((target_args != nullptr) ? target_args : results_)
{
    if (path == Path::channel) {
        ucp_ifunc_channel_params_t params = {};
        params.field_mask                 = UCP_IFUNC_CHANNEL_FIELD_SLOTS |
                            UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE;
        params.slots     = slots;
        params.slot_size = slot_size;
        check(ucp_ifunc_channel_create(target.context(), &params, &channel_),
              "ucp_ifunc_channel_create");
    } else {
        ucp_ifunc_am_params_t params = {};
        params.field_mask            = UCP_IFUNC_AM_FIELD_TARGET_ARGS;
        params.target_args           = target_args_;
        check(ucp_ifunc_am_enable(target.context(), target.worker().get(),
                                  &params, &am_),
              "ucp_ifunc_am_enable");
    }
}

PathEnd::~PathEnd()
{
    /* Sources close their end first: a credit read or a put still on its
     * way must not reach released memory. */
    for (size_t peer : opened_) {
        try {
            Request req{};
            req.op = Op::path_close;
            call(peer, req);
        } catch (const std::exception &e) {
            ADD_FAILURE() << "closing the path of peer " << peer << ": "
                          << e.what();
        }
    }
    ucp_ifunc_channel_destroy(channel_);
    ucp_ifunc_am_disable(am_);
}

void PathEnd::open(size_t peer, uint32_t flags, uint16_t port)
{
    Request req{};
    req.op     = Op::path_open;
    req.flags  = flags | ((path_ == Path::am) ? kPathAm : kPathChannel);
    req.offset = port;
    if (path_ == Path::channel) {
        void  *blob;
        size_t blob_size;
        check(ucp_ifunc_channel_pack(channel_, &blob, &blob_size),
              "ucp_ifunc_channel_pack");
        std::vector<char> bytes(static_cast<char *>(blob),
                                static_cast<char *>(blob) + blob_size);
        ucp_ifunc_channel_blob_release(blob);
        check(ucs_status_t(call(peer, req, bytes.data(), bytes.size()).status),
              "path_open");
    } else {
        check(ucs_status_t(call(peer, req).status), "path_open");
    }
    opened_.push_back(peer);
}

void PathEnd::forget(size_t peer)
{
    opened_.erase(std::remove(opened_.begin(), opened_.end(), peer),
                  opened_.end());
}

void PathEnd::poll(unsigned max_count)
{
    if (channel_ == nullptr) {
        return;
    }
    unsigned     count;
    ucs_status_t status =
            ucp_ifunc_channel_poll(channel_, max_count, target_args_, &count);
    if (status != UCS_OK) {
        errors_.push_back(status);
    }
}

Reply PathEnd::call(size_t peer, Request req, const void *data, size_t size)
{
    req.flags |= (path_ == Path::am) ? kPathAm : kPathChannel;
    return target_.call_polling(peer, req, data, size, [this] { poll(); });
}

Reply PathEnd::send(size_t peer, uint32_t handle, uint64_t count,
                    const void *args, size_t args_size, uint32_t flags)
{
    Request req{};
    req.op     = Op::path_send;
    req.handle = handle;
    req.count  = count;
    req.flags  = flags;
    return call(peer, req, args, args_size);
}

std::pair<uint64_t, uint64_t> PathEnd::sent(size_t peer)
{
    Request req{};
    req.op      = Op::path_query;
    Reply reply = call(peer, req);
    check(ucs_status_t(reply.status), "path_query");
    return {reply.value, reply.elapsed_ns};
}

PathEnd &second_source_end(Target &target, PathEnd &first, size_t peer,
                           std::unique_ptr<PathEnd> *own)
{
    PathEnd *end = &first;
    if (first.path() == Path::channel) {
        *own = std::make_unique<PathEnd>(target, Path::channel);
        end  = own->get();
    }
    end->open(peer);
    return *end;
}

uint32_t register_on_peer(Target &target, size_t peer, const char *name)
{
    Request req{};
    req.op = Op::register_ifunc;
    snprintf(req.name, sizeof(req.name), "%s", name);
    Reply reply = target.call_polling(peer, req, nullptr, 0, [] {});
    check(ucs_status_t(reply.status), "register_ifunc");
    return uint32_t(reply.value);
}

void PathTest::SetUp()
{
    if (tls() == "tcp") {
        tcp_put_ = std::make_unique<ScopedEnv>("UCX_TCP_PUT_ENABLE", "n");
    }
    target_ = std::make_unique<Target>(tls(), peer_ifunc_lib_dir(),
                                       UCP_FEATURE_RMA | UCP_FEATURE_AM);
    end_    = std::make_unique<PathEnd>(*target_, path(), PathEnd::kSlots,
                                     PathEnd::kSlotSize, target_args_);
    end_->open();
}

void PathTest::TearDown()
{
    end_.reset();
    target_.reset();
    tcp_put_.reset();
}

std::string path_param_name(const ::testing::TestParamInfo<PathParam> &info)
{
    return std::get<0>(info.param) +
           ((std::get<1>(info.param) == Path::channel) ? "_channel" : "_am");
}

} // namespace test
