/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The sandbox runtime (sandbox.h) with hand-written code that keeps the
 * rules S1-S7 (sandbox_code.S): normal runs, faults of every kind, the
 * budget, host calls with good and bad pointers, two slots that cannot
 * reach each other, many slots, the state restored on the way out, what
 * slots and their debugger descriptions count toward the memory limit,
 * and the cost of a message.
 */
#if defined(__x86_64__) && defined(__linux__)

#include "fixture.h"
#include "sandbox_probe.h"
#include "../common/process.h"

#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/load/gdb_jit.h"
#include "ucp/ifunc/format/image.h"
#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/sandbox/sandbox.h"
#include "ucp/ifunc/sandbox/sandbox_verify.h"

#include <ucp/api/ucp_ifunc.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cfenv>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xmmintrin.h>

extern "C" {
extern const uint8_t sbx_text_end[];
extern const uint8_t sbx_t_double[], sbx_t_nop[], sbx_t_read[], sbx_t_write[],
        sbx_t_loop[], sbx_t_ud2[], sbx_t_div0[], sbx_t_overflow[],
        sbx_t_gate_hlt[], sbx_t_memcpy[], sbx_t_memset[], sbx_t_strlen[],
        sbx_t_call_loop[], sbx_t_flags[], sbx_t_x87_flag[],
        sbx_t_gate_with_rsp[], sbx_t_gate_at_top[], sbx_t_dirty[];
}

namespace test {
namespace {

using namespace ucx_ifunc::sandbox;

constexpr uint64_t kDataVaddr  = 0x2000; /* sandbox_code.S */
constexpr uint64_t kRelroVaddr = 0x3000;
constexpr uint64_t kMapSize    = 0x4000;
constexpr uint64_t kData       = kImageOffset + kDataVaddr; /* offsets */
constexpr uint64_t kRelro      = kImageOffset + kRelroVaddr;

uint64_t vaddr(const uint8_t *function)
{
    return uint64_t(function - sbx_text_start);
}

class Sandbox : public ::testing::Test {
protected:
    void SetUp() override
    {
        std::string why;
        if (!sandbox_supported(&why)) {
            GTEST_SKIP() << why;
        }
        ASSERT_LE(uint64_t(sbx_text_end - sbx_text_start), kDataVaddr);
        for (size_t i = 0; i < relro_.size(); ++i) {
            relro_[i] = uint8_t(i * 7 + 3);
        }
        sandbox_set_budget(0.05);
    }

    SlotImage image(std::vector<std::string> imports = {
                            "memcpy", "memset", "memmove", "memcmp", "strlen"})
    {
        SlotImage image;
        image.name     = "sandbox_test";
        image.map_size = kMapSize;
        image.segments = {
                {0, uint64_t(sbx_text_end - sbx_text_start), sbx_text_start,
                 uint64_t(sbx_text_end - sbx_text_start),
                 kSlotRead | kSlotExec},
                {kDataVaddr, 0x1000, nullptr, 0, kSlotRead | kSlotWrite},
                {kRelroVaddr, 0x1000, relro_.data(), relro_.size(), kSlotRead}};
        image.imports       = std::move(imports);
        image.payload_limit = 4096;
        return image;
    }

    std::unique_ptr<Slot> make_slot(const SlotImage &code)
    {
        std::unique_ptr<Slot> slot;
        EXPECT_EQ(UCS_OK, Slot::create(code, &slot));
        if (slot) {
            EXPECT_EQ(UCS_OK, slot->seal());
        }
        return slot;
    }

    std::unique_ptr<Slot> make_slot() { return make_slot(image()); }

    /* Runs @a function on the words @a words; they come back changed. */
    ucs_status_t run(Slot &slot, const uint8_t *function,
                     std::vector<uint64_t> &words)
    {
        ucs_status_t status = slot.run(vaddr(function), words.data(),
                                       words.size() * 8, nullptr);
        memcpy(words.data(), slot.payload_area(), words.size() * 8);
        return status;
    }

    uint64_t read(Slot &slot, uint64_t offset)
    {
        std::vector<uint64_t> words = {offset, 0};
        EXPECT_EQ(UCS_OK, run(slot, sbx_t_read, words));
        return words[1];
    }

    std::array<uint8_t, 4096> relro_{};
};

TEST_F(Sandbox, RunsAndReturnsThroughThePayload)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    EXPECT_EQ(0u, slot->base() % kSlotSize);
    for (uint64_t i = 1; i <= 3; ++i) {
        std::vector<uint64_t> words = {20 + i, 0};
        ASSERT_EQ(UCS_OK, run(*slot, sbx_t_double, words));
        EXPECT_EQ(2 * (20 + i) + 1, words[0]);
        EXPECT_EQ(i, words[1]); /* the data segment keeps its value */
    }
    uint64_t relro_word;
    memcpy(&relro_word, relro_.data(), 8);
    EXPECT_EQ(relro_word, read(*slot, kRelro));
}

TEST_F(Sandbox, NotSealedTextDoesNotRun)
{
    std::unique_ptr<Slot> slot;
    ASSERT_EQ(UCS_OK, Slot::create(image(), &slot));
    std::vector<uint64_t> words = {1, 0};
    EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_double, words));
}

TEST_F(Sandbox, BadArgumentsRunNothing)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    std::vector<uint64_t> big(4096 / 8 + 1, 0);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              slot->run(vaddr(sbx_t_nop), big.data(), big.size() * 8, nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              slot->run(kDataVaddr, big.data(), 8, nullptr));
}

TEST_F(Sandbox, AnImportNotGrantedIsRefused)
{
    std::unique_ptr<Slot> slot;
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              Slot::create(image({"memcpy", "system"}), &slot));
    EXPECT_FALSE(slot);
}

TEST_F(Sandbox, AccessesOutsideItsRightsFaultAndTheNextMessageRuns)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    struct Case {
        const uint8_t *function;
        uint64_t       offset;
    } cases[] = {
            {sbx_t_read, 0x100},                            /* low guard */
            {sbx_t_read, kGateOffset - 8},                  /* guard */
            {sbx_t_write, kGateOffset},                     /* gate page */
            {sbx_t_write, kImageOffset},                    /* text */
            {sbx_t_write, kRelro},                          /* read-only data */
            {sbx_t_read, kImageOffset + kMapSize + 0x1000}, /* past it */
            {sbx_t_read, kStackWindow},                     /* stack guard */
            {sbx_t_write, kStackTop + 16},         /* above the stack */
            {sbx_t_read, kPayloadOffset + 0x1000}, /* past the payload */
            {sbx_t_read, kGrantOffset},            /* nothing granted */
            {sbx_t_write, kSlotSize - 8},          /* high guard */
    };
    for (const Case &c : cases) {
        std::vector<uint64_t> words = {c.offset, 0x5a5a};
        EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, c.function, words))
                << std::hex << c.offset;
        EXPECT_EQ(SIGSEGV, slot->last_fault().signal);
        EXPECT_EQ(c.offset, slot->last_fault().address);
        std::vector<uint64_t> next = {5, 0};
        EXPECT_EQ(UCS_OK, run(*slot, sbx_t_double, next));
        EXPECT_EQ(11u, next[0]);
    }
    /* Writes that may happen do: the data page and the stack. */
    for (uint64_t offset : {kData + 8, kStackTop - 4096}) {
        std::vector<uint64_t> words = {offset, 0x1234};
        EXPECT_EQ(UCS_OK, run(*slot, sbx_t_write, words));
        EXPECT_EQ(0x1234u, read(*slot, offset));
    }
}

