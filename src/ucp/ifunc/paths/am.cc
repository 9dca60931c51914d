/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Delivery by active message. A message travels on am_id as
 *  - a full frame: AM header = the source's token for this target and a
 *    word 0 (16 bytes), AM data = the frame as ucp_ifunc_msg_create made it (or that
 *    of another ISA, multi_isa.h); sent with UCP_AM_SEND_FLAG_REPLY, so
 *    that the target can answer. Until the target's first reply says which
 *    ISA it runs, a message of a library built for several carries one
 *    frame per ISA, one after the other, and the target runs the one for
 *    its own;
 *  - a reference: AM header = one word (8 bytes): the target's index of
 *    the code (CodeCache::lookup_index), which its reply gave, and in bits
 *    24-31 the lead (multi_isa.h); AM data = the payload, or, for a
 *    payload of kLeadMin to kLeadMax bytes sent from a message, the lead's
 *    8 bytes of the message before the payload, then the payload: in the
 *    eager buffers of UCX's transports the payload then starts 16-byte
 *    aligned and runs in place, where it was copied before. An active
 *    message arrives whole and knows its length, so nothing else of the
 *    reference frame's header (magic, sizes, nonce, seal) is sent, and an
 *    8-byte payload keeps the message in one cache line of the shared
 *    memory FIFO. The word is kept per AM endpoint (UCX reads a header
 *    until the send completes).
 * After a full frame ran, the target replies on am_id + 1 with the token,
 * the code id's low half, its ISA and its index of the code, with
 * UCP_AM_SEND_FLAG_REPLY; the source takes a reply only from the endpoint
 * its AM endpoint of that token sends on (tokens are random: no peer can
 * guess another's), and only with an ISA and an index a target can send;
 * from then on the source sends that code by reference. A
 * reference therefore always follows the code's reply, which followed its
 * linking, whatever order UCP delivers messages in (docs/design.md). The
 * service keeps its context's ifunc state, so the code stays linked while it
 * runs.
 */
#include "ucp/ifunc/paths/am.h"
#include "ucp/ifunc/base/api_guard.h"
#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/load/context.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/deliver/code_once.h"
#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/format/isa.h"
#include "ucp/ifunc/deliver/multi_isa.h"
#include "ucp/ifunc/deliver/run.h"
#include "ucp/ifunc/deliver/send.h"
#include "ucp/ifunc/base/tls.h"

#include <sodium.h>
#include <ucs/debug/log_def.h>

#include <array>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ucx_ifunc {
namespace {

constexpr unsigned kMaxReceiving = 8;
/* Rendezvous messages waiting for a receive to start: each holds only
 * UCX's small descriptor, but a peer could announce any number. Beyond
 * this, new ones are refused (UCS_ERR_NO_RESOURCE at the source). */
constexpr size_t kMaxWaiting = 4096;
/* Sources the service pins code for (PeerPins each); beyond this, code
 * from new sources runs without being announced. */
constexpr size_t kMaxPinningPeers = 4096;
/* References with at least this much payload travel with the reply flag
 * (8 bytes more), so that the target knows the source of those that come
 * by rendezvous (source_failed()); smaller ones, eager unless UCX is told
 * otherwise, keep their header in one cache line. The default path's AM
 * endpoints send every message with the flag (am_ep_always_reply), so
 * that its code can answer its source. */
constexpr size_t kRefReplyFromSize = 1024;

/* AM header of a full frame; the frames in the AM data (1, or one per
 * ISA) follow one another, each saying its size. */
struct AmFullHeader {
    uint64_t token;
    uint64_t reserved; /* 0 (checked): its length tells it from a reference */
};

/* AM header length of a reference: its word. */
constexpr size_t kRefHeaderLength = sizeof(uint64_t);
static_assert(kRefHeaderLength != sizeof(AmFullHeader),
              "the header's length tells a reference from a full frame");
/* ... and of a reference whose source asked for a delivery report: its
 * word, then the report id as 32 bits (am_reported_ref_header()). */
static_assert((kReportedRefHeaderLength != sizeof(AmFullHeader)) &&
                      (kReportedRefHeaderLength != kRefHeaderLength),
              "the header's length tells a reported reference apart");

/* The report id of a reference whose AM header (@a header_length bytes
 * at @a header) is a reported one's; 0 for another. */
uint16_t ref_report(const void *header, size_t header_length)
{
    uint32_t report = 0;
    if (header_length == kReportedRefHeaderLength) {
        std::memcpy(&report, static_cast<const char *>(header) + 8,
                    sizeof(report));
    }
    return uint16_t(report);
}

/* References with a payload of this many bytes get a lead (multi_isa.h).
 * A smaller payload may travel inline in a transport's FIFO element,
 * which the lead would not align and a second cache line would slow; a
 * larger one is split or goes by rendezvous, into buffers that start
 * aligned without it. 8 KiB is the eager segment of UCX's transports. */
constexpr size_t kLeadMin = 256;
constexpr size_t kLeadMax = 8192;

/* AM header of a target's reply. */
struct AmReply {
    uint64_t token;
    uint64_t code_id;    /* the low half: enough to tell what the target holds,
                         since a reference names the whole id */
    uint64_t machine;    /* the ISA the target runs */
    uint64_t code_index; /* its index of the code: what references name */
};

struct FreeDeleter {
    void operator()(void *p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char, FreeDeleter>;

AlignedBuffer aligned_buffer(size_t size)
{
    void *p = nullptr;
    if (posix_memalign(&p, 64, std::max<size_t>(size, 8)) != 0) {
        throw std::bad_alloc();
    }
    return AlignedBuffer(static_cast<char *>(p));
}

/* Payloads of eager messages that UCP hands over at an address not aligned
 * for NAME_main are copied here first. The owner frees it when the thread
 * ends; the copy reads the plain pointer, since each use of a thread_local
 * with a destructor costs a call to __tls_get_addr for its guard. */
UCX_IFUNC_TLS AlignedBuffer payload_scratch_owner;
UCX_IFUNC_TLS char         *payload_scratch      = nullptr;
UCX_IFUNC_TLS size_t        payload_scratch_size = 0;

void *aligned_payload(void *payload, size_t size)
{
    if ((reinterpret_cast<uintptr_t>(payload) % kPayloadAlign) == 0) {
        return payload;
    }
    /* Allocated for an empty payload too: memcpy wants a real address. */
    if ((payload_scratch == nullptr) || (payload_scratch_size < size)) {
        payload_scratch_owner = aligned_buffer(size);
        payload_scratch       = payload_scratch_owner.get();
        payload_scratch_size  = size;
    }
    std::memcpy(payload_scratch, payload, size);
    return payload_scratch;
}

} // namespace
} // namespace ucx_ifunc

using namespace ucx_ifunc;

namespace {
struct PendingReceive;

using Clock = std::chrono::steady_clock;

/* Where a message came from, as the service knows it (PeerOrigin): a UCP
 * endpoint names a peer only while it lives, and UCX gives a closed
 * endpoint's address to the next one. So the connection behind an
 * endpoint gets an id of its own the first time the endpoint is seen, and
 * each source on it (an AM endpoint of the peer, known by the token of its
 * full frames) another; ids are process-wide (several services may share
 * a context's PeerLog), never 0 and never reused. Warnings go by both
 * (PeerLog: keys per source, lines counted per connection), pins
 * (PeerPins) by the source, and replies to the endpoint it came on. The
 * peer layer, which owns its endpoints, says when one goes
 * (am_forget_source); a receive that fails or times out says so too
 * (source_failed()): the connection's ids and pins are forgotten then. A
 * service used without the peer layer is not told when the application
 * closes an endpoint: there a new peer at a reused address keeps the
 * connection id (so it shares the old peer's count of lines for the rest
 * of a second at most) but is a new source from its first full frame,
 * whose token (random, per AM endpoint) is not the old one's; its
 * references before that (it cannot know an index yet) count as the old
 * source's. A peer that changes tokens earns new keys, never more lines
 * for its connection. */
struct KnownSource {
    uint64_t id;
    uint64_t token; /* of its full frames; 0 before the first */
};

struct KnownEndpoint {
    uint64_t                 connection;
    std::vector<KnownSource> sources; /* the newest first */
};

/* Sources an endpoint keeps: a second AM endpoint over one UCP endpoint
 * keeps its own pins beside the first's; older ones go, with their pins. */
constexpr size_t kSourcesPerEndpoint = 2;

/* The next connection or source id (KnownEndpoint). */
std::atomic<uint64_t> next_origin_id{1};
} // namespace

struct ucp_ifunc_am {
    /* Buffers for messages that arrive by rendezvous, kept for the next
     * ones: a fresh large buffer per message costs page faults and, worse,
     * a new memory registration in UCX for each. Kept up to kKeptBytes. */
    struct BufferPool {
        static constexpr size_t kKeptBytes = 64ul << 20;

        /* Powers of two, so that buffers serve messages of nearby sizes
         * too. */
        static size_t capacity_for(size_t size)
        {
            return size_t(1)
                   << (64 - __builtin_clzll(std::max<size_t>(size, 64) - 1));
        }

        AlignedBuffer take(size_t size, size_t *capacity)
        {
            std::lock_guard<std::mutex> guard(lock);
            for (auto it = free.begin(); it != free.end(); ++it) {
                if (it->first >= size) {
                    *capacity            = it->first;
                    AlignedBuffer buffer = std::move(it->second);
                    kept -= it->first;
                    free.erase(it);
                    return buffer;
                }
            }
            *capacity = capacity_for(size);
            return aligned_buffer(*capacity);
        }

        void give_back(AlignedBuffer buffer, size_t capacity)
        {
            std::lock_guard<std::mutex> guard(lock);
            if (kept + capacity <= kKeptBytes) {
                kept += capacity;
                free.emplace_back(capacity, std::move(buffer));
            }
        }

        std::mutex                                    lock;
        std::vector<std::pair<size_t, AlignedBuffer>> free;
        size_t                                        kept = 0; /* bytes */
    };

    ucp_context_h                 context;
    ucp_worker_h                  worker;
    unsigned                      am_id;
    void                         *target_args;
    std::shared_ptr<ContextState> state;
    /* What its messages count as: a peer's service's as the default
     * path's (am_count_as_peer). */
    RunPath                                         path = RunPath::am;
    std::mutex                                      lock; /* of eps */
    std::unordered_map<uint64_t, ucp_ifunc_am_ep *> eps;  /* by token */
    BufferPool                                      buffers;
    /* Who is behind the endpoints messages arrived on (KnownEndpoint), and
     * the last origin looked up, which most messages find again. Touched
     * only in the worker's progress. */
    std::unordered_map<ucp_ep_h, KnownEndpoint> endpoints;
    ucp_ep_h                                    last_ep     = nullptr;
    uint64_t                                    last_token  = 0;
    PeerOrigin                                  last_origin = {};
    /* The largest message it takes, and the most memory its rendezvous
     * receive buffers may take at once (UCX_IFUNC_MAX_AM_MESSAGE,
     * UCX_IFUNC_MAX_AM_RNDV_MEMORY). */
    size_t max_message;
    size_t max_receiving_bytes;
    /* Rendezvous receives under way, and messages waiting for one: at most
     * kMaxReceiving at once and max_receiving_bytes of buffers, so that a
     * source that streams large messages waits for the target (its sends
     * complete later) instead of making it hold a buffer for every message
     * in flight. Touched only in the worker's progress. */
    unsigned                                    receiving       = 0;
    size_t                                      receiving_bytes = 0;
    std::deque<std::unique_ptr<PendingReceive>> waiting;
    /* The receives under way (owned by UCX's requests until they complete),
     * and how long one may take (UCX_IFUNC_AM_RECEIVE_TIMEOUT): a source
     * that dies on an endpoint without error handling leaves its receives
     * under way for ever. */
    std::vector<PendingReceive *> under_way;
    /* start_waiting() is running, and was asked to run again. */
    bool                                starting    = false;
    bool                                start_again = false;
    std::chrono::steady_clock::duration receive_timeout;
    bool closing = false; /* in ucp_ifunc_am_disable: start nothing */
    /* Code pinned for each source this service told it holds it, by its
     * id (KnownSource); after state, so it goes first. */
    std::unordered_map<uint64_t, std::unique_ptr<PeerPins>> peers;
    /* Headers of destroyed AM endpoints: a send of a full frame may still
     * read its header (UCX 1.13 cannot copy it), so they live as long as
     * the service. */
    std::vector<std::unique_ptr<AmFullHeader>> retired_headers;
    std::vector<std::unique_ptr<uint64_t>>     retired_ref_words;
    /* Set by am_admit_only(): the endpoints whose messages may run. */
    std::function<bool(ucp_ep_h)> admits;
    /* Set by am_need_source(): only messages with a reply endpoint run. */
    bool need_source = false;
};

struct ucp_ifunc_am_ep {
    ucp_ifunc_am *am;
    ucp_ep_h      ep;
    /* Lives as long as the sends that use it: moved to the service when
     * the AM endpoint goes. */
    std::unique_ptr<AmFullHeader> full_header =
            std::make_unique<AmFullHeader>();
    /* The ISA the target runs (from its replies, or the peer's hello) and
     * what it said it holds (learnt by the reply handler). */
    TargetCodes           codes;
    std::atomic<uint64_t> sent_with_code{0};
    std::atomic<uint64_t> sent_by_ref{0};
    /* UCP_AM_SEND_FLAG_EAGER where a rendezvous could abort the target
     * (eager_only_endpoint), else 0: added to every send. */
    uint32_t send_flags = 0;
    /* The AM headers of references, one per word sent: UCX reads a header
     * until the send completes; moved to the service with full_header. */
    std::mutex                                              ref_words_lock;
    std::unordered_map<uint64_t, std::unique_ptr<uint64_t>> ref_words;
    std::atomic<const uint64_t *> last_ref_word{nullptr};
};

namespace {

void reply_sent(void *request, ucs_status_t, void *user_data)
{
    std::unique_ptr<AmReply> reply(static_cast<AmReply *>(user_data));
    ucp_request_free(request);
}

/* Tells the source that this target holds @a code_id, and its ISA. */
void send_reply(ucp_ifunc_am &am, ucp_ep_h reply_ep, uint64_t token,
                uint64_t code_id, uint64_t code_index)
{
    auto reply = std::make_unique<AmReply>(
            AmReply{token, code_id, arch::elf_machine(), code_index});
    ucp_request_param_t param;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send   = reply_sent;
    param.user_data = reply.get();
    /* The source takes a reply only from the endpoint it sends on: UCP
     * names it only with this flag. */
    param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t request =
            ucp_am_send_nbx(reply_ep, am.am_id + 1, reply.get(),
                            sizeof(AmReply), nullptr, 0, &param);
    if (UCS_PTR_IS_PTR(request)) {
        reply.release(); /* reply_sent() frees it */
    } else if (UCS_PTR_IS_ERR(request)) {
        /* The source keeps sending the code: slower, never wrong. */
        ucs_debug("ifunc: reply to the source failed: %s",
                  ucs_status_string(UCS_PTR_STATUS(request)));
    }
}

/* The ISA of the code in the frame at @a bytes, or 0 if the frame is too
 * short to say (run_full() then tells what is wrong with it). */
uint16_t frame_machine(const char *bytes, size_t length)
{
    FrameHeader hdr;
    if (length < sizeof(hdr)) {
        return 0;
    }
    std::memcpy(&hdr, bytes, sizeof(hdr));
    size_t desc_offset = frame_image_offset(hdr.name_length);
    if ((hdr.name_length > UCP_IFUNC_NAME_MAX) ||
        (hdr.image_size < sizeof(ucp_ifunc_image_desc_t)) ||
        (desc_offset + sizeof(ucp_ifunc_image_desc_t) > length)) {
        return 0;
    }
    return read_at<ucp_ifunc_image_desc_t>(bytes, desc_offset).machine;
}

/* Forgets the sources behind @a ep, and the pins of each: it goes, and
 * its address may come back for another peer. */
void forget_endpoint(ucp_ifunc_am &am, ucp_ep_h ep)
{
    auto it = am.endpoints.find(ep);
    if (it == am.endpoints.end()) {
        return;
    }
    for (const KnownSource &source : it->second.sources) {
        am.peers.erase(source.id);
    }
    am.endpoints.erase(it);
    am.last_ep = nullptr;
}

PeerOrigin origin_slow(ucp_ifunc_am &am, ucp_ep_h ep, const uint64_t *token)
{
    auto [it, is_new]    = am.endpoints.try_emplace(ep);
    KnownEndpoint &known = it->second;
    if (is_new) {
        known.connection = next_origin_id.fetch_add(1);
    }
    auto &sources = known.sources;
    auto  found   = sources.begin();
    if (token != nullptr) {
        found = std::find_if(sources.begin(), sources.end(),
                             [&](const KnownSource &source) {
                                 return source.token == *token;
                             });
        if ((found == sources.end()) && !sources.empty() &&
            (sources.front().token == 0)) {
            found        = sources.begin(); /* its first full frame */
            found->token = *token;
        }
    }
    if (found == sources.end()) {
        if (sources.size() >= kSourcesPerEndpoint) {
            am.peers.erase(sources.back().id);
            sources.pop_back();
        }
        sources.insert(sources.begin(),
                       KnownSource{next_origin_id.fetch_add(1),
                                   (token != nullptr) ? *token : 0});
    } else if (found != sources.begin()) {
        std::rotate(sources.begin(), found, found + 1);
    }
    am.last_ep     = ep;
    am.last_token  = sources.front().token;
    am.last_origin = PeerOrigin{known.connection, sources.front().id};
    return am.last_origin;
}

/* Where the message that arrived on @a ep came from (KnownEndpoint), with
 * the token of its full frame at @a token (nullptr for a reference); {0,
 * 0} where UCP names no endpoint. */
PeerOrigin origin_of(ucp_ifunc_am &am, ucp_ep_h ep, const uint64_t *token)
{
    if (ep == nullptr) {
        return PeerOrigin{};
    }
    /* Most messages come from the source of the one before. */
    if ((ep == am.last_ep) &&
        ((token == nullptr) || (*token == am.last_token))) {
        return am.last_origin;
    }
    return origin_slow(am, ep, token);
}

/* Whether @a machine is an ISA this build makes images for. */
bool known_machine(uint16_t machine)
{
    return std::find(std::begin(kShippableMachines),
                     std::end(kShippableMachines),
                     machine) != std::end(kShippableMachines);
}

/* The frames in the @a length bytes at @a bytes, as docs/design.md states
 * the AM data of a full frame: one frame, or (sent before the source knew
 * this target's ISA) one per ISA of its library, each for a different ISA
 * this build knows, one after the other, nothing after the last. Finds the
 * one for this process; else the first, whose check says why it cannot run
 * here. Returns its length, or 0 if the bytes are not such frames
 * (logged). */
size_t pick_frame(ucp_ifunc_am &am, char **bytes_p, size_t length)
{
    std::array<char *, kMaxMachines>   frames{};
    std::array<size_t, kMaxMachines>   sizes{};
    std::array<uint16_t, kMaxMachines> machines{};
    unsigned                           count   = 0;
    size_t                             offset  = 0;
    const char                        *problem = nullptr;
    while (((count == 0) || (offset < length)) && (problem == nullptr)) {
        uint64_t frame_size = 0;
        if (length - offset >= kMinFrameSize) {
            std::memcpy(&frame_size, *bytes_p + offset + 8, sizeof(frame_size));
        }
        if (count == kMaxMachines) {
            problem = "more frames than ISAs";
        } else if ((frame_size < kMinFrameSize) ||
                   (frame_size > length - offset)) {
            problem = "sizes that do not add up to its length";
        } else {
            frames[count] = *bytes_p + offset;
            sizes[count]  = frame_size;
            offset += frame_size;
            ++count;
        }
    }
    /* One frame is checked as a frame (wrong ISA included); of several,
     * the ISAs tell which to run. */
    for (unsigned i = 0; (count > 1) && (i < count) && (problem == nullptr);
         ++i) {
        machines[i] = frame_machine(frames[i], sizes[i]);
        if (!known_machine(machines[i])) {
            problem = "a frame for no ISA this build knows";
        } else if (std::find(machines.begin(), machines.begin() + i,
                             machines[i]) != machines.begin() + i) {
            problem = "two frames for one ISA";
        }
    }
    if (problem != nullptr) {
        ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_message, 0,
                            "ifunc active message of %zu bytes does not "
                            "hold 1 to %u frames one after the other, each "
                            "for another ISA, with nothing after the last "
                            "(%s); message dropped",
                            length, unsigned(kMaxMachines), problem);
        am.state->counters.count_reject(Reject::bad_frame);
        return 0; /* the caller counts its bytes */
    }
    unsigned chosen = 0;
    for (unsigned i = 1; i < count; ++i) {
        if (machines[i] == arch::elf_machine()) {
            chosen = i;
        }
    }
    *bytes_p = frames[chosen];
    return sizes[chosen];
}

/* The pins of source @a source (KnownSource's id), made on its first full
 * frame; nullptr where nothing is pinned for it (no endpoint to answer on,
 * or too many sources already). */
PeerPins *peer_pins(ucp_ifunc_am &am, uint64_t source)
{
    if (source == 0) {
        return nullptr;
    }
    auto it = am.peers.find(source);
    if (it != am.peers.end()) {
        return it->second.get();
    }
    if (am.peers.size() >= kMaxPinningPeers) {
        return nullptr;
    }
    auto &pins = am.peers[source];
    pins       = std::make_unique<PeerPins>(am.state->code);
    return pins.get();
}

/* The @a received bytes of an active message were taken, and it was
 * dropped for @a reason. */
void count_dropped(ucp_ifunc_am &am, size_t received, Reject reason)
{
    am.state->counters.count_bytes(received);
    am.state->counters.count_reject(reason);
}

/* Runs the frame for this process of the @a length bytes at @a bytes,
 * which all count as received, with the message's outcome; @a source
 * (its PeerOrigin's) sent it on @a reply_ep. */
void run_full(ucp_ifunc_am &am, char *bytes, size_t length,
              const AmFullHeader &full, ucp_ep_h reply_ep, uint64_t source)
{
    PeerLog &log      = am.state->peer_log;
    size_t   received = length;
    length            = pick_frame(am, &bytes, length);
    if (length == 0) {
        am.state->counters.count_bytes(received);
        return;
    }
    FrameHeader hdr;
    uint64_t    trailer = 0;
    if (length >= kMinFrameSize) {
        std::memcpy(&hdr, bytes, sizeof(hdr));
        std::memcpy(&trailer, bytes + length - kSealSize, kSealSize);
    }
    if ((length < kMinFrameSize) || !frame_complete(hdr, trailer, length)) {
        ucx_ifunc_peer_warn(log, PeerProblem::am_message, 0,
                            "ifunc active message of %zu bytes is not a "
                            "sealed frame; message dropped",
                            length);
        count_dropped(am, received, Reject::bad_frame);
        return;
    }
    ucs_status_t status = frame_validate(hdr, length, log);
    if (status != UCS_OK) {
        count_dropped(am, received, frame_reject(status));
        report_drop(hdr.report, frame_reject(status));
        return;
    }
    void *payload =
            aligned_payload(bytes + hdr.payload_offset, hdr.payload_size);
    /* The source is told the target holds the code only where the code
     * could be pinned for it (PeerPins). */
    PeerPins *pins      = peer_pins(am, source);
    uint64_t  announced = 0; /* the code's index, if announced */
    if ((run_message(*am.state, am.path, received, hdr, bytes, payload,
                     am.target_args, pins, &announced) == UCS_OK) &&
        (announced != 0)) {
        send_reply(am, reply_ep, full.token, hdr.code_id_lo, announced);
    }
}

/* Runs a reference: @a header is its AM header (its word, and a report id
 * where its source asked for a report: @a header_length), @a data its
 * @a length bytes of AM data (counted as received, as by run_full()). */
void run_ref(ucp_ifunc_am &am, const char *header, size_t header_length,
             char *data, size_t length)
{
    uint64_t word;
    std::memcpy(&word, header, sizeof(word));
    uint16_t report = ref_report(header, header_length);
    uint64_t lead   = (word & kAmLeadMask) >> kAmLeadShift;
    if ((lead >= kPayloadAlign) || (lead > length)) {
        ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_message, 0,
                            "ifunc active message of %zu bytes announces "
                            "%llu bytes before its payload (0 to %zu); "
                            "message dropped",
                            length, static_cast<unsigned long long>(lead),
                            std::min(length, kPayloadAlign - 1));
        count_dropped(am, length, Reject::bad_frame);
        report_drop(report, Reject::bad_frame);
        return;
    }
    size_t size = length - lead;
    /* Warnings about it go by its source where UCP names it (the reply
     * flag: PeerOriginScope), else by no source. */
    run_reference(*am.state, am.path, length, word & ~kAmLeadMask, 0,
                  aligned_payload(data + lead, size), size, am.target_args, 0,
                  report);
}

/* Receives under way from one source, at most: a source that dies with
 * its receives under way then holds only its share of them until they
 * time out (UCX_IFUNC_AM_RECEIVE_TIMEOUT), and the others' messages, whose
 * receives completing is what lets the service see the time out, go on. */
constexpr unsigned kMaxReceivingPerSource = kMaxReceiving / 4;

/* A message whose data comes by rendezvous: what to do when it is in. */
struct PendingReceive {
    ucp_ifunc_am     *am; /* nullptr once given up (abandon()) */
    void             *data_desc;
    std::vector<char> ref_header; /* empty for a full frame */
    AlignedBuffer     buffer;
    size_t            capacity;
    size_t            length;
    AmFullHeader      full;     /* of a full frame */
    ucp_ep_h          reply_ep; /* its source, where UCP names it */
    Clock::time_point started;  /* when its receive started */

    ~PendingReceive()
    {
        if (buffer && (am != nullptr)) {
            am->receiving_bytes -= capacity;
            am->buffers.give_back(std::move(buffer), capacity);
        }
    }

    void run()
    {
        DeliveringFrom from(reply_ep); /* its source, for the code */
        if (ref_header.empty()) {
            PeerOrigin      origin = origin_of(*am, reply_ep, &full.token);
            PeerOriginScope from(origin);
            run_full(*am, buffer.get(), length, full, reply_ep, origin.source);
        } else {
            PeerOriginScope from(origin_of(*am, reply_ep, nullptr));
            run_ref(*am, ref_header.data(), ref_header.size(), buffer.get(),
                    length);
        }
    }
};

/* Receives given up (abandon()): UCX may still write into their buffers,
 * so each stays until UCX completes its receive, which for a source that
 * died is never. Process-wide, since a service may go before them. */
std::mutex                                   abandoned_lock;
std::vector<std::unique_ptr<PendingReceive>> abandoned;

/* Whether @a source has as many receives under way as it may
 * (kMaxReceivingPerSource). */
bool source_full(const ucp_ifunc_am &am, ucp_ep_h source)
{
    return std::count_if(am.under_way.begin(), am.under_way.end(),
                         [&](const PendingReceive *p) {
                             return p->reply_ep == source;
                         }) >= long(kMaxReceivingPerSource);
}

/* Whether a receive of @a length bytes may start now: within
 * kMaxReceiving receives and max_receiving_bytes of buffers; one alone may
 * always start (max_message is at most max_receiving_bytes, but buffers
 * are rounded up). */
bool may_receive(const ucp_ifunc_am &am, size_t length)
{
    return (am.receiving == 0) ||
           ((am.receiving < kMaxReceiving) &&
            (am.receiving_bytes +
                     ucp_ifunc_am::BufferPool::capacity_for(length) <=
             am.max_receiving_bytes));
}

void start_receive(std::unique_ptr<PendingReceive> pending);

/* Logs a message dropped for want of memory: the peer's doing (it chose
 * the size), so a warning. */
void warn_dropped(ucp_ifunc_am &am, size_t length, ucp_ep_h reply_ep,
                  const char *why)
{
    PeerOriginScope from(origin_of(am, reply_ep, nullptr));
    ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_too_large, 0,
                        "ifunc: a %zu-byte active message was dropped: %s "
                        "(UCX_IFUNC_MAX_AM_RNDV_MEMORY bounds what the "
                        "target takes)",
                        length, why);
    am.state->counters.count_reject(Reject::other);
}

