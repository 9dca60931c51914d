/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Out-of-band channel of the tests and the benchmark: length-prefixed
 * messages over a connected stream socket (a socketpair between a test and
 * its peer, TCP between benchmark processes). Every wait has a deadline.
 */
#ifndef UCX_IFUNC_TOOLS_OOB_H_
#define UCX_IFUNC_TOOLS_OOB_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <stdexcept>
#include <cstring>
#include <vector>

namespace ucx_util {

using Clock    = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadline_in(double seconds)
{
    return Clock::now() + std::chrono::microseconds(int64_t(seconds * 1e6));
}

class OobChannel {
public:
    explicit OobChannel(int fd = -1) : fd_(fd) {}
    ~OobChannel();
    OobChannel(OobChannel &&other) noexcept;
    OobChannel &operator=(OobChannel &&other) noexcept;
    OobChannel(const OobChannel &)            = delete;
    OobChannel &operator=(const OobChannel &) = delete;

    int fd() const { return fd_; }

    /* Sends one message; throws std::runtime_error on failure. */
    void send(const void *data, size_t size);
    void send(const std::vector<char> &data) { send(data.data(), data.size()); }

    /* Whether a message can be read without blocking. */
    bool readable();

    /* Receives one message; throws on error, on end of stream and when the
     * deadline passes. */
    std::vector<char> recv(Deadline deadline);

private:
    void read_exact(void *data, size_t size, Deadline deadline);
    int  fd_;
};

/* Out-of-band messages that are plain structs: one message each, its size
 * checked on receipt (std::runtime_error otherwise). */
template <typename T>
void oob_send(OobChannel &oob, const T &value)
{
    oob.send(&value, sizeof(value));
}

template <typename T>
T oob_recv(OobChannel &oob, Deadline deadline)
{
    std::vector<char> data = oob.recv(deadline);
    if (data.size() != sizeof(T)) {
        throw std::runtime_error("out-of-band message of unexpected size");
    }
    T value;
    std::memcpy(&value, data.data(), sizeof(value));
    return value;
}

/* A TCP socket listening on all interfaces. */
class OobListener {
public:
    /* Port 0 picks a free port; port() tells which. */
    explicit OobListener(int port);
    int port() const { return port_; }

    /* Waits for one connection. */
    OobChannel accept(Deadline deadline);

    /* Whether a connection waits to be accepted (never blocks). */
    bool pending();

private:
    OobChannel socket_;
    int        port_;
};

/* TCP: connects to @a host:@a port, retrying until the deadline (the peer
 * may still be starting). */
OobChannel oob_connect(const std::string &host, int port, Deadline deadline);

} // namespace ucx_util

#endif