TEST_F(Sandbox, TrapsEndTheMessage)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    std::vector<uint64_t> words = {0, 0};
    EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_ud2, words));
    EXPECT_EQ(SIGILL, slot->last_fault().signal);
    EXPECT_EQ(kImageOffset + vaddr(sbx_t_ud2), slot->last_fault().pc);
    EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_div0, words));
    EXPECT_EQ(SIGFPE, slot->last_fault().signal);
    /* Gate bundles of no import halt: a fault in user mode. */
    EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_gate_hlt, words));
    EXPECT_EQ(kGateOffset + 127 * kBundleSize, slot->last_fault().pc);
    /* A stack overflow reaches the guard; the handler runs on its own
     * stack. */
    EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_overflow, words));
    EXPECT_EQ(kStackBase - 8, slot->last_fault().address);
    words = {1, 0};
    EXPECT_EQ(UCS_OK, run(*slot, sbx_t_double, words));
}

TEST_F(Sandbox, TheBudgetEndsALoop)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    for (const uint8_t *function : {sbx_t_loop, sbx_t_call_loop}) {
        std::vector<uint64_t> words = {0, 0};
        auto                  start = std::chrono::steady_clock::now();
        EXPECT_EQ(UCS_ERR_TIMED_OUT, run(*slot, function, words));
        double took = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count();
        printf("budget 50 ms: a loop ended after %.1f ms\n", took * 1e3);
        EXPECT_GE(took, 0.045);
        EXPECT_LT(took, 0.5);
        words = {1, 0};
        EXPECT_EQ(UCS_OK, run(*slot, sbx_t_double, words));
    }
}

TEST_F(Sandbox, TheBudgetHoldsInAForkedChild)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    std::vector<uint64_t> words = {0, 0};
    ASSERT_EQ(UCS_OK, run(*slot, sbx_t_nop, words)); /* watchdog runs */
    pid_t child = fork();
    ASSERT_NE(-1, child);
    if (child == 0) {
        alarm(10); /* no watchdog: the loop would not end */
        _exit((run(*slot, sbx_t_loop, words) == UCS_ERR_TIMED_OUT) ? 0 : 1);
    }
    int status;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
    EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_F(Sandbox, ASecondThreadWaitsForTheSlot)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    auto        start = std::chrono::steady_clock::now();
    std::thread first([&] {
        std::vector<uint64_t> words = {0, 0};
        EXPECT_EQ(UCS_ERR_TIMED_OUT, run(*slot, sbx_t_loop, words));
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::vector<uint64_t> words = {3, 0};
    EXPECT_EQ(UCS_OK,
              slot->run(vaddr(sbx_t_double), words.data(), 16, nullptr));
    /* It ran once the loop's budget (50 ms) was over. */
    EXPECT_GE(std::chrono::steady_clock::now() - start,
              std::chrono::milliseconds(45));
    first.join();
}

/* What granted_probe saw: the arguments, and the slot of the call. */
struct GrantedProbeCall {
    uint64_t args[3];
    Slot    *slot;
};
GrantedProbeCall granted_probe_call;

uint64_t granted_probe(uint64_t a, uint64_t b, uint64_t c, uint64_t, uint64_t,
                       uint64_t)
{
    granted_probe_call = GrantedProbeCall{{a, b, c}, running_slot()};
    return a + b + c;
}

TEST_F(Sandbox, ALayerAboveGrantsAFunction)
{
    /* Not granted yet: no slot imports it. */
    std::unique_ptr<Slot> slot;
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              Slot::create(image({"sandbox_test_granted"}), &slot));
    grant_host_function("sandbox_test_granted", granted_probe);
    auto names = granted_functions();
    EXPECT_NE(names.end(),
              std::find(names.begin(), names.end(), "sandbox_test_granted"));

    /* Import 0 is the granted function now: sbx_t_memcpy's call reaches
     * the wrapper with the registers as the code set them, in the slot. */
    slot = make_slot(image({"sandbox_test_granted"}));
    ASSERT_TRUE(slot);
    std::vector<uint64_t> words = {slot->base() + 5, 7, 11, 0};
    ASSERT_EQ(UCS_OK, run(*slot, sbx_t_memcpy, words));
    EXPECT_EQ(slot->base() + 5 + 7 + 11, words[3]);
    EXPECT_EQ(slot->base() + 5, granted_probe_call.args[0]);
    EXPECT_EQ(7u, granted_probe_call.args[1]);
    EXPECT_EQ(11u, granted_probe_call.args[2]);
    EXPECT_EQ(slot.get(), granted_probe_call.slot);
    EXPECT_EQ(nullptr, running_slot()); /* outside a host call */
}

TEST_F(Sandbox, HostCallsCheckTheirPointers)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    const uint64_t        src = kPayloadOffset + 64; /* the payload's tail */
    std::vector<uint64_t> words(16, 0x1111111111111111);
    words[0] = slot->base() + kData + 64; /* a full pointer */
    words[1] = src;                       /* or its low 32 bits */
    words[2] = 32;
    ASSERT_EQ(UCS_OK, run(*slot, sbx_t_memcpy, words));
    EXPECT_EQ(slot->base() + kData + 64, words[3]);
    EXPECT_EQ(0x1111111111111111u, read(*slot, kData + 64 + 24));

    /* Out of range, read-only, or across a region's end: refused, nothing
     * written. */
    uint64_t host_word = 77;
    struct Case {
        uint64_t dst, src, n;
    } refused[] = {
            {kRelro, src, 8},
            {kImageOffset, src, 8},
            {0x100, src, 8},
            {kData + 0x1000 - 8, src, 16},
            {kData, kGrantOffset, 8},
            {kData, kSlotSize - 0x100, 8},
            {kData, src, uint64_t(1) << 33},
            {reinterpret_cast<uint64_t>(&host_word), src, 8},
    };
    for (const Case &c : refused) {
        words    = std::vector<uint64_t>(16, 0x2222222222222222);
        words[0] = c.dst;
        words[1] = c.src;
        words[2] = c.n;
        EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_memcpy, words))
                << std::hex << c.dst << " " << c.src;
        EXPECT_EQ(0, slot->last_fault().signal);
        /* where the call returns to: sbx_t_memcpy's last bundle */
        EXPECT_EQ(kImageOffset + vaddr(sbx_t_memset) - kBundleSize,
                  slot->last_fault().pc);
    }
    EXPECT_EQ(77u, host_word);
    EXPECT_EQ(0x1111111111111111u, read(*slot, kData + 64 + 24));

    words = {kData + 128, 0xab, 16, 0};
    ASSERT_EQ(UCS_OK, run(*slot, sbx_t_memset, words));
    EXPECT_EQ(0xababababababababu, read(*slot, kData + 128));
    words = {kRelro, 0xab, 16, 0};
    EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_memset, words));

    /* strlen: a string inside the payload, and one that runs to the end of
     * the data page without a NUL. */
    std::vector<uint64_t> text = {kPayloadOffset + 32, 0, 0, 0};
    text.resize(8);
    memcpy(&text[4], "sandbox", 8);
    ASSERT_EQ(UCS_OK, run(*slot, sbx_t_strlen, text));
    EXPECT_EQ(7u, text[3]);
    words = {kData + 0x1000 - 8, 0x41, 8, 0};
    ASSERT_EQ(UCS_OK, run(*slot, sbx_t_memset, words));
    words = {kData + 0x1000 - 8, 0, 0, 0};
    EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_strlen, words));
}

