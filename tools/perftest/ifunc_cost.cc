/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * ifunc_cost: what sending and running an ifunc costs on one core, with no
 * second process and no cache lines moving between cores: the software
 * part of the latency that ucx_ifunc_perftest measures. The frame goes to a
 * buffer of this process through an endpoint to its own worker, so it takes
 * the same path as to a peer on this host (ucp_rkey_ptr, direct stores).
 *
 * Two tables: a message into a buffer (ucp_ifunc_msg_create + free on its
 * own; ucp_ifunc_send_nbx, code in every message, ucp_poll_ifunc), then the same message on a channel
 * (ucp_ifunc_channel_send_nbx, ucp_ifunc_channel_poll), which sends the
 * code once and then a reference frame, next to the channel with
 * UCP_IFUNC_SEND_FLAG_WITH_CODE (the full frame every time); then the
 * default path (ucp_ifunc_peer_send_nbx of a payload from this process's
 * memory, run by ucp_ifunc_worker_progress; a peer connected on the
 * endpoint to this worker: by channel, and forced onto active messages)
 * next to a UCP active message and its handler on the same endpoint, and
 * what UCP_AM_SEND_FLAG_REPLY (on every default-path active message) adds
 * to one with a reference's 8-byte header.
 * Last, where DIR holds perf_bump_sandbox.so (perf_bump built with
 * ucx-ifunc-cc --sandbox), an 8-byte message of perf_bump and of
 * perf_bump_sandbox on each path, run natively and in the sandbox
 * (UCX_IFUNC_TRUST defaults to library,sandboxed here), both counting into
 * memory granted to the sandboxed code; rounds of each in turn, the least
 * of each printed.
 *
 *     ifunc_cost [-L DIR] [-i NAME] [SIZE ...]
 *         NAME: the ifunc (default perf_bump; perf_bigcode has >16 KiB of
 *         code); default sizes: 8 2048 8192
 */
#include "../common/ucx.h"
#include "ifunc_handles.h"

#include <ucp/api/ucp_ifunc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using perftest::Owned;
using perftest::reference_frame_size;

constexpr int    kIterations = 1000000;
constexpr size_t kBufferSize = 1ul << 20;
/* The payload of the native against sandboxed rows. */
constexpr size_t kSandboxPayload = 8;
constexpr char   kSandboxIfunc[] = "perf_bump_sandbox";
constexpr int    kSandboxRounds  = 3;
/* Sends timed together when sending alone; the channel has as many slots,
 * so that one batch fills its ring. */
constexpr size_t   kSendBatch    = 64;
constexpr unsigned kChannelSlots = kSendBatch;
constexpr size_t   kMinSlotSize  = 256;

template <typename Body>
double ns_per_call(Body body)
{
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kIterations; ++i) {
        body();
    }
    std::chrono::duration<double, std::nano> elapsed =
            std::chrono::steady_clock::now() - start;
    return elapsed.count() / kIterations;
}

/* Sending alone, where each send needs a free slot: batches of @a batch
 * sends (send(k) into the k-th slot) are timed, and drain() empties the
 * slots between batches, untimed. */
template <typename Send, typename Drain>
double ns_per_send(size_t batch, Send send, Drain drain)
{
    size_t batches = (kIterations + batch - 1) / batch;
    std::chrono::duration<double, std::nano> sending{0};
    for (size_t b = 0; b < batches; ++b) {
        auto start = std::chrono::steady_clock::now();
        for (size_t k = 0; k < batch; ++k) {
            send(k);
        }
        sending += std::chrono::steady_clock::now() - start;
        drain();
    }
    return sending.count() / double(batches * batch);
}

struct ChannelCost {
    double send_ns;     /* code once: a reference frame */
    double send_run_ns; /* the same, and ucp_ifunc_channel_poll running it */
    double full_run_ns; /* send and run with UCP_IFUNC_SEND_FLAG_WITH_CODE */
    double empty_poll_ns;
};

/* The channel path for @a msg: a channel of this context, opened through
 * @a ep, an endpoint to this process's own worker. */