/* Starts waiting receives while they fit (may_receive()), in order, but
 * for those of a source that has its share under way (source_full()). */
void start_waiting_once(ucp_ifunc_am &am)
{
    std::vector<ucp_ep_h> held_back;
    for (auto it = am.waiting.begin();
         !am.closing && (it != am.waiting.end());) {
        ucp_ep_h source = (*it)->reply_ep;
        if ((std::find(held_back.begin(), held_back.end(), source) !=
             held_back.end()) ||
            source_full(am, source)) {
            held_back.push_back(source); /* its later ones too */
            ++it;
            continue;
        }
        if (!may_receive(am, (*it)->length)) {
            break;
        }
        std::unique_ptr<PendingReceive> next = std::move(*it);
        it                                   = am.waiting.erase(it);
        void  *data_desc                     = next->data_desc;
        size_t length                        = next->length;
        try {
            start_receive(std::move(next));
        } catch (const std::exception &e) {
            /* Released, so that the source's send completes. */
            ucp_am_data_release(am.worker, data_desc);
            warn_dropped(am, length, source, e.what());
        }
        if (am.start_again) {
            return; /* the queue changed under us: the caller goes again */
        }
    }
}

/* A receive UCX completes inside ucp_am_recv_data_nbx (its source failed)
 * calls back into here: that call only asks the running one to look at
 * the queue again, which it changed. */
