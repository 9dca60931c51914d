/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "oob.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace ucx_util {

OobChannel::~OobChannel()
{
    if (fd_ >= 0) {
        close(fd_);
    }
}

OobChannel::OobChannel(OobChannel &&other) noexcept : fd_(other.fd_)
{
    other.fd_ = -1;
}

OobChannel &OobChannel::operator=(OobChannel &&other) noexcept
{
    std::swap(fd_, other.fd_);
    return *this;
}

void OobChannel::send(const void *data, size_t size)
{
    uint64_t    length   = size;
    const char *parts[2] = {reinterpret_cast<const char *>(&length),
                            static_cast<const char *>(data)};
    size_t      sizes[2] = {sizeof(length), size};
    for (int i = 0; i < 2; ++i) {
        for (size_t done = 0; done < sizes[i];) {
            ssize_t n = write(fd_, parts[i] + done, sizes[i] - done);
            if ((n < 0) && (errno == EINTR)) {
                continue;
            }
            if (n <= 0) {
                throw std::runtime_error(std::string("oob write: ") +
                                         strerror(errno));
            }
            done += size_t(n);
        }
    }
}

bool OobChannel::readable()
{
    struct pollfd pfd = {fd_, POLLIN, 0};
    return ::poll(&pfd, 1, 0) > 0;
}

void OobChannel::read_exact(void *data, size_t size, Deadline deadline)
{
    char *out = static_cast<char *>(data);
    for (size_t done = 0; done < size;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - Clock::now());
        if (left.count() <= 0) {
            throw std::runtime_error("oob read: timed out");
        }
        struct pollfd pfd = {fd_, POLLIN, 0};
        int           rc  = ::poll(&pfd, 1, int(left.count()));
        if ((rc < 0) && (errno == EINTR)) {
            continue;
        }
        if (rc <= 0) {
            continue; /* re-check the deadline */
        }
        ssize_t n = read(fd_, out + done, size - done);
        if ((n < 0) && (errno == EINTR)) {
            continue;
        }
        if (n <= 0) {
            throw std::runtime_error(n == 0 ? "oob read: peer closed"
                                            : "oob read: error");
        }
        done += size_t(n);
    }
}

std::vector<char> OobChannel::recv(Deadline deadline)
{
    uint64_t length;
    read_exact(&length, sizeof(length), deadline);
    if (length > (1ull << 30)) {
        throw std::runtime_error("oob read: message too long");
    }
    std::vector<char> data(length);
    read_exact(data.data(), length, deadline);
    return data;
}

namespace {

[[noreturn]] void fail(const std::string &what)
{
    throw std::runtime_error(what + ": " + strerror(errno));
}

/* Waits until @a fd is readable or the deadline passes. */
bool wait_readable(int fd, Deadline deadline)
{
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - Clock::now());
        if (left.count() <= 0) {
            return false;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        int           rc  = ::poll(&pfd, 1, int(left.count()));
        if (rc > 0) {
            return true;
        }
        if ((rc < 0) && (errno != EINTR)) {
            fail("poll");
        }
    }
}

void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

} // namespace

OobListener::OobListener(int port) : socket_(socket(AF_INET6, SOCK_STREAM, 0))
{
    if (socket_.fd() < 0) {
        fail("socket");
    }
    int one = 1, zero = 0;
    setsockopt(socket_.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(socket_.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    struct sockaddr_in6 addr = {};
    addr.sin6_family         = AF_INET6;
    addr.sin6_addr           = in6addr_any;
    addr.sin6_port           = htons(uint16_t(port));
    socklen_t length         = sizeof(addr);
    if (bind(socket_.fd(), reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) ||
        listen(socket_.fd(), 1) ||
        getsockname(socket_.fd(), reinterpret_cast<sockaddr *>(&addr),
                    &length)) {
        fail("listen on port " + std::to_string(port));
    }
    port_ = ntohs(addr.sin6_port);
}

OobChannel OobListener::accept(Deadline deadline)
{
    if (!wait_readable(socket_.fd(), deadline)) {
        throw std::runtime_error("no connection on port " +
                                 std::to_string(port_));
    }
    OobChannel channel(::accept(socket_.fd(), nullptr, nullptr));
    if (channel.fd() < 0) {
        fail("accept");
    }
    set_nodelay(channel.fd());
    return channel;
}

bool OobListener::pending()
{
    return socket_.readable();
}

OobChannel oob_connect(const std::string &host, int port, Deadline deadline)
{
    struct addrinfo hints = {}, *res = nullptr;
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) !=
        0) {
        throw std::runtime_error("unknown host " + host);
    }
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(res, freeaddrinfo);
    do {
        for (addrinfo *ai = res; ai != nullptr; ai = ai->ai_next) {
            OobChannel channel(
                    socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol));
            if ((channel.fd() >= 0) &&
                (connect(channel.fd(), ai->ai_addr, ai->ai_addrlen) == 0)) {
                set_nodelay(channel.fd());
                return channel;
            }
        }
        usleep(50000);
    } while (Clock::now() < deadline);
    throw std::runtime_error("cannot connect to " + host + ":" +
                             std::to_string(port));
}

} // namespace ucx_util
