/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "peers": the default path (ucp_ifunc_worker_*, ucp_ifunc_listen,
 * ucp_ifunc_peer_*, ucp_ifunc_source_query). A peer is a UCP endpoint with
 * what this process knows of the process behind it: its ISA, the code it
 * said it holds (through the paths below, which keep that knowledge:
 * channel.h, am.h), what it proved, and the path to it.
 *
 * Network peers reach only the contexts the ifunc worker owns
 * (peer_net.h): listeners and connects by address use one with active
 * messages alone; channels are mapped by one restricted to shared memory.
 * Peers on the caller's endpoints use the caller's worker. Connection
 * set-up (peer_wire.h) is the same both ways, so that either side of one
 * endpoint may send: hello, then each side's proof (peer_auth.h: its host,
 * for a channel; its key, with UCX_IFUNC_PEER_KEYS), then a welcome to a
 * peer whose proof holds, with a channel where it proved its host; the
 * welcomed side that connected opens it and says its path; both flush and
 * say ready. Each message counts only on its peer's own endpoint, with
 * its random token; no worker address or key of a peer that did not
 * prove it runs on this host reaches UCX.
 *
 * The channel's key is unpacked on an endpoint the shared-memory worker
 * makes from the address in the welcome: on UCX 1.13 an endpoint of a
 * listener's connection, and any with peer error handling, has network
 * lanes only, whose keys cannot be mapped here. That endpoint (without
 * error handling, as UCX requires for shared memory) carries nothing:
 * failures are still seen on the peer's own endpoint.
 *
 * Everything that creates or destroys (endpoints, channels, peers) happens
 * in ucp_ifunc_worker_progress, outside UCP's callbacks, which only note
 * what arrived. Sends go through the send core (send_core.h): the code is
 * chosen once per message; a reference from the caller's memory where the
 * target holds the code, else a message built with the payload copied in,
 * written through the peer's ChannelPath or AmPath, which send the code
 * until the target has said it holds it.
 */
#include "ucp/ifunc/peer/peer.h"

#include "ucp/ifunc/deliver/msg.h"
#include "ucp/ifunc/paths/am.h"
#include "ucp/ifunc/base/api_guard.h"
#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/paths/channel.h"
#include "ucp/ifunc/base/config.h"
#include "ucp/ifunc/load/context.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/deliver/multi_isa.h"
#include "ucp/ifunc/load/registry.h"
#include "ucp/ifunc/peer/peer_auth.h"
#include "ucp/ifunc/base/peer_log.h"
#include "ucp/ifunc/peer/peer_net.h"
#include "ucp/ifunc/peer/peer_wire.h"
#include "ucp/ifunc/sandbox/sandbox.h"

#include <ucs/debug/log_def.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <chrono>
#include <cstring>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ucx_ifunc {
namespace {

constexpr unsigned kDefaultTimeout = 10000; /* ms */
constexpr unsigned kPollBatch      = 64;
constexpr unsigned kUcxEvery       = 256;
constexpr unsigned kRetryMs        = 50;  /* between connection attempts */
constexpr unsigned kAmWindow       = 256; /* AM sends in flight per peer */
/* Delivery reports one source awaits from one peer at most; a target
 * keeps as many waiting to be sent to one peer (beyond: dropped, one
 * warning), so that an honest source never loses one and a source that
 * never receives makes a target hold no more. */
constexpr size_t kMaxReports = 4096;

/* A close waits this long at most for the other side to answer its bye:
 * an answer needs the other side's progress, and a side that does not
 * progress hears of a failure instead. */
constexpr unsigned kByeWaitMs = 1000;

/* A set-up message as it arrived, handled in progress. */
struct Control {
    ControlHeader     header;
    std::vector<char> data;
    ucp_ep_h          reply_ep;
    bool              on_user_worker; /* else the ifunc worker's own */
};

/* Ids of peers, for logs: never used twice in a process. */
std::atomic<uint64_t> last_peer_id{0};

uint64_t now_ms()
{
    return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count());
}

/* Splits "HOST:PORT", ":PORT" or "PORT" (IPv6 hosts in brackets or bare)
 * and resolves it; false (logged) if it cannot. */
bool resolve_address(const char *function, const char *address, bool passive,
                     sockaddr_storage *addr, socklen_t *addr_len)
{
    std::string text = (address != nullptr) ? address : "";
    std::string host, port = text;
    size_t      colon = text.rfind(':');
    if (colon != std::string::npos) {
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if ((host.size() >= 2) && (host.front() == '[') &&
            (host.back() == ']')) {
            host = host.substr(1, host.size() - 2);
        }
    }
    addrinfo hints    = {};
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = passive ? AI_PASSIVE : 0;
    addrinfo *result  = nullptr;
    int       error   = port.empty()
                                ? EAI_NONAME
                                : getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                      port.c_str(), &hints, &result);
    if ((error != 0) || (result == nullptr)) {
        ucs_error("%s: cannot resolve address '%s' (expected HOST:PORT, "
                  ":PORT or PORT): %s",
                  function, text.c_str(),
                  (error != 0) ? gai_strerror(error) : "no address");
        return false;
    }
    std::memcpy(addr, result->ai_addr, result->ai_addrlen);
    *addr_len = result->ai_addrlen;
    freeaddrinfo(result);
    return true;
}

/* A peer that sandboxed code of one ifunc may send to; peer nullptr
 * once it closed (the handle then names none). */
struct SandboxPeerGrant {
    ucp_ifunc_peer         *peer;
    bool                    has_signer;
    std::array<uint8_t, 32> signer;
};

/* A message that could not be sent at once, in order. */
struct QueuedSend {
    ucp_ifunc_msg_t msg;
    bool            with_code;
    uint16_t        report; /* its report id, 0 for none */
};

/* A delivery report a source awaits. */
struct AwaitedReport {
    ucp_ifunc_report_cb_t cb;
    void                 *user_data;
};

/* An active message send in flight: what it sends (to send it again if
 * the target refuses it for now) and what it needs when it completes. */
struct InFlight {
    ucp_ifunc_peer *peer;
    ucp_ifunc_msg_t msg = {nullptr, 0}; /* a message built whole, freed then */
    CodeChoice      choice    = {};     /* the send's, for out */
    bool            with_code = false;  /* msg's: the caller asked for it */
    Outgoing        out       = {};     /* what goes (send_core.h): a
                                           reference to the payload or msg */
    std::vector<char>   copy; /* the payload, when the caller's is reused */
    ucp_ifunc_send_cb_t cb        = nullptr;
    void               *user_data = nullptr;
    /* Its report id (0: none), and a reported reference's AM header, which
     * UCX reads until the send completes. */
    uint16_t report = 0;
    char     report_header[kReportedRefHeaderLength];
};

} // namespace
} // namespace ucx_ifunc

using namespace ucx_ifunc;

struct ucp_ifunc_peer {
    ucp_ifunc_worker *iworker = nullptr;
    ucp_ep_h          ep      = nullptr;
    /* The worker of ep (the caller's, or the ifunc worker's own network
     * one) and its AM service. */
    ucp_worker_h   worker      = nullptr;
    ucp_ifunc_am_h am          = nullptr;
    bool           own_ep      = false; /* made here: closed here */
    bool           accepted    = false; /* its side connected to ours: we
                                        open nothing it offers */
    uint64_t       id          = ++last_peer_id; /* for logs: never reused */
    uint64_t       token       = 0; /* ours, random, in messages to us */
    uint64_t       their_token = 0; /* theirs, in our messages */
    uint64_t       created_ms  = now_ms();
    std::string    remote_address; /* of an accepted connection */
    /* What it proved (peer_auth.h): its key, with UCX_IFUNC_PEER_KEYS,
     * and that it runs on this host, for a channel. */
    AuthNonce nonce         = auth_nonce(); /* our challenge to it */
    HelloData their_hello   = {};
    bool      proof_sent    = false;
    bool      admitted      = false; /* its proof came and holds */
    bool      key_verified  = false;
    PublicKey key           = {}; /* verified, else zeros */
    bool      same_host     = false;
    bool      wants_channel = false; /* its hello asked for one */
    bool      their_auth    = false; /* its hello asks for our key */
    /* Its hello offers a proof of its host, and we may store into a
     * channel of its: we prove ours in turn. */
    bool             wanted_channel_from_them = false;
    bool             reported_ok   = false; /* peer_cb heard it was set up */
    size_t           channel_bytes = 0;     /* of its channel, in the budget */
    ucp_ifunc_path_t wanted        = UCP_IFUNC_PATH_AUTO;
    ucp_ifunc_path_t path          = UCP_IFUNC_PATH_AUTO; /* until welcomed */
    uint16_t         machine       = 0;
    bool             welcomed      = false; /* we may send */
    bool             greeted       = false; /* their hello came */
    bool             hello_sent    = false;
    /* Once welcomed and greeted, each side flushes its endpoints to the
     * other (UCX may still be wiring up lanes, which needs both sides to
     * progress) and then says ready: a connect returns only after the
     * other side's ready, so neither side needs the other's progress
     * afterwards. */
    std::vector<void *> settle_flushes;
    bool                settle_started = false;
    bool                settled        = false; /* flushed, ready sent */
    bool                got_ready      = false;
    ucs_status_t        status         = UCS_OK;
    bool                reported       = false; /* its failure, to peer_cb */
    unsigned            timeout_ms     = kDefaultTimeout;
    /* Closing (close_peers): a close of it is under way, which finishes
     * it; its bye, and the other side's answer; the other side's bye (a
     * clean close: UCP_IFUNC_PEER_CLOSED). */
    bool     closing        = false;
    bool     bye_sent       = false;
    bool     bye_answered   = false;
    bool     closed_by_peer = false;
    uint64_t close_deadline = 0; /* ms: sends may drain until then */
    uint64_t bye_deadline   = 0; /* ms: its answer may come until then */
    /* Sends that will not be delivered: dropped from the queue of a
     * failed peer, or ended by a close (UCS_ERR_CANCELED). */
    uint64_t lost = 0;

    ucp_ifunc_am_ep_h      am_ep      = nullptr;
    ucp_ifunc_channel_ep_h channel_ep = nullptr; /* ours, to its ring */
    ucp_ifunc_channel_h    channel    = nullptr; /* its, in our memory */
    /* Unpacks channel_ep's key: made by the shared-memory worker from the
     * address in the welcome of a peer we connected to. */
    ucp_ep_h map_ep = nullptr;

    std::deque<QueuedSend> queue;
    unsigned               in_flight = 0; /* refused ones included */
    /* Sends the target refused for now (UCS_ERR_NO_RESOURCE: too many
     * rendezvous messages wait there), sent again by progress. */
    std::deque<InFlight *> refused;
    bool                   listed = false;       /* in the worker's queued */
    uint64_t               sent_by_ref_here = 0; /* from the caller's memory */
    /* Bytes of the messages in queue and of those in flight by active
     * message (UCX_IFUNC_PEER_QUEUE_BYTES). */
    size_t held_bytes = 0;

    /* Delivery reports. As a source: those awaited, by report id (unique
     * among them), and the last id given. As a target: the entries to
     * send it, whether one report is in flight to it (its send's callback
     * clears it; shared, as the peer may go first), and whether it was
     * told of reports dropped. */
    std::unordered_map<uint16_t, AwaitedReport> reports;
    uint16_t                                    last_report = 0;
    std::vector<ReportEntry>                    reports_out;
    std::shared_ptr<bool> report_in_flight = std::make_shared<bool>(false);
    bool                  reporting_listed = false;
    bool                  reports_dropped  = false;

    ~ucp_ifunc_peer();
};

struct ucp_ifunc_listener {
    ucp_ifunc_worker *iworker;
    ucp_listener_h    listener = nullptr;
    ~ucp_ifunc_listener()
    {
        if (listener != nullptr) {
            ucp_listener_destroy(listener);
        }
    }
};

struct ucp_ifunc_worker {
    ucp_context_h       context; /* whose ifunc state runs the messages */
    ucp_worker_h        worker;  /* the caller's: peers on its endpoints */
    ucs_thread_mode_t   thread_mode;
    unsigned            am_id;
    void               *target_args;
    ucp_ifunc_path_t    path;
    ucp_ifunc_peer_cb_t peer_cb     = nullptr;
    void               *peer_cb_arg = nullptr;
    Config              config;
    std::shared_ptr<ContextState> state;        /* its PeerLog */
    ucp_ifunc_am_h                am = nullptr; /* on the caller's worker */
    /* Owned (peer_net.h), made when first needed: the network-facing
     * worker, active messages only (listeners, connects by address), with
     * its AM service; the shared-memory one, which maps channels. */
    std::unique_ptr<OwnedWorker> net;
    ucp_ifunc_am_h               net_am = nullptr;
    std::unique_ptr<OwnedWorker> shm;
    bool                         shm_tried = false;
    std::string                  shm_tls; /* "" : no shared memory */
    std::string                  net_tls; /* "" : UCX_TLS as set */
    HostProof                    proof;
    std::unique_ptr<PeerKeys>    keys;
    size_t                       channel_bytes = 0; /* of all channels */
    unsigned                     user_peers    = 0; /* on the caller's */
    unsigned                     setting_up    = 0; /* not set up yet */
    /* In ucp_ifunc_worker_destroy: no new peer, no peer_cb. */
    bool destroying = false;

    std::list<std::unique_ptr<ucp_ifunc_peer>> peers;
    /* The same peers, to check a handle that sandboxed code passes. */
    std::unordered_set<const ucp_ifunc_peer *>     live_peers;
    std::list<std::unique_ptr<ucp_ifunc_listener>> listeners;
    std::unordered_map<ucp_ep_h, ucp_ifunc_peer *> by_ep;
    /* Noted by UCP's callbacks, handled in progress. */
    /* With the listener each came on (a rejection names it). */
    std::deque<std::pair<ucp_listener_h, ucp_conn_request_h>> conn_requests;
    std::deque<Control>                                       controls;
    std::vector<ucp_ifunc_peer *>                             failed;
    /* Peers with a channel to poll, and with sends waiting. */
    std::vector<ucp_ifunc_peer *>          polled;
    std::vector<ucp_ifunc_peer *>          queued;
    std::vector<ucp_ifunc_peer *>          settling;  /* flushing to settle */
    std::vector<ucp_ifunc_peer *>          reporting; /* reports to send */
    std::vector<std::unique_ptr<InFlight>> spare_in_flight;
    unsigned in_flight = 0; /* active message sends of all peers */
    /* Every peer sends and receives by channel (set up, both ways): UCX
     * then carries only set-up, failures and messages larger than a slot,
     * and is progressed on every kUcxEvery-th call only. With TCP in
     * UCX_TLS (which connecting by address needs) each progress of the
     * worker polls its sockets with a system call, several times the cost
     * of a channel message. */
    bool     channels_only = false;
    unsigned since_ucx     = 0;
    /* The peers sandboxed code may send to, per ifunc: its handles
     * (ucp_ifunc_sandbox_peer_grant) are places in its vector, plus 1. */
    std::unordered_map<std::string, std::vector<SandboxPeerGrant>>
            sandbox_peer_grants;

    ~ucp_ifunc_worker();
};