ChannelCost measure_channel(ucp_context_h context, ucx_util::Worker &worker,
                            ucp_ep_h ep, const ucp_ifunc_msg_t &msg,
                            uint64_t *counter)
{
    using ChannelPtr   = Owned<ucp_ifunc_channel_h, ucp_ifunc_channel_destroy>;
    using ChannelEpPtr = Owned<ucp_ifunc_channel_ep_h, ucp_ifunc_channel_close>;
    using BlobPtr      = Owned<void *, ucp_ifunc_channel_blob_release>;

    ucp_ifunc_channel_params_t params = {};
    params.field_mask =
            UCP_IFUNC_CHANNEL_FIELD_SLOTS | UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE;
    params.slots     = kChannelSlots;
    params.slot_size = std::max(kMinSlotSize, (msg.frame_size + 63) / 64 * 64);
    ucp_ifunc_channel_h channel_handle;
    ucx_util::check(ucp_ifunc_channel_create(context, &params, &channel_handle),
                    "ucp_ifunc_channel_create");
    ChannelPtr channel(channel_handle);

    void  *blob_data;
    size_t blob_size;
    ucx_util::check(
            ucp_ifunc_channel_pack(channel.get(), &blob_data, &blob_size),
            "ucp_ifunc_channel_pack");
    BlobPtr                blob(blob_data);
    ucp_ifunc_channel_ep_h channel_ep_handle;
    ucx_util::check(ucp_ifunc_channel_open(worker.get(), ep, blob.get(),
                                           blob_size, nullptr,
                                           &channel_ep_handle),
                    "ucp_ifunc_channel_open");
    ChannelEpPtr channel_ep(channel_ep_handle);

    ucp_ifunc_channel_send_params_t once = {}, full = {};
    full.field_mask = UCP_IFUNC_CHANNEL_SEND_FIELD_FLAGS;
    full.flags      = UCP_IFUNC_SEND_FLAG_WITH_CODE;
    auto send       = [&](const ucp_ifunc_channel_send_params_t &send_params) {
        /* A full ring only happens when credits travel by put (not over
         * shared memory): they come with progress. */
        ucs_status_t status;
        while ((status = ucp_ifunc_channel_send_nbx(channel_ep.get(), msg,
                                                          &send_params)) ==
               UCS_ERR_NO_RESOURCE) {
            worker.progress();
        }
        if (UCS_STATUS_IS_ERR(status)) {
            ucx_util::check(status, "ucp_ifunc_channel_send_nbx");
        }
    };
    auto poll = [&]() {
        unsigned count;
        ucx_util::check(ucp_ifunc_channel_poll(channel.get(), kChannelSlots,
                                               counter, &count),
                        "ucp_ifunc_channel_poll");
        return count;
    };

    /* The code travels with the first message; once it ran, the channel
     * sends references. */
    send(once);
    while (poll() == 0) {
        worker.progress();
    }

    ChannelCost cost;
    cost.send_ns = ns_per_send(
            kChannelSlots, [&](size_t) { send(once); },
            [&]() {
                for (unsigned drained = 0; drained < kChannelSlots;) {
                    worker.progress();
                    drained += poll();
                }
            });
    cost.send_run_ns   = ns_per_call([&]() {
        send(once);
        poll();
    });
    cost.full_run_ns   = ns_per_call([&]() {
        send(full);
        poll();
    });
    cost.empty_poll_ns = ns_per_call(poll);

    ucp_ifunc_ep_attr_t attr = {};
    attr.field_mask          = UCP_IFUNC_EP_ATTR_FIELD_SENT_BY_REF;
    ucx_util::check(ucp_ifunc_channel_ep_query(channel_ep.get(), &attr),
                    "ucp_ifunc_channel_ep_query");
    if (attr.sent_by_ref == 0) {
        throw std::runtime_error("the channel sent no message by reference");
    }
    return cost;
}

/* What the UCP active message handler below needs. */
struct BumpTarget {
    ucp_worker_h      worker;
    uint64_t          handled = 0;
    std::vector<char> buffer; /* where a rendezvous payload is received */
};

