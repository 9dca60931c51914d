/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The tests. Each moves the same payload with one of these mechanisms:
 *
 *   ifunc (channel): a perf_bump message on a channel
 *          (ucp_ifunc_channel_send_nbx), which the peer drains with
 *          ucp_ifunc_channel_poll; the code travels once, later messages
 *          name it. The ifunc bumps a counter.
 *   ifunc_full: ucp_ifunc_send_nbx (naming the worker and the slot size) of
 *          a perf_bump message, code included, into a slot of the peer's
 *          buffer, which the peer polls with ucp_poll_ifunc.
 *   ifunc_am: ucp_ifunc_am_send_nbx; the message runs inside the peer's
 *          ucp_worker_progress, code sent once.
 *   ifunc_auto: the default path (ucp_ifunc_peer_send_nbx of the payload
 *          from this side's memory, with a completion callback) between an
 *          ifunc worker that listens and one that connected to it by
 *          address; messages run in ucp_ifunc_worker_progress.
 *   ifunc_bigcode: perf_bigcode (over 16 KiB of code) on a channel, code
 *          sent once or (_full) with UCP_IFUNC_SEND_FLAG_WITH_CODE.
 *   am:    ucp_am_send_nbx; the peer's handler bumps a counter (receiving the
 *          data first when UCX uses rendezvous).
 *   put:   a put (ucp_put_nbx) of the payload followed by an 8-byte sequence
 *          number in the same put; the peer polls the sequence number. The
 *          floor of any put-based protocol (it relies on the last word
 *          arriving last, which only holds on some transports).
 *
 * and one of two patterns:
 *
 *   latency: ping-pong, one message in flight, the same mechanism both ways;
 *            one-way time = round trip / 2.
 *   rate:    the client streams messages as fast as flow control allows.
 *            ifunc_full and put write into a ring of slots in the server's
 *            buffer and wait for credits, which the server returns with a
 *            put into the client's buffer; a channel has credits of its own
 *            (a full ring answers UCS_ERR_NO_RESOURCE); AM relies on
 *            UCX's flow control, ifunc_am keeps at most kAmWindow sends in
 *            flight and sends again what the target refused (it lets only
 *            so many rendezvous messages wait), and the default path has
 *            its own window and queue. For those, the same put tells the
 *            client when the warm-up and when all messages were consumed.
 *
 * A channel's ping-pong uses a channel each way. The frame column of a
 * code-once test is the reference frame that follows the first message.
 */
#include "harness.h"
#include "ifunc_handles.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <type_traits>

