/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The code image: validation of every descriptor field, and linking a
 * hand-assembled image (independent of the toolchain) through a frame.
 */
#include "fixture.h"

#include "../common/process.h"

#include <string>

#include "../common/frames.h"
#include "ucp/ifunc/load/context.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/format/image.h"
#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/load/link.h"
#include "ucp/ifunc/format/sandbox_layout.h"

#include <cstdio>
#include <cstring>
#include <fstream>

namespace test {
namespace {

using ucx_ifunc::FrameHeader;

constexpr uint64_t kPage = 4096;

/* Code of: void main(void *payload, size_t size, void *args)
 * { *(void**)args = (*got_ptr)[0]; } where got_ptr is at vaddr kPage, for
 * the CPU the test runs on. */
#if defined(__x86_64__)
const unsigned char kCode[] = {
        0x48, 0x8b, 0x05, 0xf9, 0x0f, 0x00, 0x00, /* movq 0xff9(%rip), %rax */
        0x48, 0x8b, 0x00,                         /* movq (%rax), %rax */
        0x48, 0x89, 0x02,                         /* movq %rax, (%rdx) */
        0xc3                                      /* ret */
};
#elif defined(__aarch64__)
const unsigned char kCode[] = {
        0x08, 0x80, 0x00, 0x58, /* ldr x8, .+0x1000 */
        0x08, 0x01, 0x40, 0xf9, /* ldr x8, [x8] */
        0x48, 0x00, 0x00, 0xf9, /* str x8, [x2] */
        0xc0, 0x03, 0x5f, 0xd6  /* ret */
};
#elif defined(__powerpc64__)
/* No native images on ppc64el (they are refused): only a placeholder. */
const unsigned char kCode[] = {0x20, 0x00, 0x80, 0x4e /* blr */};
#endif

/* A minimal valid image: the code above, one import ("strlen"), one
 * relocation of each kind into the data segment, a function symbol and a
 * needed library. */
struct HandImage {
    ucp_ifunc_image_desc_t   desc;
    unsigned char            text[16];
    ucp_ifunc_image_import_t import;
    ucp_ifunc_image_reloc_t  relocs[2];
    ucp_ifunc_image_symbol_t symbol;
    uint32_t                 needed;
    uint32_t                 padding;
    char                     strtab[24];
};

constexpr uint32_t kSonameOffset = 7; /* "libc.so.6" in strtab */

HandImage make_image()
{
    HandImage img              = {};
    auto     &d                = img.desc;
    d.magic                    = UCP_IFUNC_IMAGE_MAGIC;
    d.version                  = UCP_IFUNC_IMAGE_VERSION;
    d.machine                  = kHostMachine;
    d.desc_size                = sizeof(d);
    d.image_size               = sizeof(img);
    d.page_align               = kPage;
    d.map_size                 = 3 * kPage;
    d.seg[UCP_IFUNC_SEG_TEXT]  = {0, sizeof(kCode), offsetof(HandImage, text),
                                  sizeof(kCode)};
    d.seg[UCP_IFUNC_SEG_RELRO] = {kPage, 8, 0, 0};
    d.seg[UCP_IFUNC_SEG_DATA]  = {2 * kPage, 16, 0, 0};
    d.entry_vaddr              = 0;
    d.got_ptr_vaddr            = kPage;
    d.imports_offset           = offsetof(HandImage, import);
    d.relocs_offset            = offsetof(HandImage, relocs);
    d.strtab_offset            = offsetof(HandImage, strtab);
    d.strtab_size              = sizeof(img.strtab);
    d.n_imports                = 1;
    d.n_relocs                 = 2;
    d.symbols_offset           = offsetof(HandImage, symbol);
    d.n_symbols                = 1;
    d.needed_offset            = offsetof(HandImage, needed);
    d.n_needed                 = 1;
    std::memcpy(img.text, kCode, sizeof(kCode));
    img.import    = {0, 0};
    img.relocs[0] = {2 * kPage, UCP_IFUNC_RELOC_RELATIVE, 0, 16};
    img.relocs[1] = {2 * kPage + 8, UCP_IFUNC_RELOC_IMPORT, 0, 0};
    img.symbol    = {0, 0, 0, sizeof(kCode)};
    img.needed    = kSonameOffset;
    std::memcpy(img.strtab, "strlen\0libc.so.6", 17);
    return img;
}

ucs_status_t check(const HandImage &img)
{
    size_t size;
    return ucx_ifunc::image_check(&img, sizeof(img), "hand", 256ul << 20,
                                  UCS_LOG_LEVEL_WARN, &size);
}

class Image : public UnitTest {};

TEST_F(Image, HandMadeImageIsValid)
{
    EXPECT_EQ(UCS_OK, check(make_image()));
}

TEST_F(Image, EveryBadFieldIsRejected)
{
    struct Case {
        const char *what;
        void (*edit)(HandImage &);
    };
    const Case cases[] = {
            {"magic", [](HandImage &i) { i.desc.magic = 0; }},
            {"version", [](HandImage &i) { i.desc.version = 99; }},
            {"descriptor size", [](HandImage &i) { i.desc.desc_size = 100; }},
            {"image size too large",
             [](HandImage &i) { i.desc.image_size = 1 << 20; }},
            {"image size unaligned",
             [](HandImage &i) { i.desc.image_size -= 4; }},
            {"page alignment", [](HandImage &i) { i.desc.page_align = 3000; }},
            {"map size", [](HandImage &i) { i.desc.map_size = 0; }},
            {"map size huge",
             [](HandImage &i) { i.desc.map_size = 1ull << 40; }},
            {"text not at 0",
             [](HandImage &i) { i.desc.seg[0].vaddr = kPage; }},
            {"segments overlap", [](HandImage &i) { i.desc.seg[1].vaddr = 0; }},
            {"segment unaligned",
             [](HandImage &i) { i.desc.seg[2].vaddr = 2 * kPage + 8; }},
            {"segment beyond map",
             [](HandImage &i) { i.desc.seg[2].mem_size = 2 * kPage; }},
            {"file bytes beyond image",
             [](HandImage &i) { i.desc.seg[0].file_offset = 1 << 20; }},
            {"file larger than memory",
             [](HandImage &i) { i.desc.seg[0].file_size = 64; }},
            {"file bytes in descriptor",
             [](HandImage &i) { i.desc.seg[0].file_offset = 8; }},
            {"entry outside text",
             [](HandImage &i) { i.desc.entry_vaddr = 100; }},
            {"GOT pointer outside relro",
             [](HandImage &i) { i.desc.got_ptr_vaddr = 2 * kPage; }},
            {"GOT pointer unaligned",
             [](HandImage &i) { i.desc.got_ptr_vaddr = kPage + 1; }},
            {"imports beyond image",
             [](HandImage &i) { i.desc.n_imports = 1000; }},
            {"imports over the limit",
             [](HandImage &i) { i.desc.n_imports = 5000; }},
            {"relocations beyond image",
             [](HandImage &i) { i.desc.n_relocs = 1000; }},
            {"string table beyond image",
             [](HandImage &i) { i.desc.strtab_size = 1000; }},
            {"import name beyond table",
             [](HandImage &i) { i.import.name_offset = sizeof(i.strtab); }},
            {"import name empty",
             [](HandImage &i) { i.import.name_offset = sizeof(i.strtab) - 1; }},
            {"import name not terminated",
             [](HandImage &i) {
                 std::memset(i.strtab, 'x', sizeof(i.strtab));
             }},
            {"needed libraries beyond image",
             [](HandImage &i) { i.desc.n_needed = 1000; }},
            {"needed libraries over the limit",
             [](HandImage &i) { i.desc.n_needed = 65; }},
            {"needed library is a path",
             [](HandImage &i) { i.strtab[kSonameOffset] = '/'; }},
            {"needed library name beyond table",
             [](HandImage &i) { i.needed = sizeof(i.strtab); }},
            {"symbols beyond image",
             [](HandImage &i) { i.desc.n_symbols = 1000; }},
            {"symbol outside text",
             [](HandImage &i) { i.symbol.size = 2 * kPage; }},
            {"symbol reserved field",
             [](HandImage &i) { i.symbol.reserved = 1; }},
            {"signature not at the end",
             [](HandImage &i) { i.desc.signature_offset = sizeof(i.desc); }},
            {"import flags", [](HandImage &i) { i.import.flags = 2; }},
            {"relocation type", [](HandImage &i) { i.relocs[0].type = 9; }},
            {"relocation into text",
             [](HandImage &i) { i.relocs[0].vaddr = 0; }},
            {"relocation unaligned",
             [](HandImage &i) { i.relocs[0].vaddr = 2 * kPage + 4; }},
            {"relocation past segment",
             [](HandImage &i) { i.relocs[0].vaddr = 2 * kPage + 16; }},
            {"import index",
             [](HandImage &i) { i.relocs[1].import_index = 1; }},
    };
    for (const Case &c : cases) {
        HandImage img = make_image();
        c.edit(img);
        /* Too large is its own status: the limit is the target's choice. */
        std::string  what     = c.what;
        ucs_status_t expected = ((what == "map size huge") ||
                                 (what == "imports over the limit"))
                                        ? UCS_ERR_EXCEEDS_LIMIT
                                        : UCS_ERR_INVALID_PARAM;
        EXPECT_EQ(expected, check(img)) << c.what;
    }
    HandImage img    = make_image();
    img.desc.machine = kForeignMachine;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, check(img));
}

TEST_F(Image, MachineCodeForAnIsaThatRunsBitcodeOnlyIsRefused)
{
    /* ppc64el runs bitcode only: machine code that says it is for it is
     * refused, even where ppc64el is the machine asked for. */
    HandImage img    = make_image();
    img.desc.machine = EM_PPC64;
    WarningCounter warnings("runs bitcode only");
    size_t         size;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              ucx_ifunc::image_check_for(EM_PPC64, &img, sizeof(img), "hand",
                                         256ul << 20, UCS_LOG_LEVEL_WARN,
                                         &size));
    EXPECT_EQ(1u, warnings.count());
}