void bump_received(void *request, ucs_status_t status, size_t, void *arg)
{
    ucx_util::check(status, "ucp_am_recv_data_nbx");
    ucp_request_free(request);
    ++static_cast<BumpTarget *>(arg)->handled;
}

/* A UCP active message handler that does what perf_bump does, once the
 * payload is here: a rendezvous one is received first (as the ifunc
 * paths do; a handler that ignores it never moves the data). */
ucs_status_t bump_handler(void *arg, const void *, size_t, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    auto &target = *static_cast<BumpTarget *>(arg);
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        ++target.handled;
        return UCS_OK;
    }
    target.buffer.resize(length);
    ucp_request_param_t recv = {};
    recv.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    recv.cb.recv_am          = bump_received;
    recv.user_data           = &target;
    ucs_status_ptr_t request = ucp_am_recv_data_nbx(
            target.worker, data, target.buffer.data(), length, &recv);
    if (UCS_PTR_IS_ERR(request)) {
        ucx_util::check(UCS_PTR_STATUS(request), "ucp_am_recv_data_nbx");
    } else if (request == nullptr) {
        ++target.handled;
    }
    return UCS_OK;
}

struct DefaultPathCost {
    double channel_ns; /* send + run, the path chosen (a channel here) */
    double am_path_ns; /* send + run, UCP_IFUNC_PATH_AM */
    double ucp_am_ns;  /* ucp_am_send_nbx + the handler */
    /* The same with the 8-byte header of a reference, without and with
     * UCP_AM_SEND_FLAG_REPLY (which every default-path active message
     * carries): the least of kReplyRounds rounds each, in turn. */
    double header_ns;
    double reply_ns;
};

constexpr int kReplyRounds = 3;

/* Send + run of @a size bytes on the default path, through a peer on
 * @a ep with @a path, by an ifunc worker on AM id @a am_id. */
double measure_peer(ucp_context_h context, ucx_util::Worker &worker,
                    ucp_ep_h ep, ucp_ifunc_h ifunc, ucp_ifunc_path_t path,
                    unsigned am_id, const std::vector<char> &payload,
                    uint64_t *runs_p)
{
    using IworkerPtr = Owned<ucp_ifunc_worker_h, ucp_ifunc_worker_destroy>;
    volatile uint64_t        &runs   = *runs_p; /* target_args */
    ucp_ifunc_worker_params_t params = {};
    params.field_mask                = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS |
                        UCP_IFUNC_WORKER_FIELD_AM_ID |
                        UCP_IFUNC_WORKER_FIELD_PATH;
    params.target_args = runs_p;
    params.am_id       = am_id;
    params.path        = path;
    ucp_ifunc_worker_h iworker_handle;
    ucx_util::check(ucp_ifunc_worker_create(context, worker.get(), &params,
                                            &iworker_handle),
                    "ucp_ifunc_worker_create");
    IworkerPtr              iworker(iworker_handle);
    ucp_ifunc_peer_params_t peer_params = {};
    peer_params.field_mask              = UCP_IFUNC_PEER_FIELD_EP;
    peer_params.ep                      = ep;
    ucp_ifunc_peer_h peer;
    ucx_util::check(ucp_ifunc_peer_connect(iworker.get(), &peer_params, &peer),
                    "ucp_ifunc_peer_connect");
    auto send_run = [&]() {
        uint64_t     before = runs;
        ucs_status_t status = ucp_ifunc_peer_send_nbx(
                peer, ifunc, payload.data(), payload.size(), nullptr);
        ucx_util::check(status, "ucp_ifunc_peer_send_nbx");
        while (runs == before) {
            ucp_ifunc_worker_progress(iworker.get());
        }
    };
    /* Until the code is known to be held: references from then on. */
    ucp_ifunc_peer_attr_t attr = {};
    attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_SENT_BY_REF;
    for (int i = 0; (i < 100000) && (attr.sent_by_ref == 0); ++i) {
        send_run();
        ucp_ifunc_peer_query(peer, &attr);
    }
    if (attr.sent_by_ref == 0) {
        throw std::runtime_error("the default path sent no reference");
    }
    double ns = ns_per_call(send_run);
    ucp_ifunc_peer_close(peer);
    return ns;
}

