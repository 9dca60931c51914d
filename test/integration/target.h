/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The test process is the target: it maps a buffer, starts a source peer
 * process (test/peer) connected through real UCX over the transport under
 * test, and polls the buffer with ucp_poll_ifunc while it progresses its
 * worker. The peer does what the test asks over the OOB channel.
 */
#ifndef UCX_IFUNC_TEST_TARGET_H_
#define UCX_IFUNC_TEST_TARGET_H_

#include "../common/protocol.h"
#include "../../tools/common/ucx.h"

#include <ucp/api/ucp_ifunc.h>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace test {

/* The tests use the shared UCX helpers unqualified. */
using namespace ucx_util;

/* Directory of the test ifunc libraries, and the peer program. */
std::string ifunc_lib_dir();
std::string source_peer_path();

/* Where source peers load the test ifunc libraries from: a peer of another
 * ISA (test/cross/run.sh) loads its own ISA's build of them
 * ($IFUNC_TEST_PEER_LIB_DIR); by default the target's. */
std::string peer_ifunc_lib_dir();

/* The command line that starts a source peer: $IFUNC_TEST_PEER_WRAPPER
 * split at blanks (an emulator, say "qemu-aarch64"), then the peer. */
std::vector<std::string> source_peer_command();

class Target {
public:
    static constexpr size_t kBufferSize = 4ul << 20;

    /* Starts a peer over UCX_TLS=@a tls; the peer finds libraries in
     * @a peer_lib_dir (default: the peer's test libraries). */
    explicit Target(const std::string &tls,
                    const std::string &peer_lib_dir = peer_ifunc_lib_dir(),
                    uint64_t           features     = UCP_FEATURE_RMA);
    ~Target();
    Target(const Target &)            = delete;
    Target &operator=(const Target &) = delete;

    ucp_context_h context() const { return context_->get(); }
    Worker       &worker() { return *worker_; }
    char         *buffer() const { return memory_->address(); }
    size_t        buffer_size() const { return memory_->size(); }

    /* One request to the peer; progresses this worker until the reply. */
    Reply call(const Request &req, const void *data = nullptr, size_t size = 0,
               std::vector<char> *reply_data = nullptr, double timeout = 60);

    /* Starts another source peer (the first starts with the target);
     * returns its index for the calls below. */
    size_t add_peer();

    /* Kills peer @a peer with SIGKILL, as a crash would, and reaps it; the
     * target is not told. */
    void kill_peer(size_t peer);

    /* Sends signal @a sig (SIGSTOP, SIGCONT) to peer @a peer. */
    void signal_peer(size_t peer, int sig);

    /* One request to peer @a peer; calls @a poll in the loop that waits for
     * the reply (a target that must take messages meanwhile). */
    Reply call_polling(size_t peer, const Request &req, const void *data,
                       size_t size, const std::function<void()> &poll,
                       double timeout = 600);

    /* Sends a request to peer @a peer without waiting; collect the reply
     * with reply_ready() / take_reply(). */
    void  send_request(size_t peer, const Request &req,
                       const void *data = nullptr, size_t size = 0);
    bool  reply_ready(size_t peer);
    Reply take_reply(size_t peer);

    /* Shortcuts for common requests. */
    uint32_t register_ifunc(const std::string &name);
    /* With @a remote_size, the peer sends with ucp_ifunc_send_nbx naming
     * its worker and that size; else with ucp_ifunc_send_nbix. @a flags:
     * SendFlags. */
    Reply send(uint32_t handle, size_t offset, const void *args = nullptr,
               size_t args_size = 0, size_t remote_size = 0,
               uint16_t machine = 0, uint32_t flags = 0);
    std::vector<char> get_frame(uint32_t handle, const void *args,
                                size_t args_size);
    Reply             put_raw(size_t offset, const void *data, size_t size);

    ucs_status_t poll(size_t offset, size_t size, void *target_args)
    {
        return ucp_poll_ifunc(context(), buffer() + offset, size, target_args);
    }

    /* Progresses and polls until a poll returns something other than
     * UCS_ERR_NO_MESSAGE; UCS_ERR_TIMED_OUT if nothing came. */
    ucs_status_t poll_until_result(size_t offset, size_t size,
                                   void *target_args, double timeout = 30);

    /* Progresses and polls for @a seconds; returns every result other than
     * UCS_ERR_NO_MESSAGE that polling gave. */
    std::vector<ucs_status_t> poll_for(double seconds, size_t offset,
                                       size_t size, void *target_args);

    /* Asks the peer to stream a stress run (see test/peer) and consumes
     * it from a ring of @a slots slots; returns the peer's reply. */
    Reply stress(uint32_t handle, uint64_t count, uint64_t seed, size_t slots,
                 size_t slot_size, void *target_args,
                 std::vector<ucs_status_t> *errors, uint32_t flags = 0);

private:
    struct Peer {
        OobChannel oob;
        pid_t      pid = -1;
    };

    void spawn_peer(const std::string &peer_lib_dir);
    void stop_peer(Peer &peer);

    std::unique_ptr<Context> context_;
    std::unique_ptr<Worker>  worker_;
    std::unique_ptr<Memory>  memory_;
    std::string              peer_lib_dir_;
    std::vector<Peer>        peers_; /* peers_[0] serves call() */
};

/* A count from the environment variable @a name, or @a fallback. */
uint64_t env_count(const char *name, uint64_t fallback);

/* A temporary empty directory (a target's UCX_IFUNC_LIB_DIR without
 * libraries), removed with the object. */
class EmptyDir {
public:
    EmptyDir();
    ~EmptyDir();
    EmptyDir(const EmptyDir &)            = delete;
    EmptyDir &operator=(const EmptyDir &) = delete;

    const std::string &path() const { return path_; }

private:
    std::string path_;
};

/* Sets an environment variable for the life of the object. */
class ScopedEnv {
public:
    /* An empty @a value unsets the variable. */
    ScopedEnv(const char *name, const char *value);
    ~ScopedEnv();
    ScopedEnv(const ScopedEnv &)            = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    const char *name_;
    bool        had_value_;
    std::string before_;
};

/* Tests parameterised by transport: "sm" or "tcp". */
class TransportTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override;
    void TearDown() override;

    std::unique_ptr<Target> target_;
};

std::string transport_name(const ::testing::TestParamInfo<std::string> &info);

} // namespace test

#endif
