/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The default path (ucp_ifunc_listen, ucp_ifunc_peer_*) between processes
 * of test/peer/ifunc_peer_node, over shared memory and TCP: delivery of
 * the caller's payloads exactly once and intact on the path chosen, code
 * that sends itself on through the one call (sandboxed code too, and the
 * host calls' refusals of forged arguments), sources killed mid-transfer,
 * a target restarted under the same address, a connection without a
 * listener, an answer to a source seen failed, argument errors, delivery
 * reports, and the lifecycle: a worker destroyed in every state (never
 * progressed, peers connecting, mid-message), a clean close told from a
 * crash, sends lost at a close counted once.
 */
#include "node.h"
#include "target.h"

#include "../ifuncs/test_ifunc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace test {
namespace {

class Peer : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { alarm(600); }
    void TearDown() override { alarm(0); }

    std::string tls() const { return tls_of(GetParam()); }
    bool        on_sm() const { return GetParam() == "sm"; }
    std::string expected_path() const { return on_sm() ? "channel" : "am"; }

    /* A target listening on 127.0.0.1 (port @a port, 0: any); sets
     * @a port_out to the port. */
    std::unique_ptr<Node> start_target(const std::string       &name,
                                       std::vector<std::string> args,
                                       unsigned *port_out, unsigned port = 0,
                                       std::vector<std::string> env = {})
    {
        args.insert(args.begin(), {"target", "--listen",
                                   "127.0.0.1:" + std::to_string(port)});
        auto node = std::make_unique<Node>(name, tls(), args, env);
        *port_out = unsigned(number(node->expect("port", 60), "port"));
        return node;
    }

    /* A target on a port outside the range the system hands out to
     * connections, so that no other socket takes it while the target
     * restarts; any port where that range leaves none below it. */
    std::unique_ptr<Node> start_target_on_fixed_port(
            const std::string &name, const std::vector<std::string> &args,
            unsigned *port_out, const std::vector<std::string> &env)
    {
        unsigned      low = 0, high = 0;
        std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
        range >> low >> high;
        std::mt19937 random(std::random_device{}());
        for (int attempt = 0; (low > 11000) && (attempt < 20); ++attempt) {
            unsigned port = 10000 + unsigned(random() % (low - 10000));
            try {
                return start_target(name, args, port_out, port, env);
            } catch (const std::exception &) {
                /* taken: another */
            }
        }
        return start_target(name, args, port_out, 0, env);
    }

    /* Checks a target's result line: no message ran twice, corrupt or
     * outside the counted streams, and every expected one ran. */
    static void expect_clean(const Fields &result)
    {
        EXPECT_EQ(0u, number(result, "corrupt"));
        EXPECT_EQ(0u, number(result, "duplicate"));
        EXPECT_EQ(0u, number(result, "unknown"));
        EXPECT_EQ(0u, number(result, "missing"));
        EXPECT_EQ(0u, number(result, "timed_out"));
    }

    /* A target, and a source asking for delivery reports that sent it 5
     * messages while it was stopped (SIGSTOP): their reports await. */
    void five_sent_to_a_stopped_target(std::unique_ptr<Node> *target,
                                       std::unique_ptr<Node> *source)
    {
        unsigned port;
        *target = start_target("target", {}, &port);
        *source = std::make_unique<Node>(
                "source", tls(),
                std::vector<std::string>{"source", "--connect", address(port),
                                         "--report", "--interactive"});
        (*source)->expect("connected");
        kill((*target)->pid(), SIGSTOP);
        (*source)->send("send 5 8");
        (*source)->expect("sent");
    }

    static std::vector<uint64_t> streams(const Fields &result)
    {
        std::vector<uint64_t> counts;
        std::istringstream    text(result.at("streams"));
        for (std::string count; std::getline(text, count, ',');) {
            counts.push_back(std::stoull(count));
        }
        return counts;
    }
};

/* --- 1. the default path ---------------------------------------------- */

TEST_P(Peer, DefaultPathRunsEachPayloadOnceIntact)
{
    /* Small messages go by channel on shared memory, 256 KiB ones (larger
     * than a slot: the target's channel has 128 KiB slots here) by active
     * message there; everything by active message over TCP. Two sources at once: one without a callback (payloads
     * copied where needed), one with (UCS_INPROGRESS, then the callback).
     * Each overwrites a payload as soon as the library gives it back. */
    constexpr uint64_t kSmall = 10000, kLarge = 200, kTotal = kSmall + kLarge;
    const std::string  expect_each = std::to_string(kTotal);
    unsigned           port;
    auto               target = start_target(
                          "target",
                          {"--expect", "0:" + expect_each, "--expect", "1:" + expect_each},
                          &port, 0, {"UCX_IFUNC_PEER_SLOT_SIZE=128KB"});
    std::vector<std::string> args    = {"source",
                                        "--connect",
                                        address(port),
                                        "--send",
                                        std::to_string(kSmall) + ":8",
                                        "--send",
                                        std::to_string(kLarge) + ":262144"};
    std::vector<std::string> with_cb = args;
    with_cb.insert(with_cb.end(), {"--stream", "1", "--callback"});
    Node plain("source", tls(), args);
    Node callback("source with callback", tls(), with_cb);

    for (Node *source : {&plain, &callback}) {
        SCOPED_TRACE(source == &plain ? "without callback" : "with callback");
        Fields connected = source->expect("connected");
        EXPECT_EQ(expected_path(), connected["path"]);
        Fields r = source->expect("result");
        EXPECT_EQ(kTotal, number(r, "sent"));
        EXPECT_EQ(kTotal, number(r, "ok") + number(r, "in_progress"));
        EXPECT_EQ(0u, number(r, "bad_status"));
        EXPECT_EQ(number(r, "in_progress"), number(r, "callbacks"));
        EXPECT_EQ(0u, number(r, "callback_errors"));
        EXPECT_EQ(expected_path(), r["path"]);
        EXPECT_EQ("Success", r["status"]);
        EXPECT_EQ(0u, number(r, "queued"));
        /* The code goes with the first messages only. */
        uint64_t with_code = number(r, "with_code");
        uint64_t by_ref    = number(r, "by_ref");
        EXPECT_GE(with_code, 1u);
        EXPECT_EQ(kTotal, with_code + by_ref);
        EXPECT_GT(by_ref, kTotal / 2) << "with code: " << with_code;
        if (source == &callback) {
            /* 256 KiB payloads go from the caller's memory (the node
             * starts them with nothing queued). */
            EXPECT_GE(number(r, "in_progress"), 1u);
        } else {
            EXPECT_EQ(0u, number(r, "in_progress"));
        }
        source->expect("closed");
        EXPECT_EQ(0, source->wait_exit());
    }
    Fields result = target->expect("result");
    expect_clean(result);
    EXPECT_EQ(2 * kTotal, number(result, "executed"));
    EXPECT_EQ(2u, number(result, "new"));
    target->expect("destroyed");
    EXPECT_EQ(0, target->wait_exit());
}

TEST_P(Peer, CountersCountWhatRanAndPrintAtRelease)
{
    /* Small payloads by channel on shared memory and 256 KiB ones (larger
     * than a slot) by active message there, all by active message over
     * TCP: every one counts as the default path's. The target prints its
     * counters when its context is released (UCX_IFUNC_PRINT_COUNTERS). */
    constexpr uint64_t kSmall = 300, kLarge = 4, kTotal = kSmall + kLarge;
    unsigned           port;
    auto               target = start_target(
                          "target", {"--expect", "0:" + std::to_string(kTotal)}, &port, 0,
                          {"UCX_IFUNC_PEER_SLOT_SIZE=128KB", "UCX_IFUNC_PRINT_COUNTERS=y"});
    Node   source("source", tls(),
                  {"source", "--connect", address(port), "--send",
                   std::to_string(kSmall) + ":8", "--send",
                   std::to_string(kLarge) + ":262144"});
    Fields sent = source.expect("result");
    EXPECT_EQ(kTotal, number(sent, "sent"));
    source.expect("closed");
    EXPECT_EQ(0, source.wait_exit());

    Fields result = target->expect("result");
    expect_clean(result);
    EXPECT_EQ(kTotal, number(result, "executed"));
    EXPECT_EQ(kTotal, number(result, "run_peer"));
    EXPECT_EQ(0u, number(result, "run_other"));
    EXPECT_EQ(0u, number(result, "rejected"));
    target->expect("destroyed");
    target->expect("# ucx-ifunc");
    target->expect("#   run_peer");
    const std::string &log  = target->log();
    size_t             line = log.rfind("#   run_peer ");
    ASSERT_NE(std::string::npos, line) << log;
    EXPECT_EQ(kTotal, std::stoull(log.substr(line + 13))) << log;
    EXPECT_EQ(0, target->wait_exit());
}

/* --- 2. code that sends itself on --------------------------------------- */

/* @a count relay nodes of @a mode ("relay", "sbx_relay") in a ring: node
 * i sends to node i + 1, the last to node 0. */
std::vector<std::unique_ptr<Node>>
relay_ring(const std::string &mode, const std::string &tls, unsigned count,
           const std::string &path, const std::vector<std::string> &env = {})
{
    std::vector<std::unique_ptr<Node>> nodes;
    std::vector<unsigned>              ports;
    for (unsigned i = 0; i < count; ++i) {
        nodes.push_back(std::make_unique<Node>(
                mode + " " + std::to_string(i), tls,
                std::vector<std::string>{mode, "--listen", "127.0.0.1:0",
                                         "--node", std::to_string(i)},
                env));
        ports.push_back(unsigned(number(nodes[i]->expect("port", 60), "port")));
    }
    for (unsigned i = 0; i < count; ++i) {
        nodes[i]->send("connect " + address(ports[(i + 1) % count]));
    }
    for (auto &node : nodes) {
        EXPECT_EQ(path, node->expect("connected")["path"]);
    }
    return nodes;
}

/* Starts a chain of @a runs runs at node 1 of @a nodes, and checks that it
 * ended at the node it should, with every node's share of the runs and the
 * checksum of the nodes in the order they ran. */
void relay_chain(std::vector<std::unique_ptr<Node>> &nodes, uint64_t runs)
{
    const uint64_t count = nodes.size();
    nodes[0]->send("start " + std::to_string(runs - 1));
    EXPECT_EQ("Success", nodes[0]->expect("started")["status"]);

    uint64_t checksum = 0;
    for (uint64_t run = 1; run <= runs; ++run) {
        checksum = relay_mix(checksum, run % count); /* node 1 runs first */
    }
    /* The last run, and the node it tells to stop. */
    const uint64_t last = runs % count, stopped = (last + 1) % count;
    nodes[last]->expect("finished");
    nodes[stopped]->expect("finished");
    uint64_t total = 0;
    for (uint64_t i = 0; i < count; ++i) {
        SCOPED_TRACE("node " + std::to_string(i));
        nodes[i]->send("quit");
        Fields r = nodes[i]->expect("result");
        EXPECT_EQ(0u, number(r, "failures"));
        if ((i == last) || (i == stopped)) {
            EXPECT_EQ(1u, number(r, "finished"));
            EXPECT_EQ(runs, number(r, "hops"));
            EXPECT_EQ(checksum, number(r, "checksum"));
        }
        EXPECT_EQ(runs / count + ((i + count - 1) % count < runs % count),
                  number(r, "runs"));
        /* Each run sends once: the next hop, or the end of the chain. */
        EXPECT_EQ(number(r, "runs"), number(r, "sends"));
        total += number(r, "runs");
        nodes[i]->expect("destroyed");
    }
    EXPECT_EQ(runs, total);
    for (auto &node : nodes) {
        EXPECT_EQ(0, node->wait_exit());
    }
}

TEST_P(Peer, RecursionThroughTheOneCall)
{
    /* Node 0 starts a chain at node 1; each run sends relay's own code on
     * to the other node until 10 000 runs are done. */
    auto nodes = relay_ring("relay", tls(), 2, expected_path());
    relay_chain(nodes, 10000);
}

/* Sandboxed code runs here only where the kernel lets the runtime set the
 * %gs base (FSGSBASE), on x86-64. */
bool sandbox_runs_here()
{
#if defined(__x86_64__)
    return (getauxval(AT_HWCAP2) & 2) != 0; /* HWCAP2_FSGSBASE */
#else
    return false;
#endif
}

/* Only code built for the sandbox runs: no library, no key. */
const std::vector<std::string> kSandboxedOnly = {"UCX_IFUNC_TRUST=sandboxed"};

TEST_P(Peer, SandboxedCodeSendsItselfOn)
{
    if (!sandbox_runs_here()) {
        GTEST_SKIP() << "no sandbox on this machine (x86-64, FSGSBASE)";
    }
    /* sbx_relay around three processes: its code, confined, gets its own
     * handle and sends itself on through the host calls, with the peer
     * handle and node it reads from memory each node granted to it; 300
     * runs, ending at node 0 (three processes that poll share the test
     * machine's cores: a hop may wait for a time slice). The chain's last
     * send is its 300th hop from node 0's host, which a target's
     * UCX_IFUNC_SANDBOX_HOPS must allow. */
    std::vector<std::string> env = kSandboxedOnly;
    env.push_back("UCX_IFUNC_SANDBOX_HOPS=300");
    auto nodes = relay_ring("sbx_relay", tls(), 3, expected_path(), env);
    relay_chain(nodes, 300);
}

TEST_P(Peer, SandboxedHostCallsRefuseForgedArguments)
{
    if (!sandbox_runs_here()) {
        GTEST_SKIP() << "no sandbox on this machine (x86-64, FSGSBASE)";
    }
    /* Node 1 runs a probe: each host call with one forged argument returns
     * UCS_ERR_INVALID_PARAM to the code, which goes on (and records the
     * statuses); nothing reaches node 0, and no message is ended. */
    auto nodes =
            relay_ring("sbx_relay", tls(), 2, expected_path(), kSandboxedOnly);
    nodes[0]->send("probe");
    EXPECT_EQ("Success", nodes[0]->expect("started")["status"]);
    nodes[1]->expect("finished");
    /* The statuses of the calls, as numbers. */
    std::string refused, none;
    for (int i = 0; i < SBX_PROBES; ++i) {
        refused += (i ? "," : "") + std::to_string(UCS_ERR_INVALID_PARAM);
        none += (i ? ",0" : "0");
    }
    for (unsigned i = 0; i < 2; ++i) {
        SCOPED_TRACE("node " + std::to_string(i));
        nodes[i]->send("quit");
        Fields r = nodes[i]->expect("result");
        EXPECT_EQ(0u, number(r, "failures"));
        EXPECT_EQ(0u, number(r, "sends"));
        EXPECT_EQ(i, number(r, "probed"));
        EXPECT_EQ((i == 1) ? refused : none, r["probes"]);
        nodes[i]->expect("destroyed");
        EXPECT_EQ(0, nodes[i]->wait_exit());
    }
}

/* --- 3. peer faults -------------------------------------------------------- */

TEST_P(Peer, KilledSourcesNeitherStopNorStarveTheTarget)
{
    /* Sources that send 800 000-byte messages (by rendezvous) and 60 000-
     * byte ones (by channel on shared memory) without end are killed at
     * random points, one after the other; meanwhile a second source sends
     * batches that must all run, once each. */
    constexpr unsigned kKills = 5;
    constexpr unsigned kBatch = 2000;
    std::random_device seed_source;
    unsigned           seed = seed_source();
    RecordProperty("seed", int(seed));
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 random(seed);

    unsigned port;
    auto     target = start_target(
                "target", {"--check", "0:" + std::to_string(kKills * kBatch)},
                &port);
    Node survivor("survivor", tls(),
                  {"source", "--connect", address(port), "--interactive"});
    EXPECT_EQ(expected_path(), survivor.expect("connected")["path"]);

    uint64_t failures_due = 0;
    for (unsigned kill = 1; kill <= kKills; ++kill) {
        SCOPED_TRACE("kill " + std::to_string(kill));
        Node victim("victim " + std::to_string(kill), tls(),
                    {"victim", "--connect", address(port), "--stream",
                     std::to_string(kill)});
        bool early = (kill == 1);
        if (early) {
            /* Somewhere in start-up or connection set-up. */
            std::this_thread::sleep_for(
                    std::chrono::milliseconds(random() % 200));
        } else {
            victim.expect("sending");
            ++failures_due;
        }
        survivor.send("send " + std::to_string(kBatch) + " 512");
        std::this_thread::sleep_for(std::chrono::milliseconds(random() % 300));
        victim.kill9();
        EXPECT_EQ(uint64_t(kill) * kBatch,
                  number(survivor.expect("sent"), "total"));
        /* The failure is reported and the survivor's batch runs. */
        Fields report;
        auto   deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(int(kLineTimeout));
        do {
            ASSERT_LT(std::chrono::steady_clock::now(), deadline)
                    << target->log();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            target->send("report");
            report = target->expect("report");
        } while ((number(report, "stream0") < uint64_t(kill) * kBatch) ||
                 (number(report, "failed") < failures_due));
    }
    survivor.send("quit");
    Fields r = survivor.expect("result");
    EXPECT_EQ(uint64_t(kKills) * kBatch, number(r, "sent"));
    EXPECT_EQ(0u, number(r, "bad_status"));
    EXPECT_EQ("Success", r["status"]);
    survivor.expect("closed");
    EXPECT_EQ(0, survivor.wait_exit());

    target->send("stop");
    Fields result = target->expect("result");
    expect_clean(result);
    EXPECT_EQ(uint64_t(kKills) * kBatch, streams(result)[0]);
    EXPECT_GE(number(result, "failed"), failures_due);
    EXPECT_GE(number(result, "new"), 1 + failures_due);
    RecordProperty("kills", int(kKills));
    /* ucp_ifunc_worker_destroy returns. */
    target->expect("destroyed");
    EXPECT_EQ(0, target->wait_exit());
}

TEST_P(Peer, TargetRestartedUnderTheSameAddress)
{
    constexpr uint64_t kFirst = 500, kSecond = 2000;
    /* The new target binds the port the killed one's connections hold in
     * TIME_WAIT. */
    std::vector<std::string> reuse = {"UCX_TCP_CM_REUSEADDR=y"};
    unsigned                 port;
    auto first = start_target_on_fixed_port("first target", {}, &port, reuse);
    Node source("source", tls(),
                {"reconnect", "--connect", address(port), "--first",
                 std::to_string(kFirst), "--second", std::to_string(kSecond)});
    EXPECT_EQ(expected_path(), source.expect("connected")["path"]);
    source.expect("sent_first");
    Fields report;
    do {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        first->send("report");
        report = first->expect("report");
    } while (number(report, "stream0") < kFirst);
    first->kill9();

    /* The sends fail (they do not hang), the peer closes. */
    Fields error = source.expect("send_error");
    EXPECT_NE("Success", error["status"]);
    source.expect("closed_old");

    unsigned same_port;
    auto     second = start_target("second target",
                                   {"--expect", "1:" + std::to_string(kSecond)},
                                   &same_port, port, reuse);
    ASSERT_EQ(port, same_port);
    source.send("reconnect");
    EXPECT_GE(number(source.expect("reconnected"), "attempts"), 1u);
    Fields r = source.expect("result");
    EXPECT_EQ(kSecond, number(r, "sent"));
    EXPECT_EQ(0u, number(r, "bad_status"));
    /* The new target holds no code: it went again. */
    EXPECT_GE(number(r, "with_code"), 1u);
    EXPECT_EQ(kSecond, number(r, "with_code") + number(r, "by_ref"));
    EXPECT_EQ(expected_path(), r["path"]);
    source.expect("closed");
    EXPECT_EQ(0, source.wait_exit());

    Fields result = second->expect("result");
    expect_clean(result);
    EXPECT_EQ(0u, streams(result)[0]);
    EXPECT_EQ(kSecond, streams(result)[1]);
    second->expect("destroyed");
    EXPECT_EQ(0, second->wait_exit());
}

/* The test process itself as an ifunc worker, over the transport under
 * test. */
class Local {
public:
    explicit Local(const std::string &tls)
    {
        setenv("UCX_TLS", tls.c_str(), 1);
        setenv("UCX_IFUNC_LIB_DIR", ifunc_lib_dir().c_str(), 1);
        context_ = std::make_unique<Context>(UCP_FEATURE_AM | UCP_FEATURE_RMA);
        worker_  = std::make_unique<Worker>(context_->get());
        check(ucp_ifunc_worker_create(context_->get(), worker_->get(), nullptr,
                                      &iworker_),
              "ucp_ifunc_worker_create");
    }

    ~Local()
    {
        ucp_ifunc_worker_destroy(iworker_);
        if (ifunc_ != nullptr) {
            ucp_deregister_ifunc(context_->get(), ifunc_);
        }
    }

    ucp_context_h      context() const { return context_->get(); }
    ucp_worker_h       worker() const { return worker_->get(); }
    ucp_ifunc_worker_h iworker() const { return iworker_; }

    ucp_ifunc_h pattern()
    {
        if (ifunc_ == nullptr) {
            check(ucp_register_ifunc(context(), "pattern", &ifunc_),
                  "ucp_register_ifunc");
        }
        return ifunc_;
    }

private:
    std::unique_ptr<Context> context_;
    std::unique_ptr<Worker>  worker_;
    ucp_ifunc_worker_h       iworker_ = nullptr;
    ucp_ifunc_h              ifunc_   = nullptr;
};

TEST_P(Peer, ConnectWithoutListenerFailsInTime)
{
    /* A port bound and not listening: refused, and no other socket (the
     * connection's own among them) can take it meanwhile. */
    int         fd       = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr     = {};
    addr.sin_family      = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(0, bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)));
    socklen_t len = sizeof(addr);
    ASSERT_EQ(0, getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len));
    std::string to = address(ntohs(addr.sin_port));

    Local                   local(tls());
    ucp_ifunc_peer_params_t params = {};
    params.field_mask =
            UCP_IFUNC_PEER_FIELD_ADDRESS | UCP_IFUNC_PEER_FIELD_TIMEOUT;
    params.address         = to.c_str();
    params.timeout_ms      = 1000; /* asked again till then */
    ucp_ifunc_peer_h peer  = nullptr;
    auto             start = std::chrono::steady_clock::now();
    ucs_status_t     status =
            ucp_ifunc_peer_connect(local.iworker(), &params, &peer);
    auto elapsed = std::chrono::steady_clock::now() - start;
    close(fd);
    /* As documented: no listener there. */
    EXPECT_EQ(UCS_ERR_UNREACHABLE, status) << ucs_status_string(status);
    EXPECT_EQ(nullptr, peer);
    /* The timeout bounds the wait (with room for a loaded machine). */
    EXPECT_LT(elapsed, std::chrono::seconds(30));
    RecordProperty("connect_status", ucs_status_string(status));
}