void start_waiting(ucp_ifunc_am &am)
{
    if (am.starting) {
        am.start_again = true;
        return;
    }
    am.starting = true;
    do {
        am.start_again = false;
        start_waiting_once(am);
    } while (am.start_again);
    am.starting = false;
}

/* Whether a message from @a source that arrives now must wait: behind its
 * source's waiting ones, or behind one that waits for room. */
bool must_wait(const ucp_ifunc_am &am, size_t length, ucp_ep_h source)
{
    return source_full(am, source) || !may_receive(am, length) ||
           std::any_of(am.waiting.begin(), am.waiting.end(),
                       [&](const std::unique_ptr<PendingReceive> &p) {
                           return (p->reply_ep == source) ||
                                  !source_full(am, p->reply_ep);
                       });
}

/* Gives up the receive under way of @a pending: its slot and its share of
 * receive memory are free again; its buffer goes to abandoned. */
void abandon(ucp_ifunc_am &am, PendingReceive *pending)
{
    am.under_way.erase(
            std::find(am.under_way.begin(), am.under_way.end(), pending));
    --am.receiving;
    am.receiving_bytes -= pending->capacity;
    pending->am = nullptr;
    std::lock_guard<std::mutex> guard(abandoned_lock);
    abandoned.emplace_back(pending);
}