namespace {

void remove_from(std::vector<ucp_ifunc_peer *> &list, ucp_ifunc_peer *peer)
{
    list.erase(std::remove(list.begin(), list.end(), peer), list.end());
}

void control_sent(void *request, ucs_status_t, void *user_data)
{
    delete static_cast<Control *>(user_data);
    ucp_request_free(request);
}

/* Sends a set-up message, always with the reply flag: the receiver takes
 * a set-up message only on the endpoint of the peer it names. */
ucs_status_t send_control(ucp_ep_h ep, unsigned am_id, ControlKind kind,
                          uint64_t token, uint64_t flags,
                          std::vector<char> data = {})
{
    auto  control = std::make_unique<Control>();
    auto &hdr     = control->header;
    hdr.magic     = kPeerMagic;
    hdr.version   = kPeerVersion;
    hdr.kind      = uint16_t(kind);
    hdr.token     = token;
    hdr.machine   = arch::elf_machine();
    hdr.flags     = flags;
    control->data = std::move(data);
    ucp_request_param_t param;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send            = control_sent;
    param.user_data          = control.get();
    param.flags              = UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t request = ucp_am_send_nbx(
            ep, am_id + 2, &control->header, sizeof(control->header),
            control->data.data(), control->data.size(), &param);
    if (UCS_PTR_IS_PTR(request)) {
        control.release(); /* control_sent() frees it */
        return UCS_OK;
    }
    return UCS_PTR_STATUS(request);
}

ucs_status_t send_control(ucp_ifunc_peer &peer, ControlKind kind,
                          uint64_t flags, std::vector<char> data = {})
{
    return send_control(peer.ep, peer.iworker->am_id, kind,
                        (kind == ControlKind::hello) ? peer.token
                                                     : peer.their_token,
                        flags, std::move(data));
}

template <typename T>
std::vector<char> bytes_of(const T &value)
{
    const char *bytes = reinterpret_cast<const char *>(&value);
    return std::vector<char>(bytes, bytes + sizeof(value));
}

/* Whether this side would store into a channel @a peer offers: shared
 * memory is in UCX_TLS and stores are allowed. It opens one only from a
 * peer that proved it runs on this host (welcome_arrived). */
bool may_open_channel(const ucp_ifunc_worker &iw, const ucp_ifunc_peer &peer)
{
    return (peer.wanted != UCP_IFUNC_PATH_AM) && !iw.shm_tls.empty() &&
           config_shm_direct();
}

ucs_status_t send_hello(ucp_ifunc_worker &iw, ucp_ifunc_peer &peer)
{
    peer.hello_sent = true;
    HelloData hello = {};
    if ((iw.path != UCP_IFUNC_PATH_AM) && !iw.shm_tls.empty()) {
        std::strncpy(hello.proof, iw.proof.name().c_str(),
                     sizeof(hello.proof) - 1);
    }
    hello.nonce       = peer.nonce;
    hello.max_message = iw.config.max_am_message;
    if (iw.keys->has_identity()) {
        hello.key = iw.keys->public_key();
    }
    uint64_t flags = (may_open_channel(iw, peer) ? kHelloWants : 0) |
                     (iw.keys->required() ? kHelloAuth : 0);
    return send_control(peer, ControlKind::hello, flags, bytes_of(hello));
}

/* Logs a warning about a set-up message through the context's PeerLog. */
#define peer_setup_warn(_iw, _peer_id, _fmt, ...)                              \
    ucx_ifunc_peer_warn((_iw).state->peer_log, PeerProblem::am_message,        \
                        (uint64_t(1) << 63) | (_peer_id), _fmt, ##__VA_ARGS__)

ucs_status_t control_arrived(ucp_ifunc_worker &iw, bool on_user_worker,
                             const void *header, size_t header_length,
                             void *data, size_t length,
                             const ucp_am_recv_param_t *param)
{
    ControlHeader hdr;
    ucp_ep_h reply_ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
                                ? param->reply_ep
                                : nullptr;
    auto     known    = iw.by_ep.find(reply_ep);
    uint64_t peer_id  = (known != iw.by_ep.end()) ? known->second->id : 0;
    if ((header_length != sizeof(hdr)) || (reply_ep == nullptr) ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        (length > kMaxWelcomeData)) {
        peer_setup_warn(iw, peer_id,
                        "ifunc peer: a set-up message of %zu + %zu bytes is "
                        "not one of this release; dropped",
                        header_length, length);
        return UCS_OK;
    }
    std::memcpy(&hdr, header, sizeof(hdr));
    if ((hdr.magic != kPeerMagic) || (hdr.version != kPeerVersion)) {
        peer_setup_warn(iw, peer_id,
                        "ifunc peer: a set-up message of version %u (this "
                        "process reads %u) dropped; both sides need the same "
                        "release",
                        unsigned(hdr.version), unsigned(kPeerVersion));
        return UCS_OK;
    }
    /* Bounded: each message is handled in the next progress, and a peer
     * that floods set-up messages fills its own UCX buffers first. */
    const char *bytes = static_cast<const char *>(data);
    iw.controls.push_back(Control{hdr, std::vector<char>(bytes, bytes + length),
                                  reply_ep, on_user_worker});
    return UCS_OK;
}

ucs_status_t control_on_user_worker(void *arg, const void *header,
                                    size_t header_length, void *data,
                                    size_t                     length,
                                    const ucp_am_recv_param_t *param)
{
    return control_arrived(*static_cast<ucp_ifunc_worker *>(arg), true, header,
                           header_length, data, length, param);
}

ucs_status_t control_on_net_worker(void *arg, const void *header,
                                   size_t header_length, void *data,
                                   size_t                     length,
                                   const ucp_am_recv_param_t *param)
{
    return control_arrived(*static_cast<ucp_ifunc_worker *>(arg), false, header,
                           header_length, data, length, param);
}

/* Whether @a peer is still being set up (it may not send yet, or the
 * other side's ready has not come). */
bool setting_up(const ucp_ifunc_peer &peer)
{
    return (peer.status == UCS_OK) && !(peer.settled && peer.got_ready);
}

void ep_failed(void *arg, ucp_ep_h, ucs_status_t status)
{
    auto *peer = static_cast<ucp_ifunc_peer *>(arg);
    if (peer->status == UCS_OK) {
        /* A failure of UCX's that reads as a clean close is told as a
         * failure once the peer is set up (while it is set up,
         * connect_once reads UCX's refused connection in it). */
        peer->status = ((status == UCP_IFUNC_PEER_CLOSED) && !setting_up(*peer))
                               ? UCS_ERR_CONNECTION_RESET
                               : status;
        peer->iworker->failed.push_back(peer);
    }
}

void conn_request_arrived(ucp_conn_request_h request, void *arg)
{
    auto *listener = static_cast<ucp_ifunc_listener *>(arg);
    listener->iworker->conn_requests.emplace_back(listener->listener, request);
}

ucs_status_t set_control_handler(ucp_ifunc_worker &iw, ucp_worker_h worker,
                                 ucp_am_recv_callback_t cb)
{
    ucp_am_handler_param_t param;
    param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                       UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG;
    param.id  = iw.am_id + 2;
    param.cb  = cb;
    param.arg = (cb != nullptr) ? &iw : nullptr;
    return ucp_worker_set_am_recv_handler(worker, &param);
}

/* With UCX_IFUNC_PEER_KEYS, the AM service of @a iw runs only messages of
 * peers that proved a key. */
void admit_only_verified(ucp_ifunc_worker &iw, ucp_ifunc_am &am)
{
    if (!iw.keys->required()) {
        return;
    }
    am_admit_only(am, [&iw](ucp_ep_h ep) {
        auto it = iw.by_ep.find(ep);
        return (it != iw.by_ep.end()) && it->second->key_verified;
    });
}

/* The ifunc worker's own network-facing worker (peer_net.h), made on
 * first use. */
ucs_status_t net_worker(ucp_ifunc_worker &iw)
{
    if (iw.net != nullptr) {
        return UCS_OK;
    }
    std::unique_ptr<OwnedWorker> net;
    if (!iw.net_tls.empty()) {
        ucs_debug("ifunc worker: the network-facing context takes UCX_TLS=%s "
                  "(UCX connects by address through TCP only)",
                  iw.net_tls.c_str());
    }
    ucs_status_t status = OwnedWorker::create("network-facing", UCP_FEATURE_AM,
                                              iw.net_tls, iw.thread_mode, &net);
    if (status != UCS_OK) {
        return status;
    }
    ucp_ifunc_am_params_t am_params;
    am_params.field_mask =
            UCP_IFUNC_AM_FIELD_AM_ID | UCP_IFUNC_AM_FIELD_TARGET_ARGS;
    am_params.am_id       = iw.am_id;
    am_params.target_args = iw.target_args;
    ucp_ifunc_am_h am;
    status = am_enable(iw.context, net->worker(), &am_params, &am);
    if (status != UCS_OK) {
        return status;
    }
    am_count_as_peer(*am);
    am_need_source(*am);
    admit_only_verified(iw, *am);
    status = set_control_handler(iw, net->worker(), control_on_net_worker);
    if (status != UCS_OK) {
        am_disable(am);
        return status;
    }
    iw.net    = std::move(net);
    iw.net_am = am;
    return UCS_OK;
}

/* The shared-memory worker, made on first use; nullptr where UCX_TLS has
 * no shared-memory transport or it cannot be made (logged once). */
OwnedWorker *shm_worker(ucp_ifunc_worker &iw)
{
    if (!iw.shm_tried && !iw.shm_tls.empty()) {
        iw.shm_tried = true;
        if (OwnedWorker::create("shared-memory",
                                UCP_FEATURE_AM | UCP_FEATURE_RMA, iw.shm_tls,
                                iw.thread_mode, &iw.shm) != UCS_OK) {
            iw.shm.reset(); /* logged; active messages it is */
        }
    }
    return iw.shm.get();
}

/* A new peer of @a iw on @a ep of @a worker; with @a own_ep, failures of
 * the endpoint come to it, and it is closed with the peer. */
ucp_ifunc_peer *add_peer(ucp_ifunc_worker &iw, ucp_worker_h worker,
                         std::unique_ptr<ucp_ifunc_peer> peer)
{
    peer->iworker = &iw;
    peer->worker  = worker;
    peer->am      = (worker == iw.worker) ? iw.am : iw.net_am;
    if (am_ep_create(peer->am, peer->ep, &peer->am_ep) != UCS_OK) {
        return nullptr;
    }
    /* Its target then knows the source of each message, whatever its size:
     * the code can answer it (UCP_IFUNC_PEER_SOURCE). */
    am_ep_always_reply(*peer->am_ep);
    peer->wanted = iw.path;
    do {
        peer->token = random_u64();
    } while (peer->token == 0);
    if (worker == iw.worker) {
        ++iw.user_peers;
    }
    iw.by_ep[peer->ep] = peer.get();
    iw.live_peers.insert(peer.get());
    iw.peers.push_back(std::move(peer));
    return iw.peers.back().get();
}

ucp_ep_params_t ep_params(ucp_ifunc_peer *peer)
{
    ucp_ep_params_t params = {};
    params.field_mask      = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb  = ep_failed;
    params.err_handler.arg = peer;
    return params;
}

/* The IP address a connection request came from, as text ("" if UCX does
 * not say). */
std::string client_address(ucp_conn_request_h request)
{
    ucp_conn_request_attr_t attr;
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(request, &attr) != UCS_OK) {
        return "";
    }
    char        text[INET6_ADDRSTRLEN] = "";
    const void *ip                     = nullptr;
    if (attr.client_address.ss_family == AF_INET) {
        ip = &reinterpret_cast<const sockaddr_in *>(&attr.client_address)
                      ->sin_addr;
    } else if (attr.client_address.ss_family == AF_INET6) {
        ip = &reinterpret_cast<const sockaddr_in6 *>(&attr.client_address)
                      ->sin6_addr;
    }
    if ((ip == nullptr) || (inet_ntop(attr.client_address.ss_family, ip, text,
                                      sizeof(text)) == nullptr)) {
        return "";
    }
    return text;
}

/* Whether one more connection from @a address may be set up now. */
bool may_accept(ucp_ifunc_worker &iw, const std::string &address)
{
    unsigned pending = 0, from_address = 0;
    for (const auto &peer : iw.peers) {
        if (peer->accepted && setting_up(*peer)) {
            ++pending;
            from_address += (peer->remote_address == address);
        }
    }
    return (pending < iw.config.peer_pending) &&
           (address.empty() ||
            (from_address < iw.config.peer_pending_per_address));
}

/* Accepts the connections that arrived on the listeners, as far as the
 * limits of connections being set up allow; rejects the others. */
unsigned accept_peers(ucp_ifunc_worker &iw)
{
    unsigned count = 0;
    while (!iw.conn_requests.empty()) {
        ucp_listener_h     listener = iw.conn_requests.front().first;
        ucp_conn_request_h request  = iw.conn_requests.front().second;
        iw.conn_requests.pop_front();
        std::string address = client_address(request);
        ++count;
        if (iw.destroying) {
            ucp_listener_reject(listener, request); /* it closes */
            continue;
        }
        if (!may_accept(iw, address)) {
            ucx_ifunc_peer_warn(iw.state->peer_log, PeerProblem::am_message,
                                std::hash<std::string>()(address),
                                "ifunc peer: a connection from %s rejected: "
                                "%u connections are being set up "
                                "(UCX_IFUNC_PEER_PENDING, _PER_ADDRESS)",
                                address.empty() ? "?" : address.c_str(),
                                iw.config.peer_pending);
            ucp_listener_reject(listener, request);
            continue;
        }
        /* The error handler's argument is the peer, made first. */
        auto peer              = std::make_unique<ucp_ifunc_peer>();
        peer->own_ep           = true;
        peer->accepted         = true;
        peer->iworker          = &iw;
        peer->remote_address   = address;
        ucp_ep_params_t params = ep_params(peer.get());
        params.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
        params.conn_request = request;
        ucs_status_t status =
                ucp_ep_create(iw.net->worker(), &params, &peer->ep);
        if (status != UCS_OK) {
            ucs_diag("ifunc peer: accepting a connection from %s failed: %s",
                     address.c_str(), ucs_status_string(status));
            continue;
        }
        ucp_ep_h        ep    = peer->ep;
        ucp_ifunc_peer *added = add_peer(iw, iw.net->worker(), std::move(peer));
        if (added == nullptr) {
            ucp_request_param_t param;
            param.op_attr_mask           = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags                  = UCP_EP_CLOSE_FLAG_FORCE;
            ucs_status_ptr_t request_ptr = ucp_ep_close_nbx(ep, &param);
            if (UCS_PTR_IS_PTR(request_ptr)) {
                ucp_request_free(request_ptr);
            }
            continue;
        }
        send_hello(iw, *added);
    }
    return count;
}

/* The ring bytes of a channel of the configured size. */
size_t channel_ring_bytes(const ucp_ifunc_worker &iw, unsigned *slots,
                          size_t *slot_size)
{
    *slots     = std::max(1u, iw.config.peer_slots);
    *slot_size = std::max<size_t>(256, iw.config.peer_slot_size / 64 * 64);
    return size_t(*slots) * *slot_size;
}

/* The target's channel for a source that proved it runs on this host:
 * its blob, or none (then active messages). */
std::vector<char> offer_channel(ucp_ifunc_worker &iw, ucp_ifunc_peer &peer)
{
    ucp_ifunc_channel_params_t params;
    params.field_mask =
            UCP_IFUNC_CHANNEL_FIELD_SLOTS | UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE;
    size_t bytes     = channel_ring_bytes(iw, &params.slots, &params.slot_size);
    OwnedWorker *shm = shm_worker(iw);
    if ((shm == nullptr) ||
        (iw.channel_bytes + bytes > iw.config.peer_channel_memory)) {
        ucs_debug("ifunc peer %" PRIu64 ": no channel (%s)", peer.id,
                  (shm == nullptr) ? "no shared memory"
                                   : "UCX_IFUNC_PEER_CHANNEL_MEMORY spent");
        return {};
    }
    if (channel_create_mapped_by(iw.context, shm->context(), &params,
                                 &peer.channel) != UCS_OK) {
        peer.channel = nullptr; /* logged; active messages it is */
        return {};
    }
    channel_count_as_peer(*peer.channel);
    void  *blob;
    size_t blob_size;
    if (channel_pack(peer.channel, &blob, &blob_size) != UCS_OK) {
        channel_destroy(peer.channel);
        peer.channel = nullptr;
        return {};
    }
    /* The blob's size, the blob, our shared-memory worker's address. */
    uint32_t          size = uint32_t(blob_size);
    std::vector<char> data = bytes_of(size);
    data.insert(data.end(), static_cast<char *>(blob),
                static_cast<char *>(blob) + blob_size);
    channel_blob_release(blob);
    data.insert(data.end(), shm->address().begin(), shm->address().end());
    peer.channel_bytes = bytes;
    iw.channel_bytes += bytes;
    iw.polled.push_back(&peer);
    return data;
}

void drop_channel(ucp_ifunc_worker &iw, ucp_ifunc_peer &peer)
{
    if (peer.channel != nullptr) {
        remove_from(iw.polled, &peer);
        channel_destroy(peer.channel);
        peer.channel = nullptr;
        iw.channel_bytes -= peer.channel_bytes;
        peer.channel_bytes = 0;
    }
}

void report(ucp_ifunc_worker &iw, ucp_ifunc_peer *peer, ucs_status_t status)
{
    if ((iw.peer_cb != nullptr) && !iw.destroying) {
        iw.peer_cb(peer, status, iw.peer_cb_arg);
    }
}

/* Starts the flushes that settle @a peer once it is set up both ways. */
void start_settling(ucp_ifunc_worker &iw, ucp_ifunc_peer &peer)
{
    if (peer.settle_started || !peer.welcomed || !peer.greeted ||
        !peer.admitted) {
        return;
    }
    peer.settle_started = true;
    for (ucp_ep_h ep : {peer.ep, peer.map_ep}) {
        if (ep == nullptr) {
            continue;
        }
        ucp_request_param_t param;
        param.op_attr_mask       = 0;
        ucs_status_ptr_t request = ucp_ep_flush_nbx(ep, &param);
        if (UCS_PTR_IS_PTR(request)) {
            peer.settle_flushes.push_back(request);
        }
    }
    iw.settling.push_back(&peer);
}

/* Frees the settling flushes of @a peer; false while one is under way. */
bool settle_flushes_done(ucp_ifunc_peer &peer)
{
    for (void *request : peer.settle_flushes) {
        if (ucp_request_check_status(request) == UCS_INPROGRESS) {
            return false;
        }
    }
    for (void *request : peer.settle_flushes) {
        ucp_request_free(request);
    }
    peer.settle_flushes.clear();
    return true;
}

/* Says ready for every peer whose settling flushes are done. */
unsigned handle_settling(ucp_ifunc_worker &iw)
{
    unsigned count = 0;
    for (size_t i = 0; i < iw.settling.size();) {
        ucp_ifunc_peer &peer = *iw.settling[i];
        if (!settle_flushes_done(peer)) {
            ++i;
            continue;
        }
        send_control(peer, ControlKind::ready, 0);
        peer.settled = true;
        iw.settling.erase(iw.settling.begin() + i);
        ++count;
    }
    return count;
}

/* Fails @a peer in set-up with @a status: its endpoint's failure, as the
 * rest of the worker sees it (handle_failures()). */
void fail_setup(ucp_ifunc_peer &peer, ucs_status_t status)
{
    if (peer.status == UCS_OK) {
        peer.status = status;
        peer.iworker->failed.push_back(&peer);
    }
}

/* Whether an ISA a peer names is one this build knows. */
bool known_machine(uint64_t machine)
{
    return std::find(std::begin(kShippableMachines),
                     std::end(kShippableMachines),
                     machine) != std::end(kShippableMachines);
}

/* Our proof to @a peer, once its hello came: that we run on its host
 * (where we may store into a channel it offers), our key (where it asks). */
void send_proof(ucp_ifunc_worker &iw, ucp_ifunc_peer &peer)
{
    ProofData proof = {};
    uint64_t  flags = 0;
    if (peer.wanted_channel_from_them &&
        HostProof::prove(peer.their_hello.proof, sizeof(peer.their_hello.proof),
                         peer.their_token, peer.token, &proof.mac)) {
        flags |= kProofHost;
    }
    if (peer.their_auth && iw.keys->has_identity()) {
        proof.key       = iw.keys->public_key();
        proof.signature = iw.keys->sign(peer.their_hello.nonce,
                                        peer.their_hello.key, peer.nonce);
        flags |= kProofKey;
    }
    peer.proof_sent = true;
    send_control(peer, ControlKind::proof, flags, bytes_of(proof));
}

/* The welcome to @a peer, admitted: with a channel where it proved it runs
 * on this host and wants one. */
void send_welcome(ucp_ifunc_worker &iw, ucp_ifunc_peer &peer)
{
    std::vector<char> data;
    if (peer.wants_channel && peer.same_host &&
        (iw.path != UCP_IFUNC_PATH_AM)) {
        data = offer_channel(iw, peer);
    }
    ucs_debug("ifunc peer %" PRIu64 ": welcome (same host: %s, key: %s), "
              "channel offered: %s",
              peer.id, peer.same_host ? "proven" : "no",
              peer.key_verified ? "proven" : "none",
              data.empty() ? "no" : "yes");
    uint64_t flags = data.empty() ? 0 : kWelcomeHasBlob;
    if (send_control(peer, ControlKind::welcome, flags, std::move(data)) !=
        UCS_OK) {
        drop_channel(iw, peer);
    }
}

/* The peer whose endpoint @a control came on, if the message is for it
 * (its token); else nullptr, the message logged and dropped. */
ucp_ifunc_peer *addressed_peer(ucp_ifunc_worker &iw, const Control &control)
{
    auto it = iw.by_ep.find(control.reply_ep);
    if ((it == iw.by_ep.end()) &&
        (ControlKind(control.header.kind) == ControlKind::bye)) {
        /* Both sides closed at once: ours is gone, nothing to tell. */
        ucs_debug("ifunc peer: a bye for a peer closed here already "
                  "dropped");
        return nullptr;
    }
    if ((it == iw.by_ep.end()) || (control.header.token != it->second->token)) {
        peer_setup_warn(iw,
                        (it != iw.by_ep.end()) ? it->second->id : uint64_t(0),
                        "ifunc peer: a set-up message (kind %u) for a peer "
                        "of another endpoint or token dropped",
                        unsigned(control.header.kind));
        return nullptr;
    }
    return it->second;
}

/* The other side of @a control.reply_ep said hello: hello back, and send
 * our proof. */
void hello_arrived(ucp_ifunc_worker &iw, const Control &control)
{
    auto            it   = iw.by_ep.find(control.reply_ep);
    ucp_ifunc_peer *peer = (it != iw.by_ep.end()) ? it->second : nullptr;
    if ((peer == nullptr) && control.on_user_worker && !iw.destroying) {
        /* An endpoint the other side made from the caller's worker
         * address: the caller gave it out. */
        auto fresh      = std::make_unique<ucp_ifunc_peer>();
        fresh->ep       = control.reply_ep;
        fresh->accepted = true;
        peer            = add_peer(iw, iw.worker, std::move(fresh));
    }
    if (peer == nullptr) {
        peer_setup_warn(iw, 0,
                        "ifunc peer: a hello on an endpoint no connection "
                        "of this worker made; dropped");
        return;
    }
    if (peer->greeted || (control.data.size() != sizeof(HelloData)) ||
        !known_machine(control.header.machine) || (control.header.token == 0)) {
        peer_setup_warn(iw, peer->id,
                        "ifunc peer %" PRIu64 ": a hello that is not one of "
                        "this release (%zu bytes, ISA %" PRIu64 ") dropped",
                        peer->id, control.data.size(),
                        uint64_t(control.header.machine));
        return;
    }
    peer->greeted     = true;
    peer->their_token = control.header.token;
    peer->machine     = uint16_t(control.header.machine);
    std::memcpy(&peer->their_hello, control.data.data(), sizeof(HelloData));
    peer->wants_channel = (control.header.flags & kHelloWants) != 0;
    peer->their_auth    = (control.header.flags & kHelloAuth) != 0;
    peer->wanted_channel_from_them =
            may_open_channel(iw, *peer) && (peer->their_hello.proof[0] != '\0');
    am_ep_codes(*peer->am_ep).set_machine(peer->machine);
    if (!peer->hello_sent) {
        send_hello(iw, *peer); /* ours first: it names our ISA */
    }
    send_proof(iw, *peer);
}

/* The other side's proof came: admit it (and welcome it) if it proved
 * what it must. */
void proof_arrived(ucp_ifunc_worker &iw, const Control &control)
{
    ucp_ifunc_peer *peer = addressed_peer(iw, control);
    if (peer == nullptr) {
        return;
    }
    ProofData proof = {};
    if (!peer->greeted || peer->admitted ||
        (control.data.size() != sizeof(ProofData))) {
        peer_setup_warn(iw, peer->id,
                        "ifunc peer %" PRIu64 ": a proof out of turn or of "
                        "%zu bytes dropped",
                        peer->id, control.data.size());
        return;
    }
    std::memcpy(&proof, control.data.data(), sizeof(proof));
    if (iw.keys->required()) {
        if (!(control.header.flags & kProofKey) ||
            !iw.keys->verify(peer->nonce, peer->their_hello.nonce, proof.key,
                             proof.signature)) {
            /* Nothing of it is kept or run; one line at most per second
             * over all such peers. */
            ucx_ifunc_peer_warn(iw.state->peer_log, PeerProblem::am_message, 0,
                                "ifunc peer: a peer did not prove a key of "
                                "UCX_IFUNC_PEER_KEYS; dropped");
            fail_setup(*peer, UCS_ERR_REJECTED);
            return;
        }
        peer->key          = proof.key;
        peer->key_verified = true;
    }
    peer->same_host = (control.header.flags & kProofHost) &&
                      iw.proof.check(peer->token, peer->their_token, proof.mac);
    peer->admitted = true;
    send_welcome(iw, *peer);
    if (peer->accepted && !peer->reported_ok) {
        peer->reported_ok = true;
        report(iw, peer, UCS_OK);
    }
    start_settling(iw, *peer);
}

/* --- delivery reports, the source's side ---------------------------- */

/* Whether @a status is one a target reports (ucp_ifunc_report_cb_t). */
bool report_status_known(int status)
{
    switch (status) {
        case UCS_OK:
        case UCS_ERR_REJECTED:
        case UCS_ERR_EXCEEDS_LIMIT:
        case UCS_ERR_NOT_IMPLEMENTED:
        case UCS_ERR_NO_ELEM:
        case UCS_ERR_UNSUPPORTED:
        case UCS_ERR_INVALID_PARAM:
        case UCS_ERR_IO_ERROR:
        case UCS_ERR_TIMED_OUT:
        case UCS_ERR_MESSAGE_TRUNCATED:
        case UCS_ERR_NO_MEMORY:
            return true;
        default:
            return false;
    }
}

/* A new report id for a message to @a peer: not 0, and none it awaits
 * (at most kMaxReports of 65 535 are). */
uint16_t new_report(ucp_ifunc_peer &peer)
{
    do {
        ++peer.last_report;
    } while ((peer.last_report == 0) ||
             (peer.reports.count(peer.last_report) != 0));
    return peer.last_report;
}

/* The report @a report of a message to @a peer says @a status, if it is
 * awaited: its callback hears it, once. */
void answer_report(ucp_ifunc_peer &peer, uint16_t report, ucs_status_t status)
{
    auto it = peer.reports.find(report);
    if (it == peer.reports.end()) {
        return;
    }
    AwaitedReport awaited = it->second;
    peer.reports.erase(it);
    awaited.cb(awaited.user_data, status);
}

/* Every report awaited from @a peer says @a status: it failed, or closes.
 * Those its callbacks ask for meanwhile are awaited afresh. */
void answer_all_reports(ucp_ifunc_peer &peer, ucs_status_t status)
{
    std::unordered_map<uint16_t, AwaitedReport> awaited;
    awaited.swap(peer.reports);
    for (const auto &entry : awaited) {
        entry.second.cb(entry.second.user_data, status);
    }
}

/* Opens the channel a welcome offers (@a data: its blob's size, the blob,
 * the other side's shared-memory worker address), where this process can
 * store into it directly; only stores: puts over TCP lose to active
 * messages. Only for a peer that proved it runs on this host: no other
 * peer's address or key reaches UCX. */
bool open_offered_channel(ucp_ifunc_worker &iw, ucp_ifunc_peer &peer,
                          const std::vector<char> &data)
{
    uint32_t blob_size = 0;
    if (data.size() >= sizeof(blob_size)) {
        std::memcpy(&blob_size, data.data(), sizeof(blob_size));
    }
    OwnedWorker *shm = shm_worker(iw);
    if ((blob_size == 0) || (data.size() <= sizeof(blob_size) + blob_size) ||
        (shm == nullptr)) {
        if (shm != nullptr) {
            peer_setup_warn(iw, peer.id,
                            "ifunc peer %" PRIu64 ": a welcome offers a "
                            "channel it does not describe; sending by active "
                            "message",
                            peer.id);
        }
        return false;
    }
    const char     *blob   = data.data() + sizeof(blob_size);
    ucp_ep_params_t params = {};
    params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address = reinterpret_cast<const ucp_address_t *>(blob + blob_size);
    if (ucp_ep_create(shm->worker(), &params, &peer.map_ep) != UCS_OK) {
        peer.map_ep = nullptr;
        return false;
    }
    if ((channel_open(shm->worker(), peer.map_ep, blob, blob_size, nullptr,
                      &peer.channel_ep) == UCS_OK) &&
        channel_ep_direct(*peer.channel_ep)) {
        /* One table of what the target holds, whichever path told. */
        channel_ep_share_codes(*peer.channel_ep, am_ep_codes(*peer.am_ep));
        return true;
    }
    /* Nothing went on either: no flush, which would wait for the other
     * side inside progress. */
    if (peer.channel_ep != nullptr) {
        channel_ep_discard(peer.channel_ep);
    }
    peer.channel_ep = nullptr;
    return false;
}

/* The other side answered our hello. */
void welcome_arrived(ucp_ifunc_worker &iw, const Control &control)
{
    ucp_ifunc_peer *peer = addressed_peer(iw, control);
    if ((peer == nullptr) || peer->welcomed || !peer->greeted ||
        !known_machine(control.header.machine) ||
        (control.header.machine != peer->machine)) {
        if (peer != nullptr) {
            peer_setup_warn(iw, peer->id,
                            "ifunc peer %" PRIu64 ": a welcome out of turn "
                            "or for another ISA dropped",
                            peer->id);
        }
        return;
    }
    /* A worker address and a key go to UCX, which trusts them: only
     * those of a peer that proved it runs on this host and may read this
     * process's memory are used. */
    bool offered      = (control.header.flags & kWelcomeHasBlob) != 0;
    bool uses_channel = offered && peer->same_host &&
                        may_open_channel(iw, *peer) &&
                        open_offered_channel(iw, *peer, control.data);
    if (offered) {
        send_control(*peer, ControlKind::path,
                     uses_channel ? kPathUsesChannel : 0);
    }
    peer->path = uses_channel ? UCP_IFUNC_PATH_CHANNEL : UCP_IFUNC_PATH_AM;
    ucs_debug("ifunc peer %" PRIu64 ": sends by %s (offered a channel: %s)",
              peer->id, uses_channel ? "channel" : "active message",
              offered ? "yes" : "no");
    peer->welcomed = true;
    start_settling(iw, *peer);
}

/* The other side says whether it uses the channel we offered. */
void path_arrived(ucp_ifunc_worker &iw, const Control &control)
{
    ucp_ifunc_peer *peer = addressed_peer(iw, control);
    if ((peer != nullptr) && !(control.header.flags & kPathUsesChannel)) {
        drop_channel(iw, *peer);
    }
}

/* A report of the other side on messages we sent it that asked for one:
 * each entry answers a report this peer awaits, once; entries that name
 * none (another peer's, one answered already, a guess) or a status no
 * target reports count for nothing. */
void report_arrived(ucp_ifunc_worker &iw, const Control &control)
{
    ucp_ifunc_peer *peer = addressed_peer(iw, control);
    if (peer == nullptr) {
        return;
    }
    size_t n = control.data.size() / sizeof(ReportEntry);
    if ((control.data.size() % sizeof(ReportEntry)) ||
        (control.header.flags != n) || (n > kMaxReportEntries)) {
        peer_setup_warn(iw, peer->id,
                        "ifunc peer %" PRIu64 ": a report of %zu bytes that "
                        "is not one of this release dropped",
                        peer->id, control.data.size());
        return;
    }
    size_t stray = 0;
    for (size_t i = 0; i < n; ++i) {
        ReportEntry entry;
        std::memcpy(&entry, control.data.data() + i * sizeof(entry),
                    sizeof(entry));
        if ((peer->reports.count(entry.report) == 0) ||
            !report_status_known(entry.status)) {
            ++stray;
            continue;
        }
        answer_report(*peer, entry.report, ucs_status_t(entry.status));
    }
    if (stray != 0) {
        peer_setup_warn(iw, peer->id,
                        "ifunc peer %" PRIu64 ": %zu entries of a report "
                        "name no message sent to it that awaits one, or a "
                        "status no target reports; ignored",
                        peer->id, stray);
    }
}

/* The other side closes its side of the peer (or answers our bye). Only
 * on the peer's own endpoint with our token for it (addressed_peer), as
 * every set-up message: no other peer can close it. */
void bye_arrived(ucp_ifunc_worker &iw, const Control &control)
{
    ucp_ifunc_peer *peer = addressed_peer(iw, control);
    if (peer == nullptr) {
        return;
    }
    if (control.header.flags & kByeAnswer) {
        peer->bye_answered = peer->bye_sent;
        return;
    }
    if (peer->greeted) {
        /* It may close its endpoint now: we heard it. */
        send_control(*peer, ControlKind::bye, kByeAnswer);
    }
    if (peer->status == UCS_OK) {
        peer->closed_by_peer = true;
        peer->status         = UCP_IFUNC_PEER_CLOSED;
        iw.failed.push_back(peer);
    }
}

unsigned handle_controls(ucp_ifunc_worker &iw)
{
    unsigned count = 0;
    while (!iw.controls.empty()) {
        Control control = std::move(iw.controls.front());
        iw.controls.pop_front();
        switch (ControlKind(control.header.kind)) {
            case ControlKind::hello:
                hello_arrived(iw, control);
                break;
            case ControlKind::proof:
                proof_arrived(iw, control);
                break;
            case ControlKind::welcome:
                welcome_arrived(iw, control);
                break;
            case ControlKind::path:
                path_arrived(iw, control);
                break;
            case ControlKind::report:
                report_arrived(iw, control);
                break;
            case ControlKind::ready: {
                ucp_ifunc_peer *peer = addressed_peer(iw, control);
                if (peer != nullptr) {
                    peer->got_ready = true;
                }
                break;
            }
            case ControlKind::bye:
                bye_arrived(iw, control);
                break;
            default:
                peer_setup_warn(iw, 0,
                                "ifunc peer: set-up message of unknown kind "
                                "%u dropped",
                                unsigned(control.header.kind));
        }
        ++count;
    }
    return count;
}

/* Peers that a connection brought and that did not finish set-up in
 * UCX_IFUNC_PEER_SETUP_TIMEOUT go (a peer the caller connects has the
 * connect's own timeout). */
void reap_stalled(ucp_ifunc_worker &iw)
{
    uint64_t now   = now_ms();
    uint64_t limit = uint64_t(iw.config.peer_setup_timeout * 1000);
    for (const auto &peer : iw.peers) {
        if (peer->accepted && setting_up(*peer) &&
            (now - peer->created_ms > limit)) {
            ucs_debug("ifunc peer %" PRIu64 ": not set up in %" PRIu64
                      " ms; dropped",
                      peer->id, limit);
            fail_setup(*peer, UCS_ERR_TIMED_OUT);
        }
    }
}

void close_peers(ucp_ifunc_worker                    &iw,
                 const std::vector<ucp_ifunc_peer *> &peers,
                 const char                          *caller);

/* Runs what a peer that closed cleanly stored into its channel before
 * its bye (the ring is finite, and it stores nothing more). */
void run_what_its_channel_holds(ucp_ifunc_worker &iw, ucp_ifunc_peer &peer)
{
    unsigned count;
    do {
        count = 0;
        DeliveringFrom from(&peer);
        channel_poll(peer.channel, kPollBatch, iw.target_args, &count);
    } while (count > 0);
}

/* A peer failed, or the other side closed it: what it holds here goes;
 * an accepted one goes whole once reported. A peer being closed is left
 * to its close. */
unsigned handle_failures(ucp_ifunc_worker &iw)
{
    unsigned count = 0;
    while (!iw.failed.empty()) {
        ucp_ifunc_peer *peer = iw.failed.back();
        iw.failed.pop_back();
        ++count;
        if (peer->closing) {
            continue;
        }
        if (peer->closed_by_peer) {
            ucs_debug("ifunc peer %" PRIu64 " closed by the other side",
                      peer->id);
            if (peer->channel != nullptr) {
                run_what_its_channel_holds(iw, *peer);
            }
        } else {
            ucs_diag("ifunc peer %" PRIu64 " failed: %s", peer->id,
                     ucs_status_string(peer->status));
        }
        drop_channel(iw, *peer);
        am_forget_source(*peer->am, peer->ep);
        /* What it did with our messages we will not learn now. */
        answer_all_reports(*peer, peer->status);
        /* Read first: peer_cb may close a peer this process connected. */
        bool accepted = peer->accepted;
        if (peer->reported_ok || (!peer->accepted && peer->welcomed)) {
            /* A peer still connecting: ucp_ifunc_peer_connect says it. */
            report(iw, peer, peer->status);
        }
        if (accepted) {
            close_peers(iw, {peer}, "ifunc peer");
        }
    }
    return count;
}

/* Whether every peer sends and receives by channel (channels_only), and
 * how many are being set up. */
void update_progress_policy(ucp_ifunc_worker &iw)
{
    iw.setting_up = unsigned(
            std::count_if(iw.peers.begin(), iw.peers.end(),
                          [](const std::unique_ptr<ucp_ifunc_peer> &peer) {
                              return setting_up(*peer);
                          }));
    iw.channels_only =
            !iw.peers.empty() &&
            std::all_of(iw.peers.begin(), iw.peers.end(),
                        [](const std::unique_ptr<ucp_ifunc_peer> &peer) {
                            return (peer->path == UCP_IFUNC_PATH_CHANNEL) &&
                                   (peer->channel != nullptr) &&
                                   (peer->status == UCS_OK);
                        });
}

unsigned poll_channels(ucp_ifunc_worker &iw)
{
    unsigned total = 0;
    for (size_t i = 0; i < iw.polled.size(); ++i) {
        unsigned       count = 0;
        DeliveringFrom from(iw.polled[i]); /* the channel is its alone */
        channel_poll(iw.polled[i]->channel, kPollBatch, iw.target_args, &count);
        total += count;
    }
    return total;
}

InFlight *take_in_flight(ucp_ifunc_worker &iw, ucp_ifunc_peer &peer)
{
    std::unique_ptr<InFlight> entry;
    if (iw.spare_in_flight.empty()) {
        entry = std::make_unique<InFlight>();
    } else {
        entry = std::move(iw.spare_in_flight.back());
        iw.spare_in_flight.pop_back();
    }
    entry->peer = &peer;
    return entry.release();
}

void give_in_flight(ucp_ifunc_worker &iw, InFlight *raw)
{
    std::unique_ptr<InFlight> entry(raw);
    if (entry->msg.frame != nullptr) {
        entry->peer->held_bytes -= entry->msg.frame_size;
        msg_free(entry->msg);
    }
    entry->msg       = {nullptr, 0};
    entry->out       = {};
    entry->with_code = false;
    entry->copy.clear();
    entry->cb        = nullptr;
    entry->user_data = nullptr;
    entry->report    = 0;
    if (iw.spare_in_flight.size() < 64) {
        iw.spare_in_flight.push_back(std::move(entry));
    }
}

void list_queued(ucp_ifunc_peer &peer)
{
    if (!peer.listed) {
        peer.listed = true;
        peer.iworker->queued.push_back(&peer);
    }
}

/* The send @a entry describes has ended with @a status; a message that
 * asked for a report and did not reach the target hears it here. */
void end_in_flight(InFlight *entry, ucs_status_t status)
{
    ucp_ifunc_peer     &peer   = *entry->peer;
    ucp_ifunc_send_cb_t cb     = entry->cb;
    void               *data   = entry->user_data;
    uint16_t            report = entry->report;
    if (peer.closing && (status != UCS_OK)) {
        /* The close ended it: one status for every send it drops. */
        ++peer.lost;
        status = UCS_ERR_CANCELED;
    }
    --peer.in_flight;
    --peer.iworker->in_flight;
    give_in_flight(*peer.iworker, entry);
    if (ucs_unlikely(report != 0) && (status != UCS_OK)) {
        answer_report(peer, report, status);
    }
    if (cb != nullptr) {
        cb(data, status);
    }
}

void am_sent(void *request, ucs_status_t status, void *user_data)
{
    auto *entry = static_cast<InFlight *>(user_data);
    ucp_request_free(request);
    if ((status == UCS_ERR_NO_RESOURCE) && (entry->peer->status == UCS_OK)) {
        /* The target had no room for it to wait: progress sends it again
         * (after what was sent since; nothing is lost). */
        entry->peer->refused.push_back(entry);
        list_queued(*entry->peer);
        return;
    }
    end_in_flight(entry, status);
}

/* Posts the active message @a entry describes, which counts in flight
 * until am_sent() ends it. */
ucs_status_ptr_t post(InFlight *entry)
{
    ucp_request_param_t param;
    param.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send   = am_sent;
    param.user_data = entry;
    AmPath       path(*entry->peer->am_ep, &param, entry->report_header);
    ucs_status_t status = write_chosen(path, entry->out);
    return (status == UCS_INPROGRESS) ? path.request() : UCS_STATUS_PTR(status);
}

/* Whether another active message may go to @a peer now: at most
 * kAmWindow are in flight per peer, so that one source's stream of
 * rendezvous messages stays within what a target lets wait (am.cc). */
bool am_window_open(const ucp_ifunc_peer &peer)
{
    return peer.in_flight < kAmWindow;
}

/* Posts @a entry, a new send: UCS_OK or UCS_INPROGRESS (am_sent() ends
 * it), or its error. */
ucs_status_t post_new(InFlight *entry)
{
    ucp_ifunc_peer &peer = *entry->peer;
    ++peer.in_flight;
    ++peer.iworker->in_flight;
    ucs_status_ptr_t request = post(entry);
    if (UCS_PTR_IS_PTR(request)) {
        return UCS_INPROGRESS;
    }
    --peer.in_flight;
    --peer.iworker->in_flight;
    if ((UCS_PTR_STATUS(request) == UCS_ERR_NO_RESOURCE) &&
        (entry->msg.frame != nullptr)) {
        peer.held_bytes -= entry->msg.frame_size;
        entry->msg = {nullptr, 0}; /* the caller's again */
    }
    give_in_flight(*peer.iworker, entry);
    return UCS_PTR_STATUS(request);
}

/* Sends again what the target refused; what a failed peer refused ends
 * with its status. */
unsigned post_refused(ucp_ifunc_peer &peer)
{
    unsigned count = 0;
    while (!peer.refused.empty()) {
        InFlight *entry = peer.refused.front();
        if (peer.status != UCS_OK) {
            peer.refused.pop_front();
            end_in_flight(entry, peer.status);
            continue;
        }
        if (entry->msg.frame != nullptr) {
            /* Chosen anew: the target may hold the code by now. */
            CodeChoice choice =
                    choose_code(am_ep_codes(*peer.am_ep), entry->with_code,
                                MsgCodes{entry->msg});
            if (choice.status == UCS_OK) {
                entry->choice = choice;
            }
        }
        ucs_status_ptr_t request = post(entry);
        if (UCS_PTR_STATUS(request) == UCS_ERR_NO_RESOURCE) {
            break;
        }
        peer.refused.pop_front();
        ++count;
        if (!UCS_PTR_IS_PTR(request)) {
            end_in_flight(entry, UCS_PTR_STATUS(request));
        }
    }
    return count;
}

/* A reference by active message from the caller's memory (@a out): zero
 * copy with a callback; without one, what UCP does not finish at once
 * goes from a copy. */
ucs_status_t am_ref_from_caller(ucp_ifunc_peer &peer, const Outgoing &out,
                                const ucp_ifunc_peer_send_params_t *params)
{
    bool has_cb = (params != nullptr) &&
                  (params->field_mask & UCP_IFUNC_PEER_SEND_FIELD_CALLBACK) &&
                  (params->cb != nullptr);
    ++peer.sent_by_ref_here;
    if (!has_cb) {
        ucp_request_param_t quick;
        quick.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
        ReportedRefHeader reported; /* read before the send returns */
        AmPath            path(*peer.am_ep, &quick, reported);
        ucs_status_t      status = path.write_ref(out);
        if (status != UCS_ERR_NO_RESOURCE) {
            return status;
        }
    }
    InFlight *entry   = take_in_flight(*peer.iworker, peer);
    entry->choice     = *out.choice;
    entry->out        = out;
    entry->out.choice = &entry->choice;
    entry->report     = out.ref.report;
    if (has_cb) {
        entry->cb = params->cb;
        entry->user_data =
                (params->field_mask & UCP_IFUNC_PEER_SEND_FIELD_USER_DATA)
                        ? params->user_data
                        : nullptr;
    } else {
        const char *bytes = static_cast<const char *>(out.ref.payload);
        entry->copy.assign(bytes, bytes + out.ref.length);
        entry->out.ref.payload = entry->copy.data();
    }
    ucs_status_t status = post_new(entry);
    return (has_cb || (status != UCS_INPROGRESS)) ? status : UCS_OK;
}

/* Whether a message of @a frame_size bytes goes to @a peer by channel. */
bool fits_channel(const ucp_ifunc_peer &peer, size_t frame_size)
{
    return (peer.channel_ep != nullptr) &&
           (frame_size <= channel_ep_slot_size(*peer.channel_ep));
}

/* Sends @a msg (whose payload is a copy) on the peer's path; the message
 * is the path's or freed from then on, unless UCS_ERR_NO_RESOURCE.
 * @a chosen: the code the send chose for it (peer_send); nullptr for a
 * message that waited in the queue, whose code is chosen now (the target
 * may hold it by then). */
ucs_status_t send_message(ucp_ifunc_peer &peer, ucp_ifunc_msg_t msg,
                          bool with_code, uint16_t report,
                          const CodeChoice *chosen = nullptr)
{
    CodeChoice choice = (chosen != nullptr)
                                ? *chosen
                                : choose_code(am_ep_codes(*peer.am_ep),
                                              with_code, MsgCodes{msg});
    if (choice.status != UCS_OK) {
        log_no_image_for("ucp_ifunc_peer_send_nbx", msg, choice.machine);
        msg_free(msg);
        return choice.status;
    }
    if (fits_channel(peer, msg.frame_size)) {
        ChannelPath  path(*peer.channel_ep, "ucp_ifunc_peer_send_nbx");
        ucs_status_t status = write_chosen(path, outgoing_of(msg, choice));
        if (status != UCS_ERR_NO_RESOURCE) {
            msg_free(msg); /* stored: direct stores only */
        }
        return status;
    }
    if (!am_window_open(peer) || (peer.held_bytes + msg.frame_size >
                                  peer.iworker->config.peer_queue_bytes)) {
        return UCS_ERR_NO_RESOURCE;
    }
    InFlight *entry  = take_in_flight(*peer.iworker, peer);
    entry->msg       = msg;
    entry->with_code = with_code;
    entry->choice    = choice;
    entry->out       = outgoing_of(entry->msg, entry->choice);
    entry->report    = report;
    peer.held_bytes += msg.frame_size; /* until give_in_flight() */
    ucs_status_t status = post_new(entry);
    return (status == UCS_INPROGRESS) ? UCS_OK : status;
}

ucs_status_t enqueue(ucp_ifunc_peer &peer, ucp_ifunc_msg_t msg, bool with_code,
                     uint16_t report)
{
    ucp_ifunc_worker &iw = *peer.iworker;
    /* Bytes too: one entry may hold a payload of up to the largest
     * message the path takes. */
    if ((peer.queue.size() >= iw.config.peer_queue) ||
        (peer.held_bytes + msg.frame_size > iw.config.peer_queue_bytes)) {
        msg_free(msg);
        return UCS_ERR_NO_RESOURCE;
    }
    list_queued(peer);
    peer.queue.push_back(QueuedSend{msg, with_code, report});
    peer.held_bytes += msg.frame_size;
    return UCS_OK;
}

/* Sends what waits for @a peer, in order, as far as there is room; what
 * waits for a failed peer is dropped. */
unsigned drain_queue(ucp_ifunc_peer &peer)
{
    unsigned count = post_refused(peer);
    while (!peer.queue.empty() && (peer.status == UCS_OK)) {
        QueuedSend &front = peer.queue.front();
        /* Out of the queue's count while it is sent: an active message
         * counts it again while in flight. */
        peer.held_bytes -= front.msg.frame_size;
        uint16_t     report = front.report;
        ucs_status_t status =
                send_message(peer, front.msg, front.with_code, report);
        if (status == UCS_ERR_NO_RESOURCE) {
            peer.held_bytes += front.msg.frame_size;
            break;
        }
        peer.queue.pop_front();
        if ((report != 0) && (status != UCS_OK) && (status != UCS_INPROGRESS)) {
            answer_report(peer, report, status); /* it did not go */
        }
        ++count;
    }
    if (peer.status != UCS_OK) {
        peer.lost += peer.queue.size();
        for (QueuedSend &send : peer.queue) {
            peer.held_bytes -= send.msg.frame_size;
            msg_free(send.msg);
        }
        peer.queue.clear();
    }
    return count;
}

unsigned drain_queues(ucp_ifunc_worker &iw)
{
    unsigned count = 0;
    for (size_t i = 0; i < iw.queued.size();) {
        ucp_ifunc_peer &peer = *iw.queued[i];
        count += drain_queue(peer);
        if (peer.queue.empty() && peer.refused.empty()) {
            peer.listed = false;
            iw.queued.erase(iw.queued.begin() + i);
        } else {
            ++i;
        }
    }
    return count;
}

/* Whether a message of @a bytes that would go to @a peer by active message
 * is larger than the peer takes (its UCX_IFUNC_MAX_AM_MESSAGE, in its
 * hello); then logged: the send is refused at once. */
bool beyond_peer_limit(const ucp_ifunc_peer &peer, size_t bytes)
{
    if (ucs_likely(bytes <= peer.their_hello.max_message)) {
        return false;
    }
    ucs_error("ucp_ifunc_peer_send_nbx: a %zu-byte message is larger than "
              "peer %" PRIu64 " takes (its UCX_IFUNC_MAX_AM_MESSAGE is %" PRIu64
              " bytes); refused",
              bytes, peer.id, uint64_t(peer.their_hello.max_message));
    return true;
}


/* A message of @a code with the @a length bytes at @a payload copied in,
 * built whole for @a peer (its code goes with it): refused, nothing left
 * allocated, where it neither fits a slot of the peer's channel nor is
 * within what the peer takes by active message. */
ucs_status_t build_for(const ucp_ifunc_peer &peer, ucp_ifunc_h code,
                       const void *payload, size_t length,
                       ucp_ifunc_msg_t *msg_p)
{
    ucp_ifunc_msg_params_t msg_params;
    msg_params.field_mask   = UCP_IFUNC_MSG_FIELD_PAYLOAD;
    msg_params.payload      = payload;
    msg_params.payload_size = length;
    ucs_status_t status     = msg_build(code, &msg_params, msg_p);
    if (status != UCS_OK) {
        return status;
    }
    if (!fits_channel(peer, msg_p->frame_size) &&
        beyond_peer_limit(peer, msg_p->frame_size)) {
        msg_free(*msg_p);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    return UCS_OK;
}

/* The send, once the code is chosen; @a report: its report id, 0 for
 * none. */
ucs_status_t send_or_queue(ucp_ifunc_peer &peer, ucp_ifunc_h ifunc_h,
                           const CodeChoice &choice, const void *payload,
                           size_t length, bool with_code, uint16_t report,
                           const ucp_ifunc_peer_send_params_t *params)
{
    if (!peer.queue.empty()) {
        /* Sends keep their order: what waits goes first. */
        drain_queue(peer);
        if (peer.queue.size() >= peer.iworker->config.peer_queue) {
            return UCS_ERR_NO_RESOURCE;
        }
    }
    if (choice.by_ref && peer.queue.empty()) {
        /* A reference from the caller's memory: nothing built. */
        Outgoing out = {&choice, nullptr, {payload, length, 0, 0, report}};
        if (fits_channel(peer, sizeof(RefHeader) + length + 8)) {
            ChannelPath  path(*peer.channel_ep, "ucp_ifunc_peer_send_nbx");
            ucs_status_t status = path.write_ref(out);
            if (status != UCS_ERR_NO_RESOURCE) {
                peer.sent_by_ref_here += (status == UCS_OK);
                return status;
            }
        } else if (am_window_open(peer)) {
            if (beyond_peer_limit(peer, length)) {
                return UCS_ERR_EXCEEDS_LIMIT;
            }
            return am_ref_from_caller(peer, out, params);
        }
    }
    /* A frame holds its payload: one larger than the peer takes by active
     * message is refused before it is built. */
    if (!fits_channel(peer, length) && beyond_peer_limit(peer, length)) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    ucp_ifunc_msg_t msg;
    ucs_status_t    status = build_for(peer, ifunc_h, payload, length, &msg);
    if (status != UCS_OK) {
        return status;
    }
    if (report != 0) {
        msg_set_report(msg, report); /* every ISA's frame, for the peer's */
    }
    if (peer.queue.empty()) {
        status = send_message(peer, msg, with_code, report, &choice);
        if (status != UCS_ERR_NO_RESOURCE) {
            return status;
        }
    }
    return enqueue(peer, msg, with_code, report);
}

/* The whole send, once the arguments are checked. */
ucs_status_t peer_send(ucp_ifunc_peer &peer, ucp_ifunc_h ifunc_h,
                       const void *payload, size_t length,
                       const ucp_ifunc_peer_send_params_t *params)
{
    const Library &lib       = *ifunc_h->library;
    bool           with_code = (params != nullptr) &&
                     (params->field_mask & UCP_IFUNC_PEER_SEND_FIELD_FLAGS) &&
                     (params->flags & UCP_IFUNC_SEND_FLAG_WITH_CODE);
    /* The one table of the peer's target: its channel shares it. */
    CodeChoice choice =
            choose_code(am_ep_codes(*peer.am_ep), with_code, LibraryCodes{lib});
    if (choice.status != UCS_OK) {
        /* Received code has the other ISAs' images only from a library of
         * this target's that vouched for it. */
        ucs_error("ucp_ifunc_peer_send_nbx: ifunc '%s' has no code for the "
                  "peer's ISA (ELF machine %u); %s",
                  lib.name().c_str(), unsigned(choice.machine),
                  !lib.is_received()
                          ? "build it with ucx-ifunc-cc --target "
                            "listing that ISA"
                          : "this process received it for its own ISA "
                            "only: give it the library, built with "
                            "ucx-ifunc-cc --target listing both ISAs, "
                            "in UCX_IFUNC_LIB_DIR (trust policy "
                            "'library')");
        return choice.status;
    }
    if (ucs_likely((params == nullptr) ||
                   !(params->field_mask & UCP_IFUNC_PEER_SEND_FIELD_REPORT))) {
        return send_or_queue(peer, ifunc_h, choice, payload, length, with_code,
                             0, params);
    }
    if (peer.reports.size() >= kMaxReports) {
        return UCS_ERR_NO_RESOURCE; /* progress: reports come */
    }
    uint16_t     report = new_report(peer);
    ucs_status_t status = send_or_queue(peer, ifunc_h, choice, payload, length,
                                        with_code, report, params);
    if ((status == UCS_OK) || (status == UCS_INPROGRESS)) {
        peer.reports.emplace(report,
                             AwaitedReport{params->report,
                                           (params->field_mask &
                                            UCP_IFUNC_PEER_SEND_FIELD_USER_DATA)
                                                   ? params->user_data
                                                   : nullptr});
    }
    return status;
}

/* The ifunc worker whose progress runs on this thread (the messages it
 * runs may send to its peers): set for the call, restored after it. */
thread_local ucp_ifunc_worker *progressing_worker = nullptr;

class Progressing {
public:
    explicit Progressing(ucp_ifunc_worker *iw) : outer_(progressing_worker)
    {
        progressing_worker = iw;
    }
    ~Progressing() { progressing_worker = outer_; }
    Progressing(const Progressing &)            = delete;
    Progressing &operator=(const Progressing &) = delete;

private:
    ucp_ifunc_worker *outer_;
};

uint64_t now_ns()
{
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count());
}

/* Takes one send from the budget of the code in a slot: @a rate a second,
 * in bursts of up to as many (UCX_IFUNC_SANDBOX_SEND_RATE). */
bool take_send(sandbox::Slot::CallBudget &budget, unsigned rate)
{
    uint64_t now = now_ns();
    budget.tokens =
            (budget.last_ns == 0)
                    ? double(rate)
                    : std::min(double(rate),
                               budget.tokens + double(now - budget.last_ns) *
                                                       1e-9 * rate);
    budget.last_ns = now;
    if (budget.tokens < 1) {
        return false;
    }
    budget.tokens -= 1;
    return true;
}

/* The peer of @a iw that a path named as a message's source
 * (DeliveringFrom): the endpoint an active message came on, or the peer
 * whose channel it came through; nullptr if none of @a iw. */
ucp_ifunc_peer *source_peer(ucp_ifunc_worker &iw, const void *source)
{
    auto by_ep =
            iw.by_ep.find(static_cast<ucp_ep_h>(const_cast<void *>(source)));
    if (by_ep != iw.by_ep.end()) {
        return by_ep->second;
    }
    auto *peer = static_cast<const ucp_ifunc_peer *>(source);
    if ((peer != nullptr) && (iw.live_peers.count(peer) != 0)) {
        return const_cast<ucp_ifunc_peer *>(peer);
    }
    return nullptr;
}

/* The peer that UCP_IFUNC_PEER_SOURCE names for native code: the source
 * of the message whose NAME_main runs on this thread in the progress of
 * its ifunc worker. Where there is none (outside such a message, a source
 * gone) nullptr, with *@a status UCS_ERR_UNREACHABLE; where it failed, its
 * failure. Either way one line says why (a source that goes is the peer's
 * doing: through the PeerLog, which bounds the lines). */
ucp_ifunc_peer *reply_peer(ucs_status_t *status)
{
    ucp_ifunc_worker     *iw      = progressing_worker;
    const RunningMessage *running = RunningMessage::innermost_code();
    if ((iw == nullptr) || (running == nullptr) ||
        (running->state->context != iw->context)) {
        ucs_error("ucp_ifunc_peer_send_nbx: UCP_IFUNC_PEER_SOURCE names the "
                  "source of the message whose code runs in "
                  "ucp_ifunc_worker_progress, and none runs here");
        *status = UCS_ERR_UNREACHABLE;
        return nullptr;
    }
    ucp_ifunc_peer *peer = source_peer(*iw, running->source);
    if (peer == nullptr) {
        ucx_ifunc_peer_warn(running->state->peer_log, PeerProblem::lost_reply,
                            0,
                            "ifunc: the source of the running message was "
                            "closed; its answer is not sent");
        *status = UCS_ERR_UNREACHABLE;
        return nullptr;
    }
    if (peer->status != UCS_OK) {
        ucx_ifunc_peer_warn(running->state->peer_log, PeerProblem::lost_reply,
                            peer->id,
                            "ifunc peer %" PRIu64 ": the source of the "
                            "running message failed (%s); its answer is not "
                            "sent",
                            peer->id, ucs_status_string(peer->status));
        *status = peer->status;
        return nullptr;
    }
    return peer;
}

/* The peer of @a iw that sandboxed code in @a slot, running @a running,
 * names by @a value: its message's source (UCP_IFUNC_PEER_SOURCE), or a
 * handle of its ifunc's grants. nullptr where it names none, with the
 * status for the code in *@a status. */
ucp_ifunc_peer *sandbox_peer(ucp_ifunc_worker &iw, const sandbox::Slot &slot,
                             const RunningMessage &running, uint64_t value,
                             ucs_status_t *status)
{
    if (value == reinterpret_cast<uintptr_t>(UCP_IFUNC_PEER_SOURCE)) {
        ucp_ifunc_peer *peer = source_peer(iw, running.source);
        if (peer == nullptr) {
            *status = UCS_ERR_UNREACHABLE;
        }
        return peer;
    }
    *status    = UCS_ERR_INVALID_PARAM;
    auto table = iw.sandbox_peer_grants.find(slot.name());
    if ((table == iw.sandbox_peer_grants.end()) || (value == 0) ||
        (value > table->second.size())) {
        return nullptr;
    }
    const SandboxPeerGrant &grant = table->second[value - 1];
    if ((grant.peer == nullptr) ||
        (grant.has_signer && !slot.signed_by(grant.signer))) {
        return nullptr;
    }
    return grant.peer;
}

/* A sandboxed send of @a code, @a length bytes at @a payload, to @a peer:
 * a message built whole (its hop count goes in its headers), sent or
 * queued as peer_send() does. */
ucs_status_t sandboxed_send(ucp_ifunc_peer &peer, ucp_ifunc_h code,
                            const void *payload, size_t length,
                            uint16_t hop_count)
{
    CodeChoice choice = choose_code(am_ep_codes(*peer.am_ep), false,
                                    LibraryCodes{*code->library});
    if (choice.status != UCS_OK) {
        return choice.status;
    }
    if (!peer.queue.empty()) {
        drain_queue(peer); /* sends keep their order */
    }
    ucp_ifunc_msg_t msg;
    ucs_status_t    status = build_for(peer, code, payload, length, &msg);
    if (status != UCS_OK) {
        return status;
    }
    frame_set_hop_count(static_cast<char *>(msg.frame), msg.frame_size,
                        hop_count);
    if (peer.queue.empty()) {
        status = send_message(peer, msg, false, 0, &choice);
        if (status != UCS_ERR_NO_RESOURCE) {
            return status;
        }
    }
    return enqueue(peer, msg, false, 0);
}

/* ucp_ifunc_peer_send_nbx for sandboxed code: a peer its target granted to
 * its ifunc on the worker whose progress runs the message, or its
 * message's source (sandbox_peer()); the handle of its own code
 * (ucp_ifunc_code_get); a payload in its memory; no parameters (a
 * callback would be the sandbox's code run by the host). A bad argument
 * is UCS_ERR_INVALID_PARAM, and nothing is read through it. Each send is
 * bounded: per message (UCX_IFUNC_SANDBOX_SENDS), in hops from the host
 * (UCX_IFUNC_SANDBOX_HOPS; the message it sends counts one more), per code
 * and second (UCX_IFUNC_SANDBOX_SEND_RATE), and in the bytes the peer
 * holds (UCX_IFUNC_PEER_QUEUE_BYTES, enqueue()). */
uint64_t sandboxed_peer_send(uint64_t peer_value, uint64_t code_value,
                             uint64_t payload, uint64_t length, uint64_t params,
                             uint64_t)
{
    ucp_ifunc_worker     *iw      = progressing_worker;
    ucp_ifunc_h           code    = sandbox_code_handle(code_value);
    sandbox::Slot        *slot    = sandbox::running_slot();
    uint64_t              host    = 0;
    const char           *bad     = nullptr;
    ucs_status_t          status  = UCS_ERR_INVALID_PARAM;
    ucp_ifunc_peer       *peer    = nullptr;
    const RunningMessage *running = RunningMessage::innermost_code();
    if ((iw == nullptr) || (running == nullptr) ||
        (running->state->context != iw->context) ||
        ((peer = sandbox_peer(*iw, *slot, *running, peer_value, &status)) ==
         nullptr)) {
        bad = "a peer its target granted to it, or its message's source";
    } else if (code == nullptr) {
        bad = "the code handle it got from ucp_ifunc_code_get";
    } else if (!slot->check_range(payload, length, sandbox::kSlotRead, &host)) {
        bad = "a payload in its own memory";
    } else if (params != 0) {
        bad = "no parameters";
    }
    if (bad != nullptr) {
        ucs_debug("ifunc sandbox: ucp_ifunc_peer_send_nbx(0x%lx, 0x%lx, "
                  "0x%lx, %lu, 0x%lx) refused: it takes %s",
                  peer_value, code_value, payload, length, params, bad);
        return uint64_t(
                int64_t((peer == nullptr) ? status : UCS_ERR_INVALID_PARAM));
    }
    const Config &config = iw->config;
    if ((running->sends >= config.sandbox_sends) ||
        (running->hop_count >=
         std::min(config.sandbox_hops, unsigned(kMaxHopCount)))) {
        ucs_debug("ifunc sandbox: a send of '%s' refused: its message made "
                  "%u sends of UCX_IFUNC_SANDBOX_SENDS=%u, and is %u hops "
                  "from the host of UCX_IFUNC_SANDBOX_HOPS=%u",
                  slot->name().c_str(), running->sends, config.sandbox_sends,
                  unsigned(running->hop_count), config.sandbox_hops);
        return uint64_t(int64_t(UCS_ERR_EXCEEDS_LIMIT));
    }
    if (!take_send(slot->send_budget(), config.sandbox_send_rate)) {
        ucs_debug("ifunc sandbox: a send of '%s' refused: its code made "
                  "UCX_IFUNC_SANDBOX_SEND_RATE=%u sends in the last second",
                  slot->name().c_str(), config.sandbox_send_rate);
        return uint64_t(int64_t(UCS_ERR_NO_RESOURCE));
    }
    ++running->sends;
    if ((peer->status != UCS_OK) || peer->closing) {
        return uint64_t(
                int64_t(peer->closing ? UCS_ERR_CANCELED : peer->status));
    }
    ucs_status_t sent;
    try {
        sent = sandboxed_send(*peer, code, reinterpret_cast<const void *>(host),
                              length, uint16_t(running->hop_count + 1));
    } catch (const std::bad_alloc &) {
        /* Nothing may unwind into the sandbox's frames. */
        ucs_error("ifunc sandbox: a send of '%s' failed: out of memory",
                  slot->name().c_str());
        sent = UCS_ERR_NO_MEMORY;
    }
    return uint64_t(int64_t(sent));
}

/* --- delivery reports, the target's side ---------------------------- */

/* A message of @a source that asked for a report ended with @a status
 * (report_delivery(), context.h): noted for the peer that sent it, if it
 * is one of the worker whose progress runs the message, and sent by
 * send_reports(). At most kMaxReports wait per peer: a source that asks
 * for more than it receives loses the rest (one warning). */
void report_to_source(const void *source, uint16_t report, ucs_status_t status)
{
    ucp_ifunc_worker *iw = progressing_worker;
    ucp_ifunc_peer *peer = (iw != nullptr) ? source_peer(*iw, source) : nullptr;
    if ((peer == nullptr) || (peer->status != UCS_OK)) {
        return;
    }
    if (peer->reports_out.size() >= kMaxReports) {
        if (!peer->reports_dropped) {
            peer->reports_dropped = true;
            peer_setup_warn(*iw, peer->id,
                            "ifunc peer %" PRIu64 ": asks for more delivery "
                            "reports than it takes in (%zu wait); reports "
                            "beyond them are dropped",
                            peer->id, peer->reports_out.size());
        }
        return;
    }
    peer->reports_out.push_back(ReportEntry{report, int16_t(status)});
    if (!peer->reporting_listed) {
        peer->reporting_listed = true;
        iw->reporting.push_back(peer);
    }
}

/* A report on its way: what UCX reads until its send completes. */
struct ReportSend {
    ControlHeader            header;
    std::vector<ReportEntry> entries;
    std::shared_ptr<bool>    in_flight; /* the peer's report_in_flight */
};

void report_sent(void *request, ucs_status_t, void *user_data)
{
    std::unique_ptr<ReportSend> send(static_cast<ReportSend *>(user_data));
    *send->in_flight = false;
    ucp_request_free(request);
}

/* Sends each peer what waits for it, one report in flight per peer at
 * most (of up to kMaxReportEntries entries), on its own endpoint. */
unsigned send_reports(ucp_ifunc_worker &iw)
{
    unsigned count = 0;
    for (size_t i = 0; i < iw.reporting.size();) {
        ucp_ifunc_peer &peer = *iw.reporting[i];
        if (!*peer.report_in_flight && (peer.status == UCS_OK)) {
            size_t n    = std::min(peer.reports_out.size(), kMaxReportEntries);
            auto   send = std::make_unique<ReportSend>();
            auto  &hdr  = send->header;
            hdr.magic   = kPeerMagic;
            hdr.version = kPeerVersion;
            hdr.kind    = uint16_t(ControlKind::report);
            hdr.token   = peer.their_token;
            hdr.machine = arch::elf_machine();
            hdr.flags   = n;
            send->entries.assign(peer.reports_out.begin(),
                                 peer.reports_out.begin() + n);
            send->in_flight = peer.report_in_flight;
            ucp_request_param_t param;
            param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                 UCP_OP_ATTR_FIELD_USER_DATA |
                                 UCP_OP_ATTR_FIELD_FLAGS;
            param.cb.send   = report_sent;
            param.user_data = send.get();
            /* The source takes set-up messages only eagerly, with the
             * reply flag (control_arrived()). */
            param.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
            ucs_status_ptr_t request = ucp_am_send_nbx(
                    peer.ep, iw.am_id + 2, &send->header, sizeof(send->header),
                    send->entries.data(), n * sizeof(ReportEntry), &param);
            if (UCS_PTR_IS_PTR(request)) {
                *peer.report_in_flight = true;
                send.release(); /* report_sent() frees it */
            } else if (UCS_PTR_IS_ERR(request)) {
                /* Its endpoint fails too: the source learns it so. */
                ucs_debug("ifunc peer %" PRIu64 ": a report failed: %s",
                          peer.id, ucs_status_string(UCS_PTR_STATUS(request)));
            }
            peer.reports_out.erase(peer.reports_out.begin(),
                                   peer.reports_out.begin() + n);
            ++count;
        }
        if (peer.reports_out.empty() || (peer.status != UCS_OK)) {
            peer.reports_out.clear();
            peer.reporting_listed = false;
            iw.reporting.erase(iw.reporting.begin() + i);
        } else {
            ++i;
        }
    }
    return count;
}

[[maybe_unused]] const bool report_hook_set =
        (set_report_hook(report_to_source), true);

/* Granted when the library loads, before any slot is made. */
[[maybe_unused]] const bool peer_send_granted =
        (sandbox::grant_host_function("ucp_ifunc_peer_send_nbx",
                                      sandboxed_peer_send),
         true);

} // namespace