#if defined(__x86_64__)
/* A minimal sandbox image (format version 3): one bundle of code, one
 * import, a pointer to its gate bundle in DATA (a RELATIVE record with a
 * negative addend: the gate page lies before image vaddr 0), no GOT
 * pointer. */
struct SandboxHandImage {
    ucp_ifunc_image_desc_t   desc;
    unsigned char            text[32];
    ucp_ifunc_image_import_t import;
    ucp_ifunc_image_reloc_t  reloc;
    char                     strtab[8];
};

SandboxHandImage make_sandbox_image()
{
    SandboxHandImage img       = {};
    auto            &d         = img.desc;
    d.magic                    = UCP_IFUNC_IMAGE_MAGIC;
    d.version                  = UCP_IFUNC_IMAGE_VERSION_SANDBOX;
    d.flags                    = UCP_IFUNC_IMAGE_FLAG_SANDBOX;
    d.machine                  = kHostMachine;
    d.desc_size                = sizeof(d);
    d.image_size               = sizeof(img);
    d.page_align               = kPage;
    d.map_size                 = 2 * kPage;
    d.seg[UCP_IFUNC_SEG_TEXT]  = {0, sizeof(img.text),
                                  offsetof(SandboxHandImage, text),
                                  sizeof(img.text)};
    d.seg[UCP_IFUNC_SEG_RELRO] = {kPage, 0, 0, 0};
    d.seg[UCP_IFUNC_SEG_DATA]  = {kPage, 8, 0, 0};
    d.imports_offset           = offsetof(SandboxHandImage, import);
    d.relocs_offset            = offsetof(SandboxHandImage, reloc);
    d.strtab_offset            = offsetof(SandboxHandImage, strtab);
    d.strtab_size              = sizeof(img.strtab);
    d.n_imports                = 1;
    d.n_relocs                 = 1;
    std::memset(img.text, 0x90, sizeof(img.text));
    img.reloc = {kPage, UCP_IFUNC_RELOC_RELATIVE, 0, -0x1000 + 32};
    std::memcpy(img.strtab, "memcpy", 7);
    return img;
}

