/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Two UCP contexts in one process keep separate ifunc state: their own
 * linked code (and so the statics of an ifunc), their own settings, and a
 * release of one leaves the other alone.
 */
#include "fixture.h"

#include "../ifuncs/test_ifunc.h"

#include "ucp/ifunc/load/gdb_jit.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace test {
namespace {

class Contexts : public UnitTest {
public:
    void SetUp() override
    {
        UnitTest::SetUp();
        tally_ = frame_of("tally", nullptr, 0);
    }

    void TearDown() override { unsetenv("UCX_IFUNC_MAX_IMAGE_SIZE"); }

    /* Delivers the tally message to @a context; returns the count its copy
     * of the code reports, or 0 if nothing ran. */
    uint64_t tally_in(ucp_context_h context, ucs_status_t expected = UCS_OK)
    {
        std::vector<uint64_t> buffer = tally_;
        uint64_t              calls  = 0;
        EXPECT_EQ(expected, ucp_poll_ifunc(context, buffer.data(),
                                           buffer.size() * 8, &calls));
        return calls;
    }

    std::vector<uint64_t> tally_;
};

TEST_F(Contexts, EachContextLinksItsOwnCode)
{
    Context a, b;
    EXPECT_EQ(1u, tally_in(a.get()));
    EXPECT_EQ(2u, tally_in(a.get()));
    EXPECT_EQ(1u, tally_in(b.get())); /* b's statics, not a's */
    EXPECT_EQ(3u, tally_in(a.get()));

    /* Releasing b starts b afresh and leaves a as it was. */
    ucp_ifunc_context_release(b.get());
    EXPECT_EQ(1u, tally_in(b.get()));
    EXPECT_EQ(4u, tally_in(a.get()));
}

TEST_F(Contexts, SettingsAreReadPerContext)
{
    /* a reads a limit no image fits; b, created after it is lifted, does
     * not. Neither loads a library (tally has no imports), so neither reads
     * the variables again. */
    Context a, b;
    setenv("UCX_IFUNC_MAX_IMAGE_SIZE", "4096", 1);
    EXPECT_EQ(0u, tally_in(a.get(), UCS_ERR_EXCEEDS_LIMIT));
    unsetenv("UCX_IFUNC_MAX_IMAGE_SIZE");
    EXPECT_EQ(1u, tally_in(b.get()));
    EXPECT_EQ(0u, tally_in(a.get(), UCS_ERR_EXCEEDS_LIMIT));
    ucp_ifunc_context_release(a.get());
    EXPECT_EQ(1u, tally_in(a.get()));
}

TEST_F(Contexts, PerfMapNamesLinkedCode)
{
    std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
    unlink(path.c_str());
    setenv("UCX_IFUNC_PERF_MAP", "y", 1);
    Context c; /* its state reads the variable when first used */
    EXPECT_EQ(1u, tally_in(c.get()));
    unsetenv("UCX_IFUNC_PERF_MAP");
    std::ifstream map(path);
    std::string   line, found;
    while (std::getline(map, line)) {
        if (line.find(" ifunc:tally:tally_main") != std::string::npos) {
            found = line;
        }
    }
    unlink(path.c_str());
    ASSERT_FALSE(found.empty()) << "no line for tally in " << path;
    unsigned long start = 0, size = 0;
    EXPECT_EQ(2, sscanf(found.c_str(), "%lx %lx", &start, &size)) << found;
    EXPECT_GT(size, 0u);
}

/* How many symbol files in gdb's JIT list name @a object (a prefix). */
size_t gdb_jit_entries(const std::string &object)
{
    size_t n = 0;
    for (const jit_code_entry *e = __jit_debug_descriptor.first_entry;
         e != nullptr; e         = e->next_entry) {
        n += (memmem(e->symfile_addr, e->symfile_size, object.data(),
                     object.size()) != nullptr);
    }
    return n;
}

TEST_F(Contexts, GdbKnowsLinkedCodeWhileItIsLinked)
{
    size_t  before = gdb_jit_entries("ifunc:tally:");
    Context c;
    EXPECT_EQ(1u, tally_in(c.get()));
    EXPECT_EQ(before + 1, gdb_jit_entries("ifunc:tally:"));
    ucp_ifunc_context_release(c.get()); /* unmaps the code */
    EXPECT_EQ(before, gdb_jit_entries("ifunc:tally:"));

    setenv("UCX_IFUNC_GDB_JIT", "n", 1);
    Context d;
    EXPECT_EQ(1u, tally_in(d.get()));
    unsetenv("UCX_IFUNC_GDB_JIT");
    EXPECT_EQ(before, gdb_jit_entries("ifunc:tally:"));
}

TEST_F(Contexts, TargetKeepsItsCodeWhenItsRegistrationsGo)
{
    Context t;
    EXPECT_EQ(1u, tally_in(t.get()));
    ucp_ifunc_h ifunc;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(t.get(), "counter", &ifunc));
    ucp_deregister_ifunc(t.get(), ifunc);
    EXPECT_EQ(2u, tally_in(t.get())); /* statics kept */
}

