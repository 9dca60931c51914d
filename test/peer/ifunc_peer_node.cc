/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * One process of the default path's tests (test/integration/test_peer.cc):
 * an ifunc worker that listens, connects, sends and runs messages through
 * ucp_ifunc_listen / ucp_ifunc_peer_*, over whatever UCX_TLS says. It
 * prints one line per event on stdout ("WORD key=value ...") and takes
 * commands, one a line, on stdin.
 *
 *   target  --listen ADDR [--expect STREAM:N]... [--check STREAM:N]...
 *           [--idle]
 *           runs pattern messages until every expected stream ran N (or
 *           "stop" / end of input); "pause MS" stops progressing for MS
 *           milliseconds ("paused" after); prints "port", "canary" (the address
 *           of 8 bytes no peer may write; "report" gives their value),
 *           "failed" per peer that failed or was closed (code, closed=1
 *           for UCP_IFUNC_PEER_CLOSED), "report" when asked, then
 *           "result" (with the messages 0..N-1 of the expected and
 *           checked streams that did not run exactly once: "missing")
 *           and, once ucp_ifunc_worker_destroy returned, "destroyed"
 *           (with how long it took). "hold" (--idle: from the start)
 *           stops progressing until the next command.
 *   source  --connect ADDR --stream K [--callback] [--send N:SIZE]...
 *           [--ifunc NAME] (pattern by default; whosent asks who sent it)
 *           [--from-images: registers NAME from the images of
 *           $UCX_IFUNC_LIB_DIR/NAME.so, ucp_ifunc_code_register, the
 *           library closed again; prints "images count=N"]
 *           [--report] [--listen ADDR]
 *           [--peer-timeout MS] [--no-close: destroy the worker with the
 *           peer open] sends the pattern messages, then "result"; with
 *           --interactive it takes "send N SIZE" (and waits for them),
 *           "post N SIZE" (does not), "close" (whatever is under way;
 *           prints what the callbacks heard, and "reports" with --report)
 *           and "quit" instead. With --report each
 *           send asks for a delivery report, and before "result" it waits
 *           for them all and prints "reports" (status_C=N: N reports of
 *           status -C); with --listen it also listens ("port"). With
 *           --ifunc reply the messages are requests (struct
 *           reply_payload, value the sequence number, answers 1): it
 *           first tries UCP_IFUNC_PEER_SOURCE outside a message
 *           ("outside"), and after the sends waits for the answers
 *           ("replies"; after each "send" too, not after "post N SIZE").
 *   victim  --connect ADDR --stream K
 *           sends 800 000- and 60 000-byte messages until it is killed.
 *   reconnect --connect ADDR --first N1 --second N2
 *           sends N1 messages, then sends until a send fails (the target
 *           died) and closes the peer; after "reconnect" connects again
 *           until it succeeds and sends N2 messages on stream 1.
 *   relay   --listen ADDR --node ID
 *           "connect ADDR" makes the peer relay sends itself to; "start H"
 *           sends the first message of a chain of H + 1 runs; prints
 *           "finished" when the chain ended, "result" after "quit".
 *   sbx_relay --listen ADDR --node ID
 *           the same with sbx_relay (built for the sandbox), its
 *           target_args in granted memory; "probe" sends a message that
 *           makes the forged host calls ("finished" once it ran, their
 *           statuses in "result").
 *
 * Every wait has a deadline (--timeout seconds, default 120): a node never
 * outlives a test that lost track of it.
 */
#include "../common/images.h"
#include "../ifuncs/test_ifunc.h"
#include "../../tools/common/ucx.h"

#include <ucp/api/ucp_ifunc.h>

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void say(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    std::vprintf(format, args);
    va_end(args);
    std::putchar('\n');
    std::fflush(stdout);
}

const char *path_name(ucp_ifunc_path_t path)
{
    return (path == UCP_IFUNC_PATH_CHANNEL) ? "channel"
           : (path == UCP_IFUNC_PATH_AM)    ? "am"
                                            : "auto";
}

/* Lines of stdin, read without blocking. */
class Input {
public:
    /* The next whole line, if one is there; "" also at end of input, which
     * eof() tells. */
    bool next(std::string *line)
    {
        fill();
        size_t end = buffer_.find('\n');
        if (end == std::string::npos) {
            return false;
        }
        *line = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        return true;
    }

    /* The next whole line, waiting for it without progressing anything
     * (a process that stopped polling); false at end of input or once
     * @a deadline passed. */
    bool wait(std::string *line, Clock::time_point deadline)
    {
        while (!next(line)) {
            if (eof_ || (Clock::now() > deadline)) {
                return false;
            }
            pollfd fd = {STDIN_FILENO, POLLIN, 0};
            poll(&fd, 1, 100);
        }
        return true;
    }

    bool eof() const
    {
        return eof_ && (buffer_.find('\n') == std::string::npos);
    }

private:
    void fill()
    {
        pollfd fd = {STDIN_FILENO, POLLIN, 0};
        while (!eof_ && (poll(&fd, 1, 0) == 1)) {
            char    chunk[256];
            ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
            if (n <= 0) {
                eof_ = true;
                break;
            }
            buffer_.append(chunk, size_t(n));
        }
    }