ucs_status_t check_sandbox(const SandboxHandImage &img,
                           size_t                  max_map_size = 256ul << 20)
{
    size_t size;
    return ucx_ifunc::image_check(&img, sizeof(img), "sandboxed", max_map_size,
                                  UCS_LOG_LEVEL_WARN, &size);
}

TEST_F(Image, SandboxImageIsValidAndSaysSo)
{
    SandboxHandImage img = make_sandbox_image();
    EXPECT_EQ(UCS_OK, check_sandbox(img));
    EXPECT_TRUE(ucx_ifunc::image_is_sandboxed(img.desc));
    EXPECT_FALSE(ucx_ifunc::image_is_sandboxed(make_image().desc));
}

TEST_F(Image, EveryBadSandboxFieldIsRejected)
{
    struct Case {
        const char *what;
        void (*edit)(SandboxHandImage &);
        ucs_status_t expected;
    };
    const ucs_status_t invalid = UCS_ERR_INVALID_PARAM;
    const Case         cases[] = {
                    {"version 3 without the flag",
                     [](SandboxHandImage &i) { i.desc.flags = 0; }, invalid},
                    {"version 3 with another flag",
                     [](SandboxHandImage &i) { i.desc.flags = 3; }, invalid},
                    {"sandbox flag on version 2",
                     [](SandboxHandImage &i) {
                 i.desc.version = UCP_IFUNC_IMAGE_VERSION;
             },
                     invalid},
                    {"text not whole bundles",
                     [](SandboxHandImage &i) {
                 i.desc.seg[0].mem_size = i.desc.seg[0].file_size = 16;
             },
                     invalid},
                    {"text zero-filled",
                     [](SandboxHandImage &i) { i.desc.seg[0].file_size = 0; }, invalid},
                    {"no text",
                     [](SandboxHandImage &i) {
                 i.desc.seg[0].mem_size = i.desc.seg[0].file_size = 0;
             },
                     invalid},
                    {"entry not a bundle start",
                     [](SandboxHandImage &i) { i.desc.entry_vaddr = 8; }, invalid},
                    {"GOT pointer",
                     [](SandboxHandImage &i) { i.desc.got_ptr_vaddr = kPage; },
                     invalid},
                    {"import record",
                     [](SandboxHandImage &i) {
                 i.reloc.type   = UCP_IFUNC_RELOC_IMPORT;
                 i.reloc.addend = 0;
             },
                     invalid},
                    {"more imports than gate bundles",
                     [](SandboxHandImage &i) { i.desc.n_imports = 128; },
                     UCS_ERR_EXCEEDS_LIMIT},
    };
    for (const Case &c : cases) {
        SandboxHandImage img = make_sandbox_image();
        c.edit(img);
        EXPECT_EQ(c.expected, check_sandbox(img)) << c.what;
    }
    /* Below the stack window whatever the target's memory limit. */
    SandboxHandImage img = make_sandbox_image();
    img.desc.map_size =
            ucx_ifunc::sandbox::kImageEnd - ucx_ifunc::sandbox::kImageOffset;
    img.desc.seg[2].mem_size = img.desc.map_size - kPage;
    EXPECT_EQ(UCS_OK, check_sandbox(img, 4ul << 30));
    img.desc.map_size += kPage;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, check_sandbox(img, 4ul << 30));
    /* A native image never claims the sandbox. */
    HandImage native  = make_image();
    native.desc.flags = UCP_IFUNC_IMAGE_FLAG_SANDBOX;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, check(native));
}
#endif

