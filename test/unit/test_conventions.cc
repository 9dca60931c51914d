/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The two conventions of the payload functions (the paper's and the
 * workshop slides'): each library's payload_init is called with its own
 * argument order, a library that defines both bound functions is refused,
 * and payload bytes that payload_init leaves unwritten are zero, whatever
 * the message buffer held before.
 */
#include "fixture.h"

#include "../common/frames.h"
#include "../ifuncs/test_ifunc.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace test {
namespace {

using ucx_ifunc::FrameHeader;

class Conventions : public UnitTest {
protected:
    void TearDown() override
    {
        setenv("UCX_IFUNC_LIB_DIR", UCX_IFUNC_TEST_LIB_DIR, 1);
    }

    /* The payload of @a msg, as a target finds it. */
    static std::vector<uint8_t> payload_of(const ucp_ifunc_msg_t &msg)
    {
        const auto *header = static_cast<const FrameHeader *>(msg.frame);
        const auto *bytes  = static_cast<const uint8_t *>(msg.frame);
        return {bytes + header->payload_offset,
                bytes + header->payload_offset + header->payload_size};
    }

    /* Runs @a msg here, with an ifunc that records what arrived as echo
     * does. */
    echo_result run(const ucp_ifunc_msg_t &msg)
    {
        std::vector<uint64_t> buffer(msg.frame_size / 8);
        std::memcpy(buffer.data(), msg.frame, msg.frame_size);
        echo_result result = {};
        EXPECT_EQ(UCS_OK, ucp_poll_ifunc(context(), buffer.data(),
                                         buffer.size() * 8, &result));
        return result;
    }
};

TEST_F(Conventions, PaperOrderWritesThePayloadAndKeepsTheArguments)
{
    ucp_ifunc_h ifunc;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(context(), "paper", &ifunc));
    std::vector<uint8_t> args(300);
    for (size_t i = 0; i < args.size(); ++i) {
        args[i] = uint8_t(i * 7 + 3);
    }
    const std::vector<uint8_t> args_before = args;

    ucp_ifunc_msg_t msg;
    ASSERT_EQ(UCS_OK,
              ucp_ifunc_msg_create(ifunc, args.data(), args.size(), &msg));
    /* The slides' order would have written the payload over the caller's
     * arguments. */
    EXPECT_EQ(args_before, args);
    std::vector<uint8_t> expected(args.size());
    std::transform(args.begin(), args.end(), expected.begin(),
                   [](uint8_t byte) { return uint8_t(~byte); });
    EXPECT_EQ(expected, payload_of(msg));

    echo_result result = run(msg);
    EXPECT_EQ(1u, result.calls);
    EXPECT_EQ(args.size(), result.payload_size);
    EXPECT_EQ(test_hash64(expected.data(), expected.size()),
              result.payload_hash);
    ucp_ifunc_msg_free(msg);

    /* ucp_ifunc_msg_build with source arguments takes the same path. */
    ucp_ifunc_msg_params_t params = {};
    params.field_mask             = UCP_IFUNC_MSG_FIELD_SOURCE_ARGS;
    params.source_args            = args.data();
    params.source_args_size       = args.size();
    ASSERT_EQ(UCS_OK, ucp_ifunc_msg_build(ifunc, &params, &msg));
    EXPECT_EQ(args_before, args);
    EXPECT_EQ(expected, payload_of(msg));
    ucp_ifunc_msg_free(msg);
    ucp_deregister_ifunc(context(), ifunc);
}

TEST_F(Conventions, LibraryWithBothBoundFunctionsIsRefused)
{
    WarningCounter errors("both_bounds_payload_get_max_size (the paper's "
                          "convention) and both_bounds_payload_bound",
                          UCS_LOG_LEVEL_ERROR);
    ucp_ifunc_h    ifunc = nullptr;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_register_ifunc(context(), "both_bounds", &ifunc));
    EXPECT_EQ(nullptr, ifunc);
    EXPECT_EQ(1, errors.count());
}