DefaultPathCost measure_default_path(ucp_context_h     context,
                                     ucx_util::Worker &worker, ucp_ep_h ep,
                                     ucp_ifunc_h ifunc, size_t size)
{
    std::vector<char> payload(size, 0x5a);
    DefaultPathCost   cost;
    uint64_t          runs = 0;
    cost.channel_ns        = measure_peer(context, worker, ep, ifunc,
                                          UCP_IFUNC_PATH_AUTO, 240, payload, &runs);
    cost.am_path_ns        = measure_peer(context, worker, ep, ifunc,
                                          UCP_IFUNC_PATH_AM, 240, payload, &runs);

    BumpTarget target;
    target.worker                  = worker.get();
    ucp_am_handler_param_t handler = {};
    handler.field_mask             = UCP_AM_HANDLER_PARAM_FIELD_ID |
                         UCP_AM_HANDLER_PARAM_FIELD_CB |
                         UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id  = 17;
    handler.cb  = bump_handler;
    handler.arg = &target;
    ucx_util::check(ucp_worker_set_am_recv_handler(worker.get(), &handler),
                    "ucp_worker_set_am_recv_handler");
    const uint64_t header = 1;
    auto am_with = [&](const void *hdr, size_t hdr_size, uint32_t flags) {
        return ns_per_call([&]() {
            uint64_t            before = target.handled;
            ucp_request_param_t param  = {};
            if (flags != 0) {
                param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
                param.flags        = flags;
            }
            ucs_status_ptr_t request =
                    ucp_am_send_nbx(ep, 17, hdr, hdr_size, payload.data(),
                                    payload.size(), &param);
            if (UCS_PTR_IS_PTR(request)) {
                ucp_request_free(request);
            }
            while (target.handled == before) {
                worker.progress();
            }
        });
    };
    cost.ucp_am_ns = am_with(nullptr, 0, 0);
    cost.header_ns = cost.reply_ns = 1e300;
    for (int round = 0; round < kReplyRounds; ++round) {
        cost.header_ns =
                std::min(cost.header_ns, am_with(&header, sizeof(header), 0));
        cost.reply_ns =
                std::min(cost.reply_ns, am_with(&header, sizeof(header),
                                                UCP_AM_SEND_FLAG_REPLY));
    }
    handler.cb = nullptr;
    ucp_worker_set_am_recv_handler(worker.get(), &handler);
    return cost;
}

/* Send + run on the raw path: @a msg into the start of @a buffer through
 * @a ep, then ucp_poll_ifunc running it with @a target_args. */
double raw_send_run_ns(ucp_context_h context, ucp_ep_h ep,
                       ucx_util::Memory &buffer, ucp_rkey_h rkey,
                       const ucp_ifunc_msg_t &msg, void *target_args)
{
    uint64_t remote = reinterpret_cast<uint64_t>(buffer.address());
    return ns_per_call([&]() {
        ucx_util::check(ucp_ifunc_send_nbix(ep, msg, remote, rkey),
                        "ucp_ifunc_send_nbix");
        ucp_poll_ifunc(context, buffer.address(), kBufferSize, target_args);
    });
}

/* Send + run of one message of @a ifunc, kSandboxPayload bytes, on each
 * path, counting in @a counter. */
struct PathsCost {
    double raw_ns;
    double channel_ns;      /* code once */
    double peer_channel_ns; /* the default path */
    double peer_am_ns;
};