TEST_F(Sandbox, OneSlotCannotReachAnother)
{
    auto a = make_slot();
    auto b = make_slot();
    ASSERT_TRUE(a && b);
    std::vector<uint64_t> words = {kData + 16, 0xaaaa};
    ASSERT_EQ(UCS_OK, run(*a, sbx_t_write, words));
    /* B names A's data by its full address: it reaches its own. */
    words = {a->base() + kData + 16, 0xbbbb};
    ASSERT_EQ(UCS_OK, run(*b, sbx_t_write, words));
    EXPECT_EQ(0xaaaau, read(*a, kData + 16));
    EXPECT_EQ(0xbbbbu, read(*b, kData + 16));
    words = {a->base() + kData + 16, b->base() + kData + 16, 8};
    ASSERT_EQ(UCS_OK, run(*b, sbx_t_memcpy, words));
    EXPECT_EQ(0xaaaau, read(*a, kData + 16));
}

TEST_F(Sandbox, GrantedMemoryIsSharedWithTheRightsGranted)
{
    const unsigned rw_rights =
            UCP_IFUNC_SANDBOX_GRANT_READ | UCP_IFUNC_SANDBOX_GRANT_WRITE;
    void *rw = nullptr, *ro = nullptr;
    ASSERT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_alloc(4096, nullptr, &rw));
    ASSERT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_alloc(8000, nullptr, &ro));
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(rw) % 4096);
    uint64_t rw_offset = uint32_t(reinterpret_cast<uintptr_t>(rw));
    uint64_t ro_offset = uint32_t(reinterpret_cast<uintptr_t>(ro));
    EXPECT_GE(rw_offset, kGrantOffset);
    EXPECT_GE(ro_offset, kGrantOffset);

    auto before = make_slot(); /* gets the grants when they are made */
    ASSERT_TRUE(before);
    ASSERT_EQ(UCS_OK, ucp_ifunc_sandbox_grant(rw, 4096, rw_rights,
                                              "sandbox_test", nullptr));
    ASSERT_EQ(UCS_OK,
              ucp_ifunc_sandbox_grant(ro, 8192, UCP_IFUNC_SANDBOX_GRANT_READ,
                                      "sandbox_test", nullptr));
    auto after = make_slot(); /* gets them when it is made */
    ASSERT_TRUE(after);
    static_cast<uint64_t *>(ro)[1] = 0x77;
    uint64_t value                 = 100;
    for (Slot *slot : {before.get(), after.get()}) {
        std::vector<uint64_t> words = {rw_offset + 8, ++value};
        ASSERT_EQ(UCS_OK, run(*slot, sbx_t_write, words));
        EXPECT_EQ(value, static_cast<uint64_t *>(rw)[1]); /* same bytes */
        EXPECT_EQ(0x77u, read(*slot, ro_offset + 8));
        words = {ro_offset + 8, 1};
        EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_write, words));
        EXPECT_EQ(SIGSEGV, slot->last_fault().signal);
        /* Host calls take the host's own pointer to granted memory. */
        words = {reinterpret_cast<uint64_t>(rw) + 16, kPayloadOffset, 8, 0};
        EXPECT_EQ(UCS_OK, run(*slot, sbx_t_memcpy, words));
        EXPECT_EQ(reinterpret_cast<uint64_t>(rw) + 16, words[3]);
        words = {reinterpret_cast<uint64_t>(ro), kPayloadOffset, 8};
        EXPECT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_memcpy, words));
    }
    EXPECT_EQ(reinterpret_cast<uint64_t>(rw) + 16,
              static_cast<uint64_t *>(rw)[2]);

    /* Code of another ifunc, or not signed by the key named, has none. */
    SlotImage other                = image();
    other.name                     = "sandbox_other";
    auto                  stranger = make_slot(other);
    std::vector<uint64_t> words    = {rw_offset, 0};
    EXPECT_EQ(UCS_ERR_REJECTED, run(*stranger, sbx_t_read, words));

    std::array<uint8_t, 32> key;
    key.fill(0x5c);
    void *keyed = nullptr;
    ASSERT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_alloc(4096, nullptr, &keyed));
    ucp_ifunc_sandbox_grant_params_t params = {};
    params.field_mask = UCP_IFUNC_SANDBOX_GRANT_FIELD_SIGNER;
    params.signer     = key.data();
    ASSERT_EQ(UCS_OK, ucp_ifunc_sandbox_grant(keyed, 4096, rw_rights,
                                              "sandbox_test", &params));
    SlotImage signed_code  = image();
    signed_code.has_signer = true;
    signed_code.signer     = key;
    auto signed_slot       = make_slot(signed_code);
    signed_code.signer[0] ^= 1;
    auto     other_key_slot = make_slot(signed_code);
    uint64_t keyed_offset   = uint32_t(reinterpret_cast<uintptr_t>(keyed));
    words                   = {keyed_offset, 0};
    EXPECT_EQ(UCS_OK, run(*signed_slot, sbx_t_read, words));
    EXPECT_EQ(UCS_ERR_REJECTED, run(*other_key_slot, sbx_t_read, words));
    EXPECT_EQ(UCS_ERR_REJECTED, run(*after, sbx_t_read, words));

    /* Memory of the heap is refused. */
    std::vector<uint8_t> heap(3 * 4096);
    void                *page = reinterpret_cast<void *>(
            (reinterpret_cast<uintptr_t>(heap.data()) + 4095) & ~4095ul);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_sandbox_grant(page, 4096, rw_rights, "sandbox_test",
                                      nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_sandbox_grant(rw, 8192, rw_rights, "sandbox_test",
                                      nullptr)); /* past the allocation */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_sandbox_grant(rw, 4096, UCP_IFUNC_SANDBOX_GRANT_WRITE,
                                      "sandbox_test", nullptr));

    /* Freed memory leaves the slots. */
    EXPECT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_free(rw));
    words = {rw_offset, 0};
    EXPECT_EQ(UCS_ERR_REJECTED, run(*after, sbx_t_read, words));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_sandbox_mem_free(rw));
    EXPECT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_free(ro));
    EXPECT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_free(keyed));
    /* and its room is allocated again */
    void *again = nullptr;
    ASSERT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_alloc(4096, nullptr, &again));
    EXPECT_EQ(0u, static_cast<uint64_t *>(again)[1]);
    EXPECT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_free(again));
}

/* A version 3 image of the part of sandbox_code.S that keeps the rules,
 * with entry @a entry, as the
 * toolchain would write one: text, read-only data with the GOT pointer,
 * data, the five granted imports. */
struct SandboxImage {
    ucp_ifunc_image_desc_t   desc;
    uint8_t                  text[kDataVaddr];
    ucp_ifunc_image_import_t imports[5];
    uint32_t                 padding;
    char                     strtab[40];
};

