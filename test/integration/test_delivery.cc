/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Delivery between two processes: the paper's flow, payload sizes,
 * re-registration, and that each message runs exactly once.
 */
#include "target.h"

#include "../ifuncs/test_ifunc.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <random>

namespace test {
namespace {

constexpr size_t kSlot = 1ul << 20; /* offset of the slot the tests use */

class Delivery : public TransportTest {
protected:
    /* Sends @a args through echo and returns what the target saw. */
    echo_result echo(const std::vector<char> &args,
                     size_t                  *frame_size = nullptr)
    {
        return recorded("echo", args.data(), args.size(), frame_size);
    }

    /* Sends a message of @a ifunc, one that records what arrived as echo
     * does, and returns what the target saw. */
    echo_result recorded(const std::string &ifunc, const void *args,
                         size_t args_size, size_t *frame_size = nullptr)
    {
        uint32_t    handle = target_->register_ifunc(ifunc);
        Reply       reply  = target_->send(handle, 0, args, args_size);
        echo_result result = {};
        EXPECT_EQ(UCS_OK, reply.status);
        EXPECT_EQ(UCS_OK,
                  target_->poll_until_result(0, Target::kBufferSize, &result));
        if (frame_size != nullptr) {
            *frame_size = reply.value;
        }
        return result;
    }
};

TEST_P(Delivery, RunsOnceAndClearsTheBuffer)
{
    uint32_t handle  = target_->register_ifunc("counter");
    int64_t  counter = 0;
    int64_t  add     = 5;
    ASSERT_EQ(UCS_OK, target_->send(handle, kSlot, &add, sizeof(add)).status);
    ASSERT_EQ(UCS_OK, target_->poll_until_result(kSlot, kSlot, &counter));
    EXPECT_EQ(5, counter);
    EXPECT_TRUE(target_->poll_for(0.05, kSlot, kSlot, &counter).empty());
    EXPECT_EQ(5, counter);
}

/* The permissions of the mappings of this process that overlap
 * [start, start + size), or of all of them with size 0. */
std::vector<std::string> mapping_permissions(const void *start, size_t size)
{
    std::vector<std::string> perms;
    std::ifstream            maps("/proc/self/maps");
    std::string              line;
    uintptr_t                lo = reinterpret_cast<uintptr_t>(start);
    while (std::getline(maps, line)) {
        uintptr_t from, to;
        char      mode[5] = {};
        if (sscanf(line.c_str(), "%lx-%lx %4s", &from, &to, mode) != 3) {
            continue;
        }
        if ((size == 0) || ((from < lo + size) && (lo < to))) {
            perms.push_back(mode);
        }
    }
    return perms;
}

TEST_P(Delivery, WriteXorExecute)
{
    /* The receive buffer stays read/write, the code runs anyway, and no
     * mapping of this process is ever writable and executable at once. */
    for (const std::string &mode :
         mapping_permissions(target_->buffer(), target_->buffer_size())) {
        ASSERT_EQ(std::string::npos, mode.find('x')) << mode;
    }
    uint32_t handle  = target_->register_ifunc("counter");
    int64_t  counter = 0;
    ASSERT_EQ(UCS_OK, target_->send(handle, 0).status);
    ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &counter));
    EXPECT_EQ(1, counter);
    for (const std::string &mode : mapping_permissions(nullptr, 0)) {
        EXPECT_FALSE((mode[1] == 'w') && (mode[2] == 'x')) << mode;
    }
}

TEST_P(Delivery, PaperFlowWithRwxBuffer)
{
    /* As in the paper, the target makes its receive buffer RWX itself. The
     * runtime does not need it (it links code into private memory), but
     * the flow must keep working. */
    ASSERT_EQ(0, mprotect(target_->buffer(), target_->buffer_size(),
                          PROT_READ | PROT_WRITE | PROT_EXEC));
    uint32_t handle  = target_->register_ifunc("counter");
    int64_t  counter = 0;
    ASSERT_EQ(UCS_OK, target_->send(handle, 0).status);
    ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &counter));
    EXPECT_EQ(1, counter);
}

