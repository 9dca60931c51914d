/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What a peer must not be able to do to a target, in one process: pass
 * bytes after a code image that no signature covers, pin the whole code
 * cache, make the target load a library again for every rejected frame,
 * silence the warnings about other peers, or leave a stale size in a slot.
 */
#include "fixture.h"

#include "ucp/ifunc/load/context.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/format/image.h"
#include "ucp/ifunc/base/peer_log.h"

#include "../common/frames.h"
#include "../common/variants.h"
#include "../ifuncs/test_ifunc.h"

#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>

namespace test {
namespace {

using ucx_ifunc::PeerLog;
using ucx_ifunc::PeerProblem;

constexpr uint64_t kSecondNs = 1000ull * 1000 * 1000;

TEST(PeerLogLimits, FirstLineThenOnePerPeriodSayingHowManyWereHeldBack)
{
    PeerLog     log;
    std::string note;
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              log.level_at(PeerProblem::forged_code, {1, 1}, 7, 0, &note));
    EXPECT_EQ("", note);
    for (int i = 1; i <= 5; ++i) {
        EXPECT_EQ(UCS_LOG_LEVEL_DEBUG,
                  log.level_at(PeerProblem::forged_code, {1, 1}, 7, i, &note));
    }
    /* Another peer, another problem of the same peer, the same claimed
     * peer on another connection: not held back. */
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              log.level_at(PeerProblem::forged_code, {1, 1}, 8, 6, &note));
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              log.level_at(PeerProblem::unknown_code, {1, 1}, 7, 7, &note));
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              log.level_at(PeerProblem::forged_code, {2, 2}, 7, 8, &note));
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              log.level_at(PeerProblem::forged_code, {1, 1}, 7,
                           PeerLog::kKeyPeriodNs, &note));
    EXPECT_NE(std::string::npos, note.find("5 more like it held back")) << note;
}

TEST(PeerLogLimits, APeerThatInventsKeysHoldsBackOthersForOneWindowOnly)
{
    PeerLog     log;
    std::string note;
    unsigned    warned = 0;
    /* 2000 source ids in one window on one connection (0: a path that
     * knows none): more than the table keeps, too. It gets its share. */
    for (uint64_t peer = 0; peer < 2000; ++peer) {
        warned += (log.level_at(PeerProblem::forged_code, {0, 0}, peer, 1,
                                &note) == UCS_LOG_LEVEL_WARN);
    }
    EXPECT_EQ(PeerLog::kShared, warned);
    /* Within the window, another key of it waits; in the next one it is
     * warned about, with the count of what was held back. */
    EXPECT_EQ(UCS_LOG_LEVEL_DEBUG,
              log.level_at(PeerProblem::forged_code, {0, 0}, 5000, 2, &note));
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              log.level_at(PeerProblem::forged_code, {0, 0}, 5000,
                           1 + PeerLog::kWindowNs, &note));
    EXPECT_NE(std::string::npos, note.find("lines about other peers")) << note;
}

TEST(PeerLogLimits, AFloodFromOneConnectionHoldsBackNoOtherFirstLine)
{
    /* As in 0.3's attack: one connection sends frames from invented source
     * ids without pause for 3.5 s; a victim connection sends a bad frame
     * every 50 ms (70 in all). Before, the flood kept every window full
     * and the victim drew no warning; now its first line goes out at once,
     * and the flood takes at most kShared lines a window. */
    PeerLog            log;
    std::string        note;
    constexpr uint64_t kFlooder = 11, kVictim = 12;
    constexpr uint64_t kStepNs     = 1000 * 1000; /* a flood frame a ms */
    constexpr uint64_t kEndNs      = 3500 * kStepNs;
    uint64_t           flood_lines = 0, victim_lines = 0, victim_frames = 0;
    uint64_t           first_victim_line_ns = UINT64_MAX;
    uint64_t           invented             = 0;
    for (uint64_t now = kSecondNs; now < kSecondNs + kEndNs; now += kStepNs) {
        for (int i = 0; i < 20; ++i) {
            flood_lines += (log.level_at(PeerProblem::forged_code,
                                         {kFlooder, kFlooder}, ++invented, now,
                                         &note) == UCS_LOG_LEVEL_WARN);
        }
        if ((now - kSecondNs) % (50 * kStepNs) == 0) {
            ++victim_frames;
            if (log.level_at(PeerProblem::am_message, {kVictim, kVictim}, 0,
                             now, &note) == UCS_LOG_LEVEL_WARN) {
                ++victim_lines;
                first_victim_line_ns =
                        std::min(first_victim_line_ns, now - kSecondNs);
            }
        }
    }
    std::printf("    flood: %llu frames, %llu lines; victim: %llu frames, "
                "%llu lines, the first %.3f s after its first frame\n",
                static_cast<unsigned long long>(invented),
                static_cast<unsigned long long>(flood_lines),
                static_cast<unsigned long long>(victim_frames),
                static_cast<unsigned long long>(victim_lines),
                first_victim_line_ns / 1e9);
    EXPECT_EQ(70u, victim_frames);
    EXPECT_LE(first_victim_line_ns, PeerLog::kWindowNs);
    EXPECT_EQ(0u, first_victim_line_ns) << "not held back at all";
    /* One line per key period for the victim's one key. */
    EXPECT_EQ(1u, victim_lines);
    /* The flood: at most its share of each window (4 windows). */
    EXPECT_LE(flood_lines, 4u * PeerLog::kShared);
    EXPECT_GE(flood_lines, 3u * PeerLog::kShared);
}

