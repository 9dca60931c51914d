/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "target.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace test {

namespace {

/* A test that hangs is killed by this alarm instead of hanging the suite. */
constexpr unsigned kTestWatchdogSeconds = 600;

std::string env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);
    return (value && *value) ? value : fallback;
}

} // namespace

std::string ifunc_lib_dir()
{
    return env_or("IFUNC_TEST_LIB_DIR", UCX_IFUNC_TEST_LIB_DIR);
}

std::string source_peer_path()
{
    return env_or("IFUNC_TEST_PEER", UCX_IFUNC_TEST_PEER);
}

std::string peer_ifunc_lib_dir()
{
    return env_or("IFUNC_TEST_PEER_LIB_DIR", ifunc_lib_dir().c_str());
}

namespace {

/* @a program as execv() needs it: a name without a slash is looked up in
 * PATH here, since execvp() may allocate, which a forked child of a process
 * with other threads must not. */
std::string executable_path(const std::string &program)
{
    if (program.find('/') != std::string::npos) {
        return program;
    }
    std::istringstream dirs(env_or("PATH", "/usr/bin:/bin"));
    for (std::string dir; std::getline(dirs, dir, ':');) {
        std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
        if (access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
    }
    throw std::runtime_error(program + " not found in PATH");
}

} // namespace

std::vector<std::string> source_peer_command()
{
    std::vector<std::string> command;
    std::istringstream       wrapper(env_or("IFUNC_TEST_PEER_WRAPPER", ""));
    for (std::string word; wrapper >> word;) {
        command.push_back(word);
    }
    command.push_back(source_peer_path());
    command[0] = executable_path(command[0]);
    return command;
}

Target::Target(const std::string &tls, const std::string &peer_lib_dir,
               uint64_t features)
{
    alarm(kTestWatchdogSeconds);
    setenv("UCX_TLS", tls.c_str(), 1);
    setenv("UCX_IFUNC_LIB_DIR", ifunc_lib_dir().c_str(), 1);
    context_      = std::make_unique<Context>(features);
    worker_       = std::make_unique<Worker>(context_->get());
    memory_       = std::make_unique<Memory>(context_->get(), kBufferSize);
    peer_lib_dir_ = peer_lib_dir;
    add_peer();
}

size_t Target::add_peer()
{
    spawn_peer(peer_lib_dir_);
    OobChannel &oob      = peers_.back().oob;
    auto        deadline = deadline_in(30);
    oob.send(worker_->address());
    TargetInfo info     = {};
    info.buffer_address = reinterpret_cast<uint64_t>(buffer());
    info.buffer_size    = buffer_size();
    info.machine        = own_elf_machine();
    oob.send(pack(info));
    oob.send(memory_->packed_rkey());
    while (!oob.readable()) {
        worker_->progress();
        if (Clock::now() > deadline) {
            throw std::runtime_error("source peer did not start");
        }
    }
    auto ready = unpack<Reply>(oob.recv(deadline));
    check(ucs_status_t(ready.status), "source peer setup");
    return peers_.size() - 1;
}

void Target::kill_peer(size_t peer)
{
    Peer &victim = peers_.at(peer);
    kill(victim.pid, SIGKILL);
    waitpid(victim.pid, nullptr, 0);
    victim.pid = -1;
}

void Target::signal_peer(size_t peer, int sig)
{
    kill(peers_.at(peer).pid, sig);
}

Target::~Target()
{
    for (Peer &peer : peers_) {
        stop_peer(peer);
    }
    alarm(0);
}

void Target::spawn_peer(const std::string &peer_lib_dir)
{
    /* The argument vector is built before fork: the child may only make
     * async-signal-safe calls until exec. */
    std::vector<std::string> command = source_peer_command();
    int                      fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        throw std::runtime_error("socketpair failed");
    }
    command.push_back("--oob-fd");
    command.push_back(std::to_string(fds[1]));
    std::vector<char *> argv;
    for (std::string &word : command) {
        argv.push_back(word.data());
    }
    argv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        fcntl(fds[1], F_SETFD, 0);
        setenv("UCX_IFUNC_LIB_DIR", peer_lib_dir.c_str(), 1);
        execv(argv[0], argv.data());
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        throw std::runtime_error("fork failed");
    }
    peers_.emplace_back();
    peers_.back().pid = pid;
    peers_.back().oob = OobChannel(fds[0]);
}

void Target::stop_peer(Peer &peer)
{
    if (peer.pid < 0) {
        return;
    }
    try {
        Request req{};
        req.op = Op::quit;
        call_polling(
                size_t(&peer - peers_.data()), req, nullptr, 0, [] {}, 10);
    } catch (const std::exception &e) {
        ADD_FAILURE() << "source peer did not quit cleanly: " << e.what();
    }
    int  status = 0;
    auto until  = deadline_in(10);
    while (waitpid(peer.pid, &status, WNOHANG) == 0) {
        if (Clock::now() > until) {
            kill(peer.pid, SIGKILL);
            waitpid(peer.pid, &status, 0);
            ADD_FAILURE() << "source peer killed after not exiting";
            break;
        }
        worker_->progress();
    }
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0))
            << "source peer exit status " << status;
    peer.pid = -1;
}

Reply Target::call(const Request &req, const void *data, size_t size,
                   std::vector<char> *reply_data, double timeout)
{
    OobChannel &oob      = peers_[0].oob;
    auto        deadline = deadline_in(timeout);
    oob.send(pack(req, data, size));
    while (!oob.readable()) {
        worker_->progress(); /* over TCP, puts land while we progress */
        if (Clock::now() > deadline) {
            throw std::runtime_error("source peer did not reply in time");
        }
    }
    return unpack<Reply>(oob.recv(deadline), reply_data);
}

