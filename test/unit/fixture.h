/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * In-process tests of the runtime's parts: a real UCP context (no peer) and
 * messages of the real test ifunc libraries, placed in local buffers.
 */
#ifndef UCX_IFUNC_TEST_UNIT_FIXTURE_H_
#define UCX_IFUNC_TEST_UNIT_FIXTURE_H_

#include "../../tools/common/ucx.h"

#include <ucp/api/ucp_ifunc.h>

#include <gtest/gtest.h>

#include <elf.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace test {

/* The tests use the shared UCX helpers unqualified. */
using namespace ucx_util;

/* ELF machine of the code this test can run, and of code it cannot. */
#if defined(__x86_64__)
constexpr uint16_t kHostMachine    = EM_X86_64;
constexpr uint16_t kForeignMachine = EM_AARCH64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine    = EM_AARCH64;
constexpr uint16_t kForeignMachine = EM_X86_64;
#elif defined(__powerpc64__)
/* ppc64el runs bitcode only: the native image tests cannot pass there
 * (test/cross/run-ppc64el.sh runs the Jit tests alone). */
constexpr uint16_t kHostMachine    = EM_PPC64;
constexpr uint16_t kForeignMachine = EM_X86_64;
#endif

/* A buffer that @a target_context maps for remote writes, and an endpoint
 * and rkey to reach it from @a source (a worker of any context). */
struct RemoteBuffer {
    RemoteBuffer(ucp_context_h target_context, Worker &target, Worker &source,
                 size_t size = 1 << 16)
        : memory(target_context, size), ep(source, target.address()),
          rkey(ep.get(), memory.packed_rkey()),
          address(reinterpret_cast<uint64_t>(memory.address()))
    {
    }

    Memory    memory;
    Endpoint  ep;
    RemoteKey rkey;
    uint64_t  address;
};

/* Progresses @a worker and polls @a buffer until a message ran or was
 * rejected, for 10 s at most (UCS_ERR_NO_MESSAGE then). */
inline ucs_status_t poll_until_result(ucp_context_h context, Worker &worker,
                                      Memory &buffer, void *target_args)
{
    ucs_status_t status;
    Deadline     until = deadline_in(10);
    do {
        worker.progress();
        status = ucp_poll_ifunc(context, buffer.address(), buffer.size(),
                                target_args);
    } while ((status == UCS_ERR_NO_MESSAGE) && (Clock::now() < until));
    return status;
}

class UnitTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        setenv("UCX_IFUNC_LIB_DIR", UCX_IFUNC_TEST_LIB_DIR, 1);
        context_ = std::make_unique<Context>();
    }

    ucp_context_h context() const { return context_->get(); }

    /* A message of @a name with @a args, copied into @a buffer. */
    std::vector<uint64_t> frame_of(const std::string &name, const void *args,
                                   size_t size)
    {
        ucp_ifunc_h     ifunc;
        ucp_ifunc_msg_t msg;
        EXPECT_EQ(UCS_OK, ucp_register_ifunc(context(), name.c_str(), &ifunc));
        EXPECT_EQ(UCS_OK, ucp_ifunc_msg_create(ifunc, const_cast<void *>(args),
                                               size, &msg));
        std::vector<uint64_t> frame(msg.frame_size / 8);
        std::memcpy(frame.data(), msg.frame, msg.frame_size);
        ucp_ifunc_msg_free(msg);
        ucp_deregister_ifunc(context(), ifunc);
        return frame;
    }

    std::unique_ptr<Context> context_;
};

} // namespace test

#endif
