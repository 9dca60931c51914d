/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * ifunc_cost: what sending and running an ifunc costs on one core, with no
 * second process and no cache lines moving between cores: the software
 * part of the latency that ucx_ifunc_perftest measures. The frame goes to a
 * buffer of this process through an endpoint to its own worker, so it takes
 * the same path as to a peer on this host (ucp_rkey_ptr, direct stores).
 *
 *     ifunc_cost [-L DIR] [SIZE ...]      (default sizes: 8 2048 8192)
 */
#include "../common/ucx.h"

#include <ucp/api/ucp_ifunc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int    kIterations = 1000000;
constexpr size_t kBufferSize = 1ul << 20;

template <typename Body>
double ns_per_call(Body body)
{
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kIterations; ++i) {
        body();
    }
    std::chrono::duration<double, std::nano> elapsed =
            std::chrono::steady_clock::now() - start;
    return elapsed.count() / kIterations;
}

} // namespace

int main(int argc, char **argv)
{
    std::vector<size_t> sizes;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "-L") && (i + 1 < argc)) {
            setenv("UCX_IFUNC_LIB_DIR", argv[++i], 1);
        } else {
            sizes.push_back(std::strtoul(argv[i], nullptr, 10));
        }
    }
    if (sizes.empty()) {
        sizes = {8, 2048, 8192};
    }

    try {
        ucx_util::Context context;
        ucp_ifunc_h       ifunc;
        ucx_util::check(ucp_register_ifunc(context.get(), "perf_bump", &ifunc),
                        "ucp_register_ifunc(perf_bump) (see -L)");
        ucx_util::Worker    worker(context.get());
        ucx_util::Endpoint  ep(worker, worker.address());
        ucx_util::Memory    buffer(context.get(), kBufferSize);
        ucx_util::RemoteKey rkey(ep.get(), buffer.packed_rkey());
        uint64_t remote  = reinterpret_cast<uint64_t>(buffer.address());
        uint64_t counter = 0;

        std::printf("%8s %8s %12s %12s %12s %12s\n", "payload", "frame",
                    "send ns", "send+run ns", "empty poll", "rkey_ptr ns");
        for (size_t size : sizes) {
            ucp_ifunc_msg_t msg;
            ucx_util::check(
                    ucp_ifunc_msg_create(ifunc, &size, sizeof(size), &msg),
                    "ucp_ifunc_msg_create");
            if (msg.frame_size > kBufferSize) {
                throw std::runtime_error(
                        "payload of " + std::to_string(size) +
                        " bytes does not fit the 1 MiB buffer");
            }
            auto send = [&]() {
                ucx_util::check(
                        ucp_ifunc_send_nbix(ep.get(), msg, remote, rkey.get()),
                        "ucp_ifunc_send_nbix");
            };
            auto poll = [&]() {
                return ucp_poll_ifunc(context.get(), buffer.address(),
                                      kBufferSize, &counter);
            };
            double send_ns = ns_per_call(send);
            poll(); /* consume the frame left by the loop above */
            double both_ns  = ns_per_call([&]() {
                send();
                poll();
            });
            double empty_ns = ns_per_call(poll);
            double rkey_ns  = ns_per_call([&]() {
                void *address;
                ucp_rkey_ptr(rkey.get(), remote, &address);
            });
            std::printf("%8zu %8zu %12.1f %12.1f %12.1f %12.1f\n", size,
                        msg.frame_size, send_ns, both_ns, empty_ns, rkey_ns);
            ucp_ifunc_msg_free(msg);
        }
        ucp_deregister_ifunc(context.get(), ifunc);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ifunc_cost: %s\n", e.what());
        return 1;
    }
    return 0;
}
