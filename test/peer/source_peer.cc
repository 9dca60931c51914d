/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The source side of the integration tests: a separate process that talks
 * to the test (the target) through real UCX and does what the test asks
 * over the OOB channel: register ifuncs, create and send messages, put raw
 * bytes, or stream a stress run.
 *
 *   ifunc_source_peer --oob-fd N
 */
#include "../common/random.h"
#include "../common/protocol.h"
#include "../common/variants.h"
#include "../../tools/common/ucx.h"
#include "../ifuncs/test_ifunc.h"

#include <ucp/api/ucp_ifunc.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

constexpr double kOpTimeout     = 60;
constexpr double kStressTimeout = 600;
constexpr size_t kStressMaxSize = 64 * 1024;

class SourcePeer {
public:
    explicit SourcePeer(int oob_fd)
        : oob_(oob_fd), context_(UCP_FEATURE_RMA | UCP_FEATURE_AM),
          worker_(context_.get())
    {
        auto deadline   = ucx_util::deadline_in(kOpTimeout);
        auto address    = oob_.recv(deadline);
        auto info       = test::unpack<test::TargetInfo>(oob_.recv(deadline));
        auto rkey       = oob_.recv(deadline);
        buffer_         = info.buffer_address;
        buffer_size_    = info.buffer_size;
        target_machine_ = info.machine;
        ep_   = std::make_unique<ucx_util::Endpoint>(worker_, address);
        rkey_ = std::make_unique<ucx_util::RemoteKey>(ep_->get(), rkey);
        reply(UCS_OK, 0);
    }

    ~SourcePeer()
    {
        close_path();
        ucp_ifunc_am_disable(am_);
        for (ucp_ifunc_h handle : handles_) {
            ucp_deregister_ifunc(context_.get(), handle);
        }
    }

    /* Serves requests until told to quit. */
    void run()
    {
        for (;;) {
            if (!oob_.readable()) {
                worker_.progress();
                continue;
            }
            std::vector<char> data;
            auto              req = test::unpack<test::Request>(
                    oob_.recv(ucx_util::deadline_in(kOpTimeout)), &data);
            if (req.op == test::Op::quit) {
                close_path();
                ep_->flush(ucx_util::deadline_in(kOpTimeout));
                reply(UCS_OK, 0);
                return;
            }
            handle(req, data);
        }
    }

private:
    void reply(ucs_status_t status, uint64_t value, const void *data = nullptr,
               size_t size = 0, uint64_t elapsed_ns = 0)
    {
        test::Reply rep{};
        rep.status     = status;
        rep.value      = value;
        rep.elapsed_ns = elapsed_ns;
        oob_.send(test::pack(rep, data, size));
    }

    /* Writes stay inside the target's mapped buffer, whatever the test asks:
     * a test about oversized frames must not corrupt the test process. */
    bool fits(uint64_t offset, uint64_t size) const
    {
        return (offset <= buffer_size_) && (size <= buffer_size_ - offset);
    }

    ucp_ifunc_h handle_at(uint32_t index)
    {
        if (index >= handles_.size()) {
            throw std::runtime_error("unknown handle " + std::to_string(index));
        }
        return handles_[index];
    }