TEST(PeerLogLimits, ANewSourceOnAConnectionHasKeysOfItsOwn)
{
    /* A peer at a reused endpoint address keeps the connection (am.cc,
     * KnownEndpoint) but is a new source: its first line is not held back
     * by the old source's line of the same kind. */
    PeerLog     log;
    std::string note;
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              log.level_at(PeerProblem::am_message, {5, 10}, 0, 0, &note));
    EXPECT_EQ(UCS_LOG_LEVEL_DEBUG,
              log.level_at(PeerProblem::am_message, {5, 10}, 0, 1, &note));
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              log.level_at(PeerProblem::am_message, {5, 11}, 0, 2, &note));
}

TEST(PeerLogLimits, ManyFloodingConnectionsHoldBackANewOneForAWindowAtMost)
{
    /* kBurst connections that each flood fill every window: a new
     * connection's first line waits for the next window, no longer. */
    PeerLog     log;
    std::string note;
    for (uint64_t connection = 1; connection <= PeerLog::kBurst; ++connection) {
        for (uint64_t peer = 0; peer < 100; ++peer) {
            log.level_at(PeerProblem::forged_code, {connection, connection},
                         peer, 10, &note);
        }
    }
    EXPECT_EQ(UCS_LOG_LEVEL_DEBUG, log.level_at(PeerProblem::am_message,
                                                {1000, 1000}, 0, 20, &note));
    EXPECT_EQ(UCS_LOG_LEVEL_WARN,
              log.level_at(PeerProblem::am_message, {1000, 1000}, 0,
                           10 + PeerLog::kWindowNs, &note));
}

class Hardening : public UnitTest {
protected:
    void TearDown() override
    {
        for (const char *name :
             {"UCX_IFUNC_TRUST", "UCX_IFUNC_MAX_LINKED_CODES",
              "IFUNC_TEST_LOAD_LOG"}) {
            unsetenv(name);
        }
    }

    static std::vector<char> bytes_of(const std::vector<uint64_t> &frame)
    {
        const char *p = reinterpret_cast<const char *>(frame.data());
        return std::vector<char>(p, p + frame.size() * 8);
    }

    /* Polls @a frame in a buffer of its own, on context @a target. */
    static ucs_status_t poll_frame(ucp_context_h            target,
                                   const std::vector<char> &frame,
                                   void                    *target_args)
    {
        std::vector<uint64_t> buffer((frame.size() + 7) / 8 + 8, 0);
        std::memcpy(buffer.data(), frame.data(), frame.size());
        return ucp_poll_ifunc(target, buffer.data(), buffer.size() * 8,
                              target_args);
    }
};

TEST_F(Hardening, BytesAfterTheImageMakeTheFrameMalformed)
{
    setenv("UCX_IFUNC_TRUST", "any", 1); /* nothing else could refuse it */
    Context           target;
    std::vector<char> args(16, 'a');
    std::vector<char> frame  = bytes_of(frame_of("echo", args.data(), 16));
    echo_result       result = {};
    WarningCounter    warnings("the image declares");
    for (uint64_t tag = 1; tag <= 3; ++tag) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  poll_frame(target.get(), with_trailing_bytes(frame, tag),
                             &result));
    }
    EXPECT_EQ(0u, result.calls);
    EXPECT_EQ(3, warnings.count()) << "one line per rejected image";
    auto stats = ucx_ifunc::target_state(target.get()).code.stats();
    EXPECT_EQ(0u, stats.codes);
    /* The frame as it was runs. */
    EXPECT_EQ(UCS_OK, poll_frame(target.get(), frame, &result));
    EXPECT_EQ(1u, result.calls);
}