namespace perftest {

namespace {

constexpr unsigned kAmId = 17;
/* A stream's progress reports where the contexts have no remote memory
 * access (needs_rma()). */
constexpr unsigned kReportAmId   = 18;
constexpr double   kPhaseTimeout = 300;
constexpr double   kSetupTimeout = 60;
constexpr uint64_t kAmWindow     = 512; /* ifunc AM sends in flight */
constexpr size_t   kRingBytes    = 16ul << 20;
constexpr size_t   kSlotAlign    = 64;
/* ucp_ifunc_channel_create takes slots of at least this size. */
constexpr size_t kMinChannelSlotSize = 256;
/* Channel slots of a ping-pong: enough that a source on a put path reads
 * the target's credits once every few messages, not before each one. */
constexpr size_t kMaxLatencyChannelSlots = 16;
/* ... within this many bytes: one message is in flight, and a larger ring
 * would only cycle large payloads through the caches, which the other
 * latency tests (one slot, or UCX's buffers) do not. */
constexpr size_t kLatencyRingBytes = 1ul << 20;
/* Without slot credits, the server reports progress this often. */
constexpr uint64_t kReportEvery = 1024;

static_assert((kIfuncAmId != kAmId) && (kIfuncAmId + 1 != kAmId),
              "the ifunc AM service uses two AM ids of its own");

enum class Kind {
    ifunc_slot,    /* ucp_ifunc_send_nbx into a ring slot, ucp_poll_ifunc */
    ifunc_channel, /* ucp_ifunc_channel_send_nbx, ucp_ifunc_channel_poll */
    ifunc_am,      /* ucp_ifunc_am_send_nbx, runs in ucp_worker_progress */
    ifunc_auto,    /* ucp_ifunc_peer_send_nbx, ucp_ifunc_worker_progress */
    am,
    put
};

struct Mechanism {
    Kind kind;
    bool bigcode   = false; /* perf_bigcode instead of perf_bump */
    bool with_code = false; /* the code in every message of a code-once path */
};

Mechanism mechanism_of(Test test)
{
    switch (test) {
        case Test::ifunc_lat:
        case Test::ifunc_bw:
            return {Kind::ifunc_channel};
        case Test::ifunc_full_lat:
        case Test::ifunc_full_bw:
            return {Kind::ifunc_slot};
        case Test::ifunc_am_lat:
        case Test::ifunc_am_bw:
            return {Kind::ifunc_am};
        case Test::ifunc_bigcode_lat:
            return {Kind::ifunc_channel, true, false};
        case Test::ifunc_bigcode_full_lat:
            return {Kind::ifunc_channel, true, true};
        case Test::ifunc_auto_lat:
        case Test::ifunc_auto_bw:
            return {Kind::ifunc_auto};
        case Test::am_lat:
        case Test::am_bw:
            return {Kind::am};
        default:
            return {Kind::put};
    }
}

/* A stream's server reports progress by active message where the test
 * runs on contexts without remote memory access (needs_rma()). */
bool reports_by_am(Kind kind)
{
    return (kind == Kind::am) || (kind == Kind::ifunc_am) ||
           (kind == Kind::ifunc_auto);
}

/* A progress report: the count in its header, stored into word 0 of the
 * regions as a put would have (counts only grow). */
ucs_status_t report_arrived(void *arg, const void *header, size_t header_length,
                            void *, size_t, const ucp_am_recv_param_t *)
{
    uint64_t count;
    if (header_length == sizeof(count)) {
        std::memcpy(&count, header, sizeof(count));
        static_cast<std::atomic<uint64_t> *>(arg)->store(
                count, std::memory_order_release);
    }
    return UCS_OK;
}

bool is_ifunc(Kind kind)
{
    return (kind == Kind::ifunc_slot) || (kind == Kind::ifunc_channel) ||
           (kind == Kind::ifunc_am) || (kind == Kind::ifunc_auto);
}

size_t align_up(size_t value, size_t align)
{
    return (value + align - 1) / align * align;
}

/* Slots of a streaming ring of @a slot_size bytes. */
size_t ring_slots(size_t slot_size)
{
    return std::clamp<size_t>(kRingBytes / slot_size, 4, 256);
}

using ChannelPtr   = Owned<ucp_ifunc_channel_h, ucp_ifunc_channel_destroy>;
using ChannelEpPtr = Owned<ucp_ifunc_channel_ep_h, ucp_ifunc_channel_close>;
using AmEpPtr      = Owned<ucp_ifunc_am_ep_h, ucp_ifunc_am_ep_destroy>;
using BlobPtr      = Owned<void *, ucp_ifunc_channel_blob_release>;

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

/* Posted sends that complete by themselves (AM and ifunc AM): the request,
 * if any, is released at once and freed by UCX when done. */
ucs_status_t posted_status(ucs_status_ptr_t request)
{
    if (UCS_PTR_IS_PTR(request)) {
        ucp_request_free(request);
        return UCS_INPROGRESS;
    }
    return UCS_PTR_STATUS(request);
}

class Run {
public:
    /* Sets up what needs no word from the other side; connect() does the
     * rest once both sides are known to be ready. */
    Run(Peer &peer, const RunParams &params, bool client)
        : peer_(peer), params_(params), client_(client),
          mechanism_(mechanism_of(params.test)), kind_(mechanism_.kind),
          latency_(test_info(params.test).latency)
    {
        size_t payload = params.payload_size;
        if (is_ifunc(kind_)) {
            ucp_ifunc_h ifunc =
                    mechanism_.bigcode ? peer.bigcode_ifunc() : peer.ifunc();
            ucx_util::check(ucp_ifunc_msg_create(ifunc, &payload,
                                                 sizeof(payload), &msg_),
                            "ucp_ifunc_msg_create");
            bool code_once =
                    (kind_ != Kind::ifunc_slot) && !mechanism_.with_code;
            message_size_ =
                    code_once ? reference_frame_size(msg_) : msg_.frame_size;
            channel_send_params_.field_mask =
                    UCP_IFUNC_CHANNEL_SEND_FIELD_FLAGS;
            channel_send_params_.flags =
                    mechanism_.with_code ? UCP_IFUNC_SEND_FLAG_WITH_CODE : 0;
        }

        switch (kind_) {
            case Kind::ifunc_slot:
                slot_size_              = align_up(message_size_, kSlotAlign);
                slots_                  = latency_ ? 1 : ring_slots(slot_size_);
                send_params_.field_mask = UCP_IFUNC_SEND_FIELD_WORKER |
                                          UCP_IFUNC_SEND_FIELD_REMOTE_SIZE;
                send_params_.worker      = peer.worker().get();
                send_params_.remote_size = slot_size_;
                break;
            case Kind::put:
                message_size_ = align_up(payload, 8) + sizeof(uint64_t);
                slot_size_    = align_up(message_size_, kSlotAlign);
                slots_        = latency_ ? 1 : ring_slots(slot_size_);
                put_source_.assign(slots_ * slot_size_, char(0x5a));
                break;
            case Kind::ifunc_channel:
                /* The first message carries the code, whatever the test. */
                slot_size_ = std::max(kMinChannelSlotSize,
                                      align_up(msg_.frame_size, kSlotAlign));
                slots_     = latency_ ? std::clamp<size_t>(
                                            kLatencyRingBytes / slot_size_, 2,
                                            kMaxLatencyChannelSlots)
                                      : ring_slots(slot_size_);
                if (receives()) {
                    create_channel();
                }
                break;
            case Kind::ifunc_am:
                peer.ifunc_am();
                ifunc_am_base_ = peer.ifunc_am_runs();
                if (sends()) {
                    ucp_ifunc_am_ep_h am_ep;
                    ucx_util::check(ucp_ifunc_am_ep_create(peer.ifunc_am(),
                                                           peer.ep(), &am_ep),
                                    "ucp_ifunc_am_ep_create");
                    am_ep_.reset(am_ep);
                }
                break;
            case Kind::ifunc_auto:
                peer.ifunc_peer(client_);
                auto_base_ = peer.ifunc_auto_runs();
                auto_payload_.assign(payload, 0x5a);
                auto_params_.field_mask = UCP_IFUNC_PEER_SEND_FIELD_CALLBACK |
                                          UCP_IFUNC_PEER_SEND_FIELD_USER_DATA;
                auto_params_.cb = [](void *in_flight, ucs_status_t) {
                    --*static_cast<uint64_t *>(in_flight);
                };
                auto_params_.user_data = &auto_in_flight_;
                break;
            case Kind::am:
                message_size_ = payload;
                am_payload_.assign(payload, 0x5a);
                am_.worker = peer.worker().get();
                am_.rndv_buffer.resize(std::max<size_t>(payload, 1));
                set_am_handler(am_handler);
                break;
        }
    }

