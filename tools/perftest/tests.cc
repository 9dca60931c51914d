/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The six tests. Each moves the same payload with one of three mechanisms:
 *
 *   ifunc: ucp_ifunc_send_nbx (naming the worker and the slot size) of a
 *          perf_bump message into a slot of the
 *          peer's buffer, which the peer polls with ucp_poll_ifunc; the
 *          ifunc bumps a counter.
 *   am:    ucp_am_send_nbx; the peer's handler bumps a counter (receiving the
 *          data first when UCX uses rendezvous).
 *   put:   a put (ucp_put_nbx) of the payload followed by an 8-byte sequence number
 *          in the same put; the peer polls the sequence number. The floor of
 *          any put-based protocol (it relies on the last word arriving
 *          last, which only holds on some transports).
 *
 * and one of two patterns:
 *
 *   latency: ping-pong, one message in flight; one-way time = round trip / 2.
 *   rate:    the client streams messages as fast as flow control allows.
 *            ifunc and put write into a ring of slots in the server's buffer
 *            and wait for credits, which the server returns with a put into
 *            the client's buffer; AM relies on UCX's own flow control and the
 *            server reports only when all messages have arrived.
 */
#include "harness.h"

#include <algorithm>
#include <chrono>
#include <numeric>

namespace perftest {

namespace {

constexpr unsigned kAmId         = 17;
constexpr double   kPhaseTimeout = 300;
constexpr size_t   kRingBytes    = 16ul << 20;
constexpr size_t   kSlotAlign    = 64;

enum class Kind { ifunc, am, put };

Kind kind_of(Test test)
{
    switch (test) {
        case Test::ifunc_lat:
        case Test::ifunc_bw:
            return Kind::ifunc;
        case Test::am_lat:
        case Test::am_bw:
            return Kind::am;
        default:
            return Kind::put;
    }
}

size_t align_up(size_t value, size_t align)
{
    return (value + align - 1) / align * align;
}

struct AmState {
    ucp_worker_h      worker   = nullptr;
    uint64_t          received = 0;
    ucs_status_t      error    = UCS_OK; /* of a rendezvous receive */
    std::vector<char> rndv_buffer;
};

void am_rndv_done(void *request, ucs_status_t status, size_t, void *user_data)
{
    auto *state = static_cast<AmState *>(user_data);
    if (status == UCS_OK) {
        ++state->received;
    } else {
        state->error = status;
    }
    ucp_request_free(request);
}

ucs_status_t am_handler(void *arg, const void *, size_t, void *data,
                        size_t length, const ucp_am_recv_param_t *param)
{
    auto *state = static_cast<AmState *>(arg);
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        ++state->received; /* eager: the data is here, in place */
        return UCS_OK;
    }
    /* Rendezvous: fetch the data, count the message when it is in. */
    ucp_request_param_t recv = {};
    recv.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    recv.cb.recv_am = am_rndv_done;
    recv.user_data  = state;
    void *request   = ucp_am_recv_data_nbx(
              state->worker, data, state->rndv_buffer.data(), length, &recv);
    if (request == nullptr) {
        ++state->received;
    } else if (UCS_PTR_IS_ERR(request)) {
        state->error = UCS_PTR_STATUS(request);
    }
    return UCS_OK;
}

class Run {
public:
    Run(Peer &peer, const RunParams &params, bool client)
        : peer_(peer), params_(params), client_(client),
          kind_(kind_of(params.test)), latency_(test_info(params.test).latency)
    {
        size_t payload = params.payload_size;
        switch (kind_) {
            case Kind::ifunc:
                ucx_util::check(ucp_ifunc_msg_create(peer.ifunc(), &payload,
                                                     sizeof(payload), &msg_),
                                "ucp_ifunc_msg_create");
                message_size_ = msg_.frame_size;
                break;
            case Kind::put:
                message_size_ = align_up(payload, 8) + sizeof(uint64_t);
                break;
            case Kind::am:
                message_size_ = payload;
                am_payload_.assign(payload, 0x5a);
                am_.worker = peer.worker().get();
                am_.rndv_buffer.resize(std::max<size_t>(payload, 1));
                set_am_handler(am_handler);
                break;
        }

        if (kind_ != Kind::am) {
            slot_size_              = align_up(message_size_, kSlotAlign);
            send_params_.field_mask = UCP_IFUNC_SEND_FIELD_WORKER |
                                      UCP_IFUNC_SEND_FIELD_REMOTE_SIZE;
            send_params_.worker      = peer.worker().get();
            send_params_.remote_size = slot_size_;
            slots_                   = latency_ ? 1
                                                : std::clamp<size_t>(kRingBytes / slot_size_, 4,
                                                   256);
        }
        if (kind_ == Kind::put) {
            put_source_.assign(slots_ * slot_size_, char(0x5a));
        }
        /* The receiving side of a stream holds the ring; both sides of a
         * ping-pong receive into one slot. */
        bool   receives   = latency_ || !client_;
        size_t local_size = receives ? slots_ * slot_size_ : 0;
        regions_          = std::make_unique<Regions>(peer_, local_size);
    }