/* The source behind @a source failed: its receives under way will not
 * complete, and UCX may have destroyed its endpoint, which a waiting
 * descriptor names: handing one back to UCX (ucp_am_data_release or
 * ucp_am_recv_data_nbx) would use the destroyed endpoint (UCX 1.13 asserts
 * on it). So they are dropped without telling UCX (it keeps their few
 * bytes), and the code pinned for the source is let go. */
void source_failed(ucp_ifunc_am &am, ucp_ep_h source)
{
    if (source == nullptr) {
        return; /* no telling which messages were its */
    }
    for (size_t i = am.under_way.size(); i-- > 0;) {
        if (am.under_way[i]->reply_ep == source) {
            abandon(am, am.under_way[i]);
        }
    }
    size_t before = am.waiting.size();
    am.waiting.erase(
            std::remove_if(am.waiting.begin(), am.waiting.end(),
                           [&](const std::unique_ptr<PendingReceive> &p) {
                               return p->reply_ep == source;
                           }),
            am.waiting.end());
    am.state->counters.count_reject(Reject::lost, before - am.waiting.size());
    {
        PeerOriginScope from(origin_of(am, source, nullptr));
        ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_message, 0,
                            "ifunc: a source of active messages failed; %zu "
                            "of its messages that waited for a receive were "
                            "dropped",
                            before - am.waiting.size());
    }
    forget_endpoint(am, source);
}