    std::string buffer_;
    bool        eof_ = false;
};

struct Options {
    std::string                                mode;
    std::string                                listen;
    std::string                                connect;
    std::vector<std::pair<uint64_t, uint64_t>> expect; /* stream, count */
    std::vector<std::pair<uint64_t, uint64_t>> check;  /* stream, count */
    std::vector<std::pair<uint64_t, size_t>>   sends;  /* count, size */
    uint64_t                                   stream       = 0;
    bool                                       callback     = false;
    bool                                       interactive  = false;
    bool                                       idle         = false;
    bool                                       no_close     = false;
    bool                                       report       = false;
    bool                                       from_images  = false;
    unsigned                                   peer_timeout = 20000; /* ms */
    uint64_t                                   first        = 0;
    uint64_t                                   second       = 0;
    uint64_t                                   node         = 0;
    double                                     timeout      = 120;
    std::string ifunc = "pattern"; /* source: what it sends */
};

Options parse(int argc, char **argv)
{
    Options o;
    if (argc < 2) {
        throw std::runtime_error("usage: ifunc_peer_node MODE [options]");
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
        auto pair = [&](const std::string &text) {
            size_t colon = text.find(':');
            if (colon == std::string::npos) {
                throw std::runtime_error(arg + " takes A:B");
            }
            return std::make_pair(std::stoull(text.substr(0, colon)),
                                  std::stoull(text.substr(colon + 1)));
        };
        if (arg == "--listen") {
            o.listen = next();
        } else if (arg == "--connect") {
            o.connect = next();
        } else if (arg == "--expect") {
            o.expect.push_back(pair(next()));
        } else if (arg == "--check") {
            o.check.push_back(pair(next()));
        } else if (arg == "--send") {
            auto p = pair(next());
            o.sends.emplace_back(p.first, size_t(p.second));
        } else if (arg == "--stream") {
            o.stream = std::stoull(next());
        } else if (arg == "--callback") {
            o.callback = true;
        } else if (arg == "--report") {
            o.report = true;
        } else if (arg == "--from-images") {
            o.from_images = true;
        } else if (arg == "--interactive") {
            o.interactive = true;
        } else if (arg == "--idle") {
            o.idle = true;
        } else if (arg == "--no-close") {
            o.no_close = true;
        } else if (arg == "--peer-timeout") {
            o.peer_timeout = unsigned(std::stoul(next()));
        } else if (arg == "--first") {
            o.first = std::stoull(next());
        } else if (arg == "--second") {
            o.second = std::stoull(next());
        } else if (arg == "--node") {
            o.node = std::stoull(next());
        } else if (arg == "--ifunc") {
            o.ifunc = next();
        } else if (arg == "--timeout") {
            o.timeout = std::stod(next());
        } else {
            throw std::runtime_error("unknown option " + arg);
        }
    }
    return o;
}

/* A UCP worker made an ifunc worker, with what its peer_cb heard. */
class Node {
public:
    Node(const Options &options, void *target_args)
        : options_(options), context_(UCP_FEATURE_AM | UCP_FEATURE_RMA),
          worker_(context_.get()),
          deadline_(Clock::now() +
                    std::chrono::milliseconds(long(options.timeout * 1000)))
    {
        ucp_ifunc_worker_params_t params = {};
        params.field_mask                = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS |
                            UCP_IFUNC_WORKER_FIELD_PEER_CB;
        params.target_args = target_args;
        params.peer_cb     = peer_event;
        params.peer_cb_arg = this;
        ucx_util::check(ucp_ifunc_worker_create(context_.get(), worker_.get(),
                                                &params, &iworker_),
                        "ucp_ifunc_worker_create");
    }

    ~Node()
    {
        destroy();
        for (ucp_ifunc_h handle : handles_) {
            ucp_deregister_ifunc(context_.get(), handle);
        }
    }

    void destroy()
    {
        if (iworker_ != nullptr) {
            ucp_ifunc_worker_destroy(iworker_);
            iworker_ = nullptr;
        }
    }

    ucp_ifunc_worker_h iworker() const { return iworker_; }
    ucp_context_h      context() const { return context_.get(); }
    unsigned progress() { return ucp_ifunc_worker_progress(iworker_); }

    bool              expired() const { return Clock::now() > deadline_; }
    Clock::time_point deadline() const { return deadline_; }

    void check_deadline(const char *what)
    {
        if (expired()) {
            say("timeout while=%s", what);
            throw std::runtime_error(std::string("timed out: ") + what);
        }
    }

    ucp_ifunc_h ifunc(const char *name)
    {
        ucp_ifunc_h handle;
        if (options_.from_images) {
            const char                     *dir = getenv("UCX_IFUNC_LIB_DIR");
            std::vector<test::LibraryImage> images = test::library_images(
                    std::string(dir ? dir : ".") + "/" + name + ".so", name);
            std::vector<char>       all    = test::back_to_back(images);
            ucp_ifunc_code_params_t params = {};
            params.field_mask              = UCP_IFUNC_CODE_PARAM_FIELD_NAME |
                                UCP_IFUNC_CODE_PARAM_FIELD_IMAGES;
            params.name        = name;
            params.images      = all.data();
            params.images_size = all.size();
            ucx_util::check(
                    ucp_ifunc_code_register(context_.get(), &params, &handle),
                    "ucp_ifunc_code_register");
            say("images count=%zu", images.size());
        } else {
            ucx_util::check(ucp_register_ifunc(context_.get(), name, &handle),
                            "ucp_register_ifunc");
        }
        handles_.push_back(handle);
        return handle;
    }