    ~Run()
    {
        if (kind_ == Kind::am) {
            set_am_handler(nullptr);
        }
        ucp_ifunc_msg_free(msg_);
    }

    Result measure()
    {
        Result result{};
        result.test         = params_.test;
        result.payload_size = params_.payload_size;
        result.frame_size   = message_size_;
        result.iterations   = params_.iterations;
        if (latency_) {
            std::vector<double> one_way = ping_pong();
            one_way.erase(one_way.begin(), one_way.begin() + params_.warmup);
            result.lat_avg_us =
                    std::accumulate(one_way.begin(), one_way.end(), 0.0) /
                    one_way.size();
            std::nth_element(one_way.begin(),
                             one_way.begin() + one_way.size() / 2,
                             one_way.end());
            result.lat_median_us = one_way[one_way.size() / 2];
        } else {
            double seconds  = stream_as_source();
            result.msg_rate = params_.iterations / seconds;
            result.bandwidth_MBps =
                    result.msg_rate * params_.payload_size / 1e6;
        }
        finish();
        return result;
    }

    void serve()
    {
        if (latency_) {
            ping_pong();
        } else {
            stream_as_target();
        }
        finish();
    }

private:
    uint64_t total() const { return params_.warmup + params_.iterations; }

    void set_am_handler(ucp_am_recv_callback_t callback)
    {
        ucp_am_handler_param_t param = {};
        param.field_mask             = UCP_AM_HANDLER_PARAM_FIELD_ID |
                           UCP_AM_HANDLER_PARAM_FIELD_CB |
                           UCP_AM_HANDLER_PARAM_FIELD_ARG;
        param.id  = kAmId;
        param.cb  = callback;
        param.arg = &am_;
        ucx_util::check(
                ucp_worker_set_am_recv_handler(peer_.worker().get(), &param),
                "ucp_worker_set_am_recv_handler");
    }

    template <typename Done>
    void progress_until(Done done)
    {
        /* The deadline is checked every 1024 spins: reading the clock on
         * every spin would delay noticing the message. */
        auto deadline = ucx_util::deadline_in(kPhaseTimeout);
        for (unsigned spins = 1; !done(); ++spins) {
            peer_.worker().progress();
            if (!(spins % 1024) && (ucx_util::Clock::now() > deadline)) {
                throw std::runtime_error(
                        std::string(test_info(params_.test).name) +
                        ": timed out waiting for the other "
                        "side");
            }
        }
    }

    /* Sends message @a i into slot i % slots_ of the other side. */
    void send(uint64_t i)
    {
        size_t       slot = (i % std::max<size_t>(slots_, 1)) * slot_size_;
        ucs_status_t status;
        switch (kind_) {
            case Kind::ifunc:
                status = ucp_ifunc_send_nbx(peer_.ep(), msg_,
                                            regions_->remote_slot(slot),
                                            regions_->rkey(), &send_params_);
                break;
            case Kind::put: {
                char    *source = put_source_.data() + slot;
                uint64_t seq    = i + 1;
                std::memcpy(source + message_size_ - sizeof(seq), &seq,
                            sizeof(seq));
                status = ucx_util::put_posted(peer_.ep(), source, message_size_,
                                              regions_->remote_slot(slot),
                                              regions_->rkey());
                break;
            }
            default: {
                ucp_request_param_t param = {};
                void *request = ucp_am_send_nbx(peer_.ep(), kAmId, nullptr, 0,
                                                am_payload_.data(),
                                                am_payload_.size(), &param);
                status = UCS_PTR_IS_ERR(request) ? UCS_PTR_STATUS(request)
                                                 : UCS_OK;
                if (UCS_PTR_IS_PTR(request)) {
                    ucp_request_free(request); /* released when complete */
                }
            }
        }
        check_posted(status, "send");
    }

    /* An operation was posted: UCS_OK or UCS_INPROGRESS. */
    void check_posted(ucs_status_t status, const char *what) const
    {
        if (UCS_STATUS_IS_ERR(status)) {
            throw std::runtime_error(std::string(test_info(params_.test).name) +
                                     ": " + what +
                                     " failed: " + ucs_status_string(status));
        }
    }