extern "C" struct reply_record ifunc_test_reply; /* main.cc */

/* An answer to a source that failed, once this worker saw it fail: the
 * target's answer to our request (reply.so) waits in our channel while
 * the target is killed; the failure reaches our peer through the network
 * worker alone, so the channel is not polled before it; then our code's
 * answer back (UCP_IFUNC_PEER_SOURCE) gets the peer's failure, not a
 * send into the void. On a channel only: an active message runs as UCX
 * delivers it, before the failure that follows it. */
TEST_P(Peer, AnAnswerToASourceSeenFailedGetsItsFailure)
{
    if (!on_sm()) {
        GTEST_SKIP() << "the answer must wait in a channel";
    }
    unsigned    port;
    auto        target = start_target("target", {}, &port);
    Local       local(tls());
    ucp_ifunc_h reply;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(local.context(), "reply", &reply));
    std::string             to     = address(port);
    ucp_ifunc_peer_params_t params = {};
    params.field_mask              = UCP_IFUNC_PEER_FIELD_ADDRESS;
    params.address                 = to.c_str();
    ucp_ifunc_peer_h peer          = nullptr;
    ASSERT_EQ(UCS_OK, ucp_ifunc_peer_connect(local.iworker(), &params, &peer));
    /* Both directions settle (the target's channel to us among them). */
    for (auto until = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(300);
         std::chrono::steady_clock::now() < until;) {
        ucp_ifunc_worker_progress(local.iworker());
    }
    ucp_ifunc_peer_attr_t attr = {};
    attr.field_mask =
            UCP_IFUNC_PEER_ATTR_FIELD_PATH | UCP_IFUNC_PEER_ATTR_FIELD_STATUS;
    ASSERT_EQ(UCS_OK, ucp_ifunc_peer_query(peer, &attr));
    EXPECT_EQ(UCP_IFUNC_PATH_CHANNEL, attr.path);

    /* Answered (value 8) by the target, answered again by us. */
    const reply_record before  = ifunc_test_reply;
    reply_payload      request = {7, 2, -1, 0};
    ASSERT_EQ(UCS_OK, ucp_ifunc_peer_send_nbx(peer, reply, &request,
                                              sizeof(request), nullptr));
    uint64_t answered = 0;
    for (int i = 0; (i < 200) && (answered == 0); ++i) {
        target->send("report");
        answered = number(target->expect("report"), "answered");
        if (answered == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    ASSERT_EQ(1u, answered);
    target->kill9(); /* its ring of ours stays mapped here */

    ucp_ifunc_worker_attr_t wattr = {};
    wattr.field_mask              = UCP_IFUNC_WORKER_ATTR_FIELD_NET_WORKER;
    ASSERT_EQ(UCS_OK, ucp_ifunc_worker_query(local.iworker(), &wattr));
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((attr.status == UCS_OK) &&
           (std::chrono::steady_clock::now() < until)) {
        ucp_worker_progress(wattr.net_worker);
        ucp_ifunc_peer_query(peer, &attr);
    }
    ASSERT_NE(UCS_OK, attr.status) << "the target's close never came";
    EXPECT_EQ(before.failed, ifunc_test_reply.failed) << "ran before it";
    for (int i = 0; (i < 1000) && (ifunc_test_reply.failed == before.failed);
         ++i) {
        ucp_ifunc_worker_progress(local.iworker());
    }
    EXPECT_EQ(before.failed + 1, ifunc_test_reply.failed);
    EXPECT_EQ(before.answered, ifunc_test_reply.answered);
    EXPECT_EQ(int64_t(attr.status), ifunc_test_reply.status);
    ucp_ifunc_peer_close(peer);
    ucp_deregister_ifunc(local.context(), reply);
}

/* UCX_TLS=sm alone, the configuration in which UCP's own active messages
 * are fastest on one host: UCX connects by address only through TCP on the
 * address's device, which the ifunc worker's network-facing context lets
 * in; the messages still go by shared memory (channel, and active
 * messages larger than a slot). */
TEST(PeerSharedMemoryAlone, ConnectsAndRunsOnBothPaths)
{
    alarm(300);
    constexpr uint64_t kSmall = 2000, kLarge = 20, kTotal = kSmall + kLarge;
    const std::string  tls               = "sm";
    std::vector<std::string> target_args = {"target", "--listen", "127.0.0.1:0",
                                            "--expect",
                                            "0:" + std::to_string(kTotal)};
    Node target("target", tls, target_args, {"UCX_IFUNC_PEER_SLOT_SIZE=128KB"});
    unsigned port = unsigned(number(target.expect("port", 60), "port"));
    Node     source("source", tls,
                    {"source", "--connect", address(port), "--send",
                     std::to_string(kSmall) + ":8", "--send",
                     std::to_string(kLarge) + ":262144"});
    Fields   connected = source.expect("connected");
    EXPECT_EQ("channel", connected["path"]);
    Fields r = source.expect("result");
    EXPECT_EQ(kTotal, number(r, "sent"));
    EXPECT_EQ(0u, number(r, "bad_status"));
    EXPECT_EQ("Success", r["status"]);
    source.expect("closed");
    EXPECT_EQ(0, source.wait_exit());
    Fields result = target.expect("result");
    EXPECT_EQ(0u, number(result, "corrupt"));
    EXPECT_EQ(0u, number(result, "duplicate"));
    EXPECT_EQ(0u, number(result, "missing"));
    EXPECT_EQ(kTotal, number(result, "executed"));
    target.expect("destroyed");
    EXPECT_EQ(0, target.wait_exit());
    alarm(0);
}

/* --- 4. argument errors --------------------------------------------------- */

TEST_P(Peer, ArgumentErrors)
{
    unsigned port;
    auto     target = start_target("target", {"--expect", "0:1"}, &port);
    Local    local(tls());
    ucp_ifunc_worker_h iw    = local.iworker();
    uint64_t           seq   = 0;
    ucp_ifunc_h        ifunc = local.pattern();

    /* Workers and listeners. */
    ucp_ifunc_worker_params_t wparams = {};
    ucp_ifunc_worker_h        other   = nullptr;
    wparams.field_mask                = UCS_BIT(20);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_worker_create(local.context(), local.worker(), &wparams,
                                      &other));
    EXPECT_EQ(
            UCS_ERR_INVALID_PARAM,
            ucp_ifunc_worker_create(nullptr, local.worker(), nullptr, &other));
    wparams.field_mask = UCP_IFUNC_WORKER_FIELD_PATH;
    wparams.path       = ucp_ifunc_path_t(7);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_worker_create(local.context(), local.worker(), &wparams,
                                      &other));
    ucp_ifunc_listener_params_t lparams = {};
    ucp_ifunc_listener_h        listener;
    lparams.field_mask = UCS_BIT(5);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_listen(iw, &lparams, &listener));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_listen(nullptr, nullptr, &listener));
    lparams.field_mask = UCP_IFUNC_LISTENER_FIELD_ADDRESS;
    lparams.address    = "127.0.0.1:no-such-port";
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_listen(iw, &lparams, &listener));
    ucp_ifunc_listener_attr_t lattr = {};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_listener_query(nullptr, &lattr));

    /* Connections. */
    std::string             to     = address(port);
    ucp_ifunc_peer_params_t params = {};
    ucp_ifunc_peer_h        peer   = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_connect(iw, nullptr, &peer));
    params.field_mask = UCP_IFUNC_PEER_FIELD_ADDRESS | UCS_BIT(9);
    params.address    = to.c_str();
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_connect(iw, &params, &peer));
    params.field_mask = 0; /* neither an address nor an endpoint */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_connect(iw, &params, &peer));
    params.field_mask = UCP_IFUNC_PEER_FIELD_ADDRESS | UCP_IFUNC_PEER_FIELD_EP;
    params.ep         = reinterpret_cast<ucp_ep_h>(&params); /* never used */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_connect(iw, &params, &peer));
    params.field_mask =
            UCP_IFUNC_PEER_FIELD_ADDRESS | UCP_IFUNC_PEER_FIELD_PATH;
    params.path = ucp_ifunc_path_t(3);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_connect(iw, &params, &peer));
    params.field_mask = UCP_IFUNC_PEER_FIELD_ADDRESS;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_connect(nullptr, &params, &peer));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_connect(iw, &params, nullptr));
    EXPECT_EQ(nullptr, peer);
    ASSERT_EQ(UCS_OK, ucp_ifunc_peer_connect(iw, &params, &peer));

    /* Sends and queries. */
    ucp_ifunc_peer_send_params_t sparams = {};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_send_nbx(nullptr, ifunc, &seq, sizeof(seq),
                                      nullptr));
    EXPECT_EQ(
            UCS_ERR_INVALID_PARAM,
            ucp_ifunc_peer_send_nbx(peer, nullptr, &seq, sizeof(seq), nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_send_nbx(peer, ifunc, nullptr, 8, nullptr));
    /* No message runs: no source to answer or tell. */
    EXPECT_EQ(UCS_ERR_UNREACHABLE,
              ucp_ifunc_peer_send_nbx(UCP_IFUNC_PEER_SOURCE, ifunc, &seq,
                                      sizeof(seq), nullptr));
    ucp_ifunc_source_attr_t source = {};
    source.field_mask              = UCP_IFUNC_SOURCE_ATTR_FIELD_PEER;
    EXPECT_EQ(UCS_ERR_NO_ELEM, ucp_ifunc_source_query(&source));
    for (unsigned bit = 3; bit < 64; bit += 15) {
        sparams.field_mask = UCS_BIT(bit);
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  ucp_ifunc_peer_send_nbx(peer, ifunc, &seq, sizeof(seq),
                                          &sparams))
                << "bit " << bit;
    }
    /* Arrays: no count out, a callback (the array is reused on return),
     * count * length past SIZE_MAX, no peer; none sends anything. */
    size_t sent = 7;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_send_array_nbx(peer, ifunc, &seq, sizeof(seq), 1,
                                            nullptr, nullptr));
    sparams.field_mask = UCP_IFUNC_PEER_SEND_FIELD_CALLBACK;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_send_array_nbx(peer, ifunc, &seq, sizeof(seq), 1,
                                            &sent, &sparams));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_send_array_nbx(peer, ifunc, &seq, SIZE_MAX / 2, 3,
                                            &sent, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_peer_send_array_nbx(nullptr, ifunc, &seq, sizeof(seq),
                                            1, &sent, nullptr));
    EXPECT_EQ(0u, sent);
    sent = 7;
    EXPECT_EQ(UCS_OK,
              ucp_ifunc_peer_send_array_nbx(peer, ifunc, &seq, sizeof(seq), 0,
                                            &sent, nullptr));
    EXPECT_EQ(0u, sent);
    ucp_ifunc_peer_attr_t attr = {};
    attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_SENT_WITH_CODE |
                      UCP_IFUNC_PEER_ATTR_FIELD_SENT_BY_REF;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_peer_query(nullptr, &attr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_peer_query(peer, nullptr));

    /* Nothing was sent, and the peer works: the one message runs. */
    ASSERT_EQ(UCS_OK, ucp_ifunc_peer_query(peer, &attr));
    EXPECT_EQ(0u, attr.sent_with_code + attr.sent_by_ref);
    EXPECT_EQ(UCS_OK,
              ucp_ifunc_peer_send_nbx(peer, ifunc, &seq, sizeof(seq), nullptr));
    ucp_ifunc_peer_close(peer); /* sends what waits */
    Fields result = target->expect("result");
    expect_clean(result);
    EXPECT_EQ(1u, number(result, "executed"));
    ucp_ifunc_peer_close(nullptr);
    ucp_ifunc_listener_destroy(nullptr);
    ucp_ifunc_worker_destroy(nullptr);
    target->expect("destroyed");
    EXPECT_EQ(0, target->wait_exit());
}