    /* Listens on --listen; prints the port. */
    void listen()
    {
        ucp_ifunc_listener_params_t params = {};
        params.field_mask                  = UCP_IFUNC_LISTENER_FIELD_ADDRESS;
        params.address                     = options_.listen.c_str();
        ucp_ifunc_listener_h listener;
        ucx_util::check(ucp_ifunc_listen(iworker_, &params, &listener),
                        "ucp_ifunc_listen");
        ucp_ifunc_listener_attr_t attr = {};
        attr.field_mask                = UCP_IFUNC_LISTENER_ATTR_FIELD_PORT;
        ucx_util::check(ucp_ifunc_listener_query(listener, &attr),
                        "ucp_ifunc_listener_query");
        say("port port=%u", unsigned(attr.port));
    }

    ucs_status_t connect(const std::string &address, unsigned timeout_ms,
                         ucp_ifunc_peer_h *peer)
    {
        ucp_ifunc_peer_params_t params = {};
        params.field_mask =
                UCP_IFUNC_PEER_FIELD_ADDRESS | UCP_IFUNC_PEER_FIELD_TIMEOUT;
        params.address    = address.c_str();
        params.timeout_ms = timeout_ms;
        return ucp_ifunc_peer_connect(iworker_, &params, peer);
    }

    uint64_t new_peers    = 0;
    uint64_t failed_peers = 0; /* closed by the other side included */
    uint64_t closed_peers = 0; /* closed by the other side */
    /* Called by the target when a peer failed. */
    std::function<void(ucs_status_t)> on_failure;

private:
    static void peer_event(ucp_ifunc_peer_h peer, ucs_status_t status,
                           void *arg)
    {
        auto *self = static_cast<Node *>(arg);
        if (status == UCS_OK) {
            ++self->new_peers;
            /* What the target's callback knows of the peer's key. */
            ucp_ifunc_peer_attr_t attr = {};
            attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_KEY;
            ucp_ifunc_peer_query(peer, &attr);
            say("peer key_verified=%d key0=%02x", attr.key_verified,
                unsigned(attr.key[0]));
        } else {
            ++self->failed_peers;
            self->closed_peers += (status == UCP_IFUNC_PEER_CLOSED);
            if (self->on_failure) {
                self->on_failure(status);
            }
        }
    }

    const Options           &options_;
    ucx_util::Context        context_;
    ucx_util::Worker         worker_;
    Clock::time_point        deadline_;
    ucp_ifunc_worker_h       iworker_ = nullptr;
    std::vector<ucp_ifunc_h> handles_;
};

uint64_t sequence(uint64_t stream, uint64_t index)
{
    return (stream << PATTERN_STREAM_SHIFT) | index;
}

void fill_pattern(uint8_t *buffer, uint64_t seq, size_t size)
{
    std::memcpy(buffer, &seq, std::min(size, sizeof(seq)));
    for (size_t i = sizeof(seq); i < size; ++i) {
        buffer[i] = pattern_byte(seq, i);
    }
}

/* Overwrites a payload the library gave back: a library that still read it
 * would deliver a corrupt message. */
void poison(uint8_t *buffer, size_t size)
{
    std::memset(buffer, 0xa5, size);
}

/* --- target -------------------------------------------------------------- */

} // namespace

/* What whosent.so's code found out about its message's source
 * (ucp_ifunc_source_query; -1 before it ran). */
extern "C" {
int64_t ifunc_test_source = -1;
/* What reply.so's code did and got here. */
struct reply_record ifunc_test_reply = {};
}

/* The fields of ifunc_test_reply, for a line. */
std::string reply_fields()
{
    const reply_record &r = ifunc_test_reply;
    return "arrived=" + std::to_string(r.arrived) +
           " value_sum=" + std::to_string(r.value_sum) +
           " key=" + std::to_string(r.key) +
           " answered=" + std::to_string(r.answered) +
           " answer_failed=" + std::to_string(r.failed) +
           " answer_status=" + std::to_string(r.status);
}