ucp_ifunc_peer::~ucp_ifunc_peer()
{
    for (QueuedSend &send : queue) {
        msg_free(send.msg);
    }
}

namespace {

/* am_disable for a destructor, where nothing may throw. */
void disable_am(ucp_ifunc_am_h am) noexcept
{
    try {
        am_disable(am);
    } catch (const std::exception &e) {
        ucs_error("ifunc worker: disabling its AM service failed: %s",
                  e.what());
    }
}

} // namespace

ucp_ifunc_worker::~ucp_ifunc_worker()
{
    listeners.clear(); /* before the worker they listen on */
    if (net_am != nullptr) {
        disable_am(net_am);
    }
    if (am != nullptr) {
        set_control_handler(*this, worker, nullptr);
        disable_am(am);
    }
}

namespace ucx_ifunc {

/* ucp_ifunc_worker_progress; the calls inside that wait call it too. */
unsigned worker_progress(ucp_ifunc_worker &iw)
{
    Progressing          progressing(&iw);
    sandbox::SignalBatch sandbox_signals; /* once per call, if needed */
    unsigned             count = 0;
    bool                 every = (++iw.since_ucx >= kUcxEvery);
    if (!iw.channels_only || (iw.in_flight > 0) || every) {
        iw.since_ucx = every ? 0 : iw.since_ucx;
        /* The caller's worker too, as ucp_worker_progress would: its
         * endpoints' peers, and the application's own messages. */
        count += ucp_worker_progress(iw.worker);
        if (iw.net != nullptr) {
            count += ucp_worker_progress(iw.net->worker());
        }
        if ((iw.shm != nullptr) && (every || !iw.settling.empty())) {
            count += ucp_worker_progress(iw.shm->worker());
        }
    }
    if (!iw.polled.empty()) {
        count += poll_channels(iw);
    }
    if (!iw.queued.empty()) {
        count += drain_queues(iw);
    }
    if (ucs_unlikely(!iw.reporting.empty())) {
        count += send_reports(iw);
    }
    if (ucs_unlikely(!iw.conn_requests.empty() || !iw.controls.empty() ||
                     !iw.failed.empty() || !iw.settling.empty())) {
        count += accept_peers(iw);
        count += handle_controls(iw);
        count += handle_settling(iw);
        count += handle_failures(iw);
        update_progress_policy(iw);
    }
    if (ucs_unlikely(iw.setting_up > 0) && every) {
        reap_stalled(iw);
    }
    return count;
}

} // namespace ucx_ifunc