/* --- delivery reports --------------------------------------------------- */

/* The status a source's "reports" line counts a status under. */
std::string report_key(ucs_status_t status)
{
    return "status_" + std::to_string(-int(status));
}

uint64_t reports_of(const Fields &reports, ucs_status_t status)
{
    auto it = reports.find(report_key(status));
    return (it == reports.end()) ? 0 : std::stoull(it->second);
}

TEST_P(Peer, ReportsSayEachMessageRan)
{
    /* 8-byte payloads by channel on shared memory (the first with their
     * code, then references from the caller's memory), 200 000-byte ones
     * by active message (slots of 128 KiB); all by active message over
     * TCP. One source with a completion callback, one without. */
    unsigned port;
    auto     target =
            start_target("target", {"--expect", "0:220", "--expect", "1:220"},
                         &port, 0, {"UCX_IFUNC_PEER_SLOT_SIZE=128KB"});
    std::vector<std::string> args    = {"source",   "--connect", address(port),
                                        "--report", "--send",    "200:8",
                                        "--send",   "20:200000"};
    std::vector<std::string> with_cb = args;
    with_cb.insert(with_cb.end(), {"--stream", "1", "--callback"});
    Node plain("source", tls(), args);
    Node callback("source with callback", tls(), with_cb);
    for (Node *source : {&plain, &callback}) {
        Fields reports = source->expect("reports");
        EXPECT_EQ(220u, number(reports, "asked"));
        EXPECT_EQ(220u, number(reports, "heard"));
        EXPECT_EQ(220u, reports_of(reports, UCS_OK)) << source->log();
    }
    expect_clean(target->expect("result"));
}