    ~Run()
    {
        if (kind_ == Kind::am) {
            set_am_handler(nullptr);
        }
        /* A channel endpoint still open (a run that failed) goes before the
         * message its sends may still read. */
        channel_ep_.reset();
        am_ep_.reset();
        ucp_ifunc_msg_free(msg_);
    }

    /* Exchanges with the other side what the run needs from it: the
     * regions, and the channel of the side that receives. */
    void connect()
    {
        /* Only the slot rings live in the regions; the other mechanisms use
         * them for the server's progress reports. */
        bool   slot_ring  = (kind_ == Kind::ifunc_slot) || (kind_ == Kind::put);
        size_t local_size = (slot_ring && receives()) ? slots_ * slot_size_ : 0;
        regions_          = std::make_unique<Regions>(peer_, local_size);
        if (reports_by_am(kind_) && !receives()) {
            ucp_am_handler_param_t param;
            param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                               UCP_AM_HANDLER_PARAM_FIELD_ARG;
            param.id  = kReportAmId;
            param.cb  = report_arrived;
            param.arg = regions_->local_credits();
            ucx_util::check(ucp_worker_set_am_recv_handler(peer_.worker().get(),
                                                           &param),
                            "ucp_worker_set_am_recv_handler");
        }
        if (kind_ != Kind::ifunc_channel) {
            return;
        }
        if (receives()) {
            void  *blob;
            size_t blob_size;
            ucx_util::check(
                    ucp_ifunc_channel_pack(channel_.get(), &blob, &blob_size),
                    "ucp_ifunc_channel_pack");
            BlobPtr owner(blob);
            peer_.oob().send(blob, blob_size);
        }
        if (sends()) {
            std::vector<char> blob =
                    peer_.oob().recv(ucx_util::deadline_in(kSetupTimeout));
            ucp_ifunc_channel_ep_h channel_ep;
            ucx_util::check(ucp_ifunc_channel_open(peer_.worker().get(),
                                                   peer_.ep(), blob.data(),
                                                   blob.size(), nullptr,
                                                   &channel_ep),
                            "ucp_ifunc_channel_open");
            channel_ep_.reset(channel_ep);
        }
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
        check_code_sent();
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

    /* A ping-pong goes both ways; a stream from the client to the server. */
    bool receives() const { return latency_ || !client_; }
    bool sends() const { return latency_ || client_; }

    const char *name() const { return test_info(params_.test).name; }

    void create_channel()
    {
        ucp_ifunc_channel_params_t params = {};
        params.field_mask                 = UCP_IFUNC_CHANNEL_FIELD_SLOTS |
                            UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE;
        params.slots     = unsigned(slots_);
        params.slot_size = slot_size_;
        ucp_ifunc_channel_h channel;
        ucx_util::check(
                ucp_ifunc_channel_create(peer_.context(), &params, &channel),
                "ucp_ifunc_channel_create");
        channel_.reset(channel);
    }

    void set_am_handler(ucp_am_recv_callback_t callback)
    {
        ucp_am_handler_param_t param = {};
        param.field_mask             = UCP_AM_HANDLER_PARAM_FIELD_ID |
                           UCP_AM_HANDLER_PARAM_FIELD_CB |
                           UCP_AM_HANDLER_PARAM_FIELD_ARG |
                           UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
        param.flags = UCP_AM_FLAG_WHOLE_MSG;
        param.id    = kAmId;
        param.cb    = callback;
        param.arg   = &am_;
        ucx_util::check(
                ucp_worker_set_am_recv_handler(peer_.worker().get(), &param),
                "ucp_worker_set_am_recv_handler");
    }

    template <typename Done>
    void progress_until(Done done)
    {
        /* The clock is read every 1024 spins: reading it on every spin
         * would delay noticing the message. */
        auto deadline = ucx_util::deadline_in(kPhaseTimeout);
        /* One second after the start, without reading the clock again:
         * the fixed cost of a wait is part of every latency measured. */
        auto next_check = deadline - std::chrono::seconds(int(kPhaseTimeout)) +
                          std::chrono::seconds(1);
        for (unsigned spins = 1; !done(); ++spins) {
            progress_once();
            if (spins % 1024) {
                continue;
            }
            auto now = ucx_util::Clock::now();
            if (now > deadline) {
                throw std::runtime_error(
                        std::string(name()) +
                        ": timed out waiting for the other side");
            }
            if (now > next_check) {
                next_check = now + std::chrono::seconds(1);
                if (peer_.other_side_gone()) {
                    throw std::runtime_error(std::string(name()) +
                                             ": the other side quit");
                }
            }
        }
    }

    void progress_once()
    {
        if (kind_ == Kind::ifunc_auto) {
            ucp_ifunc_worker_progress(peer_.ifunc_worker());
        } else {
            peer_.worker().progress();
            if (am_refused_ > 0) {
                resend_refused();
            }
        }
    }

    /* Posts msg_ by active message; am_sent() sends it again if the
     * target refused it for now (UCS_ERR_NO_RESOURCE). */
    ucs_status_t post_ifunc_am()
    {
        ucp_request_param_t param;
        param.op_attr_mask =
                UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        param.cb.send            = am_sent;
        param.user_data          = this;
        ucs_status_ptr_t request = ucp_ifunc_am_send_nbx(
                am_ep_.get(), msg_, &param, &channel_send_params_);
        if (!UCS_PTR_IS_PTR(request)) {
            return UCS_PTR_STATUS(request);
        }
        ++am_in_flight_;
        return UCS_INPROGRESS;
    }

    static void am_sent(void *request, ucs_status_t status, void *user_data)
    {
        auto *run = static_cast<Run *>(user_data);
        ucp_request_free(request);
        --run->am_in_flight_;
        if (status == UCS_ERR_NO_RESOURCE) {
            ++run->am_refused_;
        } else if (status != UCS_OK) {
            run->am_send_error_ = status;
        }
    }

    /* Sends again what the target refused (outside UCX's callback). */
    void resend_refused()
    {
        check_posted(am_send_error_, "ifunc AM send");
        for (; am_refused_ > 0; --am_refused_) {
            check_posted(post_ifunc_am(), "ifunc AM send");
        }
    }

    ucs_status_t send_auto()
    {
        ucs_status_t status = ucp_ifunc_peer_send_nbx(
                peer_.ifunc_peer(client_), peer_.ifunc(), auto_payload_.data(),
                auto_payload_.size(), &auto_params_);
        auto_in_flight_ += (status == UCS_INPROGRESS);
        return status;
    }

    /* Sends message @a i (into slot i % slots_ of the other side, for the
     * slot rings). */
    void send(uint64_t i)
    {
        size_t       slot = (i % std::max<size_t>(slots_, 1)) * slot_size_;
        ucs_status_t status;
        switch (kind_) {
            case Kind::ifunc_slot:
                status = ucp_ifunc_send_nbx(peer_.ep(), msg_,
                                            regions_->remote_slot(slot),
                                            regions_->rkey(), &send_params_);
                break;
            case Kind::ifunc_channel:
                status = ucp_ifunc_channel_send_nbx(channel_ep_.get(), msg_,
                                                    &channel_send_params_);
                if (status == UCS_ERR_NO_RESOURCE) {
                    /* A full ring: the channel has asked for credits; they
                     * come with progress. (Not the first try: the wait's
                     * clock reads would cost every message.) */
                    progress_until([&]() {
                        status = ucp_ifunc_channel_send_nbx(
                                channel_ep_.get(), msg_, &channel_send_params_);
                        return status != UCS_ERR_NO_RESOURCE;
                    });
                }
                break;
            case Kind::ifunc_auto:
                status = send_auto();
                if (status == UCS_ERR_NO_RESOURCE) {
                    /* Its queue is full: progress sends what waits. */
                    progress_until([&]() {
                        status = send_auto();
                        return status != UCS_ERR_NO_RESOURCE;
                    });
                }
                break;
            case Kind::ifunc_am:
                /* At most kAmWindow in flight: a target lets only so many
                 * rendezvous messages wait, and refuses more. */
                progress_until([&]() { return am_in_flight_ < kAmWindow; });
                status = post_ifunc_am();
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
                status                    = posted_status(ucp_am_send_nbx(
                                           peer_.ep(), kAmId, nullptr, 0, am_payload_.data(),
                                           am_payload_.size(), &param));
            }
        }
        check_posted(status, "send");
    }