TEST_F(Hardening, LinkedCodeCountsItsReceivedCopyTowardTheMemoryLimit)
{
    setenv("UCX_IFUNC_TRUST", "any", 1);
    Context           target;
    std::vector<char> args(16, 'a');
    std::vector<char> frame  = bytes_of(frame_of("echo", args.data(), 16));
    echo_result       result = {};
    ASSERT_EQ(UCS_OK, poll_frame(target.get(), frame, &result));
    auto  &hdr   = frame_header(frame);
    auto   stats = ucx_ifunc::target_state(target.get()).code.stats();
    size_t image = ucx_ifunc::frame_image_offset(hdr.name_length);
    auto  *desc  = reinterpret_cast<ucp_ifunc_image_desc_t *>(&frame[image]);
    /* The mapping, and the copy of name and image kept to send it on. */
    EXPECT_GE(stats.memory,
              desc->map_size + image + hdr.image_size - ucx_ifunc::kNameOffset);
}

TEST_F(Hardening, WarningsAboutManySourcesDoNotSilenceANewOne)
{
    /* Frames whose code id is not their image's, from 2000 source ids:
     * the warnings are held back for one window at most, and a source
     * that comes later is warned about. */
    std::vector<char> args(16, 'a');
    std::vector<char> frame  = bytes_of(frame_of("echo", args.data(), 16));
    echo_result       result = {};
    WarningCounter    warnings("does not match its code id");
    auto              forged_from = [&](uint64_t source) {
        std::vector<char> forged = frame;
        auto             &hdr    = frame_header(forged);
        hdr.code_id_lo ^= 0x1234;
        hdr.nonce = (source << 32) | 1;
        hdr.seal  = ucx_ifunc::frame_seal(hdr);
        std::memcpy(forged.data() + forged.size() - 8, &hdr.seal, 8);
        return forged;
    };
    auto start = Clock::now();
    for (uint64_t source = 1; source <= 2000; ++source) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  poll_frame(context(), forged_from(source), &result));
    }
    double seconds =
            std::chrono::duration<double>(Clock::now() - start).count();
    /* A connection's share of a window (one, unless this machine is
     * slow): a polled buffer names no connection, all its frames count as
     * one's. */
    EXPECT_GE(warnings.count(), int(PeerLog::kShared));
    EXPECT_LE(warnings.count(), int(PeerLog::kShared * (1 + seconds)));
    int before = warnings.count();
    usleep((PeerLog::kWindowNs + kSecondNs / 10) / 1000);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              poll_frame(context(), forged_from(5000), &result));
    EXPECT_EQ(before + 1, warnings.count());
    EXPECT_EQ(0u, result.calls);
}

/* A temporary directory, removed with what is in it. */
class TempDir {
public:
    TempDir()
    {
        char templ[] = "/tmp/ucx-ifunc-libs-XXXXXX";
        if (mkdtemp(templ) == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        path_ = templ;
    }
    ~TempDir()
    {
        std::string command = "rm -rf '" + path_ + "'";
        if (system(command.c_str()) != 0) {
            ADD_FAILURE() << "could not remove " << path_;
        }
    }
    const std::string &path() const { return path_; }

private:
    std::string path_;
};

/* Loads of loadcount.so: its dependency appends a byte to a file at every
 * load (a constructor, as a real library's dependencies may have). */
class LoadCount {
public:
    LoadCount()
    {
        char templ[] = "/tmp/ucx-ifunc-loads-XXXXXX";
        int  fd      = mkstemp(templ);
        close(fd);
        path_ = templ;
        setenv("IFUNC_TEST_LOAD_LOG", path_.c_str(), 1);
    }
    ~LoadCount() { unlink(path_.c_str()); }