SandboxImage sandbox_image(const uint8_t *entry)
{
    SandboxImage img          = {};
    auto        &d            = img.desc;
    uint64_t     n            = uint64_t(sbx_clean_end - sbx_text_start);
    d.magic                   = UCP_IFUNC_IMAGE_MAGIC;
    d.version                 = UCP_IFUNC_IMAGE_VERSION_SANDBOX;
    d.machine                 = EM_X86_64;
    d.desc_size               = sizeof(d);
    d.flags                   = UCP_IFUNC_IMAGE_FLAG_SANDBOX;
    d.image_size              = sizeof(img);
    d.page_align              = 4096;
    d.map_size                = kMapSize;
    d.seg[UCP_IFUNC_SEG_TEXT] = {0, n, offsetof(SandboxImage, text), n};
    /* Segments in address order: read-only data, then data. */
    d.seg[UCP_IFUNC_SEG_RELRO] = {0x2000, 8, 0, 0};
    d.seg[UCP_IFUNC_SEG_DATA]  = {0x3000, 4096, 0, 0};
    d.entry_vaddr              = vaddr(entry);
    d.got_ptr_vaddr            = 0; /* sandbox images have none */
    d.imports_offset           = offsetof(SandboxImage, imports);
    d.relocs_offset            = offsetof(SandboxImage, padding);
    d.strtab_offset            = offsetof(SandboxImage, strtab);
    d.strtab_size              = sizeof(img.strtab);
    d.n_imports                = 5;
    d.symbols_offset           = offsetof(SandboxImage, padding);
    d.needed_offset            = offsetof(SandboxImage, padding);
    memcpy(img.text, sbx_text_start, n);
    const char names[] = "memcpy\0memset\0memmove\0memcmp\0strlen";
    memcpy(img.strtab, names, sizeof(names));
    uint32_t offset = 0;
    for (auto &import : img.imports) {
        import = {offset, 0};
        offset += uint32_t(strlen(img.strtab + offset) + 1);
    }
    return img;
}

std::vector<uint64_t> sandbox_frame(const char *name, const uint8_t *entry,
                                    const std::vector<uint64_t> &payload)
{
    SandboxImage      img    = sandbox_image(entry);
    std::vector<char> prefix = ucx_ifunc::frame_prefix(name, &img, sizeof(img));
    size_t            payload_offset = ucx_ifunc::align_up(prefix.size(), 16);
    size_t            frame_size     = payload_offset + 8 * payload.size() + 8;
    std::vector<uint64_t> frame(frame_size / 8, 0);
    memcpy(frame.data(), prefix.data(), prefix.size());
    memcpy(reinterpret_cast<char *>(frame.data()) + payload_offset,
           payload.data(), 8 * payload.size());
    auto &hdr      = *reinterpret_cast<ucx_ifunc::FrameHeader *>(frame.data());
    hdr.frame_size = frame_size;
    hdr.nonce      = 1;
    hdr.payload_offset = uint32_t(payload_offset);
    hdr.payload_size   = 8 * payload.size();
    hdr.seal           = ucx_ifunc::frame_seal(hdr);
    frame.back()       = hdr.seal;
    return frame;
}

/* A sandbox image of @a entry as bytes, with @a n_symbols symbols that all
 * name one string of @a name_bytes characters (none: no symbol table). */
std::vector<char> sandbox_image_bytes(const uint8_t *entry,
                                      uint32_t       n_symbols  = 0,
                                      size_t         name_bytes = 0)
{
    SandboxImage      img = sandbox_image(entry);
    std::vector<char> bytes(reinterpret_cast<const char *>(&img),
                            reinterpret_cast<const char *>(&img) + sizeof(img));
    if (n_symbols == 0) {
        return bytes;
    }
    /* The symbols, then a string table of the imports' names and the
     * long name, which every symbol names. */
    auto    &d       = img.desc;
    uint64_t symbols = bytes.size();
    d.symbols_offset = symbols;
    d.n_symbols      = n_symbols;
    bytes.resize(symbols +
                 uint64_t(n_symbols) * sizeof(ucp_ifunc_image_symbol_t));
    uint32_t name_offset = sizeof(img.strtab);
    for (uint32_t i = 0; i < n_symbols; ++i) {
        ucp_ifunc_image_symbol_t symbol = {name_offset, 0, 0, 8};
        memcpy(bytes.data() + symbols + i * sizeof(symbol), &symbol,
               sizeof(symbol));
    }
    d.strtab_offset = bytes.size();
    bytes.insert(bytes.end(), img.strtab, img.strtab + sizeof(img.strtab));
    bytes.insert(bytes.end(), name_bytes, 'f');
    bytes.push_back('\0');
    bytes.resize(ucx_ifunc::align_up(bytes.size(), 8), '\0');
    d.strtab_size = bytes.size() - d.strtab_offset;
    d.image_size  = bytes.size();
    memcpy(bytes.data(), &d, sizeof(d));
    return bytes;
}

/* The bytes of a message of ifunc @a name with @a image and
 * @a payload_size bytes of payload before the payload, with its seal
 * (the frame's last word). */
std::vector<uint64_t> frame_head(const char              *name,
                                 const std::vector<char> &image,
                                 size_t payload_size, size_t *frame_size)
{
    std::vector<char> prefix =
            ucx_ifunc::frame_prefix(name, image.data(), image.size());
    size_t payload_offset = ucx_ifunc::align_up(prefix.size(), 16);
    *frame_size = payload_offset + ucx_ifunc::align_up(payload_size, 8) + 8;
    std::vector<uint64_t> head(payload_offset / 8, 0);
    memcpy(head.data(), prefix.data(), prefix.size());
    auto &hdr      = *reinterpret_cast<ucx_ifunc::FrameHeader *>(head.data());
    hdr.frame_size = *frame_size;
    hdr.nonce      = 1;
    hdr.payload_offset = uint32_t(payload_offset);
    hdr.payload_size   = payload_size;
    hdr.seal           = ucx_ifunc::frame_seal(hdr);
    head.push_back(hdr.seal);
    return head;
}

/* Makes @a frame (of the right size) the message frame_head() describes,
 * keeping its payload. */
void write_head(std::vector<uint64_t> &frame, const std::vector<uint64_t> &head)
{
    std::copy(head.begin(), head.end() - 1, frame.begin());
    frame.back() = head.back();
}

/* A message of ifunc @a name with @a image and @a payload_size bytes of
 * payload (the first word @a word), sealed. */
std::vector<uint64_t> frame_of(const char *name, const std::vector<char> &image,
                               size_t payload_size, uint64_t word = 0)
{
    size_t frame_size;
    auto   head = frame_head(name, image, payload_size, &frame_size);
    std::vector<uint64_t> frame(frame_size / 8, 0);
    write_head(frame, head);
    frame[head.size() - 1] = word;
    return frame;
}

/* Sets UCX_IFUNC_* variables while it lives. */
class ScopedEnv {
public:
    explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars)
        : vars_(std::move(vars))
    {
        for (const auto &var : vars_) {
            setenv(var.first.c_str(), var.second.c_str(), 1);
        }
    }
    ~ScopedEnv()
    {
        for (const auto &var : vars_) {
            unsetenv(var.first.c_str());
        }
    }