/* Gives up receives under way for longer than receive_timeout, and takes
 * their sources for failed. */
void sweep(ucp_ifunc_am &am, Clock::time_point now)
{
    for (size_t i = am.under_way.size(); i-- > 0;) {
        if (i >= am.under_way.size()) {
            continue; /* source_failed() took several */
        }
        PendingReceive *pending = am.under_way[i];
        if (now - pending->started < am.receive_timeout) {
            continue;
        }
        ucp_ep_h        source = pending->reply_ep;
        PeerOriginScope from(origin_of(am, source, nullptr));
        ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_message, 0,
                            "ifunc: the data of a %zu-byte active message "
                            "did not arrive within "
                            "UCX_IFUNC_AM_RECEIVE_TIMEOUT; message dropped",
                            pending->length);
        am.state->counters.count_reject(Reject::lost);
        abandon(am, pending);
        source_failed(am, source);
    }
}

void data_received(void *request, ucs_status_t status, size_t, void *user_data)
{
    std::unique_ptr<PendingReceive> pending(
            static_cast<PendingReceive *>(user_data));
    ucp_request_free(request);
    if (pending->am == nullptr) {
        /* Given up already: only its buffer is left to free. */
        std::lock_guard<std::mutex> guard(abandoned_lock);
        for (auto &p : abandoned) {
            if (p.get() == pending.get()) {
                p.release();
            }
        }
        abandoned.erase(
                std::remove(abandoned.begin(), abandoned.end(), nullptr),
                abandoned.end());
        return;
    }
    ucp_ifunc_am &am = *pending->am;
    auto          under_way =
            std::find(am.under_way.begin(), am.under_way.end(), pending.get());
    if (under_way == am.under_way.end()) {
        return; /* not one start_receive() posted: nothing to undo */
    }
    am.under_way.erase(under_way);
    --am.receiving;
    /* No exception may unwind through UCX. */
    try {
        if (status != UCS_OK) {
            /* The source's doing (it died or went away): a warning. */
            PeerOriginScope from(origin_of(am, pending->reply_ep, nullptr));
            ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_message, 0,
                                "ifunc: receiving a %zu-byte message failed: "
                                "%s; message dropped",
                                pending->length, ucs_status_string(status));
            am.state->counters.count_reject(Reject::lost);
            source_failed(am, pending->reply_ep);
        } else {
            pending->run();
        }
    } catch (const std::exception &e) {
        warn_dropped(am, pending->length, pending->reply_ep, e.what());
    }
    pending.reset(); /* its buffer serves the next one */
    sweep(am, Clock::now());
    start_waiting(am);
}

void start_receive(std::unique_ptr<PendingReceive> pending)
{
    ucp_ifunc_am &am = *pending->am;
    pending->buffer  = am.buffers.take(pending->length, &pending->capacity);
    am.receiving_bytes += pending->capacity;
    pending->started = Clock::now();
    ucp_request_param_t recv;
    recv.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    recv.cb.recv_am = data_received;
    recv.user_data  = pending.get();
    /* Under way before the call: UCX may complete the receive inside it
     * (a source whose endpoint failed), calling data_received() at once. */
    am.under_way.reserve(kMaxReceiving + 1); /* no throw once posted */
    PendingReceive *posted = pending.release();
    am.under_way.push_back(posted);
    ++am.receiving;
    ucs_status_ptr_t request =
            ucp_am_recv_data_nbx(am.worker, posted->data_desc,
                                 posted->buffer.get(), posted->length, &recv);
    if (UCS_PTR_IS_PTR(request)) {
        return; /* data_received() runs it, or ran it */
    }
    auto under_way =
            std::find(am.under_way.begin(), am.under_way.end(), posted);
    if (under_way == am.under_way.end()) {
        return; /* taken care of already */
    }
    am.under_way.erase(under_way);
    --am.receiving;
    pending.reset(posted);
    if (UCS_PTR_IS_ERR(request)) {
        PeerOriginScope from(origin_of(am, pending->reply_ep, nullptr));
        ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_message, 0,
                            "ifunc: receiving a %zu-byte message failed: %s; "
                            "message dropped",
                            pending->length,
                            ucs_status_string(UCS_PTR_STATUS(request)));
        am.state->counters.count_reject(Reject::lost);
    } else {
        pending->run();
    }
}

/* Whether a message of @a length bytes may be taken at all; if not, logs
 * why and returns the status its source's send completes with. Only a
 * rendezvous message can wait, so only one is refused for want of room to
 * wait: an eager one is here already, and refusing it would lose it (its
 * source's send has completed). */
ucs_status_t admit(ucp_ifunc_am &am, size_t length, bool rndv)
{
    if (length > am.max_message) {
        ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_too_large, 0,
                            "ifunc active message of %zu bytes refused: "
                            "larger than UCX_IFUNC_MAX_AM_MESSAGE (%zu "
                            "bytes) allows; nothing was allocated",
                            length, am.max_message);
        am.state->counters.count_reject(Reject::too_large);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (rndv && (am.waiting.size() >= kMaxWaiting)) {
        ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_too_large, 0,
                            "ifunc active message of %zu bytes refused: %zu "
                            "rendezvous messages wait for receive memory "
                            "already (UCX_IFUNC_MAX_AM_RNDV_MEMORY); the "
                            "source may send it again",
                            length, am.waiting.size());
        am.state->counters.count_reject(Reject::busy);
        return UCS_ERR_NO_RESOURCE;
    }
    return UCS_OK;
}

/* A message that arrives by rendezvous: received into a buffer of the
 * service when there is room (may_receive()), else it waits. */
ucs_status_t receive_rndv(ucp_ifunc_am &am, const void *header,
                          size_t header_length, bool full,
                          const AmFullHeader &full_header, void *data,
                          size_t length, ucp_ep_h reply_ep)
{
    auto pending       = std::make_unique<PendingReceive>();
    pending->am        = &am;
    pending->data_desc = data;
    pending->length    = length;
    pending->full      = full_header;
    pending->reply_ep  = reply_ep;
    if (!full) {
        const char *bytes = static_cast<const char *>(header);
        pending->ref_header.assign(bytes, bytes + header_length);
    }
    /* Each arrival looks for receives that timed out: a source's death
     * shows nowhere else. */
    sweep(am, Clock::now());
    start_waiting(am);
    if (must_wait(am, length, reply_ep)) {
        /* The descriptor stays valid until its receive starts. */
        am.waiting.push_back(std::move(pending));
        return UCS_INPROGRESS;
    }
    start_receive(std::move(pending));
    return UCS_OK;
}