namespace {

/* Progresses until @a done, the peer fails, or @a deadline (ms) passes. */
template <typename Done>
bool progress_until(ucp_ifunc_worker &iw, uint64_t deadline, const Done &done)
{
    while (!done()) {
        if (now_ms() > deadline) {
            return false;
        }
        worker_progress(iw);
    }
    return true;
}

void close_ep(ucp_worker_h worker, ucp_ep_h ep, bool force, uint64_t deadline)
{
    ucp_request_param_t param;
    param.op_attr_mask       = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags              = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &param);
    if (!UCS_PTR_IS_PTR(request)) {
        return;
    }
    while (ucp_request_check_status(request) == UCS_INPROGRESS) {
        if (!force && (now_ms() > deadline)) {
            /* The peer does not answer: a close cannot be cancelled, so
             * it is left to UCX, which frees it when it ends (or with the
             * worker). */
            ucs_diag("ifunc peer: closing an endpoint took longer than "
                     "the peer's timeout; left to UCX");
            break;
        }
        ucp_worker_progress(worker);
    }
    ucp_request_free(request);
}

/* Whether every send to @a peer has left the queue and completed. */
bool drained(const ucp_ifunc_peer &peer)
{
    return peer.queue.empty() && peer.refused.empty() && (peer.in_flight == 0);
}