    void handle(const test::Request &req, std::vector<char> &data)
    {
        switch (req.op) {
            case test::Op::register_ifunc: {
                ucp_ifunc_h  handle;
                ucs_status_t status =
                        ucp_register_ifunc(context_.get(), req.name, &handle);
                if (status == UCS_OK) {
                    handles_.push_back(handle);
                }
                reply(status, handles_.size() - 1);
                break;
            }
            case test::Op::deregister_ifunc:
                ucp_deregister_ifunc(context_.get(), handle_at(req.handle));
                handles_[req.handle] = nullptr;
                reply(UCS_OK, 0);
                break;
            case test::Op::send:
                send(req, data);
                break;
            case test::Op::get_frame: {
                ucp_ifunc_msg_t msg;
                ucs_status_t    status = ucp_ifunc_msg_create(
                           handle_at(req.handle), data.data(), data.size(), &msg);
                if (status != UCS_OK) {
                    reply(status, 0);
                    break;
                }
                reply(UCS_OK, msg.frame_size, msg.frame, msg.frame_size);
                ucp_ifunc_msg_free(msg);
                break;
            }
            case test::Op::put_raw: {
                if (!fits(req.offset, data.size())) {
                    reply(UCS_ERR_OUT_OF_RANGE, 0);
                    break;
                }
                ucs_status_t status = ucx_util::put_posted(
                        ep_->get(), data.data(), data.size(),
                        buffer_ + req.offset, rkey_->get());
                if (!UCS_STATUS_IS_ERR(status)) {
                    status = ep_->flush(ucx_util::deadline_in(kOpTimeout));
                }
                reply(status, 0);
                break;
            }
            case test::Op::stress:
                stress(req);
                break;
            case test::Op::path_open:
                reply(path_open(req, data), 0);
                break;
            case test::Op::path_send:
                path_send(req, data);
                break;
            case test::Op::path_stress:
                path_stress(req);
                break;
            case test::Op::path_send_variants:
                path_send_variants(req, data);
                break;
            case test::Op::am_raw:
                am_raw(req, data);
                break;
            case test::Op::worker_address: {
                std::vector<char> address = worker_.address();
                reply(UCS_OK, 0, address.data(), address.size());
                break;
            }
            case test::Op::path_query: {
                ucp_ifunc_ep_attr_t attr;
                ucs_status_t        status =
                        query_path(UCP_IFUNC_EP_ATTR_FIELD_SENT_WITH_CODE |
                                           UCP_IFUNC_EP_ATTR_FIELD_SENT_BY_REF,
                                   &attr);
                reply(status, attr.sent_with_code, nullptr, 0,
                      attr.sent_by_ref);
                break;
            }
            case test::Op::path_machine: {
                ucp_ifunc_ep_attr_t attr;
                ucs_status_t        status =
                        query_path(UCP_IFUNC_EP_ATTR_FIELD_MACHINE, &attr);
                reply(status, attr.machine);
                break;
            }
            case test::Op::path_close:
                close_path();
                reply(UCS_OK, 0);
                break;
            default:
                reply(UCS_ERR_INVALID_PARAM, 0);
        }
    }

    /* The @a fields of the open path's endpoint. */
    ucs_status_t query_path(uint64_t fields, ucp_ifunc_ep_attr_t *attr)
    {
        attr->field_mask = fields;
        return (channel_ != nullptr)
                       ? ucp_ifunc_channel_ep_query(channel_, attr)
               : (am_ep_ != nullptr) ? ucp_ifunc_am_ep_query(am_ep_, attr)
                                     : UCS_ERR_NO_ELEM;
    }

    /* The paper's flow: create, send, flush, release. */
    /* Sends with ucp_ifunc_send_nbx, naming the worker and the remote
     * size, when @a remote_size is known (not 0); else with the paper's
     * ucp_ifunc_send_nbix. */
    ucs_status_t send_one(const ucp_ifunc_msg_t &msg, uint64_t address,
                          size_t remote_size, uint16_t machine = 0)
    {
        if ((remote_size == 0) && (machine == 0)) {
            return ucp_ifunc_send_nbix(ep_->get(), msg, address, rkey_->get());
        }
        ucp_ifunc_send_params_t params = {};
        params.field_mask              = UCP_IFUNC_SEND_FIELD_WORKER;
        params.worker                  = worker_.get();
        if (remote_size != 0) {
            params.field_mask |= UCP_IFUNC_SEND_FIELD_REMOTE_SIZE;
            params.remote_size = remote_size;
        }
        if (machine != 0) {
            params.field_mask |= UCP_IFUNC_SEND_FIELD_MACHINE;
            params.machine = machine;
        }
        return ucp_ifunc_send_nbx(ep_->get(), msg, address, rkey_->get(),
                                  &params);
    }