namespace {

/* Memory a network peer must not be able to write (test_edge.cc). */
volatile uint64_t canary = 0x5afe5afe5afe5afeull;

int run_target(const Options &o)
{
    std::vector<uint8_t> seen(size_t(PATTERN_STREAMS) *
                              PATTERN_STREAM_CAPACITY);
    pattern_result       result = {};
    result.seen                 = seen.data();
    Node node(o, &result);
    node.on_failure = [&](ucs_status_t status) {
        say("failed code=%d closed=%d failed=%llu stream0=%llu status=%s",
            int(status), int(status == UCP_IFUNC_PEER_CLOSED),
            (unsigned long long)node.failed_peers,
            (unsigned long long)result.per_stream[0],
            ucs_status_string(status));
    };
    node.listen();
    say("canary addr=%p", static_cast<void *>(const_cast<uint64_t *>(&canary)));
    Input       input;
    std::string line;
    auto        all_ran = [&]() {
        if (o.expect.empty()) {
            return false;
        }
        for (const auto &e : o.expect) {
            if (result.per_stream[e.first] < e.second) {
                return false;
            }
        }
        return true;
    };
    bool timed_out = false;
    /* Held: not progressed at all until the next command (--idle: from
     * the start), as an application that stopped polling. */
    bool held = o.idle;
    for (unsigned i = 0;; ++i) {
        if (!held) {
            node.progress();
            if (all_ran()) {
                break;
            }
            if ((i % 256) != 0) {
                continue;
            }
        }
        if (node.expired()) {
            timed_out = true;
            break;
        }
        bool got =
                held ? input.wait(&line, node.deadline()) : input.next(&line);
        held = false;
        if (got) {
            if (line == "stop") {
                break;
            }
            unsigned pause_ms = 0;
            if (line == "hold") {
                say("holding");
                held = true;
            }
            if (line == "report") {
                ucp_ifunc_context_attr_t counted = {};
                counted.field_mask = UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED;
                ucp_ifunc_context_query(node.context(), &counted);
                say("report stream0=%llu stream1=%llu executed=%llu "
                    "failed=%llu closed=%llu new=%llu canary=%llx "
                    "source=%lld untrusted=%llu %s",
                    (unsigned long long)result.per_stream[0],
                    (unsigned long long)result.per_stream[1],
                    (unsigned long long)result.executed,
                    (unsigned long long)node.failed_peers,
                    (unsigned long long)node.closed_peers,
                    (unsigned long long)node.new_peers,
                    (unsigned long long)canary, (long long)ifunc_test_source,
                    (unsigned long long)counted.rejected_untrusted,
                    reply_fields().c_str());
            } else if (std::sscanf(line.c_str(), "pause %u", &pause_ms) == 1) {
                std::this_thread::sleep_for(
                        std::chrono::milliseconds(pause_ms));
                say("paused");
            }
        } else if (input.eof()) {
            break;
        }
    }
    /* Each expected message ran exactly once: a missing one shows even if
     * a duplicate made the count. */
    uint64_t missing = 0;
    auto     checked = o.expect;
    checked.insert(checked.end(), o.check.begin(), o.check.end());
    for (const auto &e : checked) {
        const uint8_t *runs = &seen[e.first * PATTERN_STREAM_CAPACITY];
        for (uint64_t index = 0; index < e.second; ++index) {
            missing += (runs[index] != 1);
        }
    }
    std::string streams;
    for (unsigned s = 0; s < PATTERN_STREAMS; ++s) {
        streams += (s ? "," : "") + std::to_string(result.per_stream[s]);
    }
    /* What the context counted (ucp_ifunc_context_query). */
    ucp_ifunc_context_attr_t counted = {};
    counted.field_mask               = UCP_IFUNC_CONTEXT_ATTR_FIELD_RUN |
                         UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED;
    ucp_ifunc_context_query(node.context(), &counted);
    unsigned long long rejected =
            counted.rejected_untrusted + counted.rejected_bad_frame +
            counted.rejected_bad_version + counted.rejected_bad_code +
            counted.rejected_wrong_isa + counted.rejected_missing_import +
            counted.rejected_too_large + counted.rejected_unknown_code +
            counted.rejected_busy + counted.rejected_lost +
            counted.rejected_other;
    say("result executed=%llu corrupt=%llu duplicate=%llu unknown=%llu "
        "missing=%llu new=%llu failed=%llu timed_out=%d streams=%s "
        "run_peer=%llu run_other=%llu rejected=%llu",
        (unsigned long long)result.executed, (unsigned long long)result.corrupt,
        (unsigned long long)result.duplicate,
        (unsigned long long)result.unknown, (unsigned long long)missing,
        (unsigned long long)node.new_peers,
        (unsigned long long)node.failed_peers, int(timed_out), streams.c_str(),
        (unsigned long long)counted.run_peer,
        (unsigned long long)(counted.run_raw + counted.run_channel +
                             counted.run_am),
        rejected);
    auto start = Clock::now();
    node.destroy();
    say("destroyed ms=%lld",
        (long long)std::chrono::duration_cast<std::chrono::milliseconds>(
                Clock::now() - start)
                .count());
    return 0;
}

/* --- sources ------------------------------------------------------------- */

/* Delivery reports: asked for, heard, by status. */
uint64_t                reports_asked = 0;
uint64_t                reports_heard = 0;
std::map<int, uint64_t> report_statuses;

void report_heard(void *, ucs_status_t status)
{
    ++reports_heard;
    ++report_statuses[-int(status)];
}

/* Progresses until every report asked for came; prints "reports". */
void wait_reports(Node &node)
{
    while ((reports_heard < reports_asked) && !node.expired()) {
        node.progress();
    }
    std::string statuses;
    for (const auto &entry : report_statuses) {
        statuses += " status_" + std::to_string(entry.first) + "=" +
                    std::to_string(entry.second);
    }
    say("reports asked=%llu heard=%llu%s", (unsigned long long)reports_asked,
        (unsigned long long)reports_heard, statuses.c_str());
}

/* A peer and the pattern messages sent to it. */
class Sender {
public:
    Sender(Node &node, ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc, bool callback,
           bool report = false, bool requests = false)
        : node_(node), peer_(peer), ifunc_(ifunc), callback_(callback),
          report_(report), requests_(requests)
    {
    }

