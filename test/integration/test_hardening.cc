/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Attacks on a target by peers that may send it messages, on every
 * delivery path: copies of a captured signed image with bytes after the
 * image (which no signature covers) must link nothing; a peer that floods
 * the target with code it may run must not pin the whole code cache; the
 * AM service must refuse messages beyond its limits before allocating
 * anything. Each test prints what it measured (attack rounds, the
 * target's mappings and memory before and after).
 */
#include "../common/frames.h"
#include "../common/process.h"
#include "../common/variants.h"
#include "constructs.h"
#include "path.h"

#include <fstream>
#include <string>

namespace test {
namespace {

constexpr uint64_t kAttackRounds = 2000;
constexpr size_t   kSlot         = 1ul << 20;

/* What an attack did to the target. */
struct Footprint {
    size_t mappings = mapping_count();
    long   rss      = rss_kib();

    void report(const char *what) const
    {
        size_t mappings_after = mapping_count();
        long   rss_after      = rss_kib();
        std::printf("    %s: mappings %zu -> %zu, RSS %ld -> %ld KiB\n", what,
                    mappings, mappings_after, rss, rss_after);
        ::testing::Test::RecordProperty("mappings_before", int(mappings));
        ::testing::Test::RecordProperty("mappings_after", int(mappings_after));
        ::testing::Test::RecordProperty("rss_kib_before", int(rss));
        ::testing::Test::RecordProperty("rss_kib_after", int(rss_after));
    }
};

std::string key_path(const char *name)
{
    return std::string(UCX_IFUNC_TEST_KEY_DIR) + "/" + name + ".pub";
}

/* Where the attack comes from: a polled buffer (the paper's raw path), a
 * channel, or the active-message service. */
enum class Via { raw, channel, am };

using AttackParam = std::tuple<std::string, Via>;

std::string attack_name(const ::testing::TestParamInfo<AttackParam> &info)
{
    static const char *via[] = {"raw", "channel", "am"};
    return std::get<0>(info.param) + "_" + via[int(std::get<1>(info.param))];
}

/* A target whose peers load the signed test library (the site key signed
 * it, and the target trusts that key) under the default policy. */
class Attack : public ::testing::TestWithParam<AttackParam> {
protected:
    void SetUp() override
    {
        if (tls() == "tcp") {
            env_.push_back(
                    std::make_unique<ScopedEnv>("UCX_TCP_PUT_ENABLE", "n"));
        }
        env_.push_back(std::make_unique<ScopedEnv>("UCX_IFUNC_TRUSTED_KEYS",
                                                   key_path("site").c_str()));
    }

    void start(const std::string &peer_dir)
    {
        target_ =
                std::make_unique<Target>(tls(), peer_ifunc_lib_dir() + peer_dir,
                                         UCP_FEATURE_RMA | UCP_FEATURE_AM);
        if (via() != Via::raw) {
            end_ = std::make_unique<PathEnd>(
                    *target_, (via() == Via::am) ? Path::am : Path::channel);
            end_->open();
        }
    }

    void TearDown() override
    {
        second_.reset();
        end_.reset();
        target_.reset();
        env_.clear();
    }

    const std::string &tls() const { return std::get<0>(GetParam()); }
    Via                via() const { return std::get<1>(GetParam()); }

    /* Peer 0 sends @a count variants of the message of @a handle. */
    Reply send_variants(uint32_t handle, uint64_t count, uint32_t kind,
                        const void *args, size_t args_size)
    {
        Request req{};
        req.op     = Op::path_send_variants;
        req.handle = handle;
        req.count  = count;
        req.flags  = kind;
        req.seed   = 1;
        return end_->call(0, req, args, args_size);
    }

    std::vector<std::unique_ptr<ScopedEnv>> env_;
    std::unique_ptr<Target>                 target_;
    std::unique_ptr<PathEnd>                end_;
    std::unique_ptr<PathEnd>                second_;
};

TEST_P(Attack, TrailingBytesAfterASignedImageLinkNothing)
{
    /* Before 0.3, each copy linked as new trusted code: the code ids
     * differ, the signature still verifies. */
    env_.push_back(
            std::make_unique<ScopedEnv>("UCX_IFUNC_MAX_LINKED_CODES", "64"));
    start("/signed");
    uint32_t          handle   = target_->register_ifunc("constructs_signed");
    int32_t           selector = 3;
    constructs_result result   = {};
    WarningCounter    warnings("image declares");
    Footprint         before;
    if (via() == Via::raw) {
        std::vector<char> frame =
                target_->get_frame(handle, &selector, sizeof(selector));
        for (uint64_t i = 0; i < kAttackRounds; ++i) {
            std::vector<char> variant = with_trailing_bytes(frame, i + 1);
            ASSERT_EQ(
                    UCS_OK,
                    target_->put_raw(0, variant.data(), variant.size()).status);
            ASSERT_EQ(UCS_ERR_INVALID_PARAM,
                      target_->poll_until_result(0, kSlot, &result));
        }
    } else {
        Reply reply = send_variants(handle, kAttackRounds, kVariantTrailing,
                                    &selector, sizeof(selector));
        ASSERT_EQ(UCS_OK, reply.status);
        ASSERT_EQ(kAttackRounds, reply.value);
        /* The AM path runs messages as they come, the channel as polled:
         * take the last ones in. */
        end_->poll_until([] { return false; }, 0.5);
    }
    before.report("after 2000 variants");
    EXPECT_EQ(0u, result.calls);
    EXPECT_EQ(0u, end_ ? end_->result<constructs_result>().calls : 0u);
    EXPECT_GE(warnings.count(), 1);
    /* Nothing linked: UCX may map a few pages meanwhile, but 64 linked
     * images would take 192 mappings more. */
    EXPECT_LT(mapping_count(), before.mappings + 30);

    /* The signed image itself, from another peer: links and runs. */
    size_t peer = target_->add_peer();
    if (via() == Via::raw) {
        Request req{};
        req.op = Op::register_ifunc;
        snprintf(req.name, sizeof(req.name), "constructs_signed");
        uint32_t other = uint32_t(
                target_->call_polling(peer, req, nullptr, 0, [] {}).value);
        req        = Request{};
        req.op     = Op::send;
        req.handle = other;
        ASSERT_EQ(UCS_OK, target_->call_polling(peer, req, &selector,
                                                sizeof(selector), [] {})
                                  .status);
        ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &result));
        expect_constructs_passed("constructs_signed", result);
    } else {
        PathEnd &end   = second_source_end(*target_, *end_, peer, &second_);
        uint32_t other = register_on_peer(*target_, peer, "constructs_signed");
        ASSERT_EQ(UCS_OK,
                  end.send(peer, other, 1, &selector, sizeof(selector)).status);
        auto &ran = end.result<constructs_result>();
        ASSERT_TRUE(end.poll_until([&] { return ran.calls == 1; }));
        expect_constructs_passed("constructs_signed", ran);
    }
}

TEST_P(Attack, CodeFloodPinsAShareAndOtherPeersCodeStillLinks)
{
    /* A peer the target runs anything of (UCX_IFUNC_TRUST=any) sends 2000
     * different codes, each told to be held where the path tells: at most
     * half of the cache can be pinned for sources, so another peer's code
     * still links and runs. */
    if (via() == Via::raw) {
        GTEST_SKIP() << "the raw path tells no source what it holds";
    }
    env_.push_back(std::make_unique<ScopedEnv>("UCX_IFUNC_TRUST", "any"));
    env_.push_back(
            std::make_unique<ScopedEnv>("UCX_IFUNC_MAX_LINKED_CODES", "64"));
    start("");
    uint32_t  handle    = target_->register_ifunc("counter");
    int64_t   increment = 1;
    Footprint before;
    Reply     reply = send_variants(handle, kAttackRounds, kVariantRenamed,
                                    &increment, sizeof(increment));
    ASSERT_EQ(UCS_OK, reply.status);
    ASSERT_EQ(kAttackRounds, reply.value);
    auto &ran = end_->result<int64_t>();
    ASSERT_TRUE(
            end_->poll_until([&] { return ran == int64_t(kAttackRounds); }));
    before.report("after 2000 codes");
    /* At most MAX_LINKED_CODES images stay mapped, three mappings each. */
    EXPECT_LE(mapping_count(), before.mappings + 3 * 64 + 16);

    size_t   peer        = target_->add_peer();
    PathEnd &end         = second_source_end(*target_, *end_, peer, &second_);
    uint32_t other       = register_on_peer(*target_, peer, "counter");
    int64_t  start_value = end.result<int64_t>();
    ASSERT_EQ(UCS_OK,
              end.send(peer, other, 10, &increment, sizeof(increment)).status);
    auto &counted = end.result<int64_t>();
    EXPECT_TRUE(end.poll_until([&] { return counted == start_value + 10; }));
    EXPECT_TRUE(end.errors().empty());
}

INSTANTIATE_TEST_SUITE_P(
        Paths, Attack,
        ::testing::Combine(::testing::Values("sm", "tcp"),
                           ::testing::Values(Via::raw, Via::channel, Via::am)),
        attack_name);

/* The AM service's limits, with active messages a peer makes itself. */
class AmLimits : public TransportTest {
protected:
    void SetUp() override {}

    void start(std::vector<std::pair<const char *, const char *>> env)
    {
        if (GetParam() == "tcp") {
            env_.push_back(
                    std::make_unique<ScopedEnv>("UCX_TCP_PUT_ENABLE", "n"));
        }
        for (auto &[name, value] : env) {
            env_.push_back(std::make_unique<ScopedEnv>(name, value));
        }
        target_ = std::make_unique<Target>(GetParam(), peer_ifunc_lib_dir(),
                                           UCP_FEATURE_RMA | UCP_FEATURE_AM);
        end_    = std::make_unique<PathEnd>(*target_, Path::am);
        end_->open(); /* the peer's service takes the target's replies */
    }

    void TearDown() override
    {
        end_.reset();
        target_.reset();
        env_.clear();
    }

    /* @a count messages of @a size bytes with AM header @a header, all in
     * flight at once; the most the target's heap held beyond what it held
     * before goes to @a peak_bytes. */
    Reply am_raw(const std::vector<char> &header, size_t size, uint64_t count,
                 uint32_t flags, size_t *peak_bytes = nullptr)
    {
        Request req{};
        req.op       = Op::am_raw;
        req.seed     = UCP_IFUNC_AM_ID_DEFAULT;
        req.count    = size;
        req.slots    = count;
        req.flags    = flags;
        size_t start = heap_in_use(), peak = start;
        Reply  reply = target_->call_polling(
                 0, req, header.data(), header.size(),
                 [&] { peak = std::max(peak, heap_in_use()); });
        if (peak_bytes != nullptr) {
            *peak_bytes = peak - start;
        }
        return reply;
    }

    /* An AM reference header naming code the target does not hold. */
    static std::vector<char> unknown_code_header()
    {
        std::vector<char> header(16, 0); /* the code id */
        header[0] = 0x5a;
        return header;
    }

    std::vector<std::unique_ptr<ScopedEnv>> env_;
    std::unique_ptr<PathEnd>                end_;
};

TEST_P(AmLimits, MessageBeyondTheLimitIsRefusedBeforeAnyAllocation)
{
    start({{"UCX_IFUNC_MAX_AM_MESSAGE", "1MB"}});
    /* One message within the limit first: UCX allocates some of its own
     * buffers on a connection's first messages (UCX 1.18.1's TCP transport
     * takes 1 MiB of receive buffers at once), which are not the target's
     * doing. */
    EXPECT_EQ(UCS_OK,
              am_raw(unknown_code_header(), 512 * 1024, 1, kAmRawRndv).status);
    /* It is received, and dropped (it is no frame): the counts below are
     * from here on. */
    ucp_ifunc_context_attr_t before = {};
    before.field_mask               = UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED |
                        UCP_IFUNC_CONTEXT_ATTR_FIELD_BYTES;
    ASSERT_TRUE(end_->poll_until([&] {
        ucp_ifunc_context_query(target_->context(), &before);
        return before.rejected_bad_frame > 0;
    }));
    WarningCounter warnings("UCX_IFUNC_MAX_AM_MESSAGE");
    size_t         peak = 0;
    Reply          reply =
            am_raw(unknown_code_header(), 64ul << 20, 8, kAmRawRndv, &peak);
    std::printf("    8 x 64 MiB refused: the target's heap grew by at most "
                "%zu KiB\n",
                peak / 1024);
    /* The source's send completes with the target's refusal. */
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, reply.status);
    EXPECT_EQ(0u, reply.value);
    EXPECT_GE(warnings.count(), 1);
    EXPECT_LT(peak, 1ul << 20);
    /* Each refusal counts as one (ucp_ifunc_context_query). */
    ucp_ifunc_context_attr_t attr = {};
    attr.field_mask               = UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED |
                      UCP_IFUNC_CONTEXT_ATTR_FIELD_BYTES;
    ASSERT_EQ(UCS_OK, ucp_ifunc_context_query(target_->context(), &attr));
    EXPECT_EQ(8u, attr.rejected_too_large - before.rejected_too_large);
    EXPECT_EQ(0u, attr.bytes_received - before.bytes_received)
            << "none was received";

    /* Within the limit, the same kind of message is received (and then
     * dropped: it is no frame). */
    reply = am_raw(unknown_code_header(), 512 * 1024, 1, kAmRawRndv);
    EXPECT_EQ(UCS_OK, reply.status);
    ASSERT_TRUE(end_->poll_until([&] {
        ucp_ifunc_context_query(target_->context(), &attr);
        return attr.rejected_bad_frame > before.rejected_bad_frame;
    }));
    EXPECT_EQ(1u, attr.rejected_bad_frame - before.rejected_bad_frame);
    EXPECT_EQ(512u * 1024, attr.bytes_received - before.bytes_received);
}