private:
    std::vector<std::pair<std::string, std::string>> vars_;
};

/* Resets VmHWM to VmRSS (Linux 4.0 and later). */
bool reset_peak_rss()
{
    FILE *file = fopen("/proc/self/clear_refs", "w");
    if (file == nullptr) {
        return false;
    }
    bool written = fputs("5", file) >= 0;
    return (fclose(file) == 0) && written;
}

TEST_F(Sandbox, PayloadAreasCountTowardTheMemoryLimit)
{
    /* Twelve codes, each sent once with a 16 MiB payload, under a 64 MB
     * limit: what the slots hold stays within the limit (docs/security.md,
     * "The slot: one sandbox's memory"). The margin is for what the first
     * messages map once per process and thread. */
    constexpr size_t  kPayload = size_t(16) << 20;
    constexpr long    kLimit   = 64000000;
    constexpr long    kMargin  = 8 << 20;
    ScopedEnv         env({{"UCX_IFUNC_TRUST", "sandboxed"},
                           {"UCX_IFUNC_MAX_LINKED_MEMORY", "64000000"},
                           {"UCX_IFUNC_MAX_AM_MESSAGE", "64MB"}});
    ucx_util::Context target;
    std::vector<char> image = sandbox_image_bytes(sbx_t_nop);
    auto              warm  = frame_of("sbx_mem_warm", image, 16, 1);
    ASSERT_EQ(UCS_OK, ucp_poll_ifunc(target.get(), warm.data(), warm.size() * 8,
                                     nullptr));
    ucp_ifunc_context_attr_t attr = {};
    attr.field_mask               = UCP_IFUNC_CONTEXT_ATTR_FIELD_CODES;
    ASSERT_EQ(UCS_OK, ucp_ifunc_context_query(target.get(), &attr));
    printf("one sandboxed code after a 16-byte message counts %llu bytes\n",
           static_cast<unsigned long long>(attr.code_memory));
    /* One frame, its name rewritten per code: the test's own memory is
     * in the baseline. */
    auto frame = frame_of("sbx_mem_00", image, kPayload, 20);
    long rss0  = rss_kib();
    long most  = 0;
    for (int i = 0; i < 12; ++i) {
        char name[16];
        snprintf(name, sizeof(name), "sbx_mem_%02d", i);
        size_t frame_size;
        write_head(frame, frame_head(name, image, kPayload, &frame_size));
        ASSERT_EQ(UCS_OK, ucp_poll_ifunc(target.get(), frame.data(),
                                         frame.size() * 8, nullptr))
                << name;
        most = std::max(most, rss_kib() - rss0);
    }
    ASSERT_EQ(UCS_OK, ucp_ifunc_context_query(target.get(), &attr));
    printf("12 codes with %zu MiB payloads under a %ld-byte limit: RSS rose "
           "by at most %ld KiB (the limit is %ld KiB); %llu codes held, "
           "%llu bytes counted\n",
           kPayload >> 20, kLimit, most, kLimit / 1024,
           static_cast<unsigned long long>(attr.codes_held),
           static_cast<unsigned long long>(attr.code_memory));
    EXPECT_LE(most * 1024, kLimit + kMargin);
    EXPECT_LE(attr.code_memory, uint64_t(kLimit));

    /* A payload whose area would not fit the limit with the code's own
     * memory: dropped as too large, nothing mapped for it. */
    frame.clear();
    frame.shrink_to_fit();
    auto too_large = frame_of("sbx_mem_big", image, 63500000);
    long rss1      = rss_kib();
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              ucp_poll_ifunc(target.get(), too_large.data(),
                             too_large.size() * 8, nullptr));
    attr.field_mask = UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED;
    ASSERT_EQ(UCS_OK, ucp_ifunc_context_query(target.get(), &attr));
    EXPECT_EQ(1u, attr.rejected_too_large);
    EXPECT_LE(rss_kib() - rss1, kMargin / 1024);
}

TEST_F(Sandbox, DebuggerRegistrationIsBounded)
{
    /* 65 536 symbols that all name one 1 KiB string: a 1.6 MB image whose
     * description to the debugger must not cost more than the image. */
    ScopedEnv env(
            {{"UCX_IFUNC_TRUST", "sandboxed"}, {"UCX_IFUNC_GDB_JIT", "y"}});
    ucx_util::Context target;
    auto warm = frame_of("sbx_jit_warm", sandbox_image_bytes(sbx_t_nop), 16);
    ASSERT_EQ(UCS_OK, ucp_poll_ifunc(target.get(), warm.data(), warm.size() * 8,
                                     nullptr));
    std::vector<char> image = sandbox_image_bytes(sbx_t_nop, 65536, 1024);
    auto              frame = frame_of("sbx_jit_bomb", image, 16);
    ASSERT_TRUE(reset_peak_rss());
    long rss0 = rss_kib();
    long hwm0 = status_kib("VmHWM");
    ASSERT_EQ(UCS_OK, ucp_poll_ifunc(target.get(), frame.data(),
                                     frame.size() * 8, nullptr));
    long                  peak  = status_kib("VmHWM") - hwm0;
    long                  kept  = rss_kib() - rss0;
    const jit_code_entry *entry = __jit_debug_descriptor.first_entry;
    ASSERT_NE(nullptr, entry);
    printf("a %zu-byte image of 65536 symbols naming one 1 KiB string: peak "
           "RSS +%ld KiB, kept +%ld KiB, %llu bytes given to the debugger\n",
           image.size(), peak, kept,
           static_cast<unsigned long long>(entry->symfile_size));
    /* The image is copied twice (checked copy, the copy kept to send it
     * on): four times its size bounds all the link makes of it. */
    EXPECT_LE(entry->symfile_size, image.size() + 4096);
    EXPECT_LE(peak * 1024, long(4 * image.size()) + (4 << 20));
    EXPECT_LE(kept * 1024, long(3 * image.size()) + (4 << 20));
}

TEST_F(Sandbox, TheTestCodeKeepsTheRulesWhereItMeansTo)
{
    /* The verifier accepts the first part of sandbox_code.S (what the
     * message path test ships) and refuses the whole (std, a gate bundle
     * of no import): the hand-written code and the verifier agree on the
     * rules. */
    VerifyInput  clean{sbx_text_start, uint64_t(sbx_clean_end - sbx_text_start),
                      0, kMapSize, 5};
    VerifyResult verdict = verify_x86_64(clean);
    EXPECT_TRUE(verdict.accepted)
            << verdict.reason << " at 0x" << std::hex << verdict.offset;
    VerifyInput all = clean;
    all.text_size   = (uint64_t(sbx_text_end - sbx_text_start) + 31) & ~31ul;
    EXPECT_FALSE(verify_x86_64(all).accepted);
}