    /* Sends the message of @a seq with @a size bytes; progresses while the
     * queue is full or, with a callback, while no buffer is free. Returns
     * the send's status (an error of the peer). */
    ucs_status_t send(uint64_t seq, size_t size)
    {
        Buffer &buffer = free_buffer(size);
        fill_pattern(buffer.bytes.data(), seq, size);
        if (requests_) {
            reply_payload request = {};
            request.value         = seq;
            request.answers       = 1;
            request.key           = -1;
            std::memcpy(buffer.bytes.data(), &request,
                        std::min(size, sizeof(request)));
        }
        ucp_ifunc_peer_send_params_t params = {};
        if (callback_) {
            params.field_mask = UCP_IFUNC_PEER_SEND_FIELD_CALLBACK |
                                UCP_IFUNC_PEER_SEND_FIELD_USER_DATA;
            params.cb        = sent;
            params.user_data = &buffer;
        }
        if (report_) {
            params.field_mask |= UCP_IFUNC_PEER_SEND_FIELD_REPORT;
            params.report = report_heard;
        }
        for (;;) {
            ucs_status_t status = ucp_ifunc_peer_send_nbx(
                    peer_, ifunc_, buffer.bytes.data(), size, &params);
            if (status == UCS_ERR_NO_RESOURCE) {
                ++no_resource;
                node_.progress();
                node_.check_deadline("send: queue full");
                continue;
            }
            if (report_ && ((status == UCS_OK) || (status == UCS_INPROGRESS))) {
                ++reports_asked;
            }
            if (status == UCS_INPROGRESS) {
                ++in_progress;
                if (!callback_) {
                    ++bad_status; /* never without a callback */
                }
                buffer.busy = true;
                buffer.self = this;
            } else if (status == UCS_OK) {
                poison(buffer.bytes.data(), size);
                ++sent_ok;
            }
            settle();
            return status;
        }
    }

    /* Progresses after a send, as an application does. Until a message
     * went by reference, for a while: the target's answer that it holds
     * the code needs the source's progress to arrive, and a loop of sends
     * that outran it would send the code with every message. */
    void settle()
    {
        if (warm_) {
            node_.progress();
            return;
        }
        auto until = Clock::now() + std::chrono::milliseconds(2);
        do {
            node_.progress();
        } while (Clock::now() < until);
        warm_ = (query().sent_by_ref > 0);
    }

    /* Progresses until every callback came and nothing waits for room:
     * then every message sent is counted as with code or by reference. */
    void wait_callbacks()
    {
        while ((callbacks < in_progress) || (query().queued > 0)) {
            node_.progress();
            node_.check_deadline("sends to complete");
        }
    }

    ucp_ifunc_peer_attr_t query() const
    {
        ucp_ifunc_peer_attr_t attr = {};
        attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_PATH |
                          UCP_IFUNC_PEER_ATTR_FIELD_STATUS |
                          UCP_IFUNC_PEER_ATTR_FIELD_SENT_WITH_CODE |
                          UCP_IFUNC_PEER_ATTR_FIELD_SENT_BY_REF |
                          UCP_IFUNC_PEER_ATTR_FIELD_QUEUED |
                          UCP_IFUNC_PEER_ATTR_FIELD_MACHINE;
        ucx_util::check(ucp_ifunc_peer_query(peer_, &attr),
                        "ucp_ifunc_peer_query");
        return attr;
    }

    void print_result(uint64_t sent_count) const
    {
        ucp_ifunc_peer_attr_t attr = query();
        say("result sent=%llu ok=%llu in_progress=%llu callbacks=%llu "
            "callback_errors=%llu bad_status=%llu no_resource=%llu path=%s "
            "with_code=%llu by_ref=%llu queued=%u machine=%u status=%s",
            (unsigned long long)sent_count, (unsigned long long)sent_ok,
            (unsigned long long)in_progress, (unsigned long long)callbacks,
            (unsigned long long)callback_errors, (unsigned long long)bad_status,
            (unsigned long long)no_resource, path_name(attr.path),
            (unsigned long long)attr.sent_with_code,
            (unsigned long long)attr.sent_by_ref, attr.queued,
            unsigned(attr.machine), ucs_status_string(attr.status));
    }

    uint64_t sent_ok           = 0;
    uint64_t in_progress       = 0;
    uint64_t callbacks         = 0;
    uint64_t callback_errors   = 0;
    uint64_t callback_canceled = 0;
    uint64_t bad_status        = 0;
    uint64_t no_resource       = 0;

private:
    struct Buffer {
        std::vector<uint8_t> bytes;
        bool                 busy = false;
        Sender              *self = nullptr;
    };

    static void sent(void *user_data, ucs_status_t status)
    {
        auto *buffer = static_cast<Buffer *>(user_data);
        buffer->busy = false;
        ++buffer->self->callbacks;
        buffer->self->callback_errors += (status != UCS_OK);
        buffer->self->callback_canceled += (status == UCS_ERR_CANCELED);
        poison(buffer->bytes.data(), buffer->bytes.size());
    }