TEST_P(Peer, ReportsSayWhyAMessageDidNotRun)
{
    /* A target that runs signed code only: pattern.so is not signed. */
    unsigned strict_port, port;
    auto     strict = start_target("strict target", {}, &strict_port, 0,
                                   {"UCX_IFUNC_TRUST=signed"});
    /* loadcount.so imports from a library found through its own run path,
     * which the target's search path does not have (a target that trusts
     * any code does not load its own loadcount.so, which would load it). */
    auto target = start_target("target", {}, &port, 0, {"UCX_IFUNC_TRUST=any"});
    Node untrusted("source", tls(),
                   {"source", "--connect", address(strict_port), "--report",
                    "--send", "5:8"});
    Node lacking("source", tls(),
                 {"source", "--connect", address(port), "--report", "--ifunc",
                  "loadcount", "--send", "3:8"});
    Fields rejected = untrusted.expect("reports");
    EXPECT_EQ(5u, number(rejected, "heard"));
    EXPECT_EQ(5u, reports_of(rejected, UCS_ERR_REJECTED)) << untrusted.log();
    Fields missing = lacking.expect("reports");
    EXPECT_EQ(3u, number(missing, "heard"));
    EXPECT_EQ(3u, reports_of(missing, UCS_ERR_NOT_IMPLEMENTED))
            << lacking.log();
    strict->send("stop");
    target->send("stop");
    EXPECT_EQ(0u, number(strict->expect("result"), "executed"));
    EXPECT_EQ(0u, number(target->expect("result"), "executed"));
}