TEST_F(Sandbox, SandboxedAloneRejectsNativeCode)
{
    /* The same code as a version 2 image without the sandbox flag: under
     * 'sandboxed' alone nothing vouches for it, so it never runs natively.
     * (It would fault at its first %gs access.) */
    SandboxImage img       = sandbox_image(sbx_t_write);
    img.desc.version       = UCP_IFUNC_IMAGE_VERSION;
    img.desc.flags         = 0;
    img.desc.n_imports     = 0;
    img.desc.got_ptr_vaddr = 0x2000; /* in read-only data, as native code's */
    std::vector<char> prefix =
            ucx_ifunc::frame_prefix("sandbox_native", &img, sizeof(img));
    size_t payload_offset = ucx_ifunc::align_up(prefix.size(), 16);
    std::vector<uint64_t> frame((payload_offset + 24) / 8, 0);
    memcpy(frame.data(), prefix.data(), prefix.size());
    auto &hdr      = *reinterpret_cast<ucx_ifunc::FrameHeader *>(frame.data());
    hdr.frame_size = frame.size() * 8;
    hdr.nonce      = 1;
    hdr.payload_offset = uint32_t(payload_offset);
    hdr.payload_size   = 16;
    hdr.seal           = ucx_ifunc::frame_seal(hdr);
    frame.back()       = hdr.seal;
    setenv("UCX_IFUNC_TRUST", "sandboxed", 1);
    ucx_util::Context target;
    ucs_status_t      status = ucp_poll_ifunc(target.get(), frame.data(),
                                              frame.size() * 8, nullptr);
    unsetenv("UCX_IFUNC_TRUST");
    EXPECT_EQ(UCS_ERR_REJECTED, status);
}

TEST_F(Sandbox, AMessageOfSandboxCodeRunsInItsSlot)
{
    /* Through the message path: image check, link (trust, slot,
     * verifier) and run. */
    SandboxImage img = sandbox_image(sbx_t_write);
    size_t       size;
    ASSERT_EQ(UCS_OK,
              ucx_ifunc::image_check(&img, sizeof(img), "sandbox_e2e",
                                     1ul << 30, UCS_LOG_LEVEL_WARN, &size));
    void *shared = nullptr;
    ASSERT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_alloc(4096, nullptr, &shared));
    ASSERT_EQ(UCS_OK,
              ucp_ifunc_sandbox_grant(shared, 4096,
                                      UCP_IFUNC_SANDBOX_GRANT_READ |
                                              UCP_IFUNC_SANDBOX_GRANT_WRITE,
                                      "sandbox_e2e", nullptr));
    uint64_t offset = uint32_t(reinterpret_cast<uintptr_t>(shared));

    /* Not listed in UCX_IFUNC_TRUST: refused. */
    {
        ucx_util::Context plain;
        auto frame = sandbox_frame("sandbox_e2e", sbx_t_write, {offset, 1});
        EXPECT_EQ(UCS_ERR_REJECTED, ucp_poll_ifunc(plain.get(), frame.data(),
                                                   frame.size() * 8, nullptr));
    }
    /* A context reads the policy when it first uses ifuncs. */
    setenv("UCX_IFUNC_TRUST", "sandboxed", 1);
    ucx_util::Context target;
    auto frame = sandbox_frame("sandbox_e2e", sbx_t_write, {offset + 8, 42});
    ucs_status_t status = ucp_poll_ifunc(target.get(), frame.data(),
                                         frame.size() * 8, nullptr);
    unsetenv("UCX_IFUNC_TRUST");
    ASSERT_EQ(UCS_OK, status);
    EXPECT_EQ(42u, static_cast<uint64_t *>(shared)[1]);

    /* A message that faults is counted, and the next one runs. */
    auto bad = sandbox_frame("sandbox_e2e", sbx_t_write, {kImageOffset, 1});
    EXPECT_EQ(UCS_ERR_REJECTED, ucp_poll_ifunc(target.get(), bad.data(),
                                               bad.size() * 8, nullptr));
    frame = sandbox_frame("sandbox_e2e", sbx_t_write, {offset + 16, 43});
    EXPECT_EQ(UCS_OK, ucp_poll_ifunc(target.get(), frame.data(),
                                     frame.size() * 8, nullptr));
    EXPECT_EQ(43u, static_cast<uint64_t *>(shared)[2]);
    ucp_ifunc_context_attr_t attr = {};
    attr.field_mask               = UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED;
    ASSERT_EQ(UCS_OK, ucp_ifunc_context_query(target.get(), &attr));
    EXPECT_EQ(1u, attr.rejected_sandbox_fault);
    EXPECT_EQ(0u, attr.rejected_sandbox_budget);
    EXPECT_EQ(UCS_OK, ucp_ifunc_sandbox_mem_free(shared));
}

uint32_t read_mxcsr()
{
    return _mm_getcsr();
}

uint16_t read_fcw()
{
    uint16_t fcw;
    asm volatile("fnstcw %0" : "=m"(fcw));
    return fcw;
}

/* The x87 tag word: 0xffff when every register is empty. */
uint16_t x87_tags()
{
    uint16_t environment[14];
    asm volatile("fnstenv %0; fldenv %0" : "=m"(environment));
    return environment[4];
}

bool direction_flag()
{
    uint64_t flags;
    asm volatile("pushfq; popq %0" : "=r"(flags));
    return (flags >> 10) & 1;
}

TEST_F(Sandbox, TheHostsStateIsRestored)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    uint32_t mxcsr = read_mxcsr();
    uint16_t fcw   = read_fcw();
    /* Round toward zero, all exceptions unmasked; x87 single precision. */
    std::vector<uint64_t> words = {0x6000, 0x0c40};
    ASSERT_EQ(UCS_OK, run(*slot, sbx_t_flags, words));
    EXPECT_EQ(mxcsr, read_mxcsr());
    EXPECT_EQ(fcw, read_fcw());
    EXPECT_FALSE(direction_flag());
    EXPECT_EQ(0xffff, x87_tags()); /* the x87 stack is empty */
    /* The same after a fault. */
    ASSERT_EQ(UCS_ERR_REJECTED, run(*slot, sbx_t_ud2, words));
    EXPECT_EQ(mxcsr, read_mxcsr());
}

/* Which part of the child runs: its handler exits with 40 + this. */
volatile sig_atomic_t child_phase = 0;

/* The child of the test below, in a process of its own (the handlers are
 * installed once per process): a handler installed before the first
 * sandboxed message still gets faults outside sandboxes. */
TEST_F(Sandbox, ChildOfFaultsOutsideASandbox)
{
    if (getenv("IFUNC_TEST_SANDBOX_CHILD") == nullptr) {
        GTEST_SKIP() << "run by FaultsOutsideASandboxGoToTheHandlerBefore";
    }
    struct sigaction action = {};
    action.sa_handler       = [](int) { _exit(40 + child_phase); };
    sigaction(SIGSEGV, &action, nullptr);
    auto                  slot  = make_slot();
    std::vector<uint64_t> words = {0x100, 0};
    child_phase                 = 1;
    if (run(*slot, sbx_t_read, words) != UCS_ERR_REJECTED) {
        _exit(1);
    }
    child_phase = 2;
    raise(SIGSEGV); /* on the host */
    _exit(2);
}

TEST_F(Sandbox, FaultsOutsideASandboxGoToTheHandlerBefore)
{
    pid_t child = fork();
    ASSERT_NE(-1, child);
    if (child == 0) {
        setenv("IFUNC_TEST_SANDBOX_CHILD", "1", 1);
        execl("/proc/self/exe", "ifunc_unit",
              "--gtest_filter=Sandbox.ChildOfFaultsOutsideASandbox",
              static_cast<char *>(nullptr));
        _exit(3);
    }
    int status;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(42, WEXITSTATUS(status));
}