/* A frame around the hand-made image @a img, named @a name (each name is
 * other code: the code id covers it). */
std::vector<uint64_t> hand_made_frame(const char *name = "counter",
                                      HandImage   img  = make_image())
{
    std::vector<char> prefix = ucx_ifunc::frame_prefix(name, &img, sizeof(img));
    size_t            payload_offset = ucx_ifunc::align_up(prefix.size(), 16);
    size_t            frame_size     = payload_offset + 8;
    std::vector<uint64_t> frame(frame_size / 8, 0);
    std::memcpy(frame.data(), prefix.data(), prefix.size());

    auto &hdr          = *reinterpret_cast<FrameHeader *>(frame.data());
    hdr.frame_size     = frame_size;
    hdr.nonce          = 1;
    hdr.payload_offset = uint32_t(payload_offset);
    hdr.payload_size   = 0;
    hdr.seal           = ucx_ifunc::frame_seal(hdr);
    frame.back()       = hdr.seal;
    return frame;
}

TEST_F(Image, HandMadeImageLinksAndRunsWhereAnyCodeIsTrusted)
{
    /* A context reads the policy when it first uses ifuncs. */
    setenv("UCX_IFUNC_TRUST", "any", 1);
    Context      any_code;
    auto         frame  = hand_made_frame();
    void        *result = nullptr;
    ucs_status_t status = ucp_poll_ifunc(any_code.get(), frame.data(),
                                         frame.size() * 8, &result);
    unsetenv("UCX_IFUNC_TRUST");
    ASSERT_EQ(UCS_OK, status);
    EXPECT_EQ(reinterpret_cast<void *>(&strlen), result);
}