TEST_P(Peer, SendLargerThanThePeerTakesIsRefusedAtOnce)
{
    /* The target takes active messages of 1 MiB at most; a 1.5 MB payload
     * (more than a channel slot) is refused by the send itself, and the
     * messages before it ran. The target runs until told to stop: one
     * that left after the third message closed the peer before a slow
     * source (ASan, loaded) made its fourth send, which then heard
     * UCS_ERR_NOT_CONNECTED. */
    unsigned port;
    auto     target = start_target("target", {"--check", "0:3"}, &port, 0,
                                   {"UCX_IFUNC_MAX_AM_MESSAGE=1m"});
    Node     source("source", tls(),
                    {"source", "--connect", address(port), "--report", "--send",
                     "3:8", "--send", "1:1500000"});
    Fields   error = source.expect("send_error");
    EXPECT_EQ(unsigned(-UCS_ERR_EXCEEDS_LIMIT), number(error, "code"));
    EXPECT_EQ(3u, number(error, "index"));
    Fields reports = source.expect("reports");
    EXPECT_EQ(3u, number(reports, "asked"));
    EXPECT_EQ(3u, reports_of(reports, UCS_OK));
    target->send("stop");
    expect_clean(target->expect("result"));
}

TEST_P(Peer, ReportsOfAPeerThatDiedSayItFailed)
{
    /* The target stops before the messages arrive and is killed with
     * their reports outstanding: each is answered once, with a failure. */
    std::unique_ptr<Node> target, source_node;
    five_sent_to_a_stopped_target(&target, &source_node);
    Node &source = *source_node;
    target->kill9();
    source.send("quit");
    Fields reports = source.expect("reports");
    EXPECT_EQ(5u, number(reports, "asked"));
    EXPECT_EQ(5u, number(reports, "heard"));
    EXPECT_EQ(0u, reports_of(reports, UCS_OK)) << source.log();
    EXPECT_EQ(0u, reports_of(reports, UCS_ERR_CANCELED)) << source.log();
}