PathsCost measure_paths(ucp_context_h context, ucx_util::Worker &worker,
                        ucp_ep_h ep, ucx_util::Memory &buffer, ucp_rkey_h rkey,
                        ucp_ifunc_h ifunc, uint64_t *counter)
{
    size_t          size = kSandboxPayload;
    ucp_ifunc_msg_t msg;
    ucx_util::check(ucp_ifunc_msg_create(ifunc, &size, sizeof(size), &msg),
                    "ucp_ifunc_msg_create");
    std::memset(buffer.address(), 0, kBufferSize);
    /* The first message links the code: it must run. */
    uint64_t before = *counter;
    ucx_util::check(ucp_ifunc_send_nbix(
                            ep, msg,
                            reinterpret_cast<uint64_t>(buffer.address()), rkey),
                    "ucp_ifunc_send_nbix");
    ucs_status_t status =
            ucp_poll_ifunc(context, buffer.address(), kBufferSize, counter);
    if ((status != UCS_OK) || (*counter != before + 1)) {
        ucp_ifunc_msg_free(msg);
        throw std::runtime_error("the first message did not run (see the "
                                 "log)");
    }
    PathsCost cost;
    cost.raw_ns = raw_send_run_ns(context, ep, buffer, rkey, msg, counter);
    cost.channel_ns =
            measure_channel(context, worker, ep, msg, counter).send_run_ns;
    ucp_ifunc_msg_free(msg);
    std::vector<char> payload(kSandboxPayload, 0x5a);
    cost.peer_channel_ns =
            measure_peer(context, worker, ep, ifunc, UCP_IFUNC_PATH_AUTO, 240,
                         payload, counter);
    cost.peer_am_ns = measure_peer(context, worker, ep, ifunc,
                                   UCP_IFUNC_PATH_AM, 240, payload, counter);
    return cost;
}

void keep_least(PathsCost *least, const PathsCost &cost)
{
    least->raw_ns     = std::min(least->raw_ns, cost.raw_ns);
    least->channel_ns = std::min(least->channel_ns, cost.channel_ns);
    least->peer_channel_ns =
            std::min(least->peer_channel_ns, cost.peer_channel_ns);
    least->peer_am_ns = std::min(least->peer_am_ns, cost.peer_am_ns);
}

/* perf_bump against perf_bump_sandbox, the same code run natively and in
 * the sandbox, both counting in memory granted to the sandboxed one. */
void print_sandbox_cost(ucp_context_h context, ucx_util::Worker &worker,
                        ucp_ep_h ep, ucx_util::Memory &buffer, ucp_rkey_h rkey,
                        ucp_ifunc_h native)
{
    std::printf("\nsandboxed code: perf_bump natively and as %s "
                "(ucx-ifunc-cc --sandbox), send + run, %zu-byte payload, "
                "least of %d rounds each, in turn\n",
                kSandboxIfunc, kSandboxPayload, kSandboxRounds);
    ucp_ifunc_h sandboxed;
    if (ucp_register_ifunc(context, kSandboxIfunc, &sandboxed) != UCS_OK) {
        std::printf("skipped: no %s.so in the library directory (-L; "
                    "x86-64 builds make it)\n",
                    kSandboxIfunc);
        return;
    }
    ucx_util::SandboxMemory counters(4096);
    counters.grant(0, 4096,
                   UCP_IFUNC_SANDBOX_GRANT_READ | UCP_IFUNC_SANDBOX_GRANT_WRITE,
                   kSandboxIfunc);
    auto *counter = reinterpret_cast<uint64_t *>(counters.address());
    try {
        /* Rounds of each in turn, the least of each kept: on a shared
         * machine a round that others slowed down says nothing. */
        PathsCost native_cost = measure_paths(context, worker, ep, buffer, rkey,
                                              native, counter);
        PathsCost sandbox_cost = measure_paths(context, worker, ep, buffer,
                                               rkey, sandboxed, counter);
        for (int round = 1; round < kSandboxRounds; ++round) {
            keep_least(&native_cost, measure_paths(context, worker, ep, buffer,
                                                   rkey, native, counter));
            keep_least(&sandbox_cost, measure_paths(context, worker, ep, buffer,
                                                    rkey, sandboxed, counter));
        }
        std::printf("%-22s %10s %13s %11s\n", "path", "native ns",
                    "sandboxed ns", "difference");
        auto row = [](const char *path, double native_ns, double sandbox_ns) {
            std::printf("%-22s %10.1f %13.1f %11.1f\n", path, native_ns,
                        sandbox_ns, sandbox_ns - native_ns);
        };
        row("raw (buffer)", native_cost.raw_ns, sandbox_cost.raw_ns);
        row("channel (code once)", native_cost.channel_ns,
            sandbox_cost.channel_ns);
        row("default path, channel", native_cost.peer_channel_ns,
            sandbox_cost.peer_channel_ns);
        row("default path, AM", native_cost.peer_am_ns,
            sandbox_cost.peer_am_ns);
    } catch (const std::exception &e) {
        std::printf("skipped: %s\n", e.what());
    }
    ucp_deregister_ifunc(context, sandboxed);
}

} // namespace