TEST_F(Image, MissingSymbolOrLibraryIsOneLineThatSaysWhatFixesIt)
{
    setenv("UCX_IFUNC_TRUST", "any", 1);
    Context target;
    struct Case {
        const char *name;
        const char *strtab; /* import, NUL, soname */
        size_t      length;
        const char *hint;
    } cases[] = {{"missing_symbol", "nosuchsym\0libc.so.6", 20, "-rdynamic"},
                 {"missing_library", "strlen\0libnosuch.so.9", 22,
                  "LD_LIBRARY_PATH"}};
    for (const Case &c : cases) {
        HandImage img = make_image();
        std::memset(img.strtab, 0, sizeof(img.strtab));
        std::memcpy(img.strtab, c.strtab, c.length);
        img.needed = uint32_t(std::strlen(c.strtab) + 1);
        test::WarningCounter warnings(c.hint);
        auto                 frame  = hand_made_frame(c.name, img);
        void                *result = nullptr;
        for (int i = 0; i < 2; ++i) { /* the poll empties the buffer */
            auto buffer = frame;
            EXPECT_EQ(UCS_ERR_NO_ELEM,
                      ucp_poll_ifunc(target.get(), buffer.data(),
                                     buffer.size() * 8, &result))
                    << c.name;
        }
        EXPECT_EQ(nullptr, result);
        EXPECT_EQ(1, warnings.count()) << c.name << ": one line per code id";
    }
    unsetenv("UCX_IFUNC_TRUST");
}

TEST_F(Image, ImageLargerThanTheMemoryLimitIsRejectedWithoutEvicting)
{
    setenv("UCX_IFUNC_TRUST", "any", 1);
    setenv("UCX_IFUNC_MAX_LINKED_MEMORY", "8KB", 1); /* the image maps 12 */
    Context              target;
    test::WarningCounter warnings("UCX_IFUNC_MAX_LINKED_MEMORY");
    auto                 frame  = hand_made_frame();
    void                *result = nullptr;
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, ucp_poll_ifunc(target.get(), frame.data(),
                                                    frame.size() * 8, &result));
    unsetenv("UCX_IFUNC_TRUST");
    unsetenv("UCX_IFUNC_MAX_LINKED_MEMORY");
    EXPECT_EQ(nullptr, result);
    EXPECT_EQ(1, warnings.count());
    auto stats = ucx_ifunc::target_state(target.get()).code.stats();
    EXPECT_EQ(0u, stats.codes);
    EXPECT_EQ(0u, stats.evictions);
}

TEST_F(Image, HandMadeImageIsRejectedByTheDefaultPolicy)
{
    /* Neither signed nor the image of counter.so: nothing runs. */
    auto  frame  = hand_made_frame();
    void *result = nullptr;
    EXPECT_EQ(UCS_ERR_REJECTED, ucp_poll_ifunc(context(), frame.data(),
                                               frame.size() * 8, &result));
    EXPECT_EQ(nullptr, result);
}