TEST_F(Sandbox, APendingX87ExceptionDoesNotTrapInTheHost)
{
    /* A host that unmasks the x87 zero divide; the code masks it, divides
     * by zero and leaves the flag set: the host's next x87 wait must not
     * trap. In a child: a trap ends the process. */
    pid_t child = fork();
    ASSERT_NE(-1, child);
    if (child == 0) {
        uint16_t host_fcw = 0x037b; /* zero divide unmasked */
        asm volatile("fldcw %0" : : "m"(host_fcw));
        auto                  slot   = make_slot();
        std::vector<uint64_t> words  = {0x037f, 0};
        ucs_status_t          status = run(*slot, sbx_t_x87_flag, words);
        asm volatile("fwait");
        _exit((status == UCS_OK) && (read_fcw() == host_fcw) ? 0 : 1);
    }
    int status;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
    EXPECT_EQ(0, WEXITSTATUS(status));
}

/* Runs @a body in a child process and returns how it ended: its exit
 * status, or 128 + the signal that ended it. A test that would end its
 * process without the fix it checks runs its part there. */
template <typename Body>
int in_child(const Body &body)
{
    pid_t child = fork();
    if (child == 0) {
        alarm(20);
        int status = body();
        fflush(stdout);
        _exit(status);
    }
    int status = 0;
    if ((child < 0) || (waitpid(child, &status, 0) != child)) {
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(Sandbox, AGateEnteredWithAnyStackPointerEndsTheMessage)
{
    /* S5 and S7 let code reach a gate bundle by a masked jump with %rsp
     * anywhere in the stack window, or at its top after popping the
     * entry's return address: the host must not read a return address
     * there. Offsets in the stack window: its guard half, across the
     * guard's end, across the stack's top. */
    const uint64_t window_offsets[] = {0,       0x1000,   0xffff8,
                                       0xffffc, 0x1ffffc, 0x1fffff};
    int            ended            = in_child([&] {
        auto slot = make_slot();
        for (size_t i = 0; i < 7; ++i) {
            bool                  top = (i == 6);
            std::vector<uint64_t> words = {top ? 0 : window_offsets[i], 0};
            if (run(*slot, top ? sbx_t_gate_at_top : sbx_t_gate_with_rsp,
                                          words) != UCS_ERR_REJECTED) {
                return int(10 + i);
            }
            uint64_t rsp = top ? kStackTop : kStackWindow + window_offsets[i];
            if ((slot->last_fault().signal != 0) ||
                (slot->last_fault().address != rsp)) {
                return int(20 + i);
            }
            words = {4, 0};
            if ((run(*slot, sbx_t_double, words) != UCS_OK) ||
                (words[0] != 9)) {
                return int(30 + i);
            }
        }
        /* Through the message path: the verifier accepts the code, the
         * message ends and is counted. */
        setenv("UCX_IFUNC_TRUST", "sandboxed", 1);
        ucx_util::Context target;
        auto frame = sandbox_frame("sandbox_gate_top", sbx_t_gate_at_top, {0});
        if (ucp_poll_ifunc(target.get(), frame.data(), frame.size() * 8,
                                                 nullptr) != UCS_ERR_REJECTED) {
            return 40;
        }
        ucp_ifunc_context_attr_t attr = {};
        attr.field_mask = UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED;
        if ((ucp_ifunc_context_query(target.get(), &attr) != UCS_OK) ||
            (attr.rejected_sandbox_fault != 1)) {
            return 41;
        }
        return 0;
    });
    EXPECT_EQ(0, ended) << "10+/20+/30+ case, 40+ message path, 128+ signal";
}

/* This thread's mask. */
sigset_t thread_mask()
{
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    return now;
}

/* Whether this thread blocks exactly the signals of @a expected. */
bool thread_blocks(const sigset_t &expected)
{
    sigset_t now = thread_mask();
    for (int signal = 1; signal < NSIG; ++signal) {
        if (sigismember(&now, signal) != sigismember(&expected, signal)) {
            return false;
        }
    }
    return true;
}

TEST_F(Sandbox, SignalsReachTheSandboxWhateverTheThreadBlocks)
{
    /* A worker thread that blocks every signal: faults and the budget
     * still end the message, the thread's mask is as it was after each,
     * also when it changes between messages. In a child: a fault the
     * kernel cannot deliver ends the process. */
    int ended = in_child([&] {
        auto        slot   = make_slot();
        int         result = 0;
        std::thread worker([&] {
            /* The masks as the thread has them (no SIGKILL, SIGSTOP or
             * the C library's own signals in "all"). */
            sigset_t all, none, segv;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, nullptr);
            all = thread_mask();
            sigemptyset(&none);
            sigemptyset(&segv);
            sigaddset(&segv, SIGSEGV);
            std::vector<uint64_t> words = {0, 0};
            auto                  start = std::chrono::steady_clock::now();
            if (run(*slot, sbx_t_loop, words) != UCS_ERR_TIMED_OUT) {
                result = 10;
                return;
            }
            double took = std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - start)
                                  .count();
            printf("all signals blocked, budget 50 ms: a loop ended after "
                   "%.1f ms\n",
                   took * 1e3);
            if ((took > 0.5) || !thread_blocks(all)) {
                result = 11;
                return;
            }
            struct Fault {
                const uint8_t *function;
                uint64_t       word;
                int            signal;
            } faults[] = {{sbx_t_ud2, 0, SIGILL},
                          {sbx_t_div0, 0, SIGFPE},
                          {sbx_t_read, 0x100, SIGSEGV},
                          {sbx_t_overflow, 0, SIGSEGV}};
            for (const sigset_t *mask : {&all, &none, &segv}) {
                pthread_sigmask(SIG_SETMASK, mask, nullptr);
                for (const Fault &fault : faults) {
                    words = {fault.word, 0};
                    if ((run(*slot, fault.function, words) !=
                         UCS_ERR_REJECTED) ||
                        (slot->last_fault().signal != fault.signal)) {
                        result = 20;
                        return;
                    }
                    if (!thread_blocks(*mask)) {
                        result = 21;
                        return;
                    }
                }
                words = {2, 0};
                if ((run(*slot, sbx_t_double, words) != UCS_OK) ||
                    (words[0] != 5) || !thread_blocks(*mask)) {
                    result = 22;
                    return;
                }
            }
        });
        worker.join();
        return result;
    });
    EXPECT_EQ(0, ended) << "10+ budget, 20+ faults, 128+ signal";
}

ProbedState probe(Slot &slot, const uint8_t *function,
                  std::vector<uint64_t> words)
{
    words.resize(sizeof(ProbedState) / 8 + 1, 0xeeeeeeeeeeeeeeee);
    ProbedState state;
    EXPECT_EQ(UCS_OK, slot.run(vaddr(function), words.data(), words.size() * 8,
                               nullptr));
    memcpy(&state, slot.payload_area(), sizeof(state));
    return state;
}

uint16_t read_fsw()
{
    uint16_t fsw;
    asm volatile("fnstsw %0" : "=m"(fsw));
    return fsw;
}

