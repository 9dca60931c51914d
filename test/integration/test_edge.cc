/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The network edge of the default path: a keyless network peer
 * (test/peer/ifunc_hostile_peer, over TCP) against a target that listens
 * (test/peer/ifunc_peer_node, and the README's examples/hello target):
 * puts with its own key, forged set-up messages, messages for other
 * peers' tokens, a host it only declares, connections that never set up,
 * a flood of malformed set-up messages; and peers that must prove a key
 * (UCX_IFUNC_PEER_KEYS): the right key, a wrong one, a replayed proof, a
 * silent peer. Each test then checks that the target is alive, what it
 * holds (memory, descriptors, System V segments, a canary) and that a
 * legitimate source's messages all run. Last, requests answered in one
 * call (UCP_IFUNC_PEER_SOURCE), with and without keys, to a source that
 * closed, and a hostile peer that tries to send its answer elsewhere.
 */
#include "node.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <fstream>

namespace test {
namespace {

/* A peer's ring with the default UCX_IFUNC_PEER_SLOTS and _SLOT_SIZE. */
constexpr long kRingKib = 16 * 1028;

std::string hostile_program()
{
    return UCX_IFUNC_TEST_HOSTILE_PEER;
}

std::string key_file(const std::string &name)
{
    return std::string(UCX_IFUNC_TEST_KEY_DIR) + "/" + name;
}

/* What /proc says of process @a pid. */
long vm_size_kib(pid_t pid)
{
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("VmSize:", 0) == 0) {
            return std::stol(line.substr(7));
        }
    }
    return -1;
}

size_t open_fds(pid_t pid)
{
    size_t count = 0;
    DIR   *dir   = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
    if (dir != nullptr) {
        while (readdir(dir) != nullptr) {
            ++count;
        }
        closedir(dir);
    }
    return count;
}

/* System V segments process @a pid created. */
size_t sysv_segments(pid_t pid)
{
    std::ifstream shm("/proc/sysvipc/shm");
    std::string   line;
    std::getline(shm, line); /* the header: key shmid perms size cpid ... */
    size_t count = 0;
    while (std::getline(shm, line)) {
        std::istringstream words(line);
        std::string        key, shmid, perms, size, cpid;
        words >> key >> shmid >> perms >> size >> cpid;
        count += (cpid == std::to_string(pid));
    }
    return count;
}

/* A TCP port nothing listens on now. */
unsigned free_port()
{
    int         fd   = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = {};
    addr.sin_family  = AF_INET;
    socklen_t len    = sizeof(addr);
    bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
    getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
}

class Edge : public ::testing::TestWithParam<std::string> {
protected:
    /* Every process of these tests, the hostile peer's too, uses the
     * loopback device alone: the attacks go to this host's 127.0.0.1,
     * never to another address of it. */
    void SetUp() override
    {
        alarm(300);
        const char *devices = getenv("UCX_NET_DEVICES");
        saved_devices_      = devices ? devices : "";
        had_devices_        = (devices != nullptr);
        setenv("UCX_NET_DEVICES", "lo", 1);
    }
    void TearDown() override
    {
        if (had_devices_) {
            setenv("UCX_NET_DEVICES", saved_devices_.c_str(), 1);
        } else {
            unsetenv("UCX_NET_DEVICES");
        }
        alarm(0);
    }

    std::string tls() const { return tls_of(GetParam()); }
    std::string expected_path() const
    {
        return (GetParam() == "sm") ? "channel" : "am";
    }

    /* The target node, listening on 127.0.0.1; reads its port and the
     * address of its canary. */
    std::unique_ptr<Node> start_target(std::vector<std::string> env = {})
    {
        auto node = std::make_unique<Node>(
                "target", tls(),
                std::vector<std::string>{"target", "--listen", "127.0.0.1:0",
                                         "--timeout", "200"},
                env);
        port_   = unsigned(number(node->expect("port", 60), "port"));
        canary_ = node->expect("canary", 10).at("addr");
        return node;
    }

    std::string target_address() const { return address(port_); }

    /* Runs the hostile peer (over TCP: a network peer) in @a mode against
     * the target; the fields of its line. */
    Fields hostile(const std::string &mode, std::vector<std::string> args = {},
                   double timeout = 60)
    {
        args.insert(args.begin(), {mode, "--connect", target_address()});
        Node   node("hostile", "tcp", args, {}, hostile_program());
        Fields fields = node.expect(mode, timeout);
        EXPECT_EQ(0, node.wait_exit(timeout)) << node.log();
        return fields;
    }

    /* The target's report: it answers, so it is alive. */
    static Fields report(Node &target)
    {
        target.send("report");
        return target.expect("report", 30);
    }

    /* A legitimate source on @a tls_used sends @a count messages on
     * stream 0: true if it connected on the expected path, sent them all,
     * and the target ran every one (@a ran_before ran before). */
    void expect_source_served(Node &target, uint64_t count,
                              std::vector<std::string> env        = {},
                              uint64_t                 ran_before = 0)
    {
        Node   source("source", tls(),
                      {"source", "--connect", target_address(), "--stream", "0",
                       "--send", std::to_string(count) + ":64"},
                      env);
        Fields connected = source.expect("connected", 60);
        EXPECT_EQ(expected_path(), connected["path"]);
        source.expect("result", 60);
        uint64_t ran = 0;
        for (int i = 0; (i < 200) && (ran < ran_before + count); ++i) {
            ran = number(report(target), "stream0");
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        EXPECT_EQ(ran_before + count, ran);
    }

    /* A source (with @a env) sends whosent.so's code once; what that code
     * left in the target's ifunc_test_source. */
    std::string ran_whosent(Node &target, std::vector<std::string> env = {})
    {
        Node source("whosent", tls(),
                    {"source", "--connect", target_address(), "--stream", "0",
                     "--ifunc", "whosent", "--send", "1:8"},
                    env);
        source.expect("result", 60);
        std::string value = "-1";
        for (int i = 0; (i < 100) && (value == "-1"); ++i) {
            value = report(target)["source"];
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return value;
    }

    /* The first byte of an ucx-ifunc-keygen public key file's key. */
    static unsigned public_key_byte0(const std::string &name)
    {
        std::ifstream file(key_file(name));
        std::string   tag, hex;
        file >> tag >> hex;
        return unsigned(std::stoul(hex.substr(0, 2), nullptr, 16));
    }

    /* One line of what a test measured, for docs/security.md. */
    static void measured(const char *what, long vm_before, Node &target,
                         size_t segments)
    {
        std::printf("measured: %s: VmSize %+ld KiB, System V segments %zu "
                    "-> %zu\n",
                    what, vm_size_kib(target.pid()) - vm_before, segments,
                    sysv_segments(target.pid()));
    }

    static size_t count_lines(const std::string &log, const std::string &text)
    {
        size_t             count = 0;
        std::istringstream lines(log);
        for (std::string line; std::getline(lines, line);) {
            count += (line.find(text) != std::string::npos);
        }
        return count;
    }

    unsigned    port_ = 0;
    std::string canary_;
    std::string saved_devices_;
    bool        had_devices_ = false;
};

/* Finding 1: a UCP put with the attacker's own key, to the canary and to
 * a made-up address. UCP carries it over TCP as a software put, whose
 * handler the ifunc worker's network context (active messages only) does
 * not have: nothing is written, the target lives. */
TEST_P(Edge, KeylessPutsWriteNothing)
{
    auto target = start_target();
    for (const std::string &addr : {canary_.substr(2), std::string("10")}) {
        Fields put = hostile("put", {"--addr", addr, "--timeout", "1"});
        EXPECT_EQ("Success", put["status"]); /* posted, never carried out */
    }
    Fields r = report(*target);
    EXPECT_EQ("5afe5afe5afe5afe", r["canary"]);
    expect_source_served(*target, 50);
}

/* Finding 1 against the README's target (examples/hello): a put to a
 * made-up address crashed it. */
TEST_P(Edge, ReadmeTargetSurvivesAKeylessPut)
{
    std::string dir = std::string(UCX_IFUNC_TEST_EXAMPLES_DIR) + "/hello";
    port_           = free_port();
    Node target("hello_target", tls(), {std::to_string(port_)},
                {"UCX_IFUNC_TRUSTED_KEYS=" + dir + "/demo.pub"},
                dir + "/hello_target");
    target.expect("hello_target:", 30); /* listening */
    hostile("put", {"--addr", "10", "--timeout", "1"});
    Node source("hello_source", tls(), {target_address(), "edge"},
                {"UCX_IFUNC_LIB_DIR=" + dir}, dir + "/hello_source");
    source.expect("hello_source:", 30);
    EXPECT_NE(std::string::npos, source.log().find("hello_source: Success"))
            << source.log();
    target.expect("hello_target: ifunc", 30);
    EXPECT_EQ(0, target.wait_exit(30));
}

/* Finding 2: a welcome with a random key and worker address, one whose
 * blob claims 65536 slots of 1 MiB, a made-up same-host proof, set-up
 * messages out of turn: the accepting side reads no address or key of a
 * peer, and hands out nothing (the hostile's welcome has no data). */
TEST_P(Edge, ForgedSetUpIsReadByNothing)
{
    auto target = start_target();
    /* What a first peer costs anyway (UCX's threads and buffers). */
    expect_source_served(*target, 1);
    long   vm_before = vm_size_kib(target->pid());
    size_t segments  = sysv_segments(target->pid());
    Fields forge     = hostile("forge");
    EXPECT_EQ("1", forge["greeted"]);
    EXPECT_EQ("0", forge["welcome_bytes"]);
    report(*target);
    measured("forge", vm_before, *target, segments);
    EXPECT_LT(vm_size_kib(target->pid()) - vm_before, kRingKib);
    EXPECT_EQ(segments, sysv_segments(target->pid()));
    expect_source_served(*target, 50, {}, 1);
}

/* Finding 3: set-up messages for tokens near the hostile's own and random
 * ones, while a victim connects: tokens are random and each set-up message
 * counts only on its peer's own endpoint, so every message of the victim
 * runs, on the path it should. */
TEST_P(Edge, ForeignTokensReachNoOtherPeer)
{
    auto target = start_target();
    Node attacker("hostile", "tcp",
                  {"tokens", "--connect", target_address(), "--rounds", "300"},
                  {}, hostile_program());
    expect_source_served(*target, 52);
    attacker.expect("tokens", 60);
    EXPECT_EQ(0, attacker.wait_exit(60));
    expect_source_served(*target, 52, {}, 52);
}

/* Finding 4: 30 network peers that ask for a channel and declare this host
 * (a made-up proof): none gets a channel, an address or a key, and the
 * target maps nothing for them (each took a 16 MiB ring before). */
TEST_P(Edge, DeclaredHostGetsNoChannel)
{
    auto target = start_target({"UCX_IFUNC_PEER_PENDING_PER_ADDRESS=64"});
    expect_source_served(*target, 1);
    long   vm_before = vm_size_kib(target->pid());
    size_t segments  = sysv_segments(target->pid());
    Fields declare   = hostile("declare", {"--peers", "30"}, 120);
    EXPECT_EQ("30", declare["welcomed"]);
    EXPECT_EQ("0", declare["channels_offered"]);
    EXPECT_EQ("0", declare["welcome_bytes"]);
    report(*target);
    measured("declare 30", vm_before, *target, segments);
    /* 30 rings would be 30 times kRingKib. */
    EXPECT_LT(vm_size_kib(target->pid()) - vm_before, kRingKib);
    EXPECT_EQ(segments, sysv_segments(target->pid()));
    expect_source_served(*target, 50, {}, 1);
}

/* Finding 5: 200 connections that never say hello. At most
 * UCX_IFUNC_PEER_PENDING (16 here) are set up at once, the others are
 * rejected, and those still silent after UCX_IFUNC_PEER_SETUP_TIMEOUT (2 s)
 * are dropped: every one fails, the target's descriptors come back, and a
 * source connects afterwards. */
TEST_P(Edge, SilentConnectionsAreCappedAndDropped)
{
    auto   target     = start_target({"UCX_IFUNC_PEER_PENDING=16",
                                      "UCX_IFUNC_PEER_PENDING_PER_ADDRESS=64",
                                      "UCX_IFUNC_PEER_SETUP_TIMEOUT=2s"});
    size_t fds_before = open_fds(target->pid());
    Node   attacker("hostile", "tcp",
                    {"silent", "--connect", target_address(), "--peers", "200",
                     "--hold", "30"},
                    {}, hostile_program());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    size_t fds_during = open_fds(target->pid());
    Fields silent     = attacker.expect("silent", 60);
    EXPECT_EQ(0, attacker.wait_exit(60));
    EXPECT_EQ("200", silent["failed"]);
    report(*target);
    /* The target closes a dropped connection's socket when it hears of the
     * close, which a busy host may deliver after the attacker left. */
    size_t fds_after = open_fds(target->pid());
    for (int i = 0; (i < 100) && (fds_after > fds_before + 4); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        report(*target);
        fds_after = open_fds(target->pid());
    }
    std::printf("measured: silent 200: fds %zu before, %zu during, %zu after\n",
                fds_before, fds_during, fds_after);
    EXPECT_LT(fds_during, fds_before + 16 * 4 + 32) << "during the flood";
    EXPECT_LE(fds_after, fds_before + 4) << "after it";
    expect_source_served(*target, 50);
}

/* Finding 6: 3000 malformed set-up messages (a wrong header, another
 * version) write a handful of lines, not one each. */
TEST_P(Edge, MalformedSetUpMessagesFloodNoLog)
{
    auto   target = start_target();
    Fields flood  = hostile("flood", {"--count", "3000"});
    EXPECT_EQ("3000", flood["sent"]);
    report(*target);
    std::printf("measured: flood 3000: %zu warning lines\n",
                count_lines(target->log(), "set-up message"));
    EXPECT_LE(count_lines(target->log(), "set-up message"), 4u)
            << target->log();
    expect_source_served(*target, 50);
}

/* A bye counts only on its peer's own endpoint with the token of that
 * peer: a hostile peer's byes (and bye answers) for other tokens close
 * nothing, neither its own peer nor a source sending meanwhile; its bye
 * with its own token closes its own peer, which the target's peer_cb
 * hears as a clean close. */
TEST_P(Edge, AByeClosesOnlyItsOwnPeerWithItsToken)
{
    auto   target = start_target();
    Node   attacker("hostile", "tcp",
                    {"bye", "--connect", target_address(), "--rounds", "300",
                     "--timeout", "60"},
                    {}, hostile_program());
    Fields forged = attacker.expect("bye_forged", 60);
    EXPECT_EQ("1", forged["welcomed"]);
    EXPECT_EQ("1800", forged["sent"]);
    EXPECT_EQ("0", forged["answered"]);
    Fields r = report(*target);
    EXPECT_EQ("0", r["closed"]) << target->log();
    EXPECT_EQ("0", r["failed"]) << target->log();
    EXPECT_EQ("1", r["new"]);
    expect_source_served(*target, 52);
    attacker.send("bye");
    EXPECT_EQ("1", attacker.expect("bye", 30)["answered"]);
    EXPECT_EQ(0, attacker.wait_exit(30));
    for (int i = 0; (i < 100) && (r["closed"] == "0"); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        r = report(*target);
    }
    /* The source closed too by now: two clean closes, no failure. */
    EXPECT_EQ("2", r["closed"]) << target->log();
    EXPECT_EQ("2", r["failed"]) << target->log();
}

INSTANTIATE_TEST_SUITE_P(Transports, Edge, ::testing::Values("sm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             return i.param;
                         });

/* The code of a message knows its source, and a peer that proved no key
 * is one: whosent.so finds its source with no verified key. */
TEST_P(Edge, CodeKnowsItsSourceAndThatItProvedNoKey)
{
    auto target = start_target();
    EXPECT_EQ("0", ran_whosent(*target));
}

/* Peers that must prove a key (UCX_IFUNC_PEER_KEYS). */
class Auth : public Edge {
protected:
    std::vector<std::string> target_keys() const
    {
        return {"UCX_IFUNC_PEER_KEYS=" + key_file("site.pub"),
                "UCX_IFUNC_IDENTITY_KEY=" + key_file("site.key"),
                "UCX_IFUNC_PEER_SETUP_TIMEOUT=1s"};
    }
};

TEST_P(Auth, APeerWithAListedKeyConnectsAndRuns)
{
    auto target = start_target(target_keys());
    expect_source_served(*target, 50,
                         {"UCX_IFUNC_IDENTITY_KEY=" + key_file("site.key"),
                          "UCX_IFUNC_PEER_KEYS=" + key_file("site.pub")});
    /* The target's peer_cb saw the key the source proved, and so does the
     * code its message runs (whosent.so: 1 + the key's first byte). */
    EXPECT_NE(std::string::npos, target->log().find("peer key_verified=1"))
            << target->log();
    EXPECT_EQ(std::to_string(1 + public_key_byte0("site.pub")),
              ran_whosent(*target,
                          {"UCX_IFUNC_IDENTITY_KEY=" + key_file("site.key"),
                           "UCX_IFUNC_PEER_KEYS=" + key_file("site.pub")}));
    EXPECT_EQ("1",
              hostile("prove", {"--key", key_file("site.key")})["admitted"]);
}

TEST_P(Auth, AnotherKeyIsRefusedAndNothingOfItRuns)
{
    auto target = start_target(target_keys());
    EXPECT_EQ("0",
              hostile("prove", {"--key", key_file("other.key")})["admitted"]);
    Node   source("source", tls(),
                  {"source", "--connect", target_address(), "--stream", "0",
                   "--send", "20:64"},
                  {"UCX_IFUNC_IDENTITY_KEY=" + key_file("other.key")});
    Fields failed = source.expect("connect_failed", 60);
    EXPECT_NE("Success", failed["status"]);
    Fields r = report(*target);
    EXPECT_EQ("0", r["executed"]);
    EXPECT_EQ("0", r["new"]);
}

TEST_P(Auth, AReplayedProofIsRefused)
{
    auto   target = start_target(target_keys());
    Fields replay = hostile("replay", {"--key", key_file("site.key")});
    EXPECT_EQ("1", replay["first"]);  /* its own answer */
    EXPECT_EQ("0", replay["second"]); /* the same answer again */
}

TEST_P(Auth, ASilentPeerIsDropped)
{
    auto   target = start_target(target_keys());
    Fields silent = hostile("silent", {"--peers", "1", "--hold", "3"});
    EXPECT_EQ("1", silent["failed"]);
    EXPECT_EQ("0", report(*target)["new"]);
}

INSTANTIATE_TEST_SUITE_P(Transports, Auth, ::testing::Values("sm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             return i.param;
                         });

/* Requests answered in one call: reply.so's native NAME_main answers the
 * source of its message with ucp_ifunc_peer_send_nbx(UCP_IFUNC_PEER_SOURCE,
 * ...), its payload's value incremented (test/ifuncs/reply.c). */
class Replies : public Auth {
protected:
    /* A source of reply.so's requests, connected to the target and told
     * what to send on its stdin. */
    std::unique_ptr<Node> requester(std::vector<std::string> env = {})
    {
        auto node = std::make_unique<Node>(
                "requester", tls(),
                std::vector<std::string>{"source", "--connect",
                                         target_address(), "--stream", "0",
                                         "--ifunc", "reply", "--interactive",
                                         "--timeout", "90"},
                env);
        EXPECT_EQ(expected_path(), node->expect("connected", 60)["path"]);
        return node;
    }

    /* @a count requests of @a size bytes; the source's line once all
     * answers came back. */
    static Fields round_trips(Node &source, unsigned count, size_t size)
    {
        source.send("send " + std::to_string(count) + " " +
                    std::to_string(size));
        return source.expect("replies", 60);
    }

    /* What the answers to requests 0 .. @a count - 1 add up to: each the
     * request's sequence number + 1. */
    static uint64_t answer_sum(uint64_t count)
    {
        return count * (count + 1) / 2;
    }

    static std::string status_text(ucs_status_t status)
    {
        return std::to_string(int(status));
    }
};

/* On every path: a channel (sm; payloads beyond a slot by active message)
 * or active messages (tcp: full frames, references under and over 1 KiB,
 * rendezvous), the answers come back to their source, the code knew its
 * source each time (a key field of 0, not -2), and UCP_IFUNC_PEER_SOURCE
 * outside a message answers UCS_ERR_UNREACHABLE with one line. */
TEST_P(Replies, RequestsAreAnsweredOnEveryPathAndSize)
{
    auto target = start_target();
    auto source = requester();
    EXPECT_EQ(status_text(UCS_ERR_UNREACHABLE),
              source->expect("outside", 30)["status"]);
    uint64_t total = 0;
    for (size_t size : {32, 64, 2048, 300000, 1100000}) {
        unsigned count = (size > 100000) ? 2 : 4;
        Fields   r     = round_trips(*source, count, size);
        total += count;
        EXPECT_EQ(total, number(r, "arrived")) << size;
        EXPECT_EQ(answer_sum(total), number(r, "value_sum")) << size;
        EXPECT_EQ("0", r["key"]) << size; /* known, and proved no key */
    }
    source->send("quit");
    source->expect("closed", 60);
    EXPECT_EQ(1u, count_lines(source->log(), "UCP_IFUNC_PEER_SOURCE names"))
            << source->log();
    Fields r = report(*target);
    EXPECT_EQ(total, number(r, "answered"));
    EXPECT_EQ(0u, number(r, "answer_failed"));
    EXPECT_EQ(0u, number(r, "untrusted"));
}

/* With peer keys, the code that answers sees the key its source proved
 * (ucp_ifunc_source_query), on references small and large. */
TEST_P(Replies, TheAnsweringCodeSeesTheKeyItsSourceProved)
{
    auto target = start_target(target_keys());
    auto source = requester({"UCX_IFUNC_IDENTITY_KEY=" + key_file("site.key"),
                             "UCX_IFUNC_PEER_KEYS=" + key_file("site.pub")});
    std::string key   = std::to_string(1 + public_key_byte0("site.pub"));
    uint64_t    total = 0;
    for (size_t size : {32, 2048}) {
        Fields r = round_trips(*source, 3, size);
        total += 3;
        EXPECT_EQ(total, number(r, "arrived")) << size;
        EXPECT_EQ(answer_sum(total), number(r, "value_sum")) << size;
        EXPECT_EQ(key, r["key"]) << size;
    }
    source->send("quit");
    source->expect("closed", 60);
}

/* A source that closes before the target ran its request: the target
 * runs it once it looks again, its answer is lost (sent before the target
 * saw the source go) or refused with one line, and the target goes on
 * serving others. */
TEST_P(Replies, AnAnswerToASourceThatClosedIsLostAndNothingElse)
{
    auto target = start_target();
    {
        auto source = requester();
        round_trips(*source, 1, 64);
        target->send("pause 700");
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        source->send("post 1 64");
        source->expect("posted", 30);
        source->send("quit");
        source->expect("closed", 60);
        EXPECT_EQ(0, source->wait_exit(30));
    }
    target->expect("paused", 30);
    Fields r;
    for (int i = 0; i < 100; ++i) {
        r = report(*target);
        if (number(r, "answered") + number(r, "answer_failed") >= 2) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(2u, number(r, "answered") + number(r, "answer_failed"));
    EXPECT_LE(count_lines(target->log(), "its answer is not sent"), 1u)
            << target->log();
    auto   second = requester();
    Fields again  = round_trips(*second, 3, 64);
    EXPECT_EQ(3u, number(again, "arrived"));
    EXPECT_EQ(answer_sum(3), number(again, "value_sum"));
}

/* A hostile peer's requests that try to have their answer go elsewhere: a
 * full frame with a made-up token is answered on the hostile's own
 * endpoint; one without UCX's reply flag, and a reference without it,
 * name no source and are dropped unrun. The victim, another source, gets
 * its own answers only. */
TEST_P(Replies, AHostilePeerCannotSendItsAnswerToAnotherPeer)
{
    auto   target = start_target();
    auto   victim = requester();
    Fields before = round_trips(*victim, 1, 64);
    EXPECT_EQ(1u, number(before, "arrived"));
    Fields h = hostile("redirect");
    EXPECT_EQ("3", h["sent"]);
    EXPECT_EQ("1", h["index_known"]);
    EXPECT_EQ("1", h["answers"]);
    EXPECT_EQ("0", h["elsewhere"]);
    Fields after = round_trips(*victim, 1, 64);
    EXPECT_EQ(2u, number(after, "arrived"));
    EXPECT_EQ(answer_sum(2), number(after, "value_sum"));
    Fields r = report(*target);
    EXPECT_EQ(3u, number(r, "answered")); /* the victim's 2, its 1 */
    EXPECT_EQ(2u, number(r, "untrusted"));
    victim->send("quit");
    victim->expect("closed", 60);
}

INSTANTIATE_TEST_SUITE_P(Transports, Replies, ::testing::Values("sm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             return i.param;
                         });

} // namespace
} // namespace test