    Buffer &free_buffer(size_t size)
    {
        for (;;) {
            for (Buffer &buffer : buffers_) {
                if (!buffer.busy) {
                    if (buffer.bytes.size() < size) {
                        buffer.bytes.resize(size);
                    }
                    return buffer;
                }
            }
            node_.progress();
            node_.check_deadline("a free buffer");
        }
    }

    Node               &node_;
    ucp_ifunc_peer_h    peer_;
    ucp_ifunc_h         ifunc_;
    bool                callback_;
    bool                report_;
    bool                requests_; /* reply.so's requests */
    bool                warm_    = false;
    std::vector<Buffer> buffers_ = std::vector<Buffer>(16);
};

/* The peer's timeout also bounds its close (--peer-timeout). */
ucp_ifunc_peer_h connect_or_say(Node &node, const std::string &address,
                                unsigned timeout_ms = 20000)
{
    ucp_ifunc_peer_h peer;
    ucs_status_t     status = node.connect(address, timeout_ms, &peer);
    if (status != UCS_OK) {
        say("connect_failed status=%s", ucs_status_string(status));
        return nullptr;
    }
    ucp_ifunc_peer_attr_t attr = {};
    attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_PATH;
    ucp_ifunc_peer_query(peer, &attr);
    say("connected path=%s", path_name(attr.path));
    return peer;
}

/* "close" of an interactive source: closes the peer (or, with
 * --no-close, destroys the worker with it) whatever is under way, then
 * says what the sends' callbacks heard. */
int close_now(Node &node, ucp_ifunc_peer_h peer, Sender &sender, bool no_close,
              bool report)
{
    ucp_ifunc_peer_attr_t attr = sender.query();
    say("closing queued=%u pending=%llu", attr.queued,
        (unsigned long long)(sender.in_progress - sender.callbacks));
    if (!no_close) {
        ucp_ifunc_peer_close(peer);
    }
    if (report) {
        wait_reports(node); /* each answered, by the close at the latest */
    }
    node.destroy();
    say("closed callbacks=%llu canceled=%llu other_errors=%llu pending=%llu",
        (unsigned long long)sender.callbacks,
        (unsigned long long)sender.callback_canceled,
        (unsigned long long)(sender.callback_errors - sender.callback_canceled),
        (unsigned long long)(sender.in_progress - sender.callbacks));
    return 0;
}

int run_source(const Options &o)
{
    Node        node(o, nullptr);
    ucp_ifunc_h pattern = node.ifunc(o.ifunc.c_str());
    if (!o.listen.empty()) {
        node.listen(); /* a peer of its own: test_peer.cc's forger */
    }
    ucp_ifunc_peer_h peer = connect_or_say(node, o.connect, o.peer_timeout);
    if (peer == nullptr) {
        return 2;
    }
    bool requests = (o.ifunc == "reply");
    if (requests) {
        /* No message runs here yet: no source to answer. */
        uint64_t     value  = 0;
        ucs_status_t status = ucp_ifunc_peer_send_nbx(
                UCP_IFUNC_PEER_SOURCE, pattern, &value, sizeof(value), nullptr);
        say("outside status=%d", int(status));
    }
    Sender   sender(node, peer, pattern, o.callback, o.report, requests);
    uint64_t index = 0;
    /* With requests: progresses until every answer came back. */
    auto await_replies = [&]() {
        if (!requests) {
            return;
        }
        while (ifunc_test_reply.arrived < index) {
            node.progress();
            node.check_deadline("the answers");
        }
        say("replies %s", reply_fields().c_str());
    };
    auto send = [&](uint64_t count, size_t size) {
        for (uint64_t i = 0; i < count; ++i, ++index) {
            ucs_status_t status = sender.send(sequence(o.stream, index), size);
            if ((status != UCS_OK) && (status != UCS_INPROGRESS)) {
                say("send_error status=%s index=%llu code=%d",
                    ucs_status_string(status), (unsigned long long)index,
                    -int(status));
                return false;
            }
        }
        return true;
    };
    if (o.interactive) {
        Input       input;
        std::string line;
        for (;;) {
            node.progress();
            if (input.next(&line)) {
                unsigned long long count = 0, size = 0;
                if (line == "quit") {
                    break;
                }
                if (std::sscanf(line.c_str(), "send %llu %llu", &count,
                                &size) == 2) {
                    send(count, size);
                    sender.wait_callbacks();
                    say("sent total=%llu", (unsigned long long)index);
                    await_replies();
                } else if (std::sscanf(line.c_str(), "post %llu %llu", &count,
                                       &size) == 2) {
                    /* Without waiting for anything: what the target does
                     * not take stays queued or in flight. */
                    send(count, size);
                    say("posted total=%llu", (unsigned long long)index);
                } else if (line == "close") {
                    return close_now(node, peer, sender, o.no_close, o.report);
                }
            } else if (input.eof()) {
                break;
            }
            node.check_deadline("commands");
        }
    } else {
        /* Each phase starts with nothing waiting: a send queued behind
         * others goes as a copy (UCS_OK), whatever its size. */
        for (const auto &s : o.sends) {
            if (!send(s.first, s.second)) {
                break;
            }
            sender.wait_callbacks();
        }
        await_replies();
    }
    sender.wait_callbacks();
    if (o.report) {
        wait_reports(node);
    }
    sender.print_result(index);
    if (!o.no_close) {
        ucp_ifunc_peer_close(peer);
    }
    node.destroy();
    say("closed");
    return 0;
}

/* Sends until killed: every other message larger than a channel slot, so
 * that a kill finds active messages by rendezvous in flight, and messages
 * in the channel. */
int run_victim(const Options &o)
{
    Node             node(o, nullptr);
    ucp_ifunc_h      pattern = node.ifunc("pattern");
    ucp_ifunc_peer_h peer    = connect_or_say(node, o.connect);
    if (peer == nullptr) {
        return 2;
    }
    Sender sender(node, peer, pattern, true);
    for (uint64_t index = 0; index < PATTERN_STREAM_CAPACITY; ++index) {
        size_t       size   = (index % 2) ? 60000 : 800000;
        ucs_status_t status = sender.send(sequence(o.stream, index), size);
        if ((status != UCS_OK) && (status != UCS_INPROGRESS)) {
            say("send_error code=%d status=%s", int(status),
                ucs_status_string(status));
            break;
        }
        if (index == 3) {
            say("sending");
        }
    }
    /* Not reached in the tests: the victim is killed long before. */
    sender.wait_callbacks();
    ucp_ifunc_peer_close(peer);
    say("done");
    return 0;
}

int run_reconnect(const Options &o)
{
    Node             node(o, nullptr);
    ucp_ifunc_h      pattern = node.ifunc("pattern");
    ucp_ifunc_peer_h peer    = connect_or_say(node, o.connect);
    if (peer == nullptr) {
        return 2;
    }
    auto     sender = std::make_unique<Sender>(node, peer, pattern, false);
    uint64_t index  = 0;
    for (; index < o.first; ++index) {
        if (sender->send(sequence(0, index), 64) != UCS_OK) {
            say("send_error early index=%llu", (unsigned long long)index);
            return 3;
        }
    }
    say("sent_first count=%llu", (unsigned long long)index);
    /* The target is killed now: keep sending, slowly, until a send says
     * so. */
    ucs_status_t status = UCS_OK;
    while (status == UCS_OK) {
        for (int i = 0; i < 100; ++i) {
            node.progress();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        status = sender->send(sequence(0, index % PATTERN_STREAM_CAPACITY), 64);
        ++index;
        node.check_deadline("a send error");
    }
    say("send_error status=%s", ucs_status_string(status));
    ucp_ifunc_peer_close(peer);
    say("closed_old");
    /* Connects again once told that the new target listens: attempts on a
     * port without a listener could meet TCP's self-connect. */
    Input       input;
    std::string line;
    while (!input.next(&line) || (line != "reconnect")) {
        node.progress();
        node.check_deadline("the reconnect command");
        if (input.eof()) {
            return 3;
        }
    }
    unsigned attempts = 0;
    for (;;) {
        ++attempts;
        status = node.connect(o.connect, 2000, &peer);
        if (status == UCS_OK) {
            break;
        }
        node.check_deadline("reconnect");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    say("reconnected attempts=%u", attempts);
    sender = std::make_unique<Sender>(node, peer, pattern, false);
    for (index = 0; index < o.second; ++index) {
        status = sender->send(sequence(1, index), 64);
        if (status != UCS_OK) {
            say("send_error late status=%s", ucs_status_string(status));
            return 3;
        }
    }
    sender->wait_callbacks();
    sender->print_result(o.second);
    ucp_ifunc_peer_close(peer);
    node.destroy();
    say("closed");
    return 0;
}

/* --- relay --------------------------------------------------------------- */

/* What differs between relay.c's node and sbx_relay.c's: where their
 * target_args live, the payload that starts a chain, what they report. */
struct RelayKind {
    const char                                        *ifunc;
    std::function<void(ucp_ifunc_peer_h, ucp_ifunc_h)> set_peer;
    std::function<bool()>                              finished;
    std::function<ucs_status_t(ucp_ifunc_peer_h, ucp_ifunc_h, uint64_t, bool)>
                          start;
    std::function<void()> result;
};

/* "connect ADDR", "start H" (and "probe" where the kind has probes),
 * "quit"; prints "finished" once the chain ended. */
int relay_loop(Node &node, const RelayKind &kind)
{
    ucp_ifunc_h relay = node.ifunc(kind.ifunc);
    node.listen();
    Input            input;
    std::string      line;
    ucp_ifunc_peer_h peer      = nullptr;
    bool             announced = false;
    for (unsigned i = 0;; ++i) {
        node.progress();
        if (kind.finished() && !announced) {
            say("finished");
            announced = true;
        }
        if ((i % 256) != 0) {
            continue;
        }
        node.check_deadline("relay");
        if (!input.next(&line)) {
            if (input.eof()) {
                break;
            }
            continue;
        }
        unsigned long long hops = 0;
        char               address[256];
        if (line == "quit") {
            break;
        } else if (std::sscanf(line.c_str(), "connect %255s", address) == 1) {
            peer = connect_or_say(node, address);
            if (peer == nullptr) {
                return 2;
            }
            kind.set_peer(peer, relay);
        } else if (std::sscanf(line.c_str(), "start %llu", &hops) == 1) {
            ucs_status_t status = kind.start(peer, relay, hops, false);
            say("started status=%s", ucs_status_string(status));
        } else if (line == "probe") {
            ucs_status_t status = kind.start(peer, relay, 0, true);
            say("started status=%s", ucs_status_string(status));
        }
    }
    kind.result();
    node.destroy();
    say("destroyed");
    return 0;
}

/* The "result" line of a relay node, with @a more at its end. */
void say_relay_result(const relay_args &args, const std::string &more)
{
    say("result runs=%llu sends=%llu failures=%llu finished=%llu hops=%llu "
        "checksum=%llu%s",
        (unsigned long long)args.runs, (unsigned long long)args.sends,
        (unsigned long long)args.failures, (unsigned long long)args.finished,
        (unsigned long long)args.final_hops,
        (unsigned long long)args.final_checksum, more.c_str());
}

int run_relay(const Options &o)
{
    relay_args args = {};
    args.node       = o.node;
    Node      node(o, &args);
    RelayKind kind;
    kind.ifunc    = "relay";
    kind.set_peer = [&](ucp_ifunc_peer_h peer, ucp_ifunc_h) {
        args.peer = peer;
    };
    kind.finished = [&]() { return args.finished != 0; };
    kind.start    = [](ucp_ifunc_peer_h peer, ucp_ifunc_h relay, uint64_t hops,
                    bool) {
        relay_payload p = {};
        p.hops_left     = hops;
        return ucp_ifunc_peer_send_nbx(peer, relay, &p, sizeof(p), nullptr);
    };
    kind.result = [&]() { say_relay_result(args, ""); };
    return relay_loop(node, kind);
}

/* Its target_args in memory granted to sbx_relay, the only memory of the
 * process its code can reach besides its own. */
int run_sbx_relay(const Options &o)
{
    const size_t size   = 4096; /* grants are whole pages */
    void        *memory = nullptr;
    ucx_util::check(ucp_ifunc_sandbox_mem_alloc(size, nullptr, &memory),
                    "ucp_ifunc_sandbox_mem_alloc");
    std::unique_ptr<void, ucs_status_t (*)(void *)> owner(
            memory, ucp_ifunc_sandbox_mem_free);
    ucx_util::check(
            ucp_ifunc_sandbox_grant(memory, size,
                                    UCP_IFUNC_SANDBOX_GRANT_READ |
                                            UCP_IFUNC_SANDBOX_GRANT_WRITE,
                                    "sbx_relay", nullptr),
            "ucp_ifunc_sandbox_grant");
    auto *args       = static_cast<sbx_relay_args *>(memory); /* zero pages */
    args->relay.node = o.node;
    Node      node(o, args);
    RelayKind kind;
    kind.ifunc    = "sbx_relay";
    kind.set_peer = [&](ucp_ifunc_peer_h peer, ucp_ifunc_h relay) {
        /* The code names the peer by the handle of its grant. */
        ucp_ifunc_peer_h handle;
        ucx_util::check(ucp_ifunc_sandbox_peer_grant(peer, "sbx_relay", nullptr,
                                                     &handle),
                        "ucp_ifunc_sandbox_peer_grant");
        args->relay.peer = handle;
        args->host_code  = relay; /* live, but not the sandbox's */
    };
    kind.finished = [&]() {
        return (args->relay.finished | args->probed) != 0;
    };
    kind.start = [&](ucp_ifunc_peer_h peer, ucp_ifunc_h relay, uint64_t hops,
                     bool probe) {
        sbx_relay_payload p = {};
        p.relay.hops_left   = hops;
        p.probe             = probe;
        return ucp_ifunc_peer_send_nbx(peer, relay, &p, sizeof(p), nullptr);
    };
    kind.result = [&]() {
        std::string probes =
                " probed=" + std::to_string(args->probed) + " probes=";
        for (int i = 0; i < SBX_PROBES; ++i) {
            probes += (i ? "," : "") + std::to_string(args->probe_status[i]);
        }
        say_relay_result(args->relay, probes);
    };
    return relay_loop(node, kind);
}

} // namespace

int main(int argc, char **argv)
{
    /* Die with the test that started this node. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
    try {
        Options o       = parse(argc, argv);
        auto    counted = o.expect;
        counted.insert(counted.end(), o.check.begin(), o.check.end());
        for (const auto &e : counted) {
            if ((e.first >= PATTERN_STREAMS) ||
                (e.second > PATTERN_STREAM_CAPACITY)) {
                throw std::runtime_error("stream or count too large");
            }
        }
        if (o.mode == "target") {
            return run_target(o);
        } else if (o.mode == "source") {
            return run_source(o);
        } else if (o.mode == "victim") {
            return run_victim(o);
        } else if (o.mode == "reconnect") {
            return run_reconnect(o);
        } else if (o.mode == "relay") {
            return run_relay(o);
        } else if (o.mode == "sbx_relay") {
            return run_sbx_relay(o);
        }
        throw std::runtime_error("unknown mode " + o.mode);
    } catch (const std::exception &e) {
        say("error what=%s", e.what());
        std::fprintf(stderr, "ifunc_peer_node: %s\n", e.what());
        return 1;
    }
}