TEST_P(Peer, ReportsOfAClosedPeerSayItClosed)
{
    /* The target stops before the messages arrive; the source closes the
     * peer with their reports awaited: the close answers each, once. The
     * target goes on a moment later (the close may wait for it). */
    std::unique_ptr<Node> target, source_node;
    five_sent_to_a_stopped_target(&target, &source_node);
    Node &source = *source_node;
    source.send("close");
    /* Stopped past the close's wait for the target's bye answer (1 s):
     * a target that answered would have run them and said so. */
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    kill(target->pid(), SIGCONT);
    Fields reports = source.expect("reports");
    EXPECT_EQ(5u, number(reports, "asked"));
    EXPECT_EQ(5u, number(reports, "heard"));
    EXPECT_EQ(5u, reports_of(reports, UCS_ERR_CANCELED)) << source.log();
    target->send("stop");
    EXPECT_EQ(0u, number(target->expect("result"), "duplicate"));
}

/* A hostile peer of the source (ifunc_hostile_peer "reports") forges
 * reports on its own endpoint for every report id while the source awaits
 * the reports of messages to a stopped target, which then rejects them:
 * the source hears only the target's reports. */
TEST_P(Peer, ReportsCountOnlyOnTheirPeersEndpoint)
{
    unsigned port;
    auto     strict = start_target("strict target", {}, &port, 0,
                                   {"UCX_IFUNC_TRUST=signed"});
    Node     source("source", tls(),
                    {"source", "--connect", address(port), "--report",
                     "--interactive", "--listen", "127.0.0.1:0"});
    unsigned source_port = unsigned(number(source.expect("port"), "port"));
    source.expect("connected");
    kill(strict->pid(), SIGSTOP);
    source.send("send 5 8");
    source.expect("sent");
    {
        Node forger(
                "hostile", "tcp",
                {"reports", "--connect", address(source_port), "--rounds", "2"},
                {}, UCX_IFUNC_TEST_HOSTILE_PEER);
        EXPECT_EQ(1u, number(forger.expect("reports", 60), "greeted"));
        EXPECT_EQ(0, forger.wait_exit(60)) << forger.log();
    }
    kill(strict->pid(), SIGCONT);
    source.send("quit");
    Fields reports = source.expect("reports");
    EXPECT_EQ(5u, number(reports, "heard"));
    EXPECT_EQ(5u, reports_of(reports, UCS_ERR_REJECTED)) << source.log();
    EXPECT_EQ(0u, reports_of(reports, UCS_OK)) << source.log();
    EXPECT_NE(std::string::npos,
              source.log().find("name no message sent to it"))
            << source.log();
}