TEST_P(Delivery, ManyMessagesThroughOneSlot)
{
    uint32_t handle  = target_->register_ifunc("counter");
    int64_t  counter = 0;
    int64_t  sum     = 0;
    for (int64_t i = 1; i <= 300; ++i) {
        ASSERT_EQ(UCS_OK, target_->send(handle, kSlot, &i, sizeof(i)).status);
        ASSERT_EQ(UCS_OK, target_->poll_until_result(kSlot, kSlot, &counter));
        sum += i;
    }
    EXPECT_EQ(sum, counter);
}

TEST_P(Delivery, PayloadShrinksToWhatInitUsed)
{
    std::vector<char> args(1000, 'a');
    size_t            frame_size;
    echo_result       result = echo(args, &frame_size);
    EXPECT_EQ(1u, result.calls);
    EXPECT_EQ(args.size(), result.payload_size);
    EXPECT_EQ(test_hash64(args.data(), args.size()), result.payload_hash);
    /* echo's bound is 2 * size + 64: the frame carries only what was used. */
    EXPECT_LT(frame_size, 2 * args.size());
}

TEST_P(Delivery, ZeroBytePayload)
{
    echo_result result = echo({});
    EXPECT_EQ(1u, result.calls);
    EXPECT_EQ(0u, result.payload_size);
}

TEST_P(Delivery, OneMebibytePayload)
{
    std::vector<char> args(1ul << 20);
    std::mt19937_64   rng(7);
    for (char &c : args) {
        c = char(rng());
    }
    echo_result result = echo(args);
    EXPECT_EQ(1u, result.calls);
    EXPECT_EQ(args.size(), result.payload_size);
    EXPECT_EQ(test_hash64(args.data(), args.size()), result.payload_hash);
}

TEST_P(Delivery, ReregistrationAfterDeregistration)
{
    int64_t counter = 0;
    for (int round = 0; round < 3; ++round) {
        uint32_t handle = target_->register_ifunc("counter");
        ASSERT_EQ(UCS_OK, target_->send(handle, 0).status);
        ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &counter));
        Request req{};
        req.op     = Op::deregister_ifunc;
        req.handle = handle;
        ASSERT_EQ(UCS_OK, target_->call(req).status);
    }
    EXPECT_EQ(3, counter);
}

TEST_P(Delivery, DifferentIfuncsThroughOneSlot)
{
    uint32_t    counter_h = target_->register_ifunc("counter");
    uint32_t    echo_h    = target_->register_ifunc("echo");
    int64_t     counter   = 0;
    echo_result result    = {};
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(UCS_OK, target_->send(counter_h, 0).status);
        ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &counter));
        ASSERT_EQ(UCS_OK, target_->send(echo_h, 0, "xyz", 3).status);
        ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &result));
    }
    EXPECT_EQ(20, counter);
    EXPECT_EQ(20u, result.calls);
}

TEST_P(Delivery, PaperConventionLibrary)
{
    /* paper_payload_init(payload, payload_size, source_args,
     * source_args_size): its payload, the arguments complemented, arrives
     * whole (the payload is the bound's size). */
    std::vector<char> args(777);
    std::mt19937_64   rng(11);
    for (char &c : args) {
        c = char(rng());
    }
    std::vector<char> expected(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
        expected[i] = char(~args[i]);
    }
    echo_result result = recorded("paper", args.data(), args.size());
    EXPECT_EQ(1u, result.calls);
    EXPECT_EQ(args.size(), result.payload_size);
    EXPECT_EQ(test_hash64(expected.data(), expected.size()),
              result.payload_hash);
}

TEST_P(Delivery, UnwrittenPayloadBytesArriveAsZeros)
{
    /* A payload_init that writes 8 bytes of a 1000-byte bound, after the
     * source's kept message buffers were filled with 0xAA by echo: the
     * target gets those 8 bytes and zeros, in both conventions. */
    partial_args      args = {1000, 0x1122334455667788ull};
    std::vector<char> expected(args.bound, 0);
    std::memcpy(expected.data(), &args.value, sizeof(args.value));
    for (const char *ifunc : {"partial_paper", "partial_slides"}) {
        echo(std::vector<char>(3000, char(0xAA)));
        echo_result result = recorded(ifunc, &args, sizeof(args));
        EXPECT_EQ(1u, result.calls) << ifunc;
        EXPECT_EQ(args.bound, result.payload_size) << ifunc;
        EXPECT_EQ(test_hash64(expected.data(), expected.size()),
                  result.payload_hash)
                << ifunc;
    }
}

INSTANTIATE_TEST_SUITE_P(Transports, Delivery, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