TEST_P(AmLimits, RendezvousMemoryInFlightIsBounded)
{
    /* 16 messages of 4 MiB at once: without a bound on receive memory, 8
     * buffers of 4 MiB were taken at once (32 MiB); with 8 MB, two. */
    start({{"UCX_IFUNC_MAX_AM_MESSAGE", "4MB"},
           {"UCX_IFUNC_MAX_AM_RNDV_MEMORY", "8MB"}});
    size_t peak = 0;
    Reply  reply =
            am_raw(unknown_code_header(), 4ul << 20, 16, kAmRawRndv, &peak);
    std::printf("    16 x 4 MiB in flight: the target's heap grew by at most "
                "%zu KiB\n",
                peak / 1024);
    EXPECT_EQ(UCS_OK, reply.status);
    EXPECT_EQ(16u, reply.value);
    /* Two buffers, and what UCX allocates for the messages beside them. */
    EXPECT_GE(peak, 4ul << 20);
    EXPECT_LT(peak, 12ul << 20);
}

TEST_P(AmLimits, OverAWorkerAddressEndpointTheSourceRefusesWhatTheTargetWould)
{
    /* Such an endpoint sends eagerly (no rendezvous read from a source that
     * may die): the target could refuse a message only once UCX had it
     * whole, so the source refuses it, by the same limit (echo's frame
     * carries its arguments twice). */
    start({{"UCX_IFUNC_MAX_AM_MESSAGE", "1MB"}});
    uint32_t          handle = register_on_peer(*target_, 0, "echo");
    std::vector<char> large(2ul << 20, 0x11), small(256ul << 10, 0x22);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              end_->send(0, handle, 1, large.data(), large.size()).status);
    EXPECT_EQ(UCS_OK,
              end_->send(0, handle, 1, small.data(), small.size()).status);
    EXPECT_TRUE(end_->poll_until(
            [&] { return end_->result<echo_result>().calls >= 1; }, 10));
    EXPECT_EQ(1u, end_->result<echo_result>().calls);
}

TEST_P(AmLimits, FullMessageWithoutFramesIsWarnedAbout)
{
    start({});
    WarningCounter    warnings("frames one after the other");
    std::vector<char> header(16, 0); /* token 0, 0; the data: zeros */
    Reply             reply = am_raw(header, 256, 1, kAmRawReply);
    EXPECT_EQ(UCS_OK, reply.status);
    end_->poll_until([&] { return warnings.count() > 0; }, 10);
    EXPECT_EQ(1, warnings.count());
}

INSTANTIATE_TEST_SUITE_P(Transports, AmLimits, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
