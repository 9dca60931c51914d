/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * A hostile network peer of an ifunc worker's listener, for the tests of
 * the network edge (test/integration/test_edge.cc): it holds no key unless
 * given one, speaks UCP itself and forges what it likes. One mode a run;
 * it prints one line "MODE key=value ..." and exits 0 when it could do
 * what it tried (what the target made of it is the test's to judge).
 *
 *   put --addr HEX [--value HEX]   one UCP put of 8 bytes with a key its
 *                                  own context packed, then a flush
 *   forge                          set-up messages with forged fields: a
 *                                  welcome with a random worker address
 *                                  and key, one whose blob claims 64 GiB
 *                                  slots, a made-up same-host proof
 *   tokens --rounds N              set-up messages for tokens near and far
 *                                  from its own, on its own endpoint
 *   declare --peers N              N connections that ask for a channel
 *                                  and prove the host with a made-up MAC
 *   silent --peers N --hold S      N connections that never say hello,
 *                                  held until all failed, S seconds at most
 *   flood --count N                N malformed set-up messages
 *   prove --key FILE               a set-up that proves FILE's key
 *   replay --key FILE              proves FILE's key on one connection,
 *                                  then sends that proof again on another
 *   redirect                       after its hello, requests of reply.so
 *                                  (test/ifuncs/reply.c) that try to make
 *                                  their answer go to another peer: a
 *                                  full frame with a made-up token, the
 *                                  same without UCX's reply flag, and a
 *                                  reference without it (its index from
 *                                  the target's reply to the first);
 *                                  counts the answers that came to it
 *   reports --rounds N             N rounds of forged delivery reports on
 *                                  its own endpoint: every report id, of
 *                                  status UCS_OK, under its token, a
 *                                  wrong one, and with malformed sizes
 *   ask --count N                  N references to code the target does
 *                                  not hold, each asking for a delivery
 *                                  report (ids 1..N), then N that do not
 *                                  ask; counts the report entries that
 *                                  came back, by id
 *   bye --rounds N                 a set-up that the target admits, then
 *                                  byes (and bye answers) for tokens near
 *                                  and far from its peer's, then, once a
 *                                  line comes on stdin, a bye with the
 *                                  right token
 *
 * Common options: --connect HOST:PORT (required), --am-id N (the ifunc
 * worker's AM id, default UCP_IFUNC_AM_ID_DEFAULT), --timeout S.
 */
#include "../../src/ucp/ifunc/peer/peer_wire.h"
#include "../../tools/common/ucx.h"
#include "../ifuncs/test_ifunc.h"

#include <ucp/api/ucp_ifunc.h>

#include <netdb.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ucx_ifunc;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string mode;
    std::string connect;
    unsigned    am_id   = UCP_IFUNC_AM_ID_DEFAULT;
    double      timeout = 5;
    uint64_t    addr    = 0;
    uint64_t    value   = 0x4841434b4544ull; /* "HACKED" */
    unsigned    rounds  = 100;
    unsigned    peers   = 1;
    unsigned    count   = 1000;
    double      hold    = 1;
    std::string key;
};

Options parse(int argc, char **argv)
{
    Options o;
    if (argc < 2) {
        throw std::runtime_error("usage: ifunc_hostile_peer MODE --connect "
                                 "HOST:PORT [options]");
    }
    o.mode = argv[1];
    for (int i = 2; i < argc; ++i) {
        std::string arg  = argv[i];
        auto        next = [&]() -> std::string {
            if (i + 1 >= argc) {
                throw std::runtime_error(arg + " needs a value");
            }
            return argv[++i];
        };
        if (arg == "--connect") {
            o.connect = next();
        } else if (arg == "--am-id") {
            o.am_id = unsigned(std::stoul(next()));
        } else if (arg == "--timeout") {
            o.timeout = std::stod(next());
        } else if (arg == "--addr") {
            o.addr = std::stoull(next(), nullptr, 16);
        } else if (arg == "--value") {
            o.value = std::stoull(next(), nullptr, 16);
        } else if (arg == "--rounds") {
            o.rounds = unsigned(std::stoul(next()));
        } else if (arg == "--peers") {
            o.peers = unsigned(std::stoul(next()));
        } else if (arg == "--count") {
            o.count = unsigned(std::stoul(next()));
        } else if (arg == "--hold") {
            o.hold = std::stod(next());
        } else if (arg == "--key") {
            o.key = next();
        } else {
            throw std::runtime_error("unknown option " + arg);
        }
    }
    if (o.connect.empty()) {
        throw std::runtime_error("--connect HOST:PORT is required");
    }
    return o;
}

/* A set-up message the target sent us. */
struct Received {
    ControlHeader     header;
    std::vector<char> data;
    ucp_ep_h          ep;
};

/* A UCP worker of a context with remote memory access (what an attacker
 * would use), over UCX_TLS as set, and what the target sent it. */
class Attacker {
public:
    explicit Attacker(const Options &o)
        : options_(o), context_(UCP_FEATURE_AM | UCP_FEATURE_RMA),
          worker_(context_.get())
    {
        ucp_am_handler_param_t param;
        param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                           UCP_AM_HANDLER_PARAM_FIELD_CB |
                           UCP_AM_HANDLER_PARAM_FIELD_ARG;
        param.id  = o.am_id + 2;
        param.cb  = arrived;
        param.arg = this;
        ucx_util::check(ucp_worker_set_am_recv_handler(worker_.get(), &param),
                        "ucp_worker_set_am_recv_handler");
    }

    ~Attacker()
    {
        for (ucp_ep_h ep : eps_) {
            ucp_request_param_t param;
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
            ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &param);
            if (UCS_PTR_IS_PTR(r)) {
                while (ucp_request_check_status(r) == UCS_INPROGRESS) {
                    worker_.progress();
                }
                ucp_request_free(r);
            }
        }
    }

    ucp_context_h context() { return context_.get(); }
    ucp_worker_h  worker() { return worker_.get(); }

    /* A new endpoint to the target's listener. */
    ucp_ep_h connect()
    {
        std::string text  = options_.connect;
        size_t      colon = text.rfind(':');
        addrinfo    hints = {};
        hints.ai_family   = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo *result  = nullptr;
        if ((colon == std::string::npos) ||
            (getaddrinfo(text.substr(0, colon).c_str(),
                         text.substr(colon + 1).c_str(), &hints,
                         &result) != 0)) {
            throw std::runtime_error("cannot resolve " + text);
        }
        ucp_ep_params_t params = {};
        params.field_mask      = UCP_EP_PARAM_FIELD_FLAGS |
                            UCP_EP_PARAM_FIELD_SOCK_ADDR |
                            UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                            UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        params.sockaddr.addr    = result->ai_addr;
        params.sockaddr.addrlen = result->ai_addrlen;
        params.err_mode         = UCP_ERR_HANDLING_MODE_PEER;
        params.err_handler.cb   = failed;
        params.err_handler.arg  = this;
        ucp_ep_h     ep;
        ucs_status_t status = ucp_ep_create(worker_.get(), &params, &ep);
        freeaddrinfo(result);
        ucx_util::check(status, "ucp_ep_create");
        eps_.push_back(ep);
        return ep;
    }

    /* Sends a set-up message of @a kind. */
    ucs_status_t send(ucp_ep_h ep, ControlKind kind, uint64_t token,
                      uint64_t flags, const void *data, size_t length,
                      uint16_t version = kPeerVersion,
                      uint64_t machine = 62 /* x86-64 */)
    {
        ControlHeader hdr = {kPeerMagic, version, uint16_t(kind),
                             token,      machine, flags};
        return send_raw(ep, &hdr, sizeof(hdr), data, length);
    }

    ucs_status_t send_raw(ucp_ep_h ep, const void *header, size_t header_size,
                          const void *data, size_t length)
    {
        ucp_request_param_t param;
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags        = UCP_AM_SEND_FLAG_REPLY;
        return wait(ucp_am_send_nbx(ep, options_.am_id + 2, header, header_size,
                                    data, length, &param));
    }

    /* The next message of @a kind that came on @a ep, waiting until the
     * deadline; false if none. */
    bool expect(ucp_ep_h ep, ControlKind kind, Received *out,
                double seconds = -1)
    {
        auto until = (seconds < 0)
                             ? deadline()
                             : Clock::now() + std::chrono::milliseconds(
                                                      long(seconds * 1000));
        for (;;) {
            for (auto it = received_.begin(); it != received_.end(); ++it) {
                if ((it->ep == ep) && (it->header.kind == uint16_t(kind))) {
                    *out = std::move(*it);
                    received_.erase(it);
                    return true;
                }
            }
            if (Clock::now() > until) {
                return false;
            }
            worker_.progress();
        }
    }

    /* Progresses for @a seconds. */
    void idle(double seconds)
    {
        auto until =
                Clock::now() + std::chrono::milliseconds(long(seconds * 1000));
        while (Clock::now() < until) {
            worker_.progress();
        }
    }

    unsigned failures() const { return failures_; }

    /* From now on counts the messages that come on @a ep to the ifunc
     * worker's AM id (its messages) and keeps the code index of the
     * target's replies (AM id + 1). */
    void watch_ifunc_messages(ucp_ep_h ep)
    {
        watched_ = ep;
        for (unsigned id : {options_.am_id, options_.am_id + 1}) {
            ucp_am_handler_param_t param;
            param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                               UCP_AM_HANDLER_PARAM_FIELD_ARG;
            param.id  = id;
            param.cb  = (id == options_.am_id) ? ifunc_message : target_reply;
            param.arg = this;
            ucx_util::check(
                    ucp_worker_set_am_recv_handler(worker_.get(), &param),
                    "ucp_worker_set_am_recv_handler");
        }
    }

    unsigned ifunc_messages = 0; /* on the watched endpoint */
    unsigned elsewhere      = 0; /* on another, or none named */
    uint64_t code_index     = 0; /* from the target's last reply */

    /* Progresses until @a request completes or the deadline passes; a
     * request still under way then is left to UCX (a flush cannot be
     * cancelled, and the process leaves without cleaning up). */
    ucs_status_t wait(ucs_status_ptr_t request)
    {
        if (!UCS_PTR_IS_PTR(request)) {
            return UCS_PTR_STATUS(request);
        }
        auto         until = deadline();
        ucs_status_t status;
        while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
            if (Clock::now() > until) {
                return UCS_ERR_TIMED_OUT;
            }
            worker_.progress();
        }
        ucp_request_free(request);
        return status;
    }

    ucx_util::Deadline deadline() const
    {
        return Clock::now() +
               std::chrono::milliseconds(long(options_.timeout * 1000));
    }

private:
    static ucs_status_t arrived(void *arg, const void *header,
                                size_t header_length, void *data, size_t length,
                                const ucp_am_recv_param_t *param)
    {
        auto *self = static_cast<Attacker *>(arg);
        if ((header_length != sizeof(ControlHeader)) ||
            (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
            return UCS_OK;
        }
        Received r;
        std::memcpy(&r.header, header, sizeof(r.header));
        r.data.assign(static_cast<char *>(data),
                      static_cast<char *>(data) + length);
        r.ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
                       ? param->reply_ep
                       : nullptr;
        self->received_.push_back(std::move(r));
        return UCS_OK;
    }

    static bool on_watched(const Attacker &self, const ucp_am_recv_param_t *p)
    {
        return (p->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) &&
               (p->reply_ep == self.watched_);
    }

    static ucs_status_t ifunc_message(void *arg, const void *, size_t, void *,
                                      size_t, const ucp_am_recv_param_t *param)
    {
        auto *self = static_cast<Attacker *>(arg);
        if (on_watched(*self, param)) {
            ++self->ifunc_messages;
        } else {
            ++self->elsewhere;
        }
        return UCS_OK;
    }

    /* The target's AM reply: token, code id's low half, ISA, index. */
    static ucs_status_t target_reply(void *arg, const void *header,
                                     size_t header_length, void *, size_t,
                                     const ucp_am_recv_param_t *param)
    {
        auto    *self = static_cast<Attacker *>(arg);
        uint64_t words[4];
        if (on_watched(*self, param) && (header_length == sizeof(words))) {
            std::memcpy(words, header, sizeof(words));
            self->code_index = words[3];
        }
        return UCS_OK;
    }

    static void failed(void *arg, ucp_ep_h, ucs_status_t)
    {
        ++static_cast<Attacker *>(arg)->failures_;
    }

    const Options        &options_;
    ucx_util::Context     context_;
    ucx_util::Worker      worker_;
    std::vector<ucp_ep_h> eps_;
    std::deque<Received>  received_;
    unsigned              failures_ = 0;
    ucp_ep_h              watched_  = nullptr;
};

std::mt19937_64 &random_engine()
{
    static std::mt19937_64 engine(std::random_device{}());
    return engine;
}

std::vector<char> random_bytes(size_t size)
{
    std::vector<char> bytes(size);
    for (char &b : bytes) {
        b = char(random_engine()());
    }
    return bytes;
}

/* Ends the process at once, as a hostile peer may go: no flush, no
 * close, no waiting for UCX to tear down what it has. */
[[noreturn]] void leave(int status)
{
    std::fflush(stdout);
    std::_Exit(status);
}

/* Our side of a set-up up to the target's hello: our hello sent, its
 * hello (with its token) received. */
struct Greeted {
    ucp_ep_h  ep;
    uint64_t  our_token;
    HelloData ours;
    Received  theirs;
    HelloData their_hello;
};

/* @a max_message: the largest active message our hello says we take (0:
 * none, so the target sends us none). */
bool greet(Attacker &a, Greeted *g, uint64_t flags = 0,
           const PublicKey &key = {}, uint64_t max_message = 0)
{
    g->ep               = a.connect();
    g->our_token        = random_engine()() | 1;
    g->ours             = {};
    g->ours.key         = key;
    g->ours.max_message = max_message;
    randombytes_buf(g->ours.nonce.data(), g->ours.nonce.size());
    if (a.send(g->ep, ControlKind::hello, g->our_token, flags, &g->ours,
               sizeof(g->ours)) != UCS_OK) {
        return false;
    }
    if (!a.expect(g->ep, ControlKind::hello, &g->theirs) ||
        (g->theirs.data.size() != sizeof(HelloData))) {
        return false;
    }
    std::memcpy(&g->their_hello, g->theirs.data.data(), sizeof(HelloData));
    return true;
}

int run_put(const Options &o)
{
    Attacker a(o);
    ucp_ep_h ep = a.connect();
    /* A key its own context packed: over TCP, UCX checks none. */
    ucx_util::Memory  local(a.context(), 4096);
    std::vector<char> key = local.packed_rkey();
    a.idle(0.2); /* wired up */
    ucx_util::RemoteKey rkey(ep, key);
    uint64_t            value = o.value;
    ucp_request_param_t param;
    param.op_attr_mask  = 0;
    ucs_status_t status = a.wait(
            ucp_put_nbx(ep, &value, sizeof(value), o.addr, rkey.get(), &param));
    ucs_status_t flushed = a.wait(ucp_ep_flush_nbx(ep, &param));
    std::printf("put key_bytes=%zu status=%s flush=%s\n", key.size(),
                ucs_status_string(status), ucs_status_string(flushed));
    leave(0);
}

int run_forge(const Options &o)
{
    Attacker a(o);
    Greeted  g;
    if (!greet(a, &g, 1 /* wants a channel */)) {
        std::printf("forge greeted=0\n");
        leave(1);
    }
    uint64_t target_token = g.theirs.header.token;
    /* A same-host proof it cannot have made. */
    ProofData proof = {};
    auto      mac   = random_bytes(sizeof(proof.mac));
    std::memcpy(proof.mac.data(), mac.data(), mac.size());
    a.send(g.ep, ControlKind::proof, target_token, 1, &proof, sizeof(proof));
    /* A welcome with a random key and worker address (64 bytes each), and
     * one whose blob is a channel's header claiming 65536 slots of 1 MiB
     * with a random key. */
    unsigned sent = 0;
    for (int variant = 0; variant < 2; ++variant) {
        std::vector<char> blob = random_bytes(64);
        if (variant == 1) {
            uint32_t header[8] = {0};
            header[2]          = 65536;   /* slots, where a blob has them */
            header[3]          = 1 << 20; /* slot size */
            std::memcpy(blob.data(), header, sizeof(header));
        }
        uint32_t          size = uint32_t(blob.size());
        std::vector<char> data(sizeof(size));
        std::memcpy(data.data(), &size, sizeof(size));
        data.insert(data.end(), blob.begin(), blob.end());
        auto address = random_bytes(64);
        data.insert(data.end(), address.begin(), address.end());
        sent += (a.send(g.ep, ControlKind::welcome, target_token, 1,
                        data.data(), data.size()) == UCS_OK);
    }
    /* A path and a ready out of turn, and one of an unknown kind. */
    a.send(g.ep, ControlKind::path, target_token, 1, nullptr, 0);
    a.send(g.ep, ControlKind::ready, target_token, 0, nullptr, 0);
    a.send(g.ep, ControlKind(77), target_token, 0, nullptr, 0);
    Received welcome;
    bool     welcomed = a.expect(g.ep, ControlKind::welcome, &welcome, 2);
    std::printf("forge greeted=1 forged_welcomes=%u welcomed=%d "
                "welcome_bytes=%zu\n",
                sent, int(welcomed), welcomed ? welcome.data.size() : 0);
    leave(0);
}

int run_tokens(const Options &o)
{
    Attacker a(o);
    Greeted  g;
    if (!greet(a, &g)) {
        std::printf("tokens greeted=0\n");
        leave(1);
    }
    uint64_t base = g.theirs.header.token;
    unsigned sent = 0;
    for (unsigned i = 1; i <= o.rounds; ++i) {
        uint64_t tokens[] = {base + i, base - i, random_engine()()};
        for (uint64_t token : tokens) {
            for (ControlKind kind :
                 {ControlKind::welcome, ControlKind::proof, ControlKind::path,
                  ControlKind::ready, ControlKind::bye}) {
                sent += (a.send(g.ep, kind, token, 0, nullptr, 0) == UCS_OK);
            }
        }
        a.idle(0.001);
    }
    std::printf("tokens greeted=1 sent=%u\n", sent);
    leave(0);
}

/* Whether the target answered a bye on @a g within @a seconds. */
bool bye_answered(Attacker &a, const Greeted &g, double seconds)
{
    Received answer;
    return a.expect(g.ep, ControlKind::bye, &answer, seconds) &&
           (answer.header.flags & kByeAnswer);
}

int run_bye(const Options &o)
{
    Attacker a(o);
    Greeted  g;
    if (!greet(a, &g)) {
        std::printf("bye greeted=0\n");
        leave(1);
    }
    /* Admitted (no key asked for): the target's peer_cb hears of it. */
    ProofData proof = {};
    a.send(g.ep, ControlKind::proof, g.theirs.header.token, 0, &proof,
           sizeof(proof));
    Received welcome;
    bool     welcomed = a.expect(g.ep, ControlKind::welcome, &welcome, 3);
    uint64_t token    = g.theirs.header.token;
    unsigned sent     = 0;
    for (unsigned i = 1; i <= o.rounds; ++i) {
        for (uint64_t forged : {token + i, token - i, random_engine()()}) {
            if (forged == token) {
                continue;
            }
            sent += (a.send(g.ep, ControlKind::bye, forged, 0, nullptr, 0) ==
                     UCS_OK);
            sent += (a.send(g.ep, ControlKind::bye, forged, kByeAnswer, nullptr,
                            0) == UCS_OK);
        }
    }
    /* Forged: never answered. */
    bool forged_answered = bye_answered(a, g, 0.5);
    std::printf("bye_forged welcomed=%d sent=%u answered=%d\n", int(welcomed),
                sent, int(forged_answered));
    std::fflush(stdout);
    /* Until told (the test checks the target meanwhile). */
    for (auto until = a.deadline(); Clock::now() < until;) {
        pollfd in = {STDIN_FILENO, POLLIN, 0};
        if (poll(&in, 1, 0) == 1) {
            break;
        }
        a.idle(0.01);
    }
    a.send(g.ep, ControlKind::bye, token, 0, nullptr, 0);
    std::printf("bye answered=%d\n", int(bye_answered(a, g, 5)));
    leave(0);
}

int run_declare(const Options &o)
{
    Attacker a(o);
    unsigned offered = 0, welcomed = 0;
    size_t   welcome_bytes = 0;
    for (unsigned i = 0; i < o.peers; ++i) {
        Greeted g;
        if (!greet(a, &g, 1 /* wants a channel */)) {
            continue;
        }
        ProofData proof = {};
        auto      mac   = random_bytes(sizeof(proof.mac));
        std::memcpy(proof.mac.data(), mac.data(), mac.size());
        a.send(g.ep, ControlKind::proof, g.theirs.header.token, 1, &proof,
               sizeof(proof));
        Received welcome;
        if (a.expect(g.ep, ControlKind::welcome, &welcome, 2)) {
            ++welcomed;
            offered += (welcome.header.flags & 1) != 0;
            welcome_bytes += welcome.data.size();
        }
    }
    std::printf("declare peers=%u welcomed=%u channels_offered=%u "
                "welcome_bytes=%zu\n",
                o.peers, welcomed, offered, welcome_bytes);
    leave(0);
}

int run_silent(const Options &o)
{
    Attacker a(o);
    for (unsigned i = 0; i < o.peers; ++i) {
        a.connect();
    }
    /* Until every one failed: on a busy host a connection can reach the
     * target's listener only after the first ones were dropped. */
    auto until = Clock::now() + std::chrono::milliseconds(long(o.hold * 1000));
    while ((a.failures() < o.peers) && (Clock::now() < until)) {
        a.idle(0.01);
    }
    std::printf("silent peers=%u failed=%u\n", o.peers, a.failures());
    leave(0);
}

int run_flood(const Options &o)
{
    Attacker a(o);
    ucp_ep_h ep      = a.connect();
    unsigned sent    = 0;
    char     junk[7] = "junk!!";
    for (unsigned i = 0; i < o.count; ++i) {
        /* A header of the wrong size, then a message of another version. */
        if ((i % 2) == 0) {
            sent += (a.send_raw(ep, junk, sizeof(junk), nullptr, 0) == UCS_OK);
        } else {
            sent += (a.send(ep, ControlKind::hello, 1, 0, nullptr, 0, 9) ==
                     UCS_OK);
        }
    }
    a.idle(0.5);
    std::printf("flood sent=%u\n", sent);
    leave(0);
}

/* A proof of the key @a keys holds for the set-up @a g. */
ProofData key_proof(const Greeted &g, const PeerKeys &keys)
{
    ProofData proof = {};
    proof.key       = keys.public_key();
    proof.signature =
            keys.sign(g.their_hello.nonce, g.their_hello.key, g.ours.nonce);
    return proof;
}

/* Whether the target welcomes the set-up @a g after @a proof. */
bool welcomed_after(Attacker &a, const Greeted &g, const ProofData &proof)
{
    a.send(g.ep, ControlKind::proof, g.theirs.header.token, 2 /* key */, &proof,
           sizeof(proof));
    Received welcome;
    return a.expect(g.ep, ControlKind::welcome, &welcome, 3);
}

int run_prove(const Options &o, bool replay)
{
    Config config;
    config.identity_key = o.key;
    std::unique_ptr<PeerKeys> keys;
    ucx_util::check(PeerKeys::load(config, &keys), "the key of --key");
    const PublicKey &pk = keys->public_key();
    Attacker         a(o);
    Greeted          first;
    if (!greet(a, &first, 0, pk)) {
        std::printf("%s greeted=0\n", replay ? "replay" : "prove");
        leave(1);
    }
    ProofData proof        = key_proof(first, *keys);
    bool      first_admits = welcomed_after(a, first, proof);
    if (!replay) {
        std::printf("prove admitted=%d\n", int(first_admits));
        leave(0);
    }
    Greeted second;
    if (!greet(a, &second, 0, pk)) {
        std::printf("replay first=%d greeted=0\n", int(first_admits));
        leave(1);
    }
    /* The first connection's answer, to the second's challenge. */
    bool second_admits = welcomed_after(a, second, proof);
    std::printf("replay first=%d second=%d\n", int(first_admits),
                int(second_admits));
    leave(0);
}

/* Forged reports: a peer that sends to us may tell us only what became of
 * our messages to it, never of those to another peer. */
int run_reports(const Options &o)
{
    Attacker a(o);
    Greeted  g;
    if (!greet(a, &g)) {
        std::printf("reports greeted=0\n");
        leave(1);
    }
    uint64_t                 token = g.theirs.header.token;
    std::vector<ReportEntry> entries(kMaxReportEntries);
    unsigned                 sent = 0;
    for (unsigned round = 0; round < o.rounds; ++round) {
        for (uint32_t first = 1; first <= UINT16_MAX;
             first += kMaxReportEntries) {
            size_t n = 0;
            for (uint32_t id = first;
                 (id <= UINT16_MAX) && (n < kMaxReportEntries); ++id, ++n) {
                entries[n] = ReportEntry{uint16_t(id), 0 /* UCS_OK */};
            }
            for (uint64_t t : {token, token + 1}) {
                sent += (a.send(g.ep, ControlKind::report, t, n, entries.data(),
                                n * sizeof(ReportEntry)) == UCS_OK);
            }
        }
        /* A count that does not match, a size that is no entry's. */
        a.send(g.ep, ControlKind::report, token, 5, entries.data(),
               2 * sizeof(ReportEntry));
        a.send(g.ep, ControlKind::report, token, 1, entries.data(), 3);
        a.idle(0.01);
    }
    std::printf("reports greeted=1 sent=%u\n", sent);
    leave(0);
}

/* References that ask for reports: the target answers each once, on our
 * own endpoint, and nothing for those that do not ask. */
int run_ask(const Options &o)
{
    Attacker a(o);
    Greeted  g;
    if (!greet(a, &g)) {
        std::printf("ask greeted=0\n");
        leave(1);
    }
    unsigned count      = std::min(o.count, unsigned(UINT16_MAX));
    uint64_t word       = (uint64_t(0x7fffffff) << 32) | 1; /* held by no one */
    uint64_t payload[2] = {0, 0};
    unsigned sent       = 0;
    auto     send_ref   = [&](const void *header, size_t length) {
        ucp_request_param_t param;
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags        = UCP_AM_SEND_FLAG_REPLY;
        sent += (a.wait(ucp_am_send_nbx(g.ep, o.am_id, header, length, payload,
                                              sizeof(payload), &param)) == UCS_OK);
    };
    for (unsigned id = 1; id <= count; ++id) {
        char header[12];
        std::memcpy(header, &word, 8);
        uint32_t report = id;
        std::memcpy(header + 8, &report, 4);
        send_ref(header, sizeof(header));
    }
    for (unsigned i = 0; i < count; ++i) {
        send_ref(&word, sizeof(word));
    }
    /* What came back, until nothing did for a second. */
    std::vector<unsigned> answers(UINT16_MAX + 1u);
    unsigned              entries = 0, reports = 0, wrong_status = 0;
    Received              r;
    while (a.expect(g.ep, ControlKind::report, &r, 1)) {
        ++reports;
        for (size_t i = 0; i + sizeof(ReportEntry) <= r.data.size();
             i += sizeof(ReportEntry)) {
            ReportEntry e;
            std::memcpy(&e, r.data.data() + i, sizeof(e));
            ++answers[e.report];
            ++entries;
            wrong_status += (e.status != int16_t(UCS_ERR_NO_ELEM));
        }
    }
    unsigned once = 0, twice = 0, stray = 0;
    for (unsigned id = 0; id < answers.size(); ++id) {
        bool asked = (id >= 1) && (id <= count);
        once += asked && (answers[id] == 1);
        twice += (answers[id] > 1);
        stray += !asked && (answers[id] > 0);
    }
    std::printf("ask greeted=1 sent=%u reports=%u entries=%u once=%u "
                "twice=%u stray=%u wrong_status=%u\n",
                sent, reports, entries, once, twice, stray, wrong_status);
    leave(0);
}

/* Sends an ifunc active message on @a ep: @a header, @a data, with UCX's
 * reply flag or without. */
ucs_status_t send_ifunc_am(Attacker &a, ucp_ep_h ep, unsigned am_id,
                           const void *header, size_t header_length,
                           const void *data, size_t length, bool reply_flag)
{
    ucp_request_param_t param;
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags =
            UCP_AM_SEND_FLAG_EAGER | (reply_flag ? UCP_AM_SEND_FLAG_REPLY : 0);
    return a.wait(ucp_am_send_nbx(ep, am_id, header, header_length, data,
                                  length, &param));
}

int run_redirect(const Options &o)
{
    Attacker a(o);
    Greeted  g;
    if (!greet(a, &g, 0, {}, 1ull << 30)) { /* it takes our answer */
        std::printf("redirect greeted=0\n");
        leave(1);
    }
    a.watch_ifunc_messages(g.ep);
    ucp_ifunc_h reply;
    ucx_util::check(ucp_register_ifunc(a.context(), "reply", &reply),
                    "ucp_register_ifunc");
    /* A value no legitimate source sends: an answer to it elsewhere would
     * show in that source's sum. */
    reply_payload request = {};
    request.value         = 1000000;
    request.answers       = 1;
    ucp_ifunc_msg_t msg;
    ucx_util::check(
            ucp_ifunc_msg_create(reply, &request, sizeof(request), &msg),
            "ucp_ifunc_msg_create");
    /* The AM service's header of a full frame: a token (made up: not this
     * connection's, whatever another's is), then a word 0. */
    uint64_t full[2] = {random_engine()() | 1, 0};
    unsigned sent    = 0;
    sent += (send_ifunc_am(a, g.ep, o.am_id, full, sizeof(full), msg.frame,
                           msg.frame_size, true) == UCS_OK);
    a.idle(0.3); /* its answer, and the reply with the code's index */
    sent += (send_ifunc_am(a, g.ep, o.am_id, full, sizeof(full), msg.frame,
                           msg.frame_size, false) == UCS_OK);
    bool index_known = (a.code_index != 0);
    if (index_known) {
        sent += (send_ifunc_am(a, g.ep, o.am_id, &a.code_index,
                               sizeof(a.code_index), &request, sizeof(request),
                               false) == UCS_OK);
    }
    a.idle(0.3);
    std::printf("redirect sent=%u index_known=%d answers=%u elsewhere=%u\n",
                sent, int(index_known), a.ifunc_messages, a.elsewhere);
    ucp_ifunc_msg_free(msg);
    ucp_deregister_ifunc(a.context(), reply);
    leave(0);
}

} // namespace

int run(const Options &o);

int main(int argc, char **argv)
{
    try {
        /* Gone at once, as a hostile peer may go: no flush, no close. */
        int status = run(parse(argc, argv));
        std::fflush(stdout);
        std::_Exit(status);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ifunc_hostile_peer: %s\n", e.what());
        return 2;
    }
}

int run(const Options &o)
{
    if (o.mode == "put") {
        return run_put(o);
    } else if (o.mode == "forge") {
        return run_forge(o);
    } else if (o.mode == "tokens") {
        return run_tokens(o);
    } else if (o.mode == "declare") {
        return run_declare(o);
    } else if (o.mode == "silent") {
        return run_silent(o);
    } else if (o.mode == "flood") {
        return run_flood(o);
    } else if (o.mode == "prove") {
        return run_prove(o, false);
    } else if (o.mode == "replay") {
        return run_prove(o, true);
    } else if (o.mode == "reports") {
        return run_reports(o);
    } else if (o.mode == "ask") {
        return run_ask(o);
    } else if (o.mode == "redirect") {
        return run_redirect(o);
    } else if (o.mode == "bye") {
        return run_bye(o);
    }
    throw std::runtime_error("unknown mode " + o.mode);
}