/* Progresses while @a busy (which bounds itself with deadlines). */
template <typename Busy>
void progress_while(ucp_ifunc_worker &iw, const Busy &busy)
{
    while (busy()) {
        worker_progress(iw);
    }
}

template <typename Test>
bool any_of(const std::vector<ucp_ifunc_peer *> &peers, const Test &test)
{
    return std::any_of(peers.begin(), peers.end(), test);
}

/* Closes the endpoints of @a peers together, each at most until its
 * close deadline (or at once, by force, where it failed or did not
 * drain); what is under way then is left to UCX. */
void close_endpoints(ucp_ifunc_worker                    &iw,
                     const std::vector<ucp_ifunc_peer *> &peers)
{
    struct Closing {
        ucp_worker_h worker;
        void        *request;
        uint64_t     deadline; /* 0: by force, waited for */
    };
    std::vector<Closing> closing;
    auto start = [&](ucp_worker_h worker, ucp_ep_h ep, bool force,
                     uint64_t deadline) {
        ucp_request_param_t param;
        param.op_attr_mask       = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags              = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &param);
        if (UCS_PTR_IS_PTR(request)) {
            closing.push_back({worker, request, force ? 0 : deadline});
        }
    };
    uint64_t now = now_ms();
    for (ucp_ifunc_peer *peer : peers) {
        /* The close's own steps get time even where the sends took it
         * all. */
        uint64_t deadline = std::max(
                peer->close_deadline,
                now + std::min<uint64_t>(peer->timeout_ms, kByeWaitMs));
        if (peer->channel_ep != nullptr) {
            /* Direct stores only: nothing is in flight to flush. */
            channel_ep_discard(peer->channel_ep);
            peer->channel_ep = nullptr;
        }
        if (peer->map_ep != nullptr) {
            /* Without error handling: by force it would not be told, and
             * a flush waits for a peer that died until the deadline. */
            start(iw.shm->worker(), peer->map_ep, false, deadline);
            peer->map_ep = nullptr;
        }
        drop_channel(iw, *peer);
        remove_from(iw.settling, peer);
        if (peer->own_ep && (peer->ep != nullptr)) {
            /* Flushing sends what is in flight (our bye, its answer); a
             * peer that failed, or whose sends did not drain in time, is
             * closed by force, which ends its sends with an error. */
            /* A peer still being set up carries nothing to flush: by
             * force, so that a client that stopped in set-up does not
             * hold a destroy for its timeout. */
            bool force = ((peer->status != UCS_OK) && !peer->closed_by_peer) ||
                         setting_up(*peer) || !drained(*peer) ||
                         (peer->bye_sent && !peer->bye_answered);
            /* Receives of it under way are cancelled by force (a flush
             * close with one under way fails an assertion of UCX 1.13);
             * those that wait are dropped first either way. */
            force |= am_drop_waiting_of(*peer->am, peer->ep);
            start(peer->worker, peer->ep, force, deadline);
        }
        /* UCX frees a request handed back under way once it ends. */
        for (void *request : peer->settle_flushes) {
            ucp_request_free(request);
        }
        peer->settle_flushes.clear();
    }
    for (Closing &c : closing) {
        while (ucp_request_check_status(c.request) == UCS_INPROGRESS) {
            if ((c.deadline != 0) && (now_ms() > c.deadline)) {
                /* The peer does not answer: a close cannot be cancelled,
                 * so it is left to UCX, which frees it when it ends (or
                 * with the worker). */
                ucs_diag("ifunc peer: closing an endpoint took longer than "
                         "the peer's timeout; left to UCX");
                break;
            }
            ucp_worker_progress(c.worker);
        }
        ucp_request_free(c.request);
    }
}