ucs_status_t am_message(void *arg, const void *header, size_t header_length,
                        void *data, size_t length,
                        const ucp_am_recv_param_t *param)
{
    auto        &am          = *static_cast<ucp_ifunc_am *>(arg);
    bool         full        = (header_length == sizeof(AmFullHeader));
    AmFullHeader full_header = {};
    ucp_ep_h     reply_ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
                                    ? param->reply_ep
                                    : nullptr;
    bool         rndv     = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV);
    if (ucs_unlikely(bool(am.admits)) &&
        ((reply_ep == nullptr) || !am.admits(reply_ep))) {
        /* Not from a peer that proved its key: nothing of it runs or is
         * logged (a rendezvous one is not even received). */
        count_dropped(am, rndv ? 0 : length, Reject::untrusted);
        return rndv ? UCS_ERR_REJECTED : UCS_OK;
    }
    if (ucs_unlikely(reply_ep == nullptr) && am.need_source) {
        /* Its code could not tell or answer its source: peers of this
         * build send every message with the reply flag. */
        ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_message, 0,
                            "ifunc active message of %zu bytes without "
                            "UCX's reply flag names no source; message "
                            "dropped",
                            length);
        count_dropped(am, rndv ? 0 : length, Reject::untrusted);
        return rndv ? UCS_ERR_REJECTED : UCS_OK;
    }
    DeliveringFrom from(reply_ep); /* its source, for the code */
    /* No exception may unwind through UCX. */
    try {
        if (full) {
            std::memcpy(&full_header, header, sizeof(full_header));
        }
        PeerOrigin origin =
                origin_of(am, reply_ep, full ? &full_header.token : nullptr);
        PeerOriginScope from(origin);
        if (!full && (header_length != kRefHeaderLength) &&
            (header_length != kReportedRefHeaderLength)) {
            ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::am_message, 0,
                                "ifunc active message with a %zu-byte "
                                "header is not an ifunc message; message "
                                "dropped",
                                header_length);
            /* A rendezvous one's data is not received. */
            count_dropped(am, rndv ? 0 : length, Reject::bad_frame);
            return UCS_OK;
        }
        if (full && (full_header.reserved != 0)) {
            ucx_ifunc_peer_warn(
                    am.state->peer_log, PeerProblem::am_message, 0,
                    "ifunc active message whose header's "
                    "reserved word is 0x%llx, not 0; message "
                    "dropped",
                    static_cast<unsigned long long>(full_header.reserved));
            count_dropped(am, rndv ? 0 : length, Reject::bad_frame);
            return UCS_OK;
        }
        ucs_status_t status = admit(am, length, rndv);
        if (status != UCS_OK) {
            if (!rndv) {
                am.state->counters.count_bytes(length); /* it is here */
                /* A refused rendezvous message's source hears it from
                 * its send; an eager one's from its report, if asked
                 * (a full frame's is in its frame, not read here: a peer
                 * refuses those itself, knowing this limit). */
                report_drop(ref_report(header, full ? 0 : header_length),
                            Reject::too_large);
            }
            /* A refused rendezvous completes the source's send with this
             * status; an eager message is in UCX's memory already, and
             * UCX takes nothing but UCS_OK for it. */
            return rndv ? status : UCS_OK;
        }
        if (rndv) {
            return receive_rndv(am, header, header_length, full, full_header,
                                data, length, reply_ep);
        }
        /* Read in place; only a misaligned payload is copied. */
        if (full) {
            run_full(am, static_cast<char *>(data), length, full_header,
                     reply_ep, origin.source);
        } else {
            run_ref(am, static_cast<const char *>(header), header_length,
                    static_cast<char *>(data), length);
        }
    } catch (const std::exception &e) {
        warn_dropped(am, length, reply_ep, e.what());
    }
    return UCS_OK;
}

/* What is wrong with a reply (AmReply) that arrived on @a reply_ep for
 * the AM endpoint @a am_ep of its token, or nullptr if it may be
 * believed: only the target that AM endpoint sends to answers on its
 * endpoint, and only with an ISA and a code index a target sends. */
const char *reply_problem(const AmReply &reply, const ucp_ifunc_am_ep &am_ep,
                          ucp_ep_h reply_ep)
{
    if (reply_ep != am_ep.ep) {
        return "came on another endpoint than its AM endpoint sends on";
    }
    if ((reply.machine > UINT16_MAX) ||
        !known_machine(uint16_t(reply.machine))) {
        return "names an ISA this build does not know";
    }
    if (!code_index_well_formed(reply.code_index)) {
        return "names a code index no target gives";
    }
    return nullptr;
}

ucs_status_t am_reply(void *arg, const void *header, size_t      header_length,
                      void *, size_t, const ucp_am_recv_param_t *param)
{
    auto    &am       = *static_cast<ucp_ifunc_am *>(arg);
    ucp_ep_h reply_ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
                                ? param->reply_ep
                                : nullptr;
    /* No exception may unwind through UCX. */
    try {
        PeerOriginScope from(origin_of(am, reply_ep, nullptr));
        AmReply         reply;
        if ((header_length != sizeof(reply)) || (reply_ep == nullptr)) {
            ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::bad_reply, 0,
                                "ifunc: reply with a %zu-byte header%s "
                                "ignored",
                                header_length,
                                (reply_ep == nullptr)
                                        ? " and no endpoint to tell its sender"
                                        : "");
            return UCS_OK;
        }
        std::memcpy(&reply, header, sizeof(reply));
        std::lock_guard<std::mutex> guard(am.lock);
        auto                        it = am.eps.find(reply.token);
        if (it == am.eps.end()) {
            /* For an AM endpoint destroyed since (or a guess): nothing to
             * learn. */
            ucs_debug("ifunc: reply for no AM endpoint of this service "
                      "ignored");
            return UCS_OK;
        }
        const char *problem = reply_problem(reply, *it->second, reply_ep);
        if (problem != nullptr) {
            ucx_ifunc_peer_warn(am.state->peer_log, PeerProblem::bad_reply, 0,
                                "ifunc: a reply to an AM endpoint %s; "
                                "ignored",
                                problem);
            return UCS_OK;
        }
        /* The ISA first: a send that sees the code held must also see
         * which ISA's code that is. */
        it->second->codes.set_machine(uint16_t(reply.machine));
        it->second->codes.learn(reply.code_id, reply.code_index);
    } catch (const std::exception &e) {
        ucs_error("ifunc: a reply could not be handled: %s", e.what());
    }
    return UCS_OK;
}

/* Lets the receives under way complete, within receive_timeout (they
 * write into the service's buffers), gives up the rest, and drops the
 * messages still waiting. */
void finish_receives(ucp_ifunc_am &am)
{
    am.closing    = true;
    auto deadline = Clock::now() + am.receive_timeout;
    while ((am.receiving > 0) && (Clock::now() < deadline)) {
        ucp_worker_progress(am.worker);
    }
    sweep(am, Clock::time_point::max());
    if (!am.waiting.empty()) {
        ucs_warn("ucp_ifunc_am_disable: %zu messages still waiting for "
                 "their data were dropped (their senders see them complete)",
                 am.waiting.size());
    }
    am.state->counters.count_reject(Reject::lost, am.waiting.size());
    /* Their sources did not fail as far as this service saw. */
    for (auto &pending : am.waiting) {
        ucp_am_data_release(am.worker, pending->data_desc);
    }
    am.waiting.clear();
}

