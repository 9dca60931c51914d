/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The code image: validation of every descriptor field, and linking a
 * hand-assembled image (independent of the toolchain) through a frame.
 */
#include "fixture.h"

#include <string>

#include "ucp/ifunc/frame.h"
#include "ucp/ifunc/image.h"
#include "ucp/ifunc/image_check.h"

#include <cstring>

namespace test {
namespace {

using ucx_ifunc::FrameHeader;

constexpr uint64_t kPage = 4096;

/* x86-64 code of: void main(void *payload, size_t size, void *args)
 * { *(void**)args = (*got_ptr)[0]; } where got_ptr is at vaddr kPage. */
const unsigned char kCode[] = {
        0x48, 0x8b, 0x05, 0xf9, 0x0f, 0x00, 0x00, /* movq 0xff9(%rip), %rax */
        0x48, 0x8b, 0x00,                         /* movq (%rax), %rax */
        0x48, 0x89, 0x02,                         /* movq %rax, (%rdx) */
        0xc3                                      /* ret */
};

/* A minimal valid image: the code above, one import ("strlen"), and one
 * relocation of each kind into the data segment. */
struct HandImage {
    ucp_ifunc_image_desc_t   desc;
    unsigned char            text[16];
    ucp_ifunc_image_import_t import;
    ucp_ifunc_image_reloc_t  relocs[2];
    char                     strtab[8];
};

HandImage make_image()
{
    HandImage img              = {};
    auto     &d                = img.desc;
    d.magic                    = UCP_IFUNC_IMAGE_MAGIC;
    d.version                  = UCP_IFUNC_IMAGE_VERSION;
    d.machine                  = 62;
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
    std::memcpy(img.text, kCode, sizeof(kCode));
    img.import    = {0, 0};
    img.relocs[0] = {2 * kPage, UCP_IFUNC_RELOC_RELATIVE, 0, 16};
    img.relocs[1] = {2 * kPage + 8, UCP_IFUNC_RELOC_IMPORT, 0, 0};
    std::strcpy(img.strtab, "strlen");
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
             [](HandImage &i) { i.import.name_offset = 8; }},
            {"import name empty",
             [](HandImage &i) { i.import.name_offset = 7; }},
            {"import name not terminated",
             [](HandImage &i) { std::memset(i.strtab, 'x', 8); }},
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
    img.desc.machine = 183;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, check(img));
}

TEST_F(Image, HandMadeImageLinksAndRuns)
{
    /* A frame around the image, named after an existing library: imports
     * resolve in its scope. */
    HandImage         img = make_image();
    std::vector<char> prefix =
            ucx_ifunc::frame_prefix("counter", &img, sizeof(img));
    size_t payload_offset = ucx_ifunc::align_up(prefix.size(), 16);
    size_t frame_size     = payload_offset + 8;
    std::vector<uint64_t> frame(frame_size / 8, 0);
    std::memcpy(frame.data(), prefix.data(), prefix.size());

    auto &hdr          = *reinterpret_cast<FrameHeader *>(frame.data());
    hdr.frame_size     = frame_size;
    hdr.nonce          = 1;
    hdr.payload_offset = uint32_t(payload_offset);
    hdr.payload_size   = 0;
    hdr.seal           = ucx_ifunc::frame_seal(hdr);
    frame.back()       = hdr.seal;

    void *result = nullptr;
    ASSERT_EQ(UCS_OK,
              ucp_poll_ifunc(context(), frame.data(), frame_size, &result));
    EXPECT_EQ(reinterpret_cast<void *>(&strlen), result);
}

} // namespace
} // namespace test
