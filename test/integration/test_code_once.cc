/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Code sent once, on the channel and active-message paths: the first
 * message of an ifunc carries its code, later ones name it; and the cases
 * where a reference could go wrong (docs/design.md, "Code sent once"):
 * many messages before the target said anything, a target that lost its
 * code, two sources, code rebuilt under the same name, and a reference to
 * code the target never had.
 */
#include "path.h"

#include "../common/frames.h"
#include "../ifuncs/test_ifunc.h"

#include "../../src/ucp/ifunc/format/frame.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace test {
namespace {

class CodeOnce : public PathTest {};

TEST_P(CodeOnce, FirstMessageCarriesTheCodeLaterOnesNameIt)
{
    uint32_t handle = target_->register_ifunc("counter");
    ASSERT_EQ(UCS_OK, end_->send(0, handle, 1).status);
    ASSERT_TRUE(end_->poll_until([&] { return end_->result<int64_t>() == 1; }));
    /* The target's answer travels to the source on its own; on a loaded
     * machine a few more messages may leave with the code before it
     * arrives, never all of them. */
    int64_t ran = 1;
    while ((end_->sent().second == 0) && (ran < 200)) {
        ASSERT_EQ(UCS_OK, end_->send(0, handle, 1).status);
        ++ran;
        ASSERT_TRUE(end_->poll_until(
                [&] { return end_->result<int64_t>() == ran; }));
    }
    ASSERT_GT(end_->sent().second, 0u)
            << "the source never learned that the target holds the code";
    ASSERT_EQ(UCS_OK, end_->send(0, handle, 50).status);
    ran += 50;
    ASSERT_TRUE(
            end_->poll_until([&] { return end_->result<int64_t>() == ran; }));

    auto sent = end_->sent();
    EXPECT_GE(sent.first, 1u);
    EXPECT_GE(sent.second, 50u) << "with code " << sent.first;
    EXPECT_EQ(uint64_t(ran), sent.first + sent.second);

    /* The paper's mode on demand: the code in every message. */
    ASSERT_EQ(UCS_OK,
              end_->send(0, handle, 5, nullptr, 0, kPathWithCode).status);
    ASSERT_TRUE(end_->poll_until(
            [&] { return end_->result<int64_t>() == ran + 5; }));
    EXPECT_EQ(sent.first + 5, end_->sent().first);
    EXPECT_TRUE(end_->errors().empty());
}

/* Before the target has said anything, every message must carry the code,
 * however many are in flight and in whatever order the transport delivers
 * them; run with several lanes where UCX has them. */
TEST_P(CodeOnce, BurstBeforeTheTargetAnswers)
{
    WarningCounter missing("does not hold");
    uint32_t       handle = target_->register_ifunc("counter");
    ASSERT_EQ(UCS_OK, end_->send(0, handle, 500).status);
    ASSERT_TRUE(
            end_->poll_until([&] { return end_->result<int64_t>() == 500; }));
    EXPECT_EQ(0, missing.count());
    EXPECT_TRUE(end_->errors().empty());
    auto sent = end_->sent();
    EXPECT_GE(sent.first, 1u);
    EXPECT_EQ(500u, sent.first + sent.second);
}

TEST_P(CodeOnce, TargetThatLostItsCodeGetsItAgain)
{
    uint32_t handle = target_->register_ifunc("tally");
    ASSERT_EQ(UCS_OK, end_->send(0, handle, 10).status);
    ASSERT_TRUE(
            end_->poll_until([&] { return end_->result<uint64_t>() == 10; }));
    /* More until some went by reference: the target's answer may come
     * late on a loaded machine. */
    uint64_t ran = 10;
    for (int batch = 0; (batch < 100) && (end_->sent().second == 0); ++batch) {
        ASSERT_EQ(UCS_OK, end_->send(0, handle, 10).status);
        ran += 10;
        ASSERT_TRUE(end_->poll_until(
                [&] { return end_->result<uint64_t>() == ran; }));
    }
    EXPECT_GT(end_->sent().second, 0u);

    /* The target drops everything it had (as a restarted process would:
     * its code and the statics of that code) and opens a new path; the
     * source opens the new one. */
    end_.reset();
    ucp_ifunc_context_release(target_->context());
    end_ = std::make_unique<PathEnd>(*target_, path());
    end_->open();

    ASSERT_EQ(UCS_OK, end_->send(0, handle, 20).status);
    /* tally counts the runs of its code: 20 again means the code was linked
     * anew from a message that carried it. */
    ASSERT_TRUE(
            end_->poll_until([&] { return end_->result<uint64_t>() == 20; }));
    auto sent = end_->sent();
    EXPECT_GE(sent.first, 1u);
    EXPECT_EQ(20u, sent.first + sent.second);
    EXPECT_TRUE(end_->errors().empty());
}

TEST_P(CodeOnce, TwoSourcesEachSendTheCodeFirst)
{
    size_t                   second = target_->add_peer();
    std::unique_ptr<PathEnd> second_channel;
    PathEnd                 &second_end =
            second_source_end(*target_, *end_, second, &second_channel);
    uint32_t first_handle  = target_->register_ifunc("counter");
    uint32_t second_handle = register_on_peer(*target_, second, "counter");

    /* The first source's code is at the target already when the second one
     * starts: the second must still not name it before its own channel
     * (or reply) says so. */
    ASSERT_EQ(UCS_OK, end_->send(0, first_handle, 30).status);
    ASSERT_TRUE(
            end_->poll_until([&] { return end_->result<int64_t>() == 30; }));
    ASSERT_EQ(UCS_OK, second_end.send(second, second_handle, 30).status);
    ASSERT_TRUE(second_end.poll_until([&] {
        return second_end.result<int64_t>() == 30 + (second_channel ? 0 : 30);
    }));

    EXPECT_GE(end_->sent(0).first, 1u);
    EXPECT_GE(second_end.sent(second).first, 1u);
    EXPECT_TRUE(end_->errors().empty());
    EXPECT_TRUE(second_end.errors().empty());
    second_channel.reset();
}

void copy_file(const std::string &from, const std::string &to)
{
    /* Written aside and renamed: a process that still maps the old file
     * keeps it intact. */
    std::ifstream in(from, std::ios::binary);
    std::ofstream out(to + ".tmp", std::ios::binary);
    out << in.rdbuf();
    out.close();
    ASSERT_TRUE(in.good() && out.good()) << from;
    ASSERT_EQ(0, rename((to + ".tmp").c_str(), to.c_str()));
}

TEST_P(CodeOnce, CodeRebuiltUnderTheSameNameRunsTheNewCode)
{
    char templ[] = "/tmp/ucx-ifunc-rebuilt-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(templ));
    std::string dir     = templ;
    std::string library = dir + "/rebuilt.so";
    copy_file(ifunc_lib_dir() + "/rebuilt_v1/rebuilt.so", library);

    end_.reset();
    target_.reset();
    target_ = std::make_unique<Target>(tls(), dir,
                                       UCP_FEATURE_RMA | UCP_FEATURE_AM);
    /* What is tested is the code-once protocol, not trust: the target has
     * no copy of either build, and takes any code. */
    ScopedEnv any_code("UCX_IFUNC_TRUST", "any");
    end_ = std::make_unique<PathEnd>(*target_, path());
    end_->open();
    auto *result = &end_->result<uint64_t>(); /* [0] version, [1] calls */

    uint32_t handle = target_->register_ifunc("rebuilt");
    ASSERT_EQ(UCS_OK, end_->send(0, handle, 10).status);
    ASSERT_TRUE(end_->poll_until([&] { return result[1] == 10; }));
    EXPECT_EQ(1u, result[0]);

    /* Rebuilt: same name, other code; the source loads it afresh. */
    Request dereg{};
    dereg.op     = Op::deregister_ifunc;
    dereg.handle = handle;
    ASSERT_EQ(UCS_OK, target_->call(dereg).status);
    copy_file(ifunc_lib_dir() + "/rebuilt_v2/rebuilt.so", library);
    handle = target_->register_ifunc("rebuilt");
    ASSERT_EQ(UCS_OK, end_->send(0, handle, 10).status);
    ASSERT_TRUE(end_->poll_until([&] { return result[1] == 20; }));
    EXPECT_EQ(2u, result[0]);
    EXPECT_GE(end_->sent().first, 2u); /* each build's code went once */
    EXPECT_TRUE(end_->errors().empty());

    end_.reset();
    target_.reset();
    unlink(library.c_str());
    rmdir(dir.c_str());
}

INSTANTIATE_PATH_TESTS(CodeOnce);

/* A reference to code the target does not hold (forged, or stale) runs
 * nothing, and code that arrives later runs as usual. */
class ForgedReference : public TransportTest {};

TEST_P(ForgedReference, RunsNothingAndTheSlotWorksAfterwards)
{
    using namespace ucx_ifunc;
    uint32_t          handle  = target_->register_ifunc("counter");
    int64_t           counter = 1;
    std::vector<char> full =
            target_->get_frame(handle, &counter, sizeof(counter));
    FrameHeader hdr;
    std::memcpy(&hdr, full.data(), sizeof(hdr));
    /* An index the target never gave (slot 0 of generation 1; a cache's
     * generations start at a random value): it names nothing, before the
     * code is linked and after. */
    uint64_t  seal;
    RefHeader ref_hdr =
            ref_header_for(ref_header(hdr), uint64_t(1) << 32, &seal);
    std::vector<char> ref(ref_hdr.frame_size, 0);
    ref_hdr.seal = seal;
    std::memcpy(ref.data(), &ref_hdr, sizeof(ref_hdr));
    std::memcpy(ref.data() + sizeof(ref_hdr), full.data() + hdr.payload_offset,
                hdr.payload_size);

    int64_t        total = 0;
    WarningCounter missing("does not hold");
    ASSERT_EQ(UCS_OK, target_->put_raw(0, ref.data(), ref.size()).status);
    EXPECT_EQ(UCS_ERR_NO_ELEM, target_->poll_until_result(0, 4096, &total));
    EXPECT_EQ(0, total);
    EXPECT_EQ(1, missing.count());

    ASSERT_EQ(UCS_OK, target_->put_raw(0, full.data(), full.size()).status);
    EXPECT_EQ(UCS_OK, target_->poll_until_result(0, 4096, &total));
    EXPECT_EQ(1, total);
    /* The target holds the code now; the forged index still names
     * nothing, and the slot takes the next message as usual. */
    ASSERT_EQ(UCS_OK, target_->put_raw(0, ref.data(), ref.size()).status);
    EXPECT_EQ(UCS_ERR_NO_ELEM, target_->poll_until_result(0, 4096, &total));
    EXPECT_EQ(1, total);
    ASSERT_EQ(UCS_OK, target_->put_raw(0, full.data(), full.size()).status);
    EXPECT_EQ(UCS_OK, target_->poll_until_result(0, 4096, &total));
    EXPECT_EQ(2, total);
}

INSTANTIATE_TEST_SUITE_P(Transports, ForgedReference,
                         ::testing::Values("sm", "tcp"), transport_name);

} // namespace
} // namespace test