/* A hostile source (ifunc_hostile_peer "ask") asks for a report with each
 * of 3 000 references to code the target does not hold, then sends 3 000
 * that do not ask: each asking one is answered once, on its own endpoint,
 * with UCS_ERR_NO_ELEM; nothing else. */
TEST_P(Peer, ReportsAnswerEachAskingMessageOnce)
{
    unsigned port;
    auto     target = start_target("target", {}, &port);
    Node     asker("hostile", "tcp",
                   {"ask", "--connect", address(port), "--count", "3000"}, {},
                   UCX_IFUNC_TEST_HOSTILE_PEER);
    Fields   asked = asker.expect("ask", 120);
    EXPECT_EQ(0, asker.wait_exit(60)) << asker.log();
    EXPECT_EQ(6000u, number(asked, "sent"));
    EXPECT_EQ(3000u, number(asked, "entries"));
    EXPECT_EQ(3000u, number(asked, "once"));
    EXPECT_EQ(0u, number(asked, "twice"));
    EXPECT_EQ(0u, number(asked, "stray"));
    EXPECT_EQ(0u, number(asked, "wrong_status"));
    target->send("stop");
    EXPECT_EQ(0u, number(target->expect("result"), "executed"));
}

/* --- 5. lifecycle ----------------------------------------------------- */

/* The lines of @a log that hold @a text. */
size_t lines_with(const std::string &log, const std::string &text)
{
    size_t             count = 0;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
        count += (line.find(text) != std::string::npos);
    }
    return count;
}

/* How long ucp_ifunc_worker_destroy took, from the target's "destroyed"
 * line (ms). */
uint64_t destroyed_ms(Node &target)
{
    return number(target.expect("destroyed"), "ms");
}

/* Tells @a target to stop and checks that it destroyed its worker in
 * under 5 s and exited cleanly. */
void expect_stopped_in_time(Node &target)
{
    target.send("stop");
    target.expect("result");
    uint64_t ms = destroyed_ms(target);
    std::printf("    destroyed in %llu ms\n", (unsigned long long)ms);
    EXPECT_LT(ms, 5000u);
    EXPECT_EQ(0, target.wait_exit());
}

TEST_P(Peer, DestroyNeverProgressedWithConnectionsWaiting)
{
    /* The target never progresses its worker: the connection requests of
     * two sources wait in UCX (its callbacks run in progress only), then
     * the worker is destroyed under them. */
    unsigned port;
    auto     target = start_target("target", {"--idle"}, &port);
    Node     first("first source", tls(),
                   {"source", "--connect", address(port), "--send", "1:8"});
    Node     second("second source", tls(),
                    {"source", "--connect", address(port), "--send", "1:8"});
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    target->send("stop");
    Fields result = target->expect("result");
    EXPECT_EQ(0u, number(result, "executed"));
    EXPECT_EQ(0u, number(result, "new"));
    EXPECT_LT(destroyed_ms(*target), 5000u);
    EXPECT_EQ(0, target->wait_exit());
}

TEST_P(Peer, DestroyWhilePeersConnect)
{
    /* Eight connections past the target's hello that never answer (set-up
     * half done), then, with the target no longer progressing, eight more
     * whose requests wait in UCX and a source mid-connect: the worker is
     * destroyed under all of them. */
    unsigned    port;
    auto        target  = start_target("target", {}, &port, 0,
                                       {"UCX_IFUNC_PEER_PENDING_PER_ADDRESS=64"});
    std::string hostile = UCX_IFUNC_TEST_HOSTILE_PEER;
    Node        half("half set up", "tcp",
                     {"silent", "--connect", address(port), "--peers", "8", "--hold",
                      "10"},
                     {}, hostile);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    target->send("hold");
    target->expect("holding");
    Node waiting("waiting", "tcp",
                 {"silent", "--connect", address(port), "--peers", "8",
                  "--hold", "10"},
                 {}, hostile);
    Node source("source", tls(),
                {"source", "--connect", address(port), "--send", "1:8"});
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    expect_stopped_in_time(*target);
}

TEST_P(Peer, DestroyMidMessage)
{
    /* A victim streams 800 000-byte messages (rendezvous receives under
     * way at the target) and 60 000-byte ones (by channel on shared
     * memory): the target destroys its worker in the middle. The victim
     * hears a clean close, not a failure. */
    unsigned port;
    auto     target = start_target("target", {}, &port);
    Node     victim("victim", tls(),
                    {"victim", "--connect", address(port), "--stream", "1"});
    victim.expect("sending");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    expect_stopped_in_time(*target);
    EXPECT_EQ(std::to_string(int(UCP_IFUNC_PEER_CLOSED)),
              victim.expect("send_error", 30)["code"])
            << victim.log();
}