/* What dirty_host_function saw of the floating-point state. */
struct SeenInHostCall {
    uint32_t mxcsr;
    uint16_t fcw;
} seen_in_host_call;

/* Leaves @a value in %xmm8-15 and an x87 register (popped) and raises the
 * SSE and x87 zero divide flags, as host code may. */
void dirty_registers(uint64_t value)
{
    asm volatile("movq %0, %%xmm8\n\tmovq %0, %%xmm9\n\t"
                 "movq %0, %%xmm10\n\tmovq %0, %%xmm11\n\t"
                 "movq %0, %%xmm12\n\tmovq %0, %%xmm13\n\t"
                 "movq %0, %%xmm14\n\tmovq %0, %%xmm15\n\t"
                 "fildq %1\n\tfstp %%st(0)\n\t"
                 "fld1\n\tfldz\n\tfdivrp\n\tfstp %%st(0)\n\t"
                 "xorps %%xmm0, %%xmm0\n\tdivss %%xmm0, %%xmm8"
                 :
                 : "r"(value), "m"(value)
                 : "xmm0", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
                   "xmm14", "xmm15", "st");
}

uint64_t dirty_host_function(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                             uint64_t)
{
    seen_in_host_call = SeenInHostCall{read_mxcsr(), read_fcw()};
    dirty_registers(reinterpret_cast<uint64_t>(&seen_in_host_call));
    return 0x1234;
}

TEST_F(Sandbox, TenantsSeeNeitherEachOthersNorTheHostsRegisters)
{
    grant_host_function("sandbox_test_dirty", dirty_host_function);
    auto a = make_slot(image({"sandbox_test_dirty"}));
    auto b = make_slot(image({"sandbox_test_dirty"}));
    ASSERT_TRUE(a && b);
    std::vector<uint64_t> words;

    /* A leaves its values in every register it can and raises flags: the
     * host's floating-point state is as it was. */
    feclearexcept(FE_ALL_EXCEPT);
    const uint32_t mxcsr = read_mxcsr();
    const uint16_t fcw = read_fcw(), fsw = read_fsw();
    const uint64_t secret = 0x5ec5ec5ec5ec5ec5;
    words                 = {0x7fbf, 0x0f7f, secret, secret};
    ASSERT_EQ(UCS_OK, run(*a, sbx_t_dirty, words));
    EXPECT_EQ(0, fetestexcept(FE_ALL_EXCEPT));
    EXPECT_EQ(mxcsr, read_mxcsr());
    EXPECT_EQ(fcw, read_fcw());
    EXPECT_EQ(fsw, read_fsw());
    EXPECT_EQ(0xffff, x87_tags());
    EXPECT_FALSE(direction_flag());

    /* B starts with defined registers: none of A's, none of the host's
     * (which leaves a heap address in its registers first). */
    auto     heap         = std::make_unique<uint64_t>(0);
    uint64_t host_address = reinterpret_cast<uint64_t>(heap.get());
    dirty_registers(host_address);
    ProbedState start = probe(*b, sbx_t_probe, {});
    feclearexcept(FE_ALL_EXCEPT);
    EXPECT_EQ("", start_state_differs(start, b->base() + kPayloadOffset,
                                      8 * (sizeof(ProbedState) / 8 + 1), 0));

    /* After a host call that leaves host addresses in registers and raises
     * flags: the code's own MXCSR and control word, nothing else; the host
     * function ran with the host's. */
    ProbedState after = probe(*b, sbx_t_probe_call, {0x7f80, 0x0f7f});
    feclearexcept(FE_ALL_EXCEPT);
    EXPECT_EQ(mxcsr, seen_in_host_call.mxcsr);
    EXPECT_EQ(fcw, seen_in_host_call.fcw);
    EXPECT_EQ(0x1234u, after.rax);
    for (uint64_t reg : {after.rcx, after.rdx, after.rsi, after.rdi, after.r8,
                         after.r9, after.r10}) {
        EXPECT_EQ(0u, reg);
    }
    EXPECT_EQ("", fp_state_differs(after, 0x7f80, 0x0f7f));
    EXPECT_EQ(mxcsr, read_mxcsr());
    EXPECT_EQ(fcw, read_fcw());
}

TEST_F(Sandbox, AThousandSlots)
{
    constexpr size_t                   kSlots = 1000;
    size_t                             maps0  = mapping_count();
    long                               rss0   = rss_kib();
    auto                               start = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<Slot>> slots;
    for (size_t i = 0; i < kSlots; ++i) {
        slots.push_back(make_slot());
        ASSERT_TRUE(slots.back());
        std::vector<uint64_t> words = {i, 0};
        ASSERT_EQ(UCS_OK, run(*slots.back(), sbx_t_double, words));
        ASSERT_EQ(2 * i + 1, words[0]);
    }
    double took = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    size_t maps1 = mapping_count();
    long   rss1  = rss_kib();
    printf("%zu slots: %.1f us each to create and run once; %zu more "
           "mappings (%.1f per slot), %ld KiB more RSS (%.1f KiB per slot)\n",
           kSlots, took * 1e6 / kSlots, maps1 - maps0,
           double(maps1 - maps0) / kSlots, rss1 - rss0,
           double(rss1 - rss0) / kSlots);
    slots.clear();
    EXPECT_LE(mapping_count(), maps0 + 2);
}

void plain_function(void *payload, size_t size, void *)
{
    asm volatile("" : : "r"(payload), "r"(size) : "memory");
}

/* Seconds per message of @a rounds messages of @a run, the best of 9. */
template <typename Run>
double per_message(int rounds, const Run &run)
{
    double best = 1e9;
    for (int trial = 0; trial < 9; ++trial) {
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < rounds; ++i) {
            run();
        }
        best = std::min(best, std::chrono::duration<double>(
                                      std::chrono::steady_clock::now() - start)
                                              .count() /
                                      rounds);
    }
    return best;
}

TEST_F(Sandbox, EntryCost)
{
    auto slot = make_slot();
    ASSERT_TRUE(slot);
    constexpr int kRounds                          = 100000;
    uint64_t      payload                          = 1;
    void (*volatile plain)(void *, size_t, void *) = plain_function;
    double sandboxed                               = per_message(kRounds, [&] {
        slot->run(vaddr(sbx_t_nop), &payload, sizeof(payload), nullptr);
    });
    double direct                                  = per_message(
                                             kRounds, [&] { plain(&payload, sizeof(payload), nullptr); });
    /* In a loop that holds a SignalScope: the signal mask is not changed
     * per message. */
    double in_scope;
    {
        SignalScope scope;
        in_scope = per_message(kRounds, [&] {
            slot->run(vaddr(sbx_t_nop), &payload, sizeof(payload), nullptr);
        });
    }
    printf("per message: plain call %.1f ns, sandboxed %.1f ns, added "
           "%.1f ns; in a SignalScope %.1f ns, added %.1f ns\n",
           direct * 1e9, sandboxed * 1e9, (sandboxed - direct) * 1e9,
           in_scope * 1e9, (in_scope - direct) * 1e9);
    EXPECT_LT(sandboxed, 2e-6); /* a sanity bound on a shared machine */
    EXPECT_LT(in_scope, sandboxed);
}

} // namespace
} // namespace test

#endif