    /* Whether message @a i has arrived here (and, for ifunc, ran). */
    bool arrived(uint64_t i)
    {
        size_t slot = (i % std::max<size_t>(slots_, 1)) * slot_size_;
        switch (kind_) {
            case Kind::ifunc: {
                ucs_status_t status = ucp_poll_ifunc(
                        peer_.context(), regions_->local_slot(slot), slot_size_,
                        &ifunc_counter_);
                if ((status != UCS_OK) && (status != UCS_ERR_NO_MESSAGE)) {
                    throw std::runtime_error(std::string("ucp_poll_ifunc: ") +
                                             ucs_status_string(status));
                }
                return status == UCS_OK;
            }
            case Kind::put: {
                auto *seq = reinterpret_cast<std::atomic<uint64_t> *>(
                        regions_->local_slot(slot) + message_size_ - 8);
                return seq->load(std::memory_order_acquire) == i + 1;
            }
            default:
                check_posted(am_.error, "rendezvous receive");
                return am_.received > i;
        }
    }

    /* Returns one-way times in microseconds (client), or echoes (server). */
    std::vector<double> ping_pong()
    {
        std::vector<double> one_way;
        one_way.reserve(total());
        for (uint64_t i = 0; i < total(); ++i) {
            if (client_) {
                auto start = ucx_util::Clock::now();
                send(i);
                progress_until([&]() { return arrived(i); });
                std::chrono::duration<double, std::micro> rtt =
                        ucx_util::Clock::now() - start;
                one_way.push_back(rtt.count() / 2);
            } else {
                progress_until([&]() { return arrived(i); });
                send(i);
            }
        }
        return one_way;
    }

    /* Returns the seconds the measured messages took: from the moment every
     * warm-up message was consumed (nothing of the warm-up left queued, in
     * any mechanism) to the credit for the last one. */
    double stream_as_source()
    {
        ucx_util::Clock::time_point start = ucx_util::Clock::now();
        for (uint64_t i = 0; i < total(); ++i) {
            if (i == params_.warmup) {
                progress_until([&]() { return regions_->credits() >= i; });
                start = ucx_util::Clock::now();
            }
            if (kind_ != Kind::am) {
                progress_until(
                        [&]() { return i - regions_->credits() < slots_; });
            }
            send(i);
            peer_.worker().progress();
        }
        progress_until([&]() { return regions_->credits() >= total(); });
        return std::chrono::duration<double>(ucx_util::Clock::now() - start)
                .count();
    }

    void stream_as_target()
    {
        uint64_t every =
                (kind_ == Kind::am) ? 1024 : std::max<size_t>(slots_ / 4, 1);
        uint64_t consumed = 0;
        while (consumed < total()) {
            progress_until([&]() { return arrived(consumed); });
            ++consumed;
            if ((consumed % every == 0) || (consumed == params_.warmup) ||
                (consumed == total())) {
                /* Credits only grow, so a put still reading credit_ when
                 * it changes sends a newer, equally valid count. */
                credit_ = consumed;
                check_posted(ucx_util::put_posted(peer_.ep(), &credit_,
                                                  sizeof(credit_),
                                                  regions_->remote_credits(),
                                                  regions_->rkey()),
                             "credit put");
            }
        }
    }

    /* Both sides: everything delivered before either releases memory. */
    void finish()
    {
        peer_.flush();
        peer_.barrier();
    }

    Peer     &peer_;
    RunParams params_;
    bool      client_;
    Kind      kind_;
    bool      latency_;
    size_t    message_size_ = 0; /* bytes per message on the wire */
    size_t    slot_size_    = 0;
    /* ifunc sends name the worker (fence instead of flush where UCX keeps
     * the fence's promise) and the slot size. */
    ucp_ifunc_send_params_t  send_params_   = {};
    size_t                   slots_         = 0;
    ucp_ifunc_msg_t          msg_           = {};
    uint64_t                 ifunc_counter_ = 0;
    AmState                  am_;
    std::vector<char>        am_payload_;
    std::vector<char>        put_source_;
    uint64_t                 credit_ = 0;
    std::unique_ptr<Regions> regions_;
};

} // namespace

Result run_client(Peer &peer, const RunParams &params)
{
    Run run(peer, params, true);
    return run.measure();
}

void run_server(Peer &peer, const RunParams &params)
{
    if (static_cast<size_t>(params.test) >= std::size(kTests)) {
        throw std::runtime_error("the client asked for an unknown test (is it "
                                 "the same version?)");
    }
    Run run(peer, params, false);
    run.serve();
}

} // namespace perftest