void Target::send_request(size_t peer, const Request &req, const void *data,
                          size_t size)
{
    peers_.at(peer).oob.send(pack(req, data, size));
}

bool Target::reply_ready(size_t peer)
{
    return peers_.at(peer).oob.readable();
}

Reply Target::take_reply(size_t peer)
{
    return unpack<Reply>(peers_.at(peer).oob.recv(deadline_in(60)));
}

Reply Target::call_polling(size_t peer, const Request &req, const void *data,
                           size_t size, const std::function<void()> &poll,
                           double timeout)
{
    auto deadline = deadline_in(timeout);
    send_request(peer, req, data, size);
    while (!reply_ready(peer)) {
        worker_->progress();
        poll();
        if (Clock::now() > deadline) {
            throw std::runtime_error("source peer did not reply in time");
        }
    }
    return take_reply(peer);
}

uint32_t Target::register_ifunc(const std::string &name)
{
    Request req{};
    req.op = Op::register_ifunc;
    snprintf(req.name, sizeof(req.name), "%s", name.c_str());
    Reply reply = call(req);
    check(ucs_status_t(reply.status), ("register " + name).c_str());
    return uint32_t(reply.value);
}

Reply Target::send(uint32_t handle, size_t offset, const void *args,
                   size_t args_size, size_t remote_size, uint16_t machine,
                   uint32_t flags)
{
    Request req{};
    req.op        = Op::send;
    req.flags     = flags;
    req.handle    = handle;
    req.offset    = offset;
    req.slot_size = remote_size;
    req.reserved  = machine;
    return call(req, args, args_size);
}

std::vector<char> Target::get_frame(uint32_t handle, const void *args,
                                    size_t args_size)
{
    Request req{};
    req.op     = Op::get_frame;
    req.handle = handle;
    std::vector<char> frame;
    check(ucs_status_t(call(req, args, args_size, &frame).status), "get_frame");
    return frame;
}

Reply Target::put_raw(size_t offset, const void *data, size_t size)
{
    Request req{};
    req.op     = Op::put_raw;
    req.offset = offset;
    return call(req, data, size);
}

ucs_status_t Target::poll_until_result(size_t offset, size_t size,
                                       void *target_args, double timeout)
{
    auto deadline = deadline_in(timeout);
    for (;;) {
        worker_->progress();
        ucs_status_t status = poll(offset, size, target_args);
        if (status != UCS_ERR_NO_MESSAGE) {
            return status;
        }
        if (Clock::now() > deadline) {
            return UCS_ERR_TIMED_OUT;
        }
    }
}

std::vector<ucs_status_t> Target::poll_for(double seconds, size_t offset,
                                           size_t size, void *target_args)
{
    std::vector<ucs_status_t> results;
    auto                      until = deadline_in(seconds);
    while (Clock::now() < until) {
        worker_->progress();
        ucs_status_t status = poll(offset, size, target_args);
        if (status != UCS_ERR_NO_MESSAGE) {
            results.push_back(status);
        }
    }
    return results;
}

Reply Target::stress(uint32_t handle, uint64_t count, uint64_t seed,
                     size_t slots, size_t slot_size, void *target_args,
                     std::vector<ucs_status_t> *errors, uint32_t flags)
{
    Request req{};
    req.op          = Op::stress;
    req.flags       = flags;
    req.handle      = handle;
    req.count       = count;
    req.seed        = seed;
    req.slots       = slots;
    req.slot_size   = slot_size;
    OobChannel &oob = peers_[0].oob;
    oob.send(pack(req));

    /* Slots are consumed in order; every executed frame returns a credit. */
    auto     deadline = deadline_in(600);
    uint64_t consumed = 0;
    while (!oob.readable()) {
        worker_->progress();
        ucs_status_t status =
                poll((consumed % slots) * slot_size, slot_size, target_args);
        if (status != UCS_ERR_NO_MESSAGE) {
            if (status != UCS_OK) {
                errors->push_back(status);
            }
            ++consumed;
            oob.send(&consumed, sizeof(consumed));
        }
        if (Clock::now() > deadline) {
            throw std::runtime_error("stress run timed out");
        }
    }
    return unpack<Reply>(oob.recv(deadline));
}

uint64_t env_count(const char *name, uint64_t fallback)
{
    const char *value = getenv(name);
    return (value && *value) ? strtoull(value, nullptr, 10) : fallback;
}

EmptyDir::EmptyDir()
{
    char templ[] = "/tmp/ucx-ifunc-test-XXXXXX";
    if (mkdtemp(templ) == nullptr) {
        throw std::runtime_error("mkdtemp failed");
    }
    path_ = templ;
}

EmptyDir::~EmptyDir()
{
    rmdir(path_.c_str());
}

ScopedEnv::ScopedEnv(const char *name, const char *value) : name_(name)
{
    const char *before = getenv(name);
    had_value_         = (before != nullptr);
    before_            = had_value_ ? before : "";
    if (*value) {
        setenv(name, value, 1);
    } else {
        unsetenv(name);
    }
}

ScopedEnv::~ScopedEnv()
{
    if (had_value_) {
        setenv(name_, before_.c_str(), 1);
    } else {
        unsetenv(name_);
    }
}

void TransportTest::SetUp()
{
    target_ = std::make_unique<Target>(GetParam());
}

void TransportTest::TearDown()
{
    target_.reset();
}

std::string transport_name(const ::testing::TestParamInfo<std::string> &info)
{
    return info.param;
}

} // namespace test
