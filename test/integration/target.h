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

#include <string>
#include <sys/types.h>
#include <vector>

namespace test {

/* The tests use the shared UCX helpers unqualified. */
using namespace ucx_util;

/* Directory of the test ifunc libraries, and the peer program. */
std::string ifunc_lib_dir();
std::string source_peer_path();

class Target {
public:
    static constexpr size_t kBufferSize = 4ul << 20;

    /* Starts a peer over UCX_TLS=@a tls; the peer finds libraries in
     * @a peer_lib_dir (default: the test libraries). */
    explicit Target(const std::string &tls,
                    const std::string &peer_lib_dir = ifunc_lib_dir());
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

    /* Shortcuts for common requests. */
    uint32_t register_ifunc(const std::string &name);
    /* With @a remote_size, the peer sends with ucp_ifunc_send_nbx naming
     * its worker and that size; else with ucp_ifunc_send_nbix. */
    Reply send(uint32_t handle, size_t offset, const void *args = nullptr,
               size_t args_size = 0, size_t remote_size = 0);
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
    void spawn_peer(const std::string &peer_lib_dir);
    void stop_peer();

    std::unique_ptr<Context> context_;
    std::unique_ptr<Worker>  worker_;
    std::unique_ptr<Memory>  memory_;
    OobChannel               oob_;
    pid_t                    peer_pid_ = -1;
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