/* Forgets @a peer, whose endpoint is closed and sends ended. */
void forget_peer(ucp_ifunc_worker &iw, ucp_ifunc_peer *peer)
{
    am_ep_destroy(peer->am_ep);
    am_forget_source(*peer->am, peer->ep);
    iw.by_ep.erase(peer->ep);
    if (peer->worker == iw.worker) {
        --iw.user_peers;
    }
    remove_from(iw.queued, peer);
    remove_from(iw.failed, peer);
    remove_from(iw.settling, peer);
    remove_from(iw.reporting, peer);
    /* Its handles name no peer from now on, not a later one at its
     * address. */
    for (auto &table : iw.sandbox_peer_grants) {
        for (SandboxPeerGrant &grant : table.second) {
            if (grant.peer == peer) {
                grant.peer = nullptr;
            }
        }
    }
    iw.live_peers.erase(peer);
    iw.peers.remove_if([&](const std::unique_ptr<ucp_ifunc_peer> &p) {
        return p.get() == peer;
    });
}

/* Closes @a peers of @a iw together (ucp_ifunc_peer_close,
 * ucp_ifunc_worker_destroy, an accepted peer that failed), in steps that
 * each wait for all of them, so that a worker's close takes the time of
 * its slowest peer, not the sum:
 * - what waits is sent, and what is in flight completes, for at most each
 *   peer's timeout (UCP's flush on close does not wait for a rendezvous
 *   to end, whose data the peer has not fetched yet);
 * - each peer that is still up says bye and waits, at most kByeWaitMs,
 *   for the answer: the other side then knows of a clean close before the
 *   endpoint goes (else the endpoint's end reaches it as a failure);
 * - the endpoints close;
 * - sends still queued or refused, and those in flight that the close
 *   ends, are lost: their callbacks hear UCS_ERR_CANCELED, and one line
 *   says how many there were (never one per send). */