TEST_F(Conventions, LibraryWithNeitherBoundFunctionNamesBoth)
{
    /* A fresh copy of an ordinary library: one the process has not
     * refused before, so that the refusal is logged. */
    char templ[] = "/tmp/ucx-ifunc-neither-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(templ));
    std::string dir  = templ;
    std::string copy = "cp " + std::string(UCX_IFUNC_TEST_LIB_DIR) +
                       "/plain.so " + dir + "/";
    ASSERT_EQ(0, system(copy.c_str()));
    setenv("UCX_IFUNC_LIB_DIR", dir.c_str(), 1);
    {
        WarningCounter errors("neither plain_payload_get_max_size (the "
                              "paper's convention) nor plain_payload_bound",
                              UCS_LOG_LEVEL_ERROR);
        ucp_ifunc_h    ifunc = nullptr;
        EXPECT_EQ(UCS_ERR_NO_ELEM,
                  ucp_register_ifunc(context(), "plain", &ifunc));
        EXPECT_EQ(1, errors.count());
    }
    unlink((dir + "/plain.so").c_str());
    rmdir(dir.c_str());
}

/* Payload bytes payload_init does not write are zero: for a bound within
 * the buffers a thread keeps (filled with 0xAA by messages of the same
 * library first) and for one beyond them (a new block each time, after a
 * freed one full of 0xAA), in both conventions. */
class UnwrittenPayload : public Conventions,
                         public ::testing::WithParamInterface<const char *> {
protected:
    /* Builds, then frees, messages of @a ifunc whose payloads are
     * @a size bytes of 0xAA, all at once: every buffer this thread keeps
     * that fits the size is then full of them. */
    static void dirty_buffers(ucp_ifunc_h ifunc, size_t size)
    {
        std::vector<uint8_t>         bytes(size, 0xAA);
        std::vector<ucp_ifunc_msg_t> msgs(8);
        ucp_ifunc_msg_params_t       params = {};
        params.field_mask                   = UCP_IFUNC_MSG_FIELD_PAYLOAD;
        params.payload                      = bytes.data();
        params.payload_size                 = bytes.size();
        for (ucp_ifunc_msg_t &msg : msgs) {
            ASSERT_EQ(UCS_OK, ucp_ifunc_msg_build(ifunc, &params, &msg));
        }
        for (ucp_ifunc_msg_t &msg : msgs) {
            ucp_ifunc_msg_free(msg);
        }
    }
};

TEST_P(UnwrittenPayload, IsZero)
{
    ucp_ifunc_h ifunc;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(context(), GetParam(), &ifunc));
    for (uint64_t bound : {uint64_t(1000), uint64_t(100000)}) {
        dirty_buffers(ifunc, bound);
        partial_args    args = {bound, 0x0102030405060708ull};
        ucp_ifunc_msg_t msg;
        ASSERT_EQ(UCS_OK,
                  ucp_ifunc_msg_create(ifunc, &args, sizeof(args), &msg));
        std::vector<uint8_t> expected(bound, 0);
        std::memcpy(expected.data(), &args.value, sizeof(args.value));
        std::vector<uint8_t> payload = payload_of(msg);
        ASSERT_EQ(bound, payload.size());
        EXPECT_EQ(0, std::memcmp(expected.data(), payload.data(), bound))
                << "bound " << bound << ": "
                << std::count(payload.begin(), payload.end(), 0xAA)
                << " bytes of 0xAA";

        echo_result result = run(msg);
        EXPECT_EQ(bound, result.payload_size);
        EXPECT_EQ(test_hash64(expected.data(), expected.size()),
                  result.payload_hash);
        ucp_ifunc_msg_free(msg);
    }
    ucp_deregister_ifunc(context(), ifunc);
}

INSTANTIATE_TEST_SUITE_P(BothConventions, UnwrittenPayload,
                         ::testing::Values("partial_paper", "partial_slides"));

} // namespace
} // namespace test