ucs_status_t set_handler(ucp_worker_h worker, unsigned id,
                         ucp_am_recv_callback_t cb, void *arg)
{
    ucp_am_handler_param_t param;
    param.field_mask =
            UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
            UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    param.id    = id;
    param.cb    = cb;
    param.arg   = arg;
    param.flags = UCP_AM_FLAG_WHOLE_MSG;
    return ucp_worker_set_am_recv_handler(worker, &param);
}

/* Whether sends over @a ep must not use rendezvous. An endpoint made from
 * the target's worker address has no connection manager lane, and the
 * target's endpoint back to it has no error handler: when the target's
 * rendezvous read from a source that died fails, UCX 1.13 destroys that
 * endpoint and then aborts on the source's requests still queued (README,
 * known UCX issues). Eager sends leave the target nothing to read. */
bool eager_only_endpoint(ucp_ep_h ep)
{
    ucp_ep_attr_t attr;
    attr.field_mask = UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR;
    bool eager_only = (ucp_ep_query(ep, &attr) != UCS_OK);
    ucs_debug("ifunc AM endpoint over ucp ep %p: %s", ep,
              eager_only ? "eager only (made from a worker address)"
                         : "rendezvous allowed (connected through a listener)");
    return eager_only;
}

/* A message the target would refuse for its size: on an eager-only
 * endpoint it could refuse it only once UCX had received all of it, and
 * the source would not learn of it, so it is refused here, by this
 * process's UCX_IFUNC_MAX_AM_MESSAGE (normally the target's too). */
bool too_large_for_eager(const ucp_ifunc_am_ep &am_ep, size_t length)
{
    if (!(am_ep.send_flags & UCP_AM_SEND_FLAG_EAGER) ||
        (length <= am_ep.am->max_message)) {
        return false;
    }
    ucs_error("ifunc: a %zu-byte active message is larger than "
              "UCX_IFUNC_MAX_AM_MESSAGE (%zu bytes) allows over an endpoint "
              "made from a worker address (sent eagerly); raise the limit or "
              "connect through a listener",
              length, am_ep.am->max_message);
    return true;
}

} // namespace

namespace ucx_ifunc {

ucs_status_t am_enable(ucp_context_h context, ucp_worker_h worker,
                       const ucp_ifunc_am_params_t *params,
                       ucp_ifunc_am_h              *am_p)
{
    constexpr uint64_t known =
            UCP_IFUNC_AM_FIELD_AM_ID | UCP_IFUNC_AM_FIELD_TARGET_ARGS;
    uint64_t mask  = (params != nullptr) ? params->field_mask : 0;
    unsigned am_id = (mask & UCP_IFUNC_AM_FIELD_AM_ID)
                             ? params->am_id
                             : UCP_IFUNC_AM_ID_DEFAULT;
    if ((context == nullptr) || (worker == nullptr) || (am_p == nullptr) ||
        (mask & ~known) || (am_id >= UINT16_MAX)) {
        ucs_error("ucp_ifunc_am_enable: need a context, a worker, am_p, "
                  "an AM id below %u and no unknown parameter",
                  unsigned(UINT16_MAX));
        return UCS_ERR_INVALID_PARAM;
    }
    auto am         = std::make_unique<ucp_ifunc_am>();
    am->context     = context;
    am->worker      = worker;
    am->am_id       = am_id;
    am->target_args = (mask & UCP_IFUNC_AM_FIELD_TARGET_ARGS)
                              ? params->target_args
                              : nullptr;
    am->state       = share_target_state(context);
    am->max_message = am->state->registry.max_am_message();
    am->max_receiving_bytes =
            std::max(am->state->registry.max_am_rndv_memory(), am->max_message);
    am->receive_timeout = std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(
                    am->state->registry.am_receive_timeout()));
    ucs_status_t status = set_handler(worker, am_id, am_message, am.get());
    if (status == UCS_OK) {
        status = set_handler(worker, am_id + 1, am_reply, am.get());
        if (status != UCS_OK) {
            set_handler(worker, am_id, nullptr, nullptr);
        }
    }
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_am_enable: setting the handlers of AM ids "
                  "%u and %u failed: %s (does the context have "
                  "UCP_FEATURE_AM?)",
                  am_id, am_id + 1, ucs_status_string(status));
        return status;
    }
    *am_p = am.release();
    return UCS_OK;
}

void am_disable(ucp_ifunc_am_h am)
{
    if (am == nullptr) {
        return;
    }
    std::unique_ptr<ucp_ifunc_am> owner(am);
    set_handler(am->worker, am->am_id, nullptr, nullptr);
    set_handler(am->worker, am->am_id + 1, nullptr, nullptr);
    finish_receives(*am);
}