    /* The ISA to name on the raw path: the one the request names, else the
     * target's where it is not ours (a mixed cluster; the raw path cannot
     * learn it by itself), else none: the paper's call. */
    uint16_t raw_path_machine(uint16_t requested) const
    {
        if (requested != 0) {
            return requested;
        }
        return (target_machine_ != test::own_elf_machine()) ? target_machine_
                                                            : 0;
    }

    void send(const test::Request &req, std::vector<char> &args)
    {
        ucp_ifunc_msg_t msg;
        ucs_status_t    status = ucp_ifunc_msg_create(
                   handle_at(req.handle), args.empty() ? nullptr : args.data(),
                   args.size(), &msg);
        if (status != UCS_OK) {
            reply(status, 0);
            return;
        }
        uint64_t frame_size = msg.frame_size;
        if (!(req.flags & test::kSendUnchecked) &&
            !fits(req.offset, frame_size)) {
            status = UCS_ERR_OUT_OF_RANGE;
        } else {
            status = send_one(msg, buffer_ + req.offset, req.slot_size,
                              raw_path_machine(uint16_t(req.reserved)));
            if (!UCS_STATUS_IS_ERR(status)) {
                status = ep_->flush(ucx_util::deadline_in(kOpTimeout));
            }
        }
        ucp_ifunc_msg_free(msg);
        reply(status, frame_size);
    }