TEST_F(Image, DistinctCodeIsEvictedWithinTheLimits)
{
    /* A peer sends thousands of distinct code images (under "any", the
     * only policy that links code it has never seen): the context keeps at
     * most UCX_IFUNC_MAX_LINKED_CODES of them, evicting the oldest, so
     * mappings and memory stay bounded and every message still runs. */
    const char *count   = getenv("IFUNC_TEST_DISTINCT_CODES");
    const int   kFrames = (count != nullptr) ? atoi(count) : 5000;
    setenv("UCX_IFUNC_TRUST", "any", 1);
    setenv("UCX_IFUNC_MAX_LINKED_CODES", "64", 1);
    Context bounded;
    size_t  maps_before = mapping_count();
    long    rss_before  = rss_kib();
    int     ran         = 0;
    for (int i = 0; i < kFrames; ++i) {
        char name[32];
        snprintf(name, sizeof(name), "distinct_%d", i);
        auto  frame  = hand_made_frame(name);
        void *result = nullptr;
        if ((ucp_poll_ifunc(bounded.get(), frame.data(), frame.size() * 8,
                            &result) == UCS_OK) &&
            (result == reinterpret_cast<void *>(&strlen))) {
            ++ran;
        }
    }
    unsetenv("UCX_IFUNC_TRUST");
    unsetenv("UCX_IFUNC_MAX_LINKED_CODES");
    auto   stats      = ucx_ifunc::target_state(bounded.get()).code.stats();
    size_t maps_after = mapping_count();
    long   rss_after  = rss_kib();
    printf("[ limits   ] %d distinct images sent, %d ran; linked now %zu "
           "(%llu bytes), evicted %llu; mappings %zu -> %zu; RSS %ld -> %ld "
           "KiB\n",
           kFrames, ran, stats.codes,
           static_cast<unsigned long long>(stats.memory),
           static_cast<unsigned long long>(stats.evictions), maps_before,
           maps_after, rss_before, rss_after);
    EXPECT_EQ(kFrames, ran);
    EXPECT_LE(stats.codes, 64u);
    EXPECT_EQ(uint64_t(kFrames) - stats.codes, stats.evictions);
    /* Three mappings per image (text, read-only data with the import
     * table, data), a few more for what this thread still remembers. */
    EXPECT_LE(maps_after, maps_before + 3 * (64 + 8) + 16);
}

TEST_F(Image, AnEvictedCodesIndexNeverNamesTheCodeAfterIt)
{
    /* References name code by the target's index (slot and generation):
     * once code is evicted and other code takes its slot, the old index
     * names nothing, and the new code's index names the new code. */
    setenv("UCX_IFUNC_TRUST", "any", 1);
    setenv("UCX_IFUNC_MAX_LINKED_CODES", "1", 1);
    Context               target;
    ucx_ifunc::CodeCache &cache = ucx_ifunc::target_state(target.get()).code;
    auto                  link  = [&](const char *name) -> uint64_t {
        auto                   frame = hand_made_frame(name);
        ucx_ifunc::FrameHeader hdr;
        std::memcpy(&hdr, frame.data(), sizeof(hdr));
        ucx_ifunc::CodeUse use;
        if (cache.lookup(hdr, frame.data(), &use) != UCS_OK) {
            ADD_FAILURE() << name << " did not link";
            return 0;
        }
        return use.code_index();
    };
    uint64_t first  = link("index_first");
    uint64_t second = link("index_second"); /* evicts the first */
    unsetenv("UCX_IFUNC_TRUST");
    unsetenv("UCX_IFUNC_MAX_LINKED_CODES");
    ASSERT_NE(0u, first);
    ASSERT_NE(0u, second);
    EXPECT_EQ(1u, cache.stats().evictions);
    EXPECT_EQ(first & 0xffffff, second & 0xffffff) << "the slot is reused";
    EXPECT_NE(first >> 32, second >> 32) << "with a new generation";

    test::WarningCounter missing("does not hold");
    ucx_ifunc::CodeUse   stale;
    EXPECT_EQ(UCS_ERR_NO_ELEM, cache.lookup_index(first, 0, &stale));
    EXPECT_EQ(1, missing.count());
    ucx_ifunc::CodeUse held;
    ASSERT_EQ(UCS_OK, cache.lookup_index(second, 0, &held));
    EXPECT_EQ(second, held.code_index());
    /* No index at all, and bits an index never has, name nothing. */
    ucx_ifunc::CodeUse none;
    EXPECT_EQ(UCS_ERR_NO_ELEM, cache.lookup_index(0, 0, &none));
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              cache.lookup_index(second | (uint64_t(1) << 24), 0, &none));
}

} // namespace
} // namespace test