int main(int argc, char **argv)
{
    std::vector<size_t> sizes;
    std::string         name = "perf_bump";
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "-L") && (i + 1 < argc)) {
            setenv("UCX_IFUNC_LIB_DIR", argv[++i], 1);
        } else if (!std::strcmp(argv[i], "-i") && (i + 1 < argc)) {
            name = argv[++i];
        } else {
            sizes.push_back(std::strtoul(argv[i], nullptr, 10));
        }
    }
    if (sizes.empty()) {
        sizes = {8, 2048, 8192};
    }
    /* The sandboxed rows need the sandbox; the others link by library. */
    setenv("UCX_IFUNC_TRUST", "library,sandboxed", 0);

    try {
        ucx_util::Context context(UCP_FEATURE_RMA | UCP_FEATURE_AM);
        ucp_ifunc_h       ifunc;
        ucx_util::check(ucp_register_ifunc(context.get(), name.c_str(), &ifunc),
                        ("ucp_register_ifunc(" + name + ") (see -L)").c_str());
        ucx_util::Worker    worker(context.get());
        ucx_util::Endpoint  ep(worker, worker.address());
        ucx_util::Memory    buffer(context.get(), kBufferSize);
        ucx_util::RemoteKey rkey(ep.get(), buffer.packed_rkey());
        uint64_t remote  = reinterpret_cast<uint64_t>(buffer.address());
        uint64_t counter = 0;

        std::printf("%8s %8s %12s %12s %12s %12s %12s\n", "payload", "frame",
                    "create ns", "send ns", "send+run ns", "empty poll",
                    "rkey_ptr ns");
        for (size_t size : sizes) {
            ucp_ifunc_msg_t msg;
            ucx_util::check(
                    ucp_ifunc_msg_create(ifunc, &size, sizeof(size), &msg),
                    "ucp_ifunc_msg_create");
            if (msg.frame_size > kBufferSize) {
                throw std::runtime_error(
                        "payload of " + std::to_string(size) +
                        " bytes does not fit the 1 MiB buffer");
            }
            auto send_to = [&](size_t offset) {
                ucx_util::check(ucp_ifunc_send_nbix(ep.get(), msg,
                                                    remote + offset,
                                                    rkey.get()),
                                "ucp_ifunc_send_nbix");
            };
            auto poll = [&]() {
                return ucp_poll_ifunc(context.get(), buffer.address(),
                                      kBufferSize, &counter);
            };
            /* A send needs a slot the target has emptied: the sends alone
             * go to a row of slots, emptied between batches. The slots of
             * the previous size left their sizes in the buffer (as a
             * target does, for its sources to check): start from zeros. */
            std::memset(buffer.address(), 0, kBufferSize);
            size_t slot_size = (msg.frame_size + 63) / 64 * 64;
            size_t batch =
                    std::min<size_t>(kSendBatch, kBufferSize / slot_size);
            double send_ns = ns_per_send(
                    batch, [&](size_t k) { send_to(k * slot_size); },
                    [&]() {
                        for (size_t k = 0; k < batch; ++k) {
                            ucx_util::check(
                                    ucp_poll_ifunc(context.get(),
                                                   buffer.address() +
                                                           k * slot_size,
                                                   slot_size, &counter),
                                    "ucp_poll_ifunc");
                        }
                    });
            double both_ns  = raw_send_run_ns(context.get(), ep.get(), buffer,
                                              rkey.get(), msg, &counter);
            double empty_ns = ns_per_call(poll);
            /* Building a message: payload_bound, the frame (a buffer the
             * thread kept, or a new one), payload_init over the payload
             * cleared first, the seal; then freeing it. */
            double create_ns = ns_per_call([&]() {
                ucp_ifunc_msg_t built;
                ucx_util::check(ucp_ifunc_msg_create(ifunc, &size, sizeof(size),
                                                     &built),
                                "ucp_ifunc_msg_create");
                ucp_ifunc_msg_free(built);
            });
            double rkey_ns   = ns_per_call([&]() {
                void *address;
                ucp_rkey_ptr(rkey.get(), remote, &address);
            });
            std::printf("%8zu %8zu %12.1f %12.1f %12.1f %12.1f %12.1f\n", size,
                        msg.frame_size, create_ns, send_ns, both_ns, empty_ns,
                        rkey_ns);
            ucp_ifunc_msg_free(msg);
        }

        std::printf("\nchannel: code once (reference frame) and with "
                    "UCP_IFUNC_SEND_FLAG_WITH_CODE (full)\n");
        std::printf("%8s %8s %10s %12s %8s %12s %10s\n", "payload", "frame",
                    "send ns", "send+run ns", "full", "send+run ns",
                    "empty poll");
        for (size_t size : sizes) {
            ucp_ifunc_msg_t msg;
            ucx_util::check(
                    ucp_ifunc_msg_create(ifunc, &size, sizeof(size), &msg),
                    "ucp_ifunc_msg_create");
            ChannelCost cost = measure_channel(context.get(), worker, ep.get(),
                                               msg, &counter);
            std::printf("%8zu %8zu %10.1f %12.1f %8zu %12.1f %10.1f\n", size,
                        reference_frame_size(msg), cost.send_ns,
                        cost.send_run_ns, msg.frame_size, cost.full_run_ns,
                        cost.empty_poll_ns);
            ucp_ifunc_msg_free(msg);
        }

        std::printf("\ndefault path (ucp_ifunc_peer_send_nbx + "
                    "ucp_ifunc_worker_progress), send + run, against a UCP "
                    "active message and its handler\n");
        std::printf("%8s %12s %12s %12s %14s\n", "payload", "channel ns",
                    "AM path ns", "UCP AM ns", "channel - AM");
        std::vector<DefaultPathCost> costs;
        for (size_t size : sizes) {
            costs.push_back(measure_default_path(context.get(), worker,
                                                 ep.get(), ifunc, size));
            const DefaultPathCost &cost = costs.back();
            std::printf("%8zu %12.1f %12.1f %12.1f %14.1f\n", size,
                        cost.channel_ns, cost.am_path_ns, cost.ucp_am_ns,
                        cost.channel_ns - cost.ucp_am_ns);
        }
        std::printf("\nUCP_AM_SEND_FLAG_REPLY, which every active message "
                    "of the default path carries: a UCP active message "
                    "with a reference's 8-byte header and its handler, "
                    "least of %d rounds each, in turn\n",
                    kReplyRounds);
        std::printf("%8s %12s %12s %12s\n", "payload", "no flag ns", "reply ns",
                    "difference");
        for (size_t i = 0; i < sizes.size(); ++i) {
            std::printf("%8zu %12.1f %12.1f %12.1f\n", sizes[i],
                        costs[i].header_ns, costs[i].reply_ns,
                        costs[i].reply_ns - costs[i].header_ns);
        }
        if (name == "perf_bump") {
            print_sandbox_cost(context.get(), worker, ep.get(), buffer,
                               rkey.get(), ifunc);
        }
        ucp_deregister_ifunc(context.get(), ifunc);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ifunc_cost: %s\n", e.what());
        return 1;
    }
    return 0;
}