    /* Streams req.count messages of random payloads into a ring of
     * req.slots slots, as fast as the target's credits allow. */
    void stress(const test::Request &req)
    {
        ucp_ifunc_h          handle   = handle_at(req.handle);
        uint64_t             state    = req.seed | 1;
        uint64_t             consumed = 0;
        auto                 deadline = ucx_util::deadline_in(kStressTimeout);
        auto                 start    = ucx_util::Clock::now();
        std::vector<uint8_t> bytes(kStressMaxSize + 8);

        /* The target returns one credit per consumed frame. */
        auto wait_credits = [&](uint64_t until_consumed) {
            while (consumed < until_consumed) {
                if (oob_.readable()) {
                    consumed = test::unpack<uint64_t>(oob_.recv(deadline));
                } else {
                    worker_.progress();
                }
                if (ucx_util::Clock::now() > deadline) {
                    return false;
                }
            }
            return true;
        };

        for (uint64_t seq = 0; seq < req.count; ++seq) {
            if ((seq >= req.slots) && !wait_credits(seq - req.slots + 1)) {
                reply(UCS_ERR_TIMED_OUT, seq);
                return;
            }
            size_t size = test::random_bytes(&bytes, &state, 0, kStressMaxSize);
            stress_args     args = {seq, size, bytes.data()};
            ucp_ifunc_msg_t msg;
            ucs_status_t    status =
                    ucp_ifunc_msg_create(handle, &args, sizeof(args), &msg);
            if ((status == UCS_OK) &&
                !fits((seq % req.slots) * req.slot_size, msg.frame_size)) {
                ucp_ifunc_msg_free(msg);
                status = UCS_ERR_OUT_OF_RANGE;
            } else if (status == UCS_OK) {
                uint64_t slot = buffer_ + (seq % req.slots) * req.slot_size;
                size_t   remote_size =
                        (req.flags & test::kStressSendNbx) ? req.slot_size : 0;
                status = send_one(msg, slot, remote_size, raw_path_machine(0));
                if (!UCS_STATUS_IS_ERR(status)) {
                    status = ep_->flush(deadline);
                }
                ucp_ifunc_msg_free(msg);
            }
            if (status != UCS_OK) {
                reply(status, seq);
                return;
            }
        }
        if (!wait_credits(req.count)) { /* all consumed: run complete */
            reply(UCS_ERR_TIMED_OUT, req.count);
            return;
        }
        auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
                ucx_util::Clock::now() - start);
        reply(UCS_OK, req.count, nullptr, 0, elapsed.count());
    }

    void close_path()
    {
        ucp_ifunc_channel_close(channel_);
        channel_ = nullptr;
        if (am_ep_ != nullptr) {
            ucx_util::Endpoint &ep = listener_ep_ ? *listener_ep_ : *ep_;
            ep.flush(ucx_util::deadline_in(kOpTimeout));
            ucp_ifunc_am_ep_destroy(am_ep_);
            am_ep_ = nullptr;
        }
        listener_ep_.reset();
    }

    /* Opens the path the request names; closes the one open before. */
    ucs_status_t path_open(const test::Request     &req,
                           const std::vector<char> &blob)
    {
        close_path();
        if ((req.flags & test::kPathMask) == test::kPathChannel) {
            return ucp_ifunc_channel_open(worker_.get(), ep_->get(),
                                          blob.data(), blob.size(), nullptr,
                                          &channel_);
        }
        ucp_ep_h ep = ep_->get();
        if (req.flags & test::kPathListener) {
            listener_ep_ = std::make_unique<ucx_util::Endpoint>(
                    worker_, connect_to_listener(uint16_t(req.offset)));
            ep = listener_ep_->get();
        }
        if (am_ == nullptr) {
            ucp_ifunc_am_params_t params = {};
            params.field_mask            = UCP_IFUNC_AM_FIELD_AM_ID;
            params.am_id                 = req.seed ? unsigned(req.seed)
                                                    : unsigned(UCP_IFUNC_AM_ID_DEFAULT);
            ucs_status_t status          = ucp_ifunc_am_enable(
                             context_.get(), worker_.get(), &params, &am_);
            if (status != UCS_OK) {
                return status;
            }
        }
        return ucp_ifunc_am_ep_create(am_, ep, &am_ep_);
    }

    /* An endpoint to the target's listener on 127.0.0.1:@a port, with peer
     * error handling, as a client of a server makes it. */
    ucp_ep_h connect_to_listener(uint16_t port)
    {
        sockaddr_in addr       = {};
        addr.sin_family        = AF_INET;
        addr.sin_port          = htons(port);
        addr.sin_addr.s_addr   = htonl(INADDR_LOOPBACK);
        ucp_ep_params_t params = {};
        params.field_mask      = UCP_EP_PARAM_FIELD_FLAGS |
                            UCP_EP_PARAM_FIELD_SOCK_ADDR |
                            UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                            UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        params.sockaddr.addr    = reinterpret_cast<const sockaddr *>(&addr);
        params.sockaddr.addrlen = sizeof(addr);
        params.err_mode         = UCP_ERR_HANDLING_MODE_PEER;
        params.err_handler.cb   = [](void *, ucp_ep_h, ucs_status_t) {};
        params.err_handler.arg  = nullptr;
        ucp_ep_h ep;
        ucx_util::check(ucp_ep_create(worker_.get(), &params, &ep),
                        "ucp_ep_create to the listener");
        return ep;
    }

    /* The endpoint the open AM path sends on. */
    ucp_ep_h path_ep() const
    {
        return listener_ep_ ? listener_ep_->get() : ep_->get();
    }

    /* Sends @a msg on the open path; waits for a free slot (counted in
     * @a waits) and for the send to complete. */
    ucs_status_t path_send_one(const ucp_ifunc_msg_t &msg, uint32_t flags,
                               ucx_util::Deadline deadline, uint64_t *waits)
    {
        ucp_ifunc_channel_send_params_t params = {};
        params.field_mask = UCP_IFUNC_CHANNEL_SEND_FIELD_FLAGS;
        params.flags      = (flags & test::kPathWithCode)
                                    ? UCP_IFUNC_SEND_FLAG_WITH_CODE
                                    : 0;
        if (am_ep_ != nullptr) {
            ucs_status_t status = worker_.wait(
                    ucp_ifunc_am_send_nbx(am_ep_, msg, nullptr, &params),
                    deadline);
            /* Eager sends over TCP complete at once: without progress the
             * target's reply (it holds the code) would never be read. */
            worker_.progress();
            return status;
        }
        if (channel_ == nullptr) {
            return UCS_ERR_NO_ELEM;
        }
        bool waited = false;
        for (;;) {
            ucs_status_t status =
                    ucp_ifunc_channel_send_nbx(channel_, msg, &params);
            if (status == UCS_INPROGRESS) {
                /* The message must stay until the flush completes. */
                return ep_->flush(deadline);
            }
            if (status != UCS_ERR_NO_RESOURCE) {
                return status;
            }
            if (!waited) {
                waited = true;
                ++*waits;
            }
            worker_.progress();
            if (ucx_util::Clock::now() > deadline) {
                return UCS_ERR_TIMED_OUT;
            }
        }
    }

    void path_send(const test::Request &req, std::vector<char> &args)
    {
        auto            deadline = ucx_util::deadline_in(kStressTimeout);
        ucp_ifunc_msg_t msg;
        ucs_status_t    status = ucp_ifunc_msg_create(
                   handle_at(req.handle), args.empty() ? nullptr : args.data(),
                   args.size(), &msg);
        uint64_t waits = 0;
        bool     pipelined =
                (am_ep_ != nullptr) && (req.flags & test::kPathPipeline);
        if ((status == UCS_OK) && pipelined) {
            /* All in flight at once: the target must pace large ones. */
            std::vector<ucs_status_ptr_t> requests;
            for (uint64_t i = 0; i < req.count; ++i) {
                requests.push_back(
                        ucp_ifunc_am_send_nbx(am_ep_, msg, nullptr, nullptr));
            }
            if (req.flags & test::kPathReportPosted) {
                reply(UCS_INPROGRESS, req.count);
            }
            for (ucs_status_ptr_t request : requests) {
                ucs_status_t one = worker_.wait(request, deadline);
                status           = (status == UCS_OK) ? one : status;
            }
        }
        for (uint64_t i = 0;
             (status == UCS_OK) && !pipelined && (i < req.count); ++i) {
            status = path_send_one(msg, req.flags, deadline, &waits);
        }
        if (msg.frame != nullptr) {
            ucp_ifunc_msg_free(msg);
        }
        reply(status, waits);
    }

    /* Forged messages: variants of one real message (test/common/variants.h)
     * sent on the open path with their code, as an attacker that captured
     * the message would send them. */
    void path_send_variants(const test::Request &req, std::vector<char> &args)
    {
        auto            deadline = ucx_util::deadline_in(kStressTimeout);
        ucp_ifunc_msg_t msg;
        ucs_status_t    status = ucp_ifunc_msg_create(
                   handle_at(req.handle), args.empty() ? nullptr : args.data(),
                   args.size(), &msg);
        if (status != UCS_OK) {
            reply(status, 0);
            return;
        }
        const char       *bytes = static_cast<const char *>(msg.frame);
        std::vector<char> frame(bytes, bytes + msg.frame_size);
        ucp_ifunc_msg_free(msg);

        uint64_t sent = 0, waits = 0;
        size_t   name_length = test::frame_header(frame).name_length;
        for (uint64_t i = 0; (i < req.count) && (status == UCS_OK); ++i) {
            std::vector<char> variant;
            if (req.flags & test::kVariantRenamed) {
                /* "v" and the number, zero-padded to the name's length */
                std::string number = std::to_string(req.seed + i);
                if (number.size() > name_length - 1) {
                    number = number.substr(number.size() - (name_length - 1));
                }
                variant = test::renamed(
                        frame,
                        "v" +
                                std::string(name_length - 1 - number.size(),
                                            '0') +
                                number);
            } else {
                variant = test::with_trailing_bytes(frame, req.seed + i);
            }
            std::vector<char> message = test::message_bytes(variant);
            /* A message's frame is 16-byte aligned, as malloc gives it. */
            std::vector<uint64_t> aligned((message.size() + 15) / 8);
            char *start = reinterpret_cast<char *>(aligned.data());
            start += (16 - reinterpret_cast<uintptr_t>(start) % 16) % 16;
            std::memcpy(start, message.data(), message.size());
            ucp_ifunc_msg_t forged = {start, variant.size()};
            status = path_send_one(forged, req.flags | test::kPathWithCode,
                                   deadline, &waits);
            sent += (status == UCS_OK);
        }
        reply(status, sent);
    }

    /* Active messages of the peer's own making (am_raw in protocol.h). */
    void am_raw(const test::Request &req, const std::vector<char> &bytes)
    {
        auto              deadline = ucx_util::deadline_in(kStressTimeout);
        std::vector<char> header   = bytes, data(req.count, 0);
        if (req.flags & test::kAmRawData) {
            size_t length = std::min<size_t>(req.offset, bytes.size());
            header.assign(bytes.begin(), bytes.begin() + length);
            data.assign(bytes.begin() + length, bytes.end());
        }
        ucp_request_param_t param;
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = (req.flags & test::kAmRawRndv) ? UCP_AM_SEND_FLAG_RNDV
                                                     : UCP_AM_SEND_FLAG_EAGER;
        if (req.flags & test::kAmRawReply) {
            param.flags |= UCP_AM_SEND_FLAG_REPLY;
        }
        std::vector<ucs_status_ptr_t> requests;
        for (uint64_t i = 0; i < std::max<uint64_t>(req.slots, 1); ++i) {
            requests.push_back(ucp_am_send_nbx(
                    path_ep(), unsigned(req.seed), header.data(), header.size(),
                    data.data(), data.size(), &param));
        }
        ucs_status_t first_failure = UCS_OK;
        uint64_t     ok            = 0;
        for (ucs_status_ptr_t request : requests) {
            ucs_status_t status = worker_.wait(request, deadline);
            ok += (status == UCS_OK);
            if ((status != UCS_OK) && (first_failure == UCS_OK)) {
                first_failure = status;
            }
        }
        reply(first_failure, ok);
    }

    /* As stress(), on the open path, whose own flow control paces it. */
    void path_stress(const test::Request &req)
    {
        ucp_ifunc_h          handle   = handle_at(req.handle);
        uint64_t             state    = req.seed | 1;
        auto                 deadline = ucx_util::deadline_in(kStressTimeout);
        auto                 start    = ucx_util::Clock::now();
        uint64_t             waits    = 0;
        std::vector<uint8_t> bytes(kStressMaxSize + 8);
        ucs_status_t         status = UCS_OK;
        for (uint64_t seq = 0; (seq < req.count) && (status == UCS_OK); ++seq) {
            size_t size = test::random_bytes(&bytes, &state, 0, kStressMaxSize);
            stress_args     args = {seq, size, bytes.data()};
            ucp_ifunc_msg_t msg;
            status = ucp_ifunc_msg_create(handle, &args, sizeof(args), &msg);
            if (status == UCS_OK) {
                status = path_send_one(msg, req.flags, deadline, &waits);
                ucp_ifunc_msg_free(msg);
            }
        }
        auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
                ucx_util::Clock::now() - start);
        reply(status, waits, nullptr, 0, elapsed.count());
    }

    ucx_util::OobChannel                 oob_;
    ucx_util::Context                    context_;
    ucx_util::Worker                     worker_;
    std::unique_ptr<ucx_util::Endpoint>  ep_;
    std::unique_ptr<ucx_util::RemoteKey> rkey_;
    std::unique_ptr<ucx_util::Endpoint>  listener_ep_; /* kPathListener */
    uint64_t                             buffer_         = 0;
    uint64_t                             buffer_size_    = 0;
    uint16_t                             target_machine_ = 0;
    std::vector<ucp_ifunc_h>             handles_;
    ucp_ifunc_channel_ep_h               channel_ = nullptr;
    ucp_ifunc_am_h                       am_      = nullptr;
    ucp_ifunc_am_ep_h                    am_ep_   = nullptr;
};

} // namespace

int main(int argc, char **argv)
{
    if ((argc != 3) || (std::strcmp(argv[1], "--oob-fd") != 0)) {
        std::fprintf(stderr, "usage: %s --oob-fd N\n", argv[0]);
        return 2;
    }
    try {
        SourcePeer peer(std::atoi(argv[2]));
        peer.run();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ifunc_source_peer: %s\n", e.what());
        return 1;
    }
    return 0;
}