    size_t loads() const
    {
        struct stat st;
        return (stat(path_.c_str(), &st) == 0) ? size_t(st.st_size) : 0;
    }

private:
    std::string path_;
};

TEST_F(Hardening, RejectedImagesLoadTheLibraryOncePerVersionOfIt)
{
    /* The target's own loadcount.so, in a directory of its own so that
     * the file can be replaced. */
    TempDir     dir;
    std::string lib = dir.path() + "/loadcount.so";
    {
        std::ifstream in(std::string(UCX_IFUNC_TEST_LIB_DIR) + "/loadcount.so",
                         std::ios::binary);
        std::ofstream out(lib, std::ios::binary);
        out << in.rdbuf();
    }
    std::vector<char> frame = bytes_of(frame_of("loadcount", nullptr, 0));
    LoadCount         count; /* frame_of unloaded it again */
    setenv("UCX_IFUNC_LIB_DIR", dir.path().c_str(), 1);
    Context target;

    /* 100 images that differ from the library's by a byte of code, each
     * sent twice: compared with the library loaded once. */
    auto variant = [&](unsigned i) {
        std::vector<char> v   = frame;
        auto             &hdr = frame_header(v);
        size_t image          = ucx_ifunc::frame_image_offset(hdr.name_length);
        auto  *desc = reinterpret_cast<ucp_ifunc_image_desc_t *>(&v[image]);
        v[image + desc->seg[UCP_IFUNC_SEG_TEXT].file_offset + 1] ^= char(i);
        reidentify_frame(v);
        return v;
    };
    int64_t result = 0;
    for (unsigned round = 0; round < 2; ++round) {
        for (unsigned i = 1; i <= 100; ++i) {
            EXPECT_EQ(UCS_ERR_REJECTED,
                      poll_frame(target.get(), variant(i), &result));
        }
    }
    EXPECT_EQ(1u, count.loads());

    /* A new version of the file: the verdict is taken again, once. */
    sleep(1); /* another modification time */
    utimes(lib.c_str(), nullptr);
    EXPECT_EQ(UCS_ERR_REJECTED, poll_frame(target.get(), variant(1), &result));
    EXPECT_EQ(UCS_ERR_REJECTED, poll_frame(target.get(), variant(1), &result));
    EXPECT_EQ(2u, count.loads());

    /* The library's own image runs; it keeps the library loaded. */
    EXPECT_EQ(UCS_OK, poll_frame(target.get(), frame, &result));
    EXPECT_EQ(7, result);
    EXPECT_LE(count.loads(), 3u);
    unsetenv("UCX_IFUNC_LIB_DIR");
}

TEST_F(Hardening, SlotSizeMarkerFollowsTheLatestPoll)
{
    std::vector<uint64_t> buffer(1 << 17, 0); /* 1 MiB */
    echo_result           result = {};
    EXPECT_EQ(UCS_ERR_NO_MESSAGE,
              ucp_poll_ifunc(context(), buffer.data(), 1024, &result));
    EXPECT_EQ(ucx_ifunc::empty_slot_word(1024), buffer[0]);
    EXPECT_EQ(UCS_ERR_NO_MESSAGE,
              ucp_poll_ifunc(context(), buffer.data(), 1 << 20, &result));
    EXPECT_EQ(ucx_ifunc::empty_slot_word(1 << 20), buffer[0]);
    /* Whatever the memory held before the first poll: marked too. */
    buffer[0] = 0x2a2a2a2a2a2a2a2aull;
    EXPECT_EQ(UCS_ERR_NO_MESSAGE,
              ucp_poll_ifunc(context(), buffer.data(), 4096, &result));
    EXPECT_EQ(ucx_ifunc::empty_slot_word(4096), buffer[0]);
}

TEST_F(Hardening, PeersPinAtMostTheirShareAndHalfTheCacheTogether)
{
    setenv("UCX_IFUNC_TRUST", "any", 1);
    setenv("UCX_IFUNC_MAX_LINKED_CODES", "200", 1);
    Context                  target;
    ucx_ifunc::ContextState &state = ucx_ifunc::target_state(target.get());
    std::vector<char>        args(8, 'a');
    std::vector<char>        frame = bytes_of(frame_of("echo", args.data(), 8));
    std::vector<std::vector<char>> codes;
    for (unsigned i = 0; i < 150; ++i) {
        char name[8];
        snprintf(name, sizeof(name), "v%03u", i);
        codes.push_back(renamed(frame, name));
    }
    /* One peer: at most PeerPins::kMaxPerPeer of them. */
    auto pin_all = [&](ucx_ifunc::PeerPins &pins, size_t first, size_t n) {
        size_t pinned = 0;
        for (size_t i = first; i < first + n; ++i) {
            ucx_ifunc::CodeUse use;
            auto              &hdr = frame_header(codes[i]);
            EXPECT_EQ(UCS_OK, state.code.lookup(hdr, codes[i].data(), &use));
            pinned += pins.pin(use);
        }
        return pinned;
    };
    auto first = std::make_unique<ucx_ifunc::PeerPins>(state.code);
    EXPECT_EQ(ucx_ifunc::PeerPins::kMaxPerPeer, pin_all(*first, 0, 70));
    /* Others: together with the first, half of the 200 codes at most. */
    ucx_ifunc::PeerPins second(state.code), third(state.code);
    EXPECT_EQ(36u, pin_all(second, 70, 40));
    EXPECT_EQ(0u, pin_all(third, 110, 10));
    EXPECT_EQ(100u, state.code.stats().pinned_codes);
    /* Code pinned already costs nothing more to pin for another peer. */
    EXPECT_EQ(5u, pin_all(third, 0, 5));
    /* A peer that goes unpins its code. */
    first.reset();
    EXPECT_EQ(10u, pin_all(third, 110, 10));
    EXPECT_EQ(36u + 5u + 10u, state.code.stats().pinned_codes);
}

} // namespace
} // namespace test
