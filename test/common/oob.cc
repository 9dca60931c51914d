/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "oob.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace test {

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

} // namespace test
