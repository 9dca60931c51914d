/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * libFuzzer harness over delivery by active message (am.cc): each input
 * becomes active messages, sent through real UCP (a context with
 * UCP_FEATURE_AM, one worker, an endpoint to itself) to the handlers
 * ucp_ifunc_am_enable installed on that worker, which is progressed until
 * every send has completed. There are two such targets, one over UCX's
 * "self" transport and one over its shared memory transports (where those
 * work), as they deliver differently (below). The handler parses what UCP
 * hands it, as from any peer: full frames (the 16-byte AmFullHeader, then
 * one frame or one per ISA), references (the 8-byte word of the code's
 * index and the lead, then the lead's bytes and the payload),
 * headers of any other length, and
 * messages to the reply id; eager, or by rendezvous (received into pooled
 * buffers, queued behind the receives under way).
 *
 * An input is a sequence of up to kMaxMessages messages (am_input.h: a
 * flags byte, which says eager or rendezvous, whether the target may
 * reply, whether the frames' hashes are recomputed, which AM id and which
 * target; the header length; the data length; the header; the data). All
 * are sent before the workers progress, so that several rendezvous
 * receives are under way at once, and some wait behind them. make_corpus
 * writes real messages of ucp_ifunc_am_send_nbx as seeds
 * (test/fuzz/corpus_am).
 *
 * Why no fuzzed code can run: the targets run under UCX_IFUNC_TRUST=library,
 * with UCX_IFUNC_LIB_DIR a directory holding copies of four test libraries
 * (counter, echo, tally, stress; both set here, whatever the caller's
 * environment says). Under that policy the link step maps an image only
 * after checking that its code id (BLAKE2b of name and image) is its own,
 * and that it is the id of the image of the target's own NAME.so; a
 * reference runs only code linked that way. So the only code that can run
 * is those libraries' own: seeds made from their messages do run it, with
 * fuzzed payloads, which each of them reads only within payload_size, and
 * with target_args a zeroed buffer large enough for each one's result.
 * The other test libraries are left out of that directory: crash and
 * faulty fail on purpose, reenter calls a function pointer from
 * target_args, imports reads its payload as a string and constructs as a
 * fixed structure.
 *
 * Log lines are formatted, as they would be, and dropped.
 */
#include "test/fuzz/am_input.h"
#include "test/fuzz/drop_log.h"
#include "test/fuzz/fix_up_hashes.h"
#include "ucp/ifunc/format/frame.h"

#include <ucp/api/ucp.h>
#include <ucp/api/ucp_ifunc.h>
#include <ucs/debug/log_def.h>

#include <sanitizer/lsan_interface.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#ifndef UCX_IFUNC_FUZZ_AM_LIB_DIR
#error "the build defines UCX_IFUNC_FUZZ_AM_LIB_DIR (test/fuzz/Makefile.inc)"
#endif

using namespace ucx_ifunc;
using namespace ucx_ifunc::fuzz;

namespace {

constexpr unsigned kMaxMessages = 16;

/* A target: a UCP context over the transports @a tls, a worker with the
 * AM service, and an endpoint to itself. Made once: UCP's setup costs far
 * more than a message. */
struct Target {
    ucp_context_h         context = nullptr;
    ucp_worker_h          worker  = nullptr;
    ucp_ep_h              ep      = nullptr;
    ucp_ifunc_am_h        am      = nullptr;
    std::vector<uint64_t> results = std::vector<uint64_t>(64);

    /* Logs and returns nullptr where @a tls cannot be used here. */
    static std::unique_ptr<Target> over(const char *tls)
    {
        auto         target = std::make_unique<Target>();
        ucs_status_t status = target->start(tls);
        if (status != UCS_OK) {
            std::fprintf(stderr, "fuzz_am: no target over UCX_TLS=%s: %s\n",
                         tls, ucs_status_string(status));
            return nullptr;
        }
        std::fprintf(stderr, "fuzz_am: a target over UCX_TLS=%s\n", tls);
        return target;
    }

    ~Target() { stop(); }

    ucs_status_t start(const char *tls)
    {
        ucp_config_t *config;
        ucs_status_t  status = ucp_config_read(nullptr, nullptr, &config);
        if (status != UCS_OK) {
            return status;
        }
        status = ucp_config_modify(config, "TLS", tls);
        if (status == UCS_OK) {
            ucp_params_t params = {};
            params.field_mask   = UCP_PARAM_FIELD_FEATURES;
            params.features     = UCP_FEATURE_AM;
            status              = ucp_init(&params, config, &context);
        }
        ucp_config_release(config);
        if (status != UCS_OK) {
            return status;
        }
        ucp_worker_params_t worker_params = {};
        worker_params.field_mask          = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        worker_params.thread_mode         = UCS_THREAD_MODE_SINGLE;
        status = ucp_worker_create(context, &worker_params, &worker);
        if (status != UCS_OK) {
            return status;
        }
        ucp_address_t *address;
        size_t         address_length;
        status = ucp_worker_get_address(worker, &address, &address_length);
        if (status != UCS_OK) {
            return status;
        }
        ucp_ep_params_t ep_params = {};
        ep_params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep_params.address         = address;
        status                    = ucp_ep_create(worker, &ep_params, &ep);
        ucp_worker_release_address(worker, address);
        if (status != UCS_OK) {
            return status;
        }
        ucp_ifunc_am_params_t am_params = {};
        am_params.field_mask            = UCP_IFUNC_AM_FIELD_TARGET_ARGS;
        am_params.target_args           = results.data();
        return ucp_ifunc_am_enable(context, worker, &am_params, &am);
    }

    /* The service goes first, so that its receives end while the worker
     * can progress them. */
    void stop()
    {
        if (am != nullptr) {
            ucp_ifunc_am_disable(am);
            am = nullptr;
        }
        if (ep != nullptr) {
            ucp_request_param_t param;
            param.op_attr_mask       = 0;
            ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &param);
            if (UCS_PTR_IS_PTR(request)) {
                while (ucp_request_check_status(request) == UCS_INPROGRESS) {
                    ucp_worker_progress(worker);
                }
                ucp_request_free(request);
            }
            ep = nullptr;
        }
        if (worker != nullptr) {
            ucp_worker_destroy(worker);
            worker = nullptr;
        }
        if (context != nullptr) {
            ucp_cleanup(context);
            context = nullptr;
        }
    }
};

/* One message of an input: where its header and data lie in it. */
struct Message {
    uint8_t           flags;
    const uint8_t    *header;
    size_t            header_length;
    std::vector<char> data; /* its own copy: the hashes may be fixed */
};

/* Two targets, as the message's flags choose: over shared memory (where
 * it works), messages arrive when the worker progresses, so that several
 * rendezvous receives are under way at once and later ones wait (am.cc's
 * kMaxReceiving); over "self" each arrives inside its send call. */
std::unique_ptr<Target> over_shm, over_self;

Target &target_of(const Message &m)
{
    return ((m.flags & kOverSelf) || !over_shm) ? *over_self : *over_shm;
}

/* Splits @a input into messages (a short tail is dropped). */
std::vector<Message> messages_of(const uint8_t *input, size_t size)
{
    std::vector<Message> messages;
    size_t               at = 0;
    while ((messages.size() < kMaxMessages) && (size - at >= kAmControlSize)) {
        Message  m;
        uint32_t data_length;
        m.flags         = input[at];
        m.header_length = input[at + 1];
        std::memcpy(&data_length, input + at + 2, sizeof(data_length));
        at += kAmControlSize;
        m.header_length = std::min(m.header_length, size - at);
        m.header        = input + at;
        at += m.header_length;
        size_t length = std::min<size_t>(data_length, size - at);
        m.data.assign(input + at, input + at + length);
        at += length;
        messages.push_back(std::move(m));
    }
    return messages;
}

/* Recomputes the hashes of each frame in @a data, one after the other as
 * the frames of a message for several ISAs lie, as far as their sizes
 * lead: so that mutated frames reach the checks behind the seals. */
void fix_up_frames(std::vector<char> &data)
{
    size_t offset = 0;
    while (data.size() - offset >= kMinFrameSize) {
        fuzz::fix_up_hashes(data.data() + offset, data.size() - offset);
        uint64_t frame_size;
        std::memcpy(&frame_size, data.data() + offset + 8, sizeof(frame_size));
        if ((frame_size < kMinFrameSize) ||
            (frame_size > data.size() - offset)) {
            break;
        }
        offset += frame_size;
    }
}

ucs_status_ptr_t send(Target &target, const Message &m)
{
    ucp_request_param_t param;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = ((m.flags & kRndv) ? UCP_AM_SEND_FLAG_RNDV
                                            : UCP_AM_SEND_FLAG_EAGER) |
                  ((m.flags & kReply) ? UCP_AM_SEND_FLAG_REPLY : 0);
    unsigned id = UCP_IFUNC_AM_ID_DEFAULT + ((m.flags & kToReplyId) ? 1 : 0);
    return ucp_am_send_nbx(
            target.ep, id, (m.header_length > 0) ? m.header : nullptr,
            m.header_length, m.data.data(), m.data.size(), &param);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    /* Forced, not defaults: what can run depends on them (above). */
    setenv("UCX_IFUNC_TRUST", "library", 1);
    setenv("UCX_IFUNC_LIB_DIR", UCX_IFUNC_FUZZ_AM_LIB_DIR, 1);
    unsetenv("UCX_IFUNC_TRUSTED_KEYS");
    ucs_log_push_handler(drop_log_line);
    {
        /* UCX keeps endpoints in memory it maps itself, which the leak
         * checker does not search: what they point to would count as
         * leaked at every check. */
        __lsan::ScopedDisabler not_leaks;
        over_shm  = Target::over("shm");
        over_self = Target::over("self");
    }
    if (!over_self) {
        std::abort();
    }
    std::fprintf(stderr, "fuzz_am: ifunc libraries from %s\n",
                 UCX_IFUNC_FUZZ_AM_LIB_DIR);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    std::vector<Target *> targets = {over_self.get()};
    if (over_shm) {
        targets.push_back(over_shm.get());
    }
    for (Target *target : targets) {
        std::fill(target->results.begin(), target->results.end(), 0);
    }
    std::vector<Message>                     messages = messages_of(data, size);
    std::vector<std::pair<Target *, void *>> requests;
    for (Message &m : messages) {
        if (m.flags & kFixHashes) {
            fix_up_frames(m.data);
        }
        Target          &target  = target_of(m);
        ucs_status_ptr_t request = send(target, m);
        if (UCS_PTR_IS_PTR(request)) {
            requests.emplace_back(&target, request);
        }
    }
    for (auto &sent : requests) {
        while (ucp_request_check_status(sent.second) == UCS_INPROGRESS) {
            ucp_worker_progress(sent.first->worker);
        }
        ucp_request_free(sent.second);
    }
    /* The targets' replies, and anything else under way, finish here. */
    for (Target *target : targets) {
        while (ucp_worker_progress(target->worker) != 0) {
        }
    }
    return 0;
}