TEST_P(Peer, CleanCloseIsToldFromACrash)
{
    /* One source closes its peer, one destroys its worker without
     * closing, one is killed: the target's peer_cb hears
     * UCP_IFUNC_PEER_CLOSED for the first two, after every message they
     * sent ran, and a failure for the third. */
    unsigned          port;
    auto              target = start_target("target",
                                            {"--check", "0:300", "--check", "1:300"}, &port);
    const std::string closed = std::to_string(int(UCP_IFUNC_PEER_CLOSED));
    for (const char *stream : {"0", "1"}) {
        std::vector<std::string> args = {"source",   "--connect", address(port),
                                         "--stream", stream,      "--send",
                                         "300:8"};
        if (stream[0] == '1') {
            args.push_back("--no-close");
        }
        Node source(std::string("source ") + stream, tls(), args);
        source.expect("closed");
        EXPECT_EQ(0, source.wait_exit());
        Fields failed = target->expect("failed");
        EXPECT_EQ(closed, failed["code"]) << "stream " << stream;
        EXPECT_EQ("1", failed["closed"]);
    }
    Node victim("victim", tls(),
                {"victim", "--connect", address(port), "--stream", "2"});
    victim.expect("sending");
    victim.kill9();
    Fields failed = target->expect("failed");
    EXPECT_NE(closed, failed["code"]);
    EXPECT_EQ("0", failed["closed"]);
    target->send("stop");
    Fields result = target->expect("result");
    EXPECT_EQ(0u, number(result, "missing")); /* every message of 0 and 1 */
    EXPECT_EQ(0u, number(result, "corrupt"));
    EXPECT_EQ(0u, number(result, "duplicate"));
    EXPECT_EQ(300u, streams(result)[0]);
    EXPECT_EQ(300u, streams(result)[1]);
    target->expect("destroyed");
    EXPECT_EQ(0, target->wait_exit());
}

/* A source closes its peer (or, with @a destroy, destroys its worker
 * without closing it) while the target does not progress: sends wait in
 * its queue (on shared memory, behind the full channel) or are in flight
 * (over TCP, 4 MiB ones with callbacks: more than loopback's socket
 * buffers hold, so some wait whatever protocol UCX picks; UCX 1.22 sends
 * 256 KiB ones eagerly to a target without TCP puts, and they all left).
 * One line
 * says how many were lost; each callback heard UCS_ERR_CANCELED; none of
 * the lost ran. */
void expect_lost_counted_once(const std::string &tls, unsigned port,
                              Node &target, bool destroy)
{
    /* The peer's timeout bounds its connect too: room for a loaded
     * machine or a sanitizer's build. */
    std::vector<std::string> args = {
            "source",     "--connect",      address(port), "--interactive",
            "--callback", "--peer-timeout", "1000"};
    if (destroy) {
        args.push_back("--no-close");
    }
    Node source("source", tls, args);
    source.expect("connected");
    /* The target holds the code from now on (and the source knows it):
     * references, by callback where they do not fit a slot. */
    source.send("send 50 8");
    source.expect("sent");
    source.send("send 2 262144");
    source.expect("sent");
    target.send("hold");
    target.expect("holding");
    source.send("post 10 4194304");
    source.expect("posted");
    source.send("post 300 8");
    source.expect("posted");
    source.send("close");
    Fields   closing = source.expect("closing");
    Fields   closed  = source.expect("closed");
    uint64_t waiting = number(closing, "queued") + number(closing, "pending");
    EXPECT_EQ(0, source.wait_exit());
    const std::string what =
            destroy ? "ucp_ifunc_worker_destroy: " : "ucp_ifunc_peer_close: ";
    EXPECT_EQ(1u, lines_with(source.log(), "were not delivered"))
            << source.log();
    size_t at = source.log().find(what);
    ASSERT_NE(std::string::npos, at) << source.log();
    uint64_t lost = std::stoull(source.log().substr(at + what.size()));
    EXPECT_GE(lost, waiting);
    EXPECT_GT(lost, 0u);
    EXPECT_EQ(number(closing, "pending"), number(closed, "canceled"));
    EXPECT_EQ(0u, number(closed, "other_errors"));
    EXPECT_EQ(0u, number(closed, "pending"));
    /* What reached the target runs once it progresses again. */
    for (int i = 0; i < 50; ++i) {
        target.send("report");
        if (number(target.expect("report"), "executed") + lost >= 362) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    target.send("stop");
    Fields result = target.expect("result");
    /* 362 sent: what was lost did not run. */
    EXPECT_LE(number(result, "executed") + lost, 362u);
    EXPECT_EQ(0u, number(result, "duplicate"));
    std::printf("    %llu lost (%llu queued, %llu pending), %llu ran\n",
                (unsigned long long)lost,
                (unsigned long long)number(closing, "queued"),
                (unsigned long long)number(closing, "pending"),
                (unsigned long long)number(result, "executed"));
}

TEST_P(Peer, SendsLostAtCloseAreCountedOnce)
{
    unsigned port;
    auto     target = start_target("target", {}, &port);
    expect_lost_counted_once(tls(), port, *target, false);
    target->expect("destroyed");
    EXPECT_EQ(0, target->wait_exit());
}

TEST_P(Peer, SendsLostAtDestroyAreCountedOnce)
{
    unsigned port;
    auto     target = start_target("target", {}, &port);
    expect_lost_counted_once(tls(), port, *target, true);
    target->expect("destroyed");
    EXPECT_EQ(0, target->wait_exit());
}

/* --- code registered from images (ucp_ifunc_code_register) ----------- */

TEST_P(Peer, CodeFromImagesRunsAsTheLibrarys)
{
    /* The source registers pattern from the images of pattern.so, which
     * it closes again; the target, which holds pattern.so, runs it under
     * its default policy: the code ids are the library's. Small payloads
     * by channel on shared memory, large ones by active message. */
    unsigned port;
    auto     target = start_target("target", {"--expect", "0:210"}, &port, 0,
                                   {"UCX_IFUNC_PEER_SLOT_SIZE=128KB"});
    Node     source("source", tls(),
                    {"source", "--connect", address(port), "--from-images",
                     "--report", "--send", "200:8", "--send", "10:200000"});
    EXPECT_LE(1u, number(source.expect("images"), "count"));
    Fields reports = source.expect("reports");
    EXPECT_EQ(210u, number(reports, "heard"));
    EXPECT_EQ(210u, reports_of(reports, UCS_OK)) << source.log();
    Fields r = source.expect("result");
    EXPECT_EQ(210u, number(r, "sent"));
    EXPECT_GE(number(r, "with_code"), 1u);
    EXPECT_GT(number(r, "by_ref"), 100u);
    Fields result = target->expect("result");
    expect_clean(result);
    EXPECT_EQ(210u, number(result, "executed"));
}

TEST_P(Peer, UnsignedCodeFromImagesIsRefusedWhereSignedIsRequired)
{
    unsigned port;
    auto     strict = start_target("strict target", {}, &port, 0,
                                   {"UCX_IFUNC_TRUST=signed"});
    Node     source("source", tls(),
                    {"source", "--connect", address(port), "--from-images",
                     "--report", "--send", "5:8"});
    Fields   reports = source.expect("reports");
    EXPECT_EQ(5u, number(reports, "heard"));
    EXPECT_EQ(5u, reports_of(reports, UCS_ERR_REJECTED)) << source.log();
    strict->send("stop");
    EXPECT_EQ(0u, number(strict->expect("result"), "executed"));
}

INSTANTIATE_TEST_SUITE_P(Transports, Peer, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