    /* An operation was posted: UCS_OK or UCS_INPROGRESS. */
    /* Sends credit_ as a progress report (reports_by_am()); UCX copies
     * the 8-byte header before the call returns or the request ends, and
     * a newer count is as valid as the one it reads. */
    void report_by_am()
    {
        ucp_request_param_t param;
        param.op_attr_mask = 0;
        ucs_status_ptr_t request =
                ucp_am_send_nbx(peer_.ep(), kReportAmId, &credit_,
                                sizeof(credit_), nullptr, 0, &param);
        if (UCS_PTR_IS_PTR(request)) {
            ucp_request_free(request);
        } else {
            check_posted(UCS_PTR_STATUS(request), "progress report");
        }
    }

    void check_posted(ucs_status_t status, const char *what) const
    {
        if (UCS_STATUS_IS_ERR(status)) {
            throw std::runtime_error(std::string(name()) + ": " + what +
                                     " failed: " + ucs_status_string(status));
        }
    }

    /* Whether message @a i has arrived here (and, for ifunc, ran). */
    bool arrived(uint64_t i)
    {
        size_t slot = (i % std::max<size_t>(slots_, 1)) * slot_size_;
        switch (kind_) {
            case Kind::ifunc_slot: {
                ucs_status_t status = ucp_poll_ifunc(peer_.context(),
                                                     regions_->local_slot(slot),
                                                     slot_size_, &ifunc_runs_);
                if ((status != UCS_OK) && (status != UCS_ERR_NO_MESSAGE)) {
                    throw std::runtime_error(std::string("ucp_poll_ifunc: ") +
                                             ucs_status_string(status));
                }
                return status == UCS_OK;
            }
            case Kind::ifunc_channel: {
                /* One poll may run several messages of a stream. */
                if (ifunc_runs_ > i) {
                    return true;
                }
                ucs_status_t status = ucp_ifunc_channel_poll(
                        channel_.get(), latency_ ? 1 : unsigned(slots_),
                        &ifunc_runs_, nullptr);
                if (status != UCS_OK) {
                    throw std::runtime_error(
                            std::string("ucp_ifunc_channel_poll: ") +
                            ucs_status_string(status));
                }
                return ifunc_runs_ > i;
            }
            case Kind::ifunc_am:
                /* Messages run in the progress of progress_until(). */
                return peer_.ifunc_am_runs() - ifunc_am_base_ > i;
            case Kind::ifunc_auto:
                return peer_.ifunc_auto_runs() - auto_base_ > i;
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
     * any mechanism) to the report of the last one. */
    double stream_as_source()
    {
        bool slot_credits = (kind_ == Kind::ifunc_slot) || (kind_ == Kind::put);
        ucx_util::Clock::time_point start = ucx_util::Clock::now();
        for (uint64_t i = 0; i < total(); ++i) {
            if (i == params_.warmup) {
                progress_until([&]() { return regions_->credits() >= i; });
                start = ucx_util::Clock::now();
            }
            if (slot_credits) {
                progress_until(
                        [&]() { return i - regions_->credits() < slots_; });
            }
            send(i);
            progress_once();
        }
        progress_until([&]() { return regions_->credits() >= total(); });
        return std::chrono::duration<double>(ucx_util::Clock::now() - start)
                .count();
    }

    void stream_as_target()
    {
        bool slot_credits = (kind_ == Kind::ifunc_slot) || (kind_ == Kind::put);
        uint64_t every =
                slot_credits ? std::max<size_t>(slots_ / 4, 1) : kReportEvery;
        uint64_t consumed = 0;
        while (consumed < total()) {
            progress_until([&]() { return arrived(consumed); });
            ++consumed;
            if ((consumed % every == 0) || (consumed == params_.warmup) ||
                (consumed == total())) {
                /* Credits only grow, so a put still reading credit_ when
                 * it changes sends a newer, equally valid count. */
                credit_ = consumed;
                if (reports_by_am(kind_)) {
                    report_by_am();
                    continue;
                }
                check_posted(ucx_util::put_posted(peer_.ep(), &credit_,
                                                  sizeof(credit_),
                                                  regions_->remote_credits(),
                                                  regions_->rkey()),
                             "credit put");
            }
        }
    }

    /* The code-once tests measure messages that name their code, the others
     * messages that carry it: say so if the library sent otherwise. */
    void check_code_sent()
    {
        ucp_ifunc_ep_attr_t attr = {};
        attr.field_mask          = UCP_IFUNC_EP_ATTR_FIELD_SENT_WITH_CODE |
                          UCP_IFUNC_EP_ATTR_FIELD_SENT_BY_REF;
        ucs_status_t status;
        if (kind_ == Kind::ifunc_auto) {
            ucp_ifunc_peer_attr_t peer_attr = {};
            peer_attr.field_mask = UCP_IFUNC_PEER_ATTR_FIELD_SENT_WITH_CODE |
                                   UCP_IFUNC_PEER_ATTR_FIELD_SENT_BY_REF;
            ucx_util::check(
                    ucp_ifunc_peer_query(peer_.ifunc_peer(client_), &peer_attr),
                    "ucp_ifunc_peer_query");
            attr.sent_with_code = peer_attr.sent_with_code - auto_with_code_;
            attr.sent_by_ref    = peer_attr.sent_by_ref - auto_by_ref_;
            auto_with_code_     = peer_attr.sent_with_code;
            auto_by_ref_        = peer_attr.sent_by_ref;
            status              = UCS_OK;
        } else if (channel_ep_) {
            status = ucp_ifunc_channel_ep_query(channel_ep_.get(), &attr);
        } else if (am_ep_) {
            status = ucp_ifunc_am_ep_query(am_ep_.get(), &attr);
        } else {
            return;
        }
        ucx_util::check(status, "ucp_ifunc_*_ep_query");
        uint64_t unexpected =
                mechanism_.with_code ? attr.sent_by_ref : attr.sent_with_code;
        uint64_t allowed = mechanism_.with_code ? 0 : params_.warmup;
        if (unexpected > allowed) {
            std::fprintf(stderr,
                         "ucx_ifunc_perftest: warning: %s, %zu B: %llu of "
                         "%llu messages were sent %s\n",
                         name(), size_t(params_.payload_size),
                         static_cast<unsigned long long>(unexpected),
                         static_cast<unsigned long long>(attr.sent_with_code +
                                                         attr.sent_by_ref),
                         mechanism_.with_code ? "without their code"
                                              : "with their code");
        }
    }

    /* Both sides: everything delivered, and the channel endpoints closed
     * (a credit read may still be on its way to the other side's ring),
     * before either releases memory. */
    void finish()
    {
        progress_until([&]() {
            return (auto_in_flight_ == 0) && (am_in_flight_ == 0) &&
                   (am_refused_ == 0);
        });
        peer_.flush();
        channel_ep_.reset();
        am_ep_.reset();
        peer_.barrier();
    }

    Peer     &peer_;
    RunParams params_;
    bool      client_;
    Mechanism mechanism_;
    Kind      kind_;
    bool      latency_;
    size_t    message_size_ = 0; /* bytes per message on the wire */
    size_t    slot_size_    = 0;
    size_t    slots_        = 0;
    /* ifunc_slot sends name the worker (fence instead of flush where UCX
     * keeps the fence's promise) and the slot size. */
    ucp_ifunc_send_params_t         send_params_         = {};
    ucp_ifunc_channel_send_params_t channel_send_params_ = {};
    ucp_ifunc_msg_t                 msg_                 = {};
    /* Messages the ifunc ran here (its NAME_main bumps it), except on the
     * AM path, whose counter the peer keeps. */
    uint64_t                     ifunc_runs_     = 0;
    uint64_t                     ifunc_am_base_  = 0;
    uint64_t                     auto_base_      = 0;
    uint64_t                     auto_in_flight_ = 0;
    uint64_t                     am_in_flight_   = 0; /* ifunc AM sends */
    uint64_t                     am_refused_     = 0; /* to send again */
    ucs_status_t                 am_send_error_  = UCS_OK;
    ucp_ifunc_peer_send_params_t auto_params_    = {};
    std::vector<char>            auto_payload_;
    /* The peer's counts at the end of the last run of this kind. */
    static inline uint64_t   auto_with_code_ = 0;
    static inline uint64_t   auto_by_ref_    = 0;
    ChannelPtr               channel_;    /* this side's, when it receives */
    ChannelEpPtr             channel_ep_; /* the other side's, when it sends */
    AmEpPtr                  am_ep_;
    AmState                  am_;
    std::vector<char>        am_payload_;
    std::vector<char>        put_source_;
    uint64_t                 credit_ = 0;
    std::unique_ptr<Regions> regions_;
};

/* What each side says once it has set its part of a run up: an empty
 * message when it is ready. */
struct SetupReport {
    char error[240];
};

/* Sets a run up on this side, learns whether the other side could too,
 * and connects the two. Throws SetupError if either side failed. */
std::unique_ptr<Run> set_up(Peer &peer, const RunParams &params, bool client)
{
    std::unique_ptr<Run> run;
    SetupReport          mine = {};
    try {
        run = std::make_unique<Run>(peer, params, client);
    } catch (const std::exception &e) {
        std::snprintf(mine.error, sizeof(mine.error), "%s", e.what());
    }
    oob_send(peer.oob(), mine);
    auto theirs                            = oob_recv<SetupReport>(peer.oob(),
                                        ucx_util::deadline_in(kSetupTimeout));
    theirs.error[sizeof(theirs.error) - 1] = '\0';

    std::string what = std::string(test_info(params.test).name) + ", " +
                       std::to_string(params.payload_size) + " B: ";
    if (mine.error[0] != '\0') {
        throw SetupError(what + mine.error);
    }
    if (theirs.error[0] != '\0') {
        throw SetupError(what + (client ? "the server: " : "the client: ") +
                         theirs.error);
    }
    run->connect();
    return run;
}

} // namespace

Result run_client(Peer &peer, const RunParams &params)
{
    return set_up(peer, params, true)->measure();
}

void run_server(Peer &peer, const RunParams &params)
{
    if (static_cast<size_t>(params.test) >= std::size(kTests)) {
        throw std::runtime_error("the client asked for an unknown test (is it "
                                 "the same version?)");
    }
    set_up(peer, params, false)->serve();
}

} // namespace perftest