void close_peers(ucp_ifunc_worker                    &iw,
                 const std::vector<ucp_ifunc_peer *> &peers, const char *caller)
{
    uint64_t now = now_ms();
    for (ucp_ifunc_peer *peer : peers) {
        peer->closing        = true;
        peer->close_deadline = now + peer->timeout_ms;
    }
    progress_while(iw, [&]() {
        return any_of(peers, [](const ucp_ifunc_peer *peer) {
            return (peer->status == UCS_OK) && !drained(*peer) &&
                   (now_ms() <= peer->close_deadline);
        });
    });
    now = now_ms();
    for (ucp_ifunc_peer *peer : peers) {
        /* Its token is known once its hello came. */
        if ((peer->status == UCS_OK) && peer->greeted) {
            peer->bye_sent =
                    (send_control(*peer, ControlKind::bye, 0) == UCS_OK);
            peer->bye_deadline =
                    now + std::min<uint64_t>(peer->timeout_ms, kByeWaitMs);
        }
    }
    progress_while(iw, [&]() {
        return any_of(peers, [](const ucp_ifunc_peer *peer) {
            return peer->bye_sent && !peer->bye_answered &&
                   (peer->status == UCS_OK) && (now_ms() <= peer->bye_deadline);
        });
    });
    for (ucp_ifunc_peer *peer : peers) {
        peer->lost += peer->queue.size();
        for (QueuedSend &send : peer->queue) {
            peer->held_bytes -= send.msg.frame_size;
            msg_free(send.msg);
        }
        peer->queue.clear();
        while (!peer->refused.empty()) { /* not sent again in time */
            InFlight *entry = peer->refused.front();
            peer->refused.pop_front();
            end_in_flight(entry, UCS_ERR_CANCELED);
        }
    }
    close_endpoints(iw, peers);
    uint64_t lost = 0, peers_with_lost = 0;
    for (ucp_ifunc_peer *peer : peers) {
        /* A forced close ends what it had in flight. */
        while (peer->in_flight > 0) {
            ucp_worker_progress(peer->worker);
        }
        lost += peer->lost;
        peers_with_lost += (peer->lost > 0);
        /* Reports it still owes: a failed peer's status, else closed. */
        answer_all_reports(*peer, (peer->status != UCS_OK) ? peer->status
                                                           : UCS_ERR_CANCELED);
    }
    if (lost > 0) {
        ucs_warn("%s: %" PRIu64 " sends to %" PRIu64 " peer(s) were not "
                 "delivered (still queued or in flight when the peer failed "
                 "or its timeout passed); callbacks of those that had one "
                 "heard UCS_ERR_CANCELED",
                 caller, lost, peers_with_lost);
    }
    for (ucp_ifunc_peer *peer : peers) {
        forget_peer(iw, peer);
    }
    update_progress_policy(iw);
}

/* A path the caller gave, as a number: it may be no value of the enum, and
 * loading such a value as the enum is undefined. */
unsigned path_value(const ucp_ifunc_path_t &path)
{
    unsigned value;
    static_assert(sizeof(value) == sizeof(path), "an enum is an int here");
    std::memcpy(&value, &path, sizeof(value));
    return value;
}

ucp_ifunc_path_t path_param(const ucp_ifunc_peer_params_t *params,
                            ucp_ifunc_path_t               fallback)
{
    return (params->field_mask & UCP_IFUNC_PEER_FIELD_PATH) ? params->path
                                                            : fallback;
}

/* Makes the endpoint of a peer we connect to, from its address or the
 * caller's. */
ucs_status_t connect_ep(ucp_ifunc_worker &iw, const ucp_ifunc_peer_params_t &p,
                        std::unique_ptr<ucp_ifunc_peer> &peer)
{
    peer->iworker = &iw;
    if (p.field_mask & UCP_IFUNC_PEER_FIELD_EP) {
        peer->ep = p.ep;
        return UCS_OK;
    }
    sockaddr_storage addr;
    socklen_t        addr_len;
    if (!resolve_address("ucp_ifunc_peer_connect", p.address, false, &addr,
                         &addr_len)) {
        return UCS_ERR_INVALID_PARAM;
    }
    ucs_status_t status = net_worker(iw);
    if (status != UCS_OK) {
        return status;
    }
    ucp_ep_params_t params = ep_params(peer.get());
    params.field_mask |=
            UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    params.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr    = reinterpret_cast<sockaddr *>(&addr);
    params.sockaddr.addrlen = addr_len;
    status = ucp_ep_create(iw.net->worker(), &params, &peer->ep);
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_peer_connect: ucp_ep_create to '%s' failed: %s",
                  p.address, ucs_status_string(status));
        peer->ep = nullptr;
        return status;
    }
    peer->own_ep = true;
    return UCS_OK;
}

/* One warning for a listener that any host may reach while no peer has
 * to prove a key. */
void warn_unauthenticated_listen(const ucp_ifunc_worker &iw,
                                 const sockaddr_storage &addr)
{
    bool loopback = false;
    if (addr.ss_family == AF_INET) {
        loopback = (ntohl(reinterpret_cast<const sockaddr_in &>(addr)
                                  .sin_addr.s_addr) >>
                    24) == 127;
    } else if (addr.ss_family == AF_INET6) {
        loopback = IN6_IS_ADDR_LOOPBACK(
                &reinterpret_cast<const sockaddr_in6 &>(addr).sin6_addr);
    }
    if (!loopback && !iw.keys->required()) {
        ucs_warn("ucp_ifunc_listen: listening beyond loopback with no "
                 "UCX_IFUNC_PEER_KEYS: any host that reaches this port may "
                 "connect and send (docs/security.md, \"Peers at the network "
                 "edge\")");
    }
}

bool peer_params_valid(const ucp_ifunc_peer_params_t *p)
{
    constexpr uint64_t known =
            UCP_IFUNC_PEER_FIELD_ADDRESS | UCP_IFUNC_PEER_FIELD_EP |
            UCP_IFUNC_PEER_FIELD_PATH | UCP_IFUNC_PEER_FIELD_TIMEOUT;
    if ((p == nullptr) || (p->field_mask & ~known)) {
        return false;
    }
    bool by_address = (p->field_mask & UCP_IFUNC_PEER_FIELD_ADDRESS) &&
                      (p->address != nullptr);
    bool by_ep =
            (p->field_mask & UCP_IFUNC_PEER_FIELD_EP) && (p->ep != nullptr);
    bool path_ok = !(p->field_mask & UCP_IFUNC_PEER_FIELD_PATH) ||
                   (path_value(p->path) <= UCP_IFUNC_PATH_AM);
    return (by_address != by_ep) && path_ok;
}

} // namespace

namespace ucx_ifunc {

ucs_status_t worker_create(ucp_context_h context, ucp_worker_h worker,
                           const ucp_ifunc_worker_params_t *params,
                           ucp_ifunc_worker_h              *iworker_p)
{
    constexpr uint64_t known =
            UCP_IFUNC_WORKER_FIELD_TARGET_ARGS | UCP_IFUNC_WORKER_FIELD_AM_ID |
            UCP_IFUNC_WORKER_FIELD_PATH | UCP_IFUNC_WORKER_FIELD_PEER_CB;
    uint64_t mask = (params != nullptr) ? params->field_mask : 0;
    auto     iw   = std::make_unique<ucp_ifunc_worker>();
    iw->am_id     = (mask & UCP_IFUNC_WORKER_FIELD_AM_ID) ? params->am_id
                                                          : UCP_IFUNC_AM_ID_DEFAULT;
    unsigned path = (mask & UCP_IFUNC_WORKER_FIELD_PATH)
                            ? path_value(params->path)
                            : unsigned(UCP_IFUNC_PATH_AUTO);
    iw->path      = ucp_ifunc_path_t(std::min(path, 3u));
    if ((context == nullptr) || (worker == nullptr) || (iworker_p == nullptr) ||
        (mask & ~known) || (iw->am_id + 2 >= UINT16_MAX) ||
        (unsigned(iw->path) > UCP_IFUNC_PATH_AM)) {
        ucs_error("ucp_ifunc_worker_create: need a context, a worker, "
                  "iworker_p, an AM id below %u, a known path and no "
                  "unknown parameter",
                  unsigned(UINT16_MAX) - 2);
        return UCS_ERR_INVALID_PARAM;
    }
    iw->context     = context;
    iw->worker      = worker;
    iw->target_args = (mask & UCP_IFUNC_WORKER_FIELD_TARGET_ARGS)
                              ? params->target_args
                              : nullptr;
    if (mask & UCP_IFUNC_WORKER_FIELD_PEER_CB) {
        iw->peer_cb     = params->peer_cb;
        iw->peer_cb_arg = params->peer_cb_arg;
    }
    iw->config          = config_read();
    ucs_status_t status = PeerKeys::load(iw->config, &iw->keys);
    if (status != UCS_OK) {
        return status;
    }
    if (iw->keys->required() && !iw->keys->has_identity()) {
        ucs_warn("ucp_ifunc_worker_create: UCX_IFUNC_PEER_KEYS is set "
                 "but UCX_IFUNC_IDENTITY_KEY is not: peers that ask "
                 "this worker for its key will refuse it");
    }
    ucp_worker_attr_t wattr;
    wattr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    iw->thread_mode  = (ucp_worker_query(worker, &wattr) == UCS_OK)
                               ? wattr.thread_mode
                               : UCS_THREAD_MODE_SINGLE;
    const char *tls  = getenv("UCX_TLS");
    iw->shm_tls      = shm_transports((tls != nullptr) ? tls : "");
    iw->net_tls      = net_transports((tls != nullptr) ? tls : "");
    iw->state        = share_target_state(context);
    ucp_ifunc_am_params_t am_params;
    am_params.field_mask =
            UCP_IFUNC_AM_FIELD_AM_ID | UCP_IFUNC_AM_FIELD_TARGET_ARGS;
    am_params.am_id       = iw->am_id;
    am_params.target_args = iw->target_args;
    status                = am_enable(context, worker, &am_params, &iw->am);
    if (status != UCS_OK) {
        iw->am = nullptr;
        return status;
    }
    am_count_as_peer(*iw->am);
    am_need_source(*iw->am);
    admit_only_verified(*iw, *iw->am);
    status = set_control_handler(*iw, worker, control_on_user_worker);
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_worker_create: setting the handler of AM id "
                  "%u failed: %s",
                  iw->am_id + 2, ucs_status_string(status));
        return status;
    }
    *iworker_p = iw.release();
    return UCS_OK;
}

void worker_destroy(ucp_ifunc_worker_h iw)
{
    if (iw == nullptr) {
        return;
    }
    std::unique_ptr<ucp_ifunc_worker> owner(iw);
    /* From now on a connection is rejected, a hello from an endpoint
     * not known makes no peer, and peer_cb hears nothing: the peers
     * there are now are the last. */
    iw->destroying = true;
    std::vector<ucp_ifunc_peer *> all;
    for (const auto &peer : iw->peers) {
        all.push_back(peer.get());
    }
    close_peers(*iw, all, "ucp_ifunc_worker_destroy");
    /* Before their listeners go (a rejection names its listener): the
     * requests the closes' progress noted. The listeners go last, once
     * nothing progresses the network worker any more: UCX 1.13 can
     * queue a request of a listener being destroyed (fixed in 1.14). */
    for (const auto &request : iw->conn_requests) {
        ucp_listener_reject(request.first, request.second);
    }
    iw->conn_requests.clear();
    iw->listeners.clear();
}

