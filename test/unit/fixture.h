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

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace test {

/* The tests use the shared UCX helpers unqualified. */
using namespace ucx_util;

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