ucs_status_t am_ep_create(ucp_ifunc_am_h am, ucp_ep_h ep,
                          ucp_ifunc_am_ep_h *am_ep_p)
{
    if ((am == nullptr) || (ep == nullptr) || (am_ep_p == nullptr)) {
        ucs_error("ucp_ifunc_am_ep_create: am, ep and am_ep_p must not "
                  "be NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    auto am_ep        = std::make_unique<ucp_ifunc_am_ep>();
    am_ep->am         = am;
    am_ep->ep         = ep;
    am_ep->send_flags = eager_only_endpoint(ep) ? UCP_AM_SEND_FLAG_EAGER : 0;
    std::lock_guard<std::mutex> guard(am->lock);
    /* Random, so that no peer can name another's AM endpoint (its
     * replies must also come on the endpoint: am_reply()), and never
     * one in use; a late reply for a destroyed AM endpoint finds
     * nothing, but for a chance of 2^-64. */
    crypto_init();
    uint64_t token = 0;
    while ((token == 0) || (am->eps.count(token) != 0)) {
        randombytes_buf(&token, sizeof(token));
    }
    am_ep->full_header->token = token;
    am->eps.emplace(token, am_ep.get());
    *am_ep_p = am_ep.release();
    return UCS_OK;
}

void am_ep_destroy(ucp_ifunc_am_ep_h am_ep)
{
    if (am_ep == nullptr) {
        return;
    }
    std::unique_ptr<ucp_ifunc_am_ep> owner(am_ep);
    std::lock_guard<std::mutex>      guard(am_ep->am->lock);
    am_ep->am->eps.erase(am_ep->full_header->token);
    am_ep->am->retired_headers.push_back(std::move(am_ep->full_header));
    for (auto &word : am_ep->ref_words) {
        am_ep->am->retired_ref_words.push_back(std::move(word.second));
    }
}

} // namespace ucx_ifunc

namespace ucx_ifunc {

namespace {

/* The AM header of a reference (multi_isa.h: the target's index of the
 * code, and the lead), kept by the AM endpoint, and then by its service,
 * for as long as a send may read it. */
[[gnu::noinline]] const uint64_t &kept_ref_word(ucp_ifunc_am_ep &am_ep,
                                                uint64_t         word)
{
    std::lock_guard<std::mutex> guard(am_ep.ref_words_lock);
    std::unique_ptr<uint64_t>  &kept = am_ep.ref_words[word];
    if (kept == nullptr) {
        kept = std::make_unique<uint64_t>(word);
    }
    am_ep.last_ref_word.store(kept.get(), std::memory_order_release);
    return *kept;
}

inline const uint64_t &am_ref_word(ucp_ifunc_am_ep &am_ep, uint64_t word)
{
    /* The common case, the same code again: no lock. A word once kept is
     * never changed or freed while the AM endpoint lives. */
    const uint64_t *last = am_ep.last_ref_word.load(std::memory_order_acquire);
    if ((last != nullptr) && (*last == word)) {
        return *last;
    }
    return kept_ref_word(am_ep, word);
}

} // namespace

inline ucp_request_param_t AmPath::request_param() const
{
    ucp_request_param_t param;
    if (param_ != nullptr) {
        param = *param_;
    } else {
        param.op_attr_mask = 0;
    }
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = am_ep_.send_flags;
    return param;
}

ucs_status_t AmPath::write_ref(const Outgoing &out)
{
    const Reference ref = reference_of(out);
    /* A reference's one word has no room for a hop count (frame.h): a
     * message sent on by running code goes whole. So does a message built
     * whole that asked for a report (its frame carries the report id); a
     * reference from the caller's memory carries it after its word. */
    if ((ref.hop_count != 0) || ((out.msg != nullptr) && (ref.report != 0))) {
        return write_full(out);
    }
    const char *data = static_cast<const char *>(ref.payload);
    size_t      size = ref.length;
    uint64_t    lead = 0;
    if ((out.msg != nullptr) && (size >= kLeadMin) && (size <= kLeadMax)) {
        /* Bytes of the message's own frame before its payload (its offset
         * is far beyond 8): the target skips them. Never from the caller's
         * memory, of which nothing before the payload may be sent. */
        lead = msg_isa_table(*out.msg).am_lead;
        data -= lead;
        size += lead;
    }
    if (too_large_for_eager(am_ep_, size)) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    ucp_request_param_t param = request_param();
    /* A large one may come by rendezvous: the reply endpoint then names its
     * source, whose messages the target must drop untouched if it dies
     * (source_failed()). */
    if (ref.length >= kRefReplyFromSize) {
        param.flags |= UCP_AM_SEND_FLAG_REPLY;
    }
    const uint64_t &word          = am_ref_word(am_ep_, out.choice->code_index |
                                                                (lead << kAmLeadShift));
    const void     *header        = &word;
    size_t          header_length = kRefHeaderLength;
    if (ref.report != 0) {
        /* The target answers on the endpoint UCP names only with this
         * flag. */
        param.flags |= UCP_AM_SEND_FLAG_REPLY;
        am_reported_ref_header(word, ref.report, reported_header_);
        header        = reported_header_;
        header_length = kReportedRefHeaderLength;
    }
    return sent(ucp_am_send_nbx(am_ep_.ep, am_ep_.am->am_id, header,
                                header_length, data, size, &param),
                am_ep_.sent_by_ref);
}

ucs_status_t AmPath::write_full(const Outgoing &out)
{
    const ucp_ifunc_msg_t &msg     = *out.msg;
    uint16_t               machine = out.choice->machine;
    const ForeignFrame    *foreign =
            ((machine != 0) && (machine != arch::elf_machine()))
                       ? foreign_frame(msg, machine)
                       : nullptr;
    /* Until the target's ISA is known (a reply says it), every ISA's frame
     * the library has (msg_isa_table). */
    const IsaTable &table = msg_isa_table(msg);
    bool            own_isa =
            (foreign == nullptr) && ((machine != 0) || (table.n_foreign == 0));
    size_t length = own_isa                ? msg.frame_size
                    : (foreign != nullptr) ? foreign->frame_size
                                           : table.all_frames_size;
    if (too_large_for_eager(am_ep_, length)) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    ucp_request_param_t param = request_param();
    param.flags |= UCP_AM_SEND_FLAG_REPLY;
    const AmFullHeader *header = am_ep_.full_header.get();
    ucs_status_ptr_t    request;
    if (own_isa) {
        request = ucp_am_send_nbx(am_ep_.ep, am_ep_.am->am_id, header,
                                  sizeof(*header), msg.frame, msg.frame_size,
                                  &param);
    } else {
        /* Gathered from the message: another ISA's frame, or every ISA's
         * one after the other. */
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        param.datatype = ucp_dt_make_iov();
        request        = (foreign != nullptr)
                                 ? ucp_am_send_nbx(am_ep_.ep, am_ep_.am->am_id, header,
                                                   sizeof(*header), foreign->iov, 3,
                                                   &param)
                                 : ucp_am_send_nbx(am_ep_.ep, am_ep_.am->am_id, header,
                                                   sizeof(*header), table.all_frames,
                                                   table.all_frames_count, &param);
    }
    return sent(request, am_ep_.sent_with_code);
}

ucs_status_ptr_t am_send(ucp_ifunc_am_ep_h am_ep, const ucp_ifunc_msg_t &msg,
                         const ucp_request_param_t *param, bool with_code)
{
    AmPath       path(*am_ep, param);
    ucs_status_t status = send_built(
            path, msg, choose_code(am_ep->codes, with_code, MsgCodes{msg}),
            "ucp_ifunc_am_send_nbx");
    return (status == UCS_INPROGRESS) ? path.request() : UCS_STATUS_PTR(status);
}

ucs_status_t am_ep_query(ucp_ifunc_am_ep_h am_ep, ucp_ifunc_ep_attr_t *attr)
{
    if ((am_ep == nullptr) || (attr == nullptr)) {
        ucs_error("ucp_ifunc_am_ep_query: am_ep and attr must not be NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    if (attr->field_mask & UCP_IFUNC_EP_ATTR_FIELD_FREE_SLOTS) {
        attr->free_slots = 0;
    }
    if (attr->field_mask & UCP_IFUNC_EP_ATTR_FIELD_SENT_WITH_CODE) {
        attr->sent_with_code = am_ep->sent_with_code;
    }
    if (attr->field_mask & UCP_IFUNC_EP_ATTR_FIELD_SENT_BY_REF) {
        attr->sent_by_ref = am_ep->sent_by_ref;
    }
    if (attr->field_mask & UCP_IFUNC_EP_ATTR_FIELD_MACHINE) {
        attr->machine = am_ep->codes.machine();
    }
    return UCS_OK;
}

void am_count_as_peer(ucp_ifunc_am &am)
{
    am.path = RunPath::peer;
}

TargetCodes &am_ep_codes(ucp_ifunc_am_ep &am_ep)
{
    return am_ep.codes;
}


void am_reported_ref_header(uint64_t word, uint16_t report, char *header)
{
    uint32_t id = report;
    std::memcpy(header, &word, sizeof(word));
    std::memcpy(header + sizeof(word), &id, sizeof(id));
}

void am_forget_source(ucp_ifunc_am &am, ucp_ep_h reply_ep)
{
    forget_endpoint(am, reply_ep);
}

bool am_drop_waiting_of(ucp_ifunc_am &am, ucp_ep_h reply_ep)
{
    size_t before = am.waiting.size();
    am.waiting.erase(
            std::remove_if(am.waiting.begin(), am.waiting.end(),
                           [&](const std::unique_ptr<PendingReceive> &p) {
                               if (p->reply_ep != reply_ep) {
                                   return false;
                               }
                               ucp_am_data_release(am.worker, p->data_desc);
                               return true;
                           }),
            am.waiting.end());
    am.state->counters.count_reject(Reject::lost, before - am.waiting.size());
    auto maybe_its = [&](const PendingReceive *p) {
        return (p->reply_ep == reply_ep) || (p->reply_ep == nullptr);
    };
    return std::any_of(am.under_way.begin(), am.under_way.end(), maybe_its) ||
           std::any_of(am.waiting.begin(), am.waiting.end(),
                       [&](const std::unique_ptr<PendingReceive> &p) {
                           return maybe_its(p.get());
                       });
}

void am_admit_only(ucp_ifunc_am &am, std::function<bool(ucp_ep_h)> admits)
{
    am.admits = std::move(admits);
}

void am_ep_always_reply(ucp_ifunc_am_ep &am_ep)
{
    am_ep.send_flags |= UCP_AM_SEND_FLAG_REPLY;
}

void am_need_source(ucp_ifunc_am &am)
{
    am.need_source = true;
}

} // namespace ucx_ifunc