TEST_F(Contexts, HandlesOutliveARelease)
{
    Context         c;
    ucp_ifunc_h     ifunc;
    ucp_ifunc_msg_t msg;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(c.get(), "tally", &ifunc));
    ucp_ifunc_context_release(c.get());
    ucp_ifunc_context_release(c.get()); /* nothing left: ignored */
    ucp_ifunc_context_release(nullptr);
    ASSERT_EQ(UCS_OK, ucp_ifunc_msg_create(ifunc, nullptr, 0, &msg));
    EXPECT_EQ(tally_.size() * 8, msg.frame_size);
    ucp_ifunc_msg_free(msg);

    /* A registration made after the release belongs to the new state; the
     * old handle's release must not count against it. */
    ucp_ifunc_h second;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(c.get(), "tally", &second));
    ucp_deregister_ifunc(c.get(), ifunc);
    ASSERT_EQ(UCS_OK, ucp_ifunc_msg_create(second, nullptr, 0, &msg));
    ucp_ifunc_msg_free(msg);
    ucp_deregister_ifunc(c.get(), second);
}

TEST_F(Contexts, ANewContextStartsAfresh)
{
    /* UCP may give a new context the handle of a released one. */
    for (int round = 0; round < 3; ++round) {
        Context c;
        EXPECT_EQ(1u, tally_in(c.get()));
        EXPECT_EQ(2u, tally_in(c.get()));
    }
}

TEST_F(Contexts, ThreadsPollTwoContextsAtOnce)
{
    /* Two threads, each on its own context, then each switches to the
     * other's: every thread's cached state must follow. (tally's static is
     * not atomic, so one context runs in one thread at a time.) */
    Context          a, b;
    constexpr int    kRounds = 2000;
    std::atomic<int> wrong{0}, halfway{0};
    auto             poll_many = [&](ucp_context_h context) {
        for (int i = 1; i <= kRounds; ++i) {
            std::vector<uint64_t> buffer = tally_;
            uint64_t              calls  = 0;
            if ((ucp_poll_ifunc(context, buffer.data(), buffer.size() * 8,
                                            &calls) != UCS_OK) ||
                (calls == 0)) {
                wrong++;
            }
        }
    };
    auto run = [&](ucp_context_h first, ucp_context_h second) {
        poll_many(first);
        halfway++;
        while (halfway.load() < 2) {
            std::this_thread::yield();
        }
        poll_many(second);
    };
    std::thread t1(run, a.get(), b.get());
    std::thread t2(run, b.get(), a.get());
    t1.join();
    t2.join();
    EXPECT_EQ(0, wrong.load());
    EXPECT_EQ(uint64_t(2 * kRounds + 1), tally_in(a.get()));
    EXPECT_EQ(uint64_t(2 * kRounds + 1), tally_in(b.get()));
}

TEST_F(Contexts, SendFromOneContextToAnother)
{
    /* Over a real UCX transport inside this process: a's worker puts into
     * memory that b mapped, and b runs it with b's code. */
    Context      a, b;
    Worker       wa(a.get()), wb(b.get());
    RemoteBuffer buffer(b.get(), wb, wa);

    ucp_ifunc_h     ifunc;
    ucp_ifunc_msg_t msg;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(a.get(), "tally", &ifunc));
    ASSERT_EQ(UCS_OK, ucp_ifunc_msg_create(ifunc, nullptr, 0, &msg));
    for (uint64_t expected = 1; expected <= 3; ++expected) {
        ucs_status_t status = ucp_ifunc_send_nbix(
                buffer.ep.get(), msg, buffer.address, buffer.rkey.get());
        ASSERT_FALSE(UCS_STATUS_IS_ERR(status));
        ASSERT_EQ(UCS_OK, buffer.ep.flush(deadline_in(10)));
        uint64_t calls = 0;
        ASSERT_EQ(UCS_OK,
                  poll_until_result(b.get(), wb, buffer.memory, &calls));
        EXPECT_EQ(expected, calls);
    }
    EXPECT_EQ(1u, tally_in(a.get())); /* a never ran it */
    ucp_ifunc_msg_free(msg);
    ucp_deregister_ifunc(a.get(), ifunc);
}

TEST_F(Contexts, MessageThatReleasesItsContextReturnsToItsCode)
{
    /* NAME_main calls back into the target, which releases the context the
     * message runs in and runs a message of another context: the running
     * code must stay mapped until it returns. */
    Context               a, b;
    std::vector<uint64_t> reenter = frame_of("reenter", nullptr, 0);
    struct Nested {
        Contexts     *test;
        ucp_context_h release, other;
        uint64_t      other_calls;
    } nested          = {this, a.get(), b.get(), 0};
    reenter_args args = {};
    args.callback     = [](void *arg) {
        auto *n = static_cast<Nested *>(arg);
        ucp_ifunc_context_release(n->release);
        n->other_calls = n->test->tally_in(n->other);
    };
    args.callback_arg = &nested;

    for (int round = 1; round <= 2; ++round) {
        EXPECT_EQ(UCS_OK, ucp_poll_ifunc(a.get(), reenter.data(),
                                         reenter.size() * 8, &args));
        EXPECT_EQ(uint64_t(round), args.returned);
        EXPECT_EQ(uint64_t(round), nested.other_calls);
        reenter = frame_of("reenter", nullptr, 0);
    }
}

} // namespace
} // namespace test