ucs_status_t worker_query(ucp_ifunc_worker_h iw, ucp_ifunc_worker_attr_t *attr)
{
    if ((iw == nullptr) || (attr == nullptr)) {
        ucs_error("ucp_ifunc_worker_query: iworker and attr must not be "
                  "NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    if (attr->field_mask & UCP_IFUNC_WORKER_ATTR_FIELD_NET_WORKER) {
        ucs_status_t status = net_worker(*iw);
        if (status != UCS_OK) {
            return status;
        }
        attr->net_worker = iw->net->worker();
    }
    return UCS_OK;
}

ucs_status_t source_query(ucp_ifunc_source_attr_t *attr)
{
    if (attr == nullptr) {
        ucs_error("ucp_ifunc_source_query: attr must not be NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    /* The message whose code runs: its path named its source. */
    ucp_ifunc_worker     *iw      = progressing_worker;
    const RunningMessage *running = RunningMessage::innermost_code();
    ucp_ifunc_peer       *peer    = ((iw != nullptr) && (running != nullptr))
                                            ? source_peer(*iw, running->source)
                                            : nullptr;
    if (peer == nullptr) {
        return UCS_ERR_NO_ELEM;
    }
    if (attr->field_mask & UCP_IFUNC_SOURCE_ATTR_FIELD_PEER) {
        attr->peer = peer;
    }
    if (attr->field_mask & UCP_IFUNC_SOURCE_ATTR_FIELD_KEY) {
        std::memcpy(attr->key, peer->key.data(), sizeof(attr->key));
        attr->key_verified = peer->key_verified;
    }
    return UCS_OK;
}

ucs_status_t listener_create(ucp_ifunc_worker_h                 iw,
                             const ucp_ifunc_listener_params_t *params,
                             ucp_ifunc_listener_h              *listener_p)
{
    uint64_t mask = (params != nullptr) ? params->field_mask : 0;
    if ((iw == nullptr) || (listener_p == nullptr) ||
        (mask & ~uint64_t(UCP_IFUNC_LISTENER_FIELD_ADDRESS))) {
        ucs_error("ucp_ifunc_listen: need an ifunc worker, listener_p "
                  "and no unknown parameter");
        return UCS_ERR_INVALID_PARAM;
    }
    const char      *address = ((mask & UCP_IFUNC_LISTENER_FIELD_ADDRESS) &&
                           (params->address != nullptr))
                                       ? params->address
                                       : "0";
    sockaddr_storage addr;
    socklen_t        addr_len;
    if (!resolve_address("ucp_ifunc_listen", address, true, &addr, &addr_len)) {
        return UCS_ERR_INVALID_PARAM;
    }
    ucs_status_t status = net_worker(*iw);
    if (status != UCS_OK) {
        return status;
    }
    warn_unauthenticated_listen(*iw, addr);
    auto listener                 = std::make_unique<ucp_ifunc_listener>();
    listener->iworker             = iw;
    ucp_listener_params_t lparams = {};
    lparams.field_mask            = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                         UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lparams.sockaddr.addr    = reinterpret_cast<sockaddr *>(&addr);
    lparams.sockaddr.addrlen = addr_len;
    lparams.conn_handler.cb  = conn_request_arrived;
    lparams.conn_handler.arg = listener.get();
    status                   = ucp_listener_create(iw->net->worker(), &lparams,
                                                   &listener->listener);
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_listen: ucp_listener_create on '%s' failed: "
                  "%s",
                  address, ucs_status_string(status));
        listener->listener = nullptr;
        return status;
    }
    *listener_p = listener.get();
    iw->listeners.push_back(std::move(listener));
    return UCS_OK;
}

ucs_status_t listener_query(ucp_ifunc_listener_h       listener,
                            ucp_ifunc_listener_attr_t *attr)
{
    if ((listener == nullptr) || (attr == nullptr)) {
        ucs_error("ucp_ifunc_listener_query: listener and attr must not "
                  "be NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    if (attr->field_mask & UCP_IFUNC_LISTENER_ATTR_FIELD_PORT) {
        ucp_listener_attr_t uattr;
        uattr.field_mask    = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
        ucs_status_t status = ucp_listener_query(listener->listener, &uattr);
        if (status != UCS_OK) {
            return status;
        }
        const auto &sa = uattr.sockaddr;
        attr->port     = ntohs(
                    (sa.ss_family == AF_INET6)
                            ? reinterpret_cast<const sockaddr_in6 &>(sa).sin6_port
                            : reinterpret_cast<const sockaddr_in &>(sa).sin_port);
    }
    return UCS_OK;
}

void listener_destroy(ucp_ifunc_listener_h listener)
{
    if (listener == nullptr) {
        return;
    }
    auto &requests = listener->iworker->conn_requests;
    for (auto it = requests.begin(); it != requests.end();) {
        if (it->first == listener->listener) {
            ucp_listener_reject(it->first, it->second);
            it = requests.erase(it);
        } else {
            ++it;
        }
    }
    auto &list = listener->iworker->listeners;
    list.remove_if([&](const std::unique_ptr<ucp_ifunc_listener> &l) {
        return l.get() == listener;
    });
}

} // namespace ucx_ifunc

namespace {

/* The peer on the endpoint @a params name: a new one, or the one a hello
 * on the caller's endpoint made already (the other side was first). */
ucs_status_t peer_for(ucp_ifunc_worker &iw, const ucp_ifunc_peer_params_t &p,
                      ucp_ifunc_peer **peer_p)
{
    auto known = (p.field_mask & UCP_IFUNC_PEER_FIELD_EP) ? iw.by_ep.find(p.ep)
                                                          : iw.by_ep.end();
    if (known != iw.by_ep.end()) {
        *peer_p             = known->second;
        (*peer_p)->accepted = false; /* the caller's from now on */
        return UCS_OK;
    }
    auto         peer   = std::make_unique<ucp_ifunc_peer>();
    ucs_status_t status = connect_ep(iw, p, peer);
    if (status != UCS_OK) {
        return status;
    }
    ucp_worker_h worker = (p.field_mask & UCP_IFUNC_PEER_FIELD_EP)
                                  ? iw.worker
                                  : iw.net->worker();
    ucp_ep_h     ep     = peer->ep;
    bool         own_ep = peer->own_ep;
    *peer_p             = add_peer(iw, worker, std::move(peer));
    if (*peer_p == nullptr) {
        if (own_ep) {
            close_ep(worker, ep, true, 0);
        }
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

} // namespace

namespace {

/* One attempt of ucp_ifunc_peer_connect, until @a deadline: the peer, set
 * up both ways, in *@a peer_p; else its status, the peer closed. */
ucs_status_t connect_once(ucp_ifunc_worker              &iw,
                          const ucp_ifunc_peer_params_t &p, uint64_t deadline,
                          ucp_ifunc_peer **peer_p)
{
    ucp_ifunc_peer *peer   = nullptr;
    ucs_status_t    status = peer_for(iw, p, &peer);
    if (status != UCS_OK) {
        return status;
    }
    peer->wanted     = path_param(&p, iw.path);
    peer->timeout_ms = (p.field_mask & UCP_IFUNC_PEER_FIELD_TIMEOUT)
                               ? p.timeout_ms
                               : kDefaultTimeout;
    if (!peer->hello_sent) {
        status = send_hello(iw, *peer);
    }
    /* Both ways set up, and both sides' endpoints flushed (ours, and the
     * other side's: its ready): a caller that stops progressing after this
     * call strands nothing the other side waits for, nor the reverse. */
    if ((status == UCS_OK) && !progress_until(iw, deadline, [&]() {
            return (peer->settled && peer->got_ready) ||
                   (peer->status != UCS_OK);
        })) {
        status = UCS_ERR_TIMED_OUT;
    }
    if ((status == UCS_OK) && (peer->status != UCS_OK)) {
        /* A refused connection (no listener there) is UCS_ERR_NOT_CONNECTED
         * from UCX 1.13's TCP connection manager and
         * UCS_ERR_CONNECTION_RESET from 1.22's; before the other side's
         * hello came, a reset can be nothing else. */
        bool refused =
                (peer->status == UCS_ERR_NOT_CONNECTED) ||
                ((peer->status == UCS_ERR_CONNECTION_RESET) && !peer->greeted);
        status = refused ? UCS_ERR_UNREACHABLE : peer->status;
    }
    if (status != UCS_OK) {
        peer_close(peer);
        return status;
    }
    *peer_p = peer;
    return UCS_OK;
}

} // namespace

namespace ucx_ifunc {

ucs_status_t peer_connect(ucp_ifunc_worker_h             iw,
                          const ucp_ifunc_peer_params_t *params,
                          ucp_ifunc_peer_h              *peer_p)
{
    if ((iw == nullptr) || (peer_p == nullptr) || !peer_params_valid(params)) {
        ucs_error("ucp_ifunc_peer_connect: need an ifunc worker, peer_p, "
                  "and params with exactly one of an address and an "
                  "endpoint, a known path and no unknown field");
        return UCS_ERR_INVALID_PARAM;
    }
    bool by_address = (params->field_mask & UCP_IFUNC_PEER_FIELD_EP) == 0;
    /* Made first, so that its making takes none of the timeout. */
    ucs_status_t status = by_address ? net_worker(*iw) : UCS_OK;
    if (status != UCS_OK) {
        return status;
    }
    uint64_t deadline =
            now_ms() + ((params->field_mask & UCP_IFUNC_PEER_FIELD_TIMEOUT)
                                ? params->timeout_ms
                                : kDefaultTimeout);
    /* A target that is still starting refuses: ask again until the
     * timeout, as a program started beside it would want. An attempt the
     * timeout cut short after refusals says what those said: no one
     * listens there (a loaded machine may not answer the last one). */
    bool refused = false;
    while (((status = connect_once(*iw, *params, deadline, peer_p)) ==
            UCS_ERR_UNREACHABLE) &&
           by_address && (now_ms() + kRetryMs < deadline)) {
        refused           = true;
        uint64_t retry_at = now_ms() + kRetryMs;
        progress_until(*iw, retry_at, []() { return false; });
    }
    if (refused && (status == UCS_ERR_TIMED_OUT)) {
        status = UCS_ERR_UNREACHABLE;
    }
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_peer_connect: no answer from %s: %s (is an "
                  "ifunc worker with AM id %u listening there, and "
                  "does UCX_NET_DEVICES name the device its address "
                  "routes through?)",
                  by_address ? params->address : "the endpoint's peer",
                  ucs_status_string(status), iw->am_id);
    }
    return status;
}

ucs_status_t peer_send_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                           const void *payload, size_t length,
                           const ucp_ifunc_peer_send_params_t *params)
{
    constexpr uint64_t known = UCP_IFUNC_PEER_SEND_FIELD_FLAGS |
                               UCP_IFUNC_PEER_SEND_FIELD_CALLBACK |
                               UCP_IFUNC_PEER_SEND_FIELD_USER_DATA |
                               UCP_IFUNC_PEER_SEND_FIELD_REPORT;
    if (peer == UCP_IFUNC_PEER_SOURCE) {
        ucs_status_t status;
        peer = reply_peer(&status);
        if (peer == nullptr) {
            return status;
        }
    }
    if (ucs_unlikely(
                (peer == nullptr) || (ifunc_h == nullptr) ||
                ((payload == nullptr) && (length > 0)) ||
                ((params != nullptr) &&
                 ((params->field_mask & ~known) ||
                  ((params->field_mask & UCP_IFUNC_PEER_SEND_FIELD_REPORT) &&
                   (params->report == nullptr)))))) {
        ucs_error("ucp_ifunc_peer_send_nbx: need a peer, an ifunc, a "
                  "payload unless the length is 0, a report callback "
                  "where its field is set, and no unknown parameter");
        return UCS_ERR_INVALID_PARAM;
    }
    if (ucs_unlikely((peer->status != UCS_OK) || peer->closing)) {
        ucs_debug("ucp_ifunc_peer_send_nbx: the peer %s",
                  peer->closing ? "is being closed"
                                : ucs_status_string(peer->status));
        return peer->closing ? UCS_ERR_CANCELED : peer->status;
    }
    return peer_send(*peer, ifunc_h, payload, length, params);
}

ucs_status_t peer_send_array_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                                 const void *payloads, size_t length,
                                 size_t count, size_t *sent_p,
                                 const ucp_ifunc_peer_send_params_t *params)
{
    if ((sent_p == nullptr) ||
        ((params != nullptr) &&
         (params->field_mask & ~uint64_t(UCP_IFUNC_PEER_SEND_FIELD_FLAGS))) ||
        ((length > 0) && (count > SIZE_MAX / length))) {
        ucs_error("ucp_ifunc_peer_send_array_nbx: need sent_p, no callback "
                  "or report (the array may be reused on return), and count "
                  "* length that fits a size_t");
        return UCS_ERR_INVALID_PARAM;
    }
    /* Each message is a send of its own: the same checks, choice of code
     * and queueing, in order. */
    const char *payload = static_cast<const char *>(payloads);
    for (*sent_p = 0; *sent_p < count; ++*sent_p) {
        ucs_status_t status = peer_send_nbx(
                peer, ifunc_h,
                (length > 0) ? payload + *sent_p * length : payload, length,
                params);
        if (status != UCS_OK) {
            return status;
        }
    }
    return UCS_OK;
}

ucs_status_t peer_query(ucp_ifunc_peer_h peer, ucp_ifunc_peer_attr_t *attr)
{
    if ((peer == nullptr) || (attr == nullptr)) {
        ucs_error("ucp_ifunc_peer_query: peer and attr must not be NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    ucp_ifunc_ep_attr_t am_attr = {};
    am_attr.field_mask          = UCP_IFUNC_EP_ATTR_FIELD_SENT_WITH_CODE |
                         UCP_IFUNC_EP_ATTR_FIELD_SENT_BY_REF;
    ucp_ifunc_ep_attr_t ch_attr = {};
    ch_attr.field_mask          = am_attr.field_mask;
    am_ep_query(peer->am_ep, &am_attr);
    if (peer->channel_ep != nullptr) {
        channel_ep_query(peer->channel_ep, &ch_attr);
    }
    uint64_t mask = attr->field_mask;
    if (mask & UCP_IFUNC_PEER_ATTR_FIELD_PATH) {
        attr->path = (peer->settled && peer->got_ready) ? peer->path
                                                        : UCP_IFUNC_PATH_AUTO;
    }
    if (mask & UCP_IFUNC_PEER_ATTR_FIELD_MACHINE) {
        attr->machine = peer->machine;
    }
    if (mask & UCP_IFUNC_PEER_ATTR_FIELD_STATUS) {
        attr->status = peer->status;
    }
    if (mask & UCP_IFUNC_PEER_ATTR_FIELD_SENT_WITH_CODE) {
        attr->sent_with_code = am_attr.sent_with_code + ch_attr.sent_with_code;
    }
    if (mask & UCP_IFUNC_PEER_ATTR_FIELD_SENT_BY_REF) {
        /* The channel counts the references it stored itself. */
        attr->sent_by_ref = am_attr.sent_by_ref + ch_attr.sent_by_ref;
    }
    if (mask & UCP_IFUNC_PEER_ATTR_FIELD_EP) {
        attr->ep = peer->ep;
    }
    if (mask & UCP_IFUNC_PEER_ATTR_FIELD_QUEUED) {
        attr->queued = unsigned(peer->queue.size());
    }
    if (mask & UCP_IFUNC_PEER_ATTR_FIELD_KEY) {
        std::memcpy(attr->key, peer->key.data(), sizeof(attr->key));
        attr->key_verified = peer->key_verified;
    }
    if (mask & UCP_IFUNC_PEER_ATTR_FIELD_HELD_BYTES) {
        attr->held_bytes = peer->held_bytes;
    }
    return UCS_OK;
}

void peer_close(ucp_ifunc_peer_h peer)
{
    if ((peer != nullptr) && !peer->closing) {
        close_peers(*peer->iworker, {peer}, "ucp_ifunc_peer_close");
    }
}

ucs_status_t
sandbox_peer_grant(ucp_ifunc_peer_h peer, const char *ifunc_name,
                   const ucp_ifunc_sandbox_peer_grant_params_t *params,
                   ucp_ifunc_peer_h                            *handle_p)
{
    uint64_t             mask = (params != nullptr) ? params->field_mask : 0;
    const unsigned char *signer =
            (mask & UCP_IFUNC_SANDBOX_PEER_GRANT_FIELD_SIGNER) ? params->signer
                                                               : nullptr;
    if ((peer == nullptr) || (handle_p == nullptr) ||
        !ifunc_name_valid(ifunc_name) ||
        (mask & ~uint64_t(UCP_IFUNC_SANDBOX_PEER_GRANT_FIELD_SIGNER)) ||
        ((mask & UCP_IFUNC_SANDBOX_PEER_GRANT_FIELD_SIGNER) &&
         (signer == nullptr))) {
        ucs_error("ucp_ifunc_sandbox_peer_grant: need a peer, a valid "
                  "ifunc name, handle_p, a signer where its field is "
                  "set, and no unknown field");
        return UCS_ERR_INVALID_PARAM;
    }
    SandboxPeerGrant grant{peer, signer != nullptr, {}};
    if (signer != nullptr) {
        std::memcpy(grant.signer.data(), signer, grant.signer.size());
    }
    auto &table = peer->iworker->sandbox_peer_grants[ifunc_name];
    auto  same  = std::find_if(
              table.begin(), table.end(), [&](const SandboxPeerGrant &g) {
                return (g.peer == peer) && (g.has_signer == grant.has_signer) &&
                       (g.signer == grant.signer);
            });
    if (same == table.end()) {
        /* Handles stay small: sandboxed code that counts through them
         * finds only peers granted to its ifunc. */
        if (table.size() >= UINT16_MAX) {
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        same = table.insert(table.end(), grant);
    }
    *handle_p = reinterpret_cast<ucp_ifunc_peer_h>(
            uintptr_t(same - table.begin()) + 1);
    return UCS_OK;
}

} // namespace ucx_ifunc
