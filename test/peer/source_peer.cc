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
#include "../common/protocol.h"
#include "../../tools/common/ucx.h"
#include "../ifuncs/test_ifunc.h"

#include <ucp/api/ucp_ifunc.h>

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
    explicit SourcePeer(int oob_fd) : oob_(oob_fd), worker_(context_.get())
    {
        auto deadline = ucx_util::deadline_in(kOpTimeout);
        auto address  = oob_.recv(deadline);
        auto info     = test::unpack<test::TargetInfo>(oob_.recv(deadline));
        auto rkey     = oob_.recv(deadline);
        buffer_       = info.buffer_address;
        buffer_size_  = info.buffer_size;
        ep_           = std::make_unique<ucx_util::Endpoint>(worker_, address);
        rkey_         = std::make_unique<ucx_util::RemoteKey>(ep_->get(), rkey);
        reply(UCS_OK, 0);
    }

    ~SourcePeer()
    {
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
            default:
                reply(UCS_ERR_INVALID_PARAM, 0);
        }
    }

    /* The paper's flow: create, send, flush, release. */
    /* Sends with ucp_ifunc_send_nbx, naming the worker and the remote
     * size, when @a remote_size is known (not 0); else with the paper's
     * ucp_ifunc_send_nbix. */
    ucs_status_t send_one(const ucp_ifunc_msg_t &msg, uint64_t address,
                          size_t remote_size)
    {
        if (remote_size == 0) {
            return ucp_ifunc_send_nbix(ep_->get(), msg, address, rkey_->get());
        }
        ucp_ifunc_send_params_t params = {};
        params.field_mask =
                UCP_IFUNC_SEND_FIELD_WORKER | UCP_IFUNC_SEND_FIELD_REMOTE_SIZE;
        params.worker      = worker_.get();
        params.remote_size = remote_size;
        return ucp_ifunc_send_nbx(ep_->get(), msg, address, rkey_->get(),
                                  &params);
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
        if (!fits(req.offset, frame_size)) {
            status = UCS_ERR_OUT_OF_RANGE;
        } else {
            status = send_one(msg, buffer_ + req.offset, req.slot_size);
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
            size_t size = next_random(&state) % (kStressMaxSize + 1);
            for (size_t i = 0; i < size; i += 8) {
                uint64_t word = next_random(&state);
                std::memcpy(&bytes[i], &word, 8);
            }
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
                status        = send_one(
                               msg, slot,
                        (req.flags & test::kStressSendNbx) ? req.slot_size : 0);
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

    static uint64_t next_random(uint64_t *state)
    {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        return *state * 0x2545f4914f6cdd1dull;
    }

    ucx_util::OobChannel                 oob_;
    ucx_util::Context                    context_;
    ucx_util::Worker                     worker_;
    std::unique_ptr<ucx_util::Endpoint>  ep_;
    std::unique_ptr<ucx_util::RemoteKey> rkey_;
    uint64_t                             buffer_      = 0;
    uint64_t                             buffer_size_ = 0;
    std::vector<ucp_ifunc_h>             handles_;
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
