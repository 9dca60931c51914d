/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * ucp_ifunc_code_register: code registered from the images of a built
 * library, read out of it, makes the messages that library makes (same
 * code ids, same frames but for the nonce), runs, and survives the caller
 * freeing its buffer; it has no payload functions; and every malformed
 * input (truncated, overlapping, misaligned, duplicated images, images
 * for no ISA or not this one's, bad fields) is refused with one log line.
 */
#include "fixture.h"

#include "../common/frames.h"
#include "../common/images.h"

#include "ucp/ifunc/format/frame.h"

#include <cstring>

namespace test {
namespace {

class CodeRegister : public UnitTest {
protected:
    std::vector<LibraryImage> images_of(const std::string &name,
                                        const std::string &subdir = "")
    {
        std::string dir = UCX_IFUNC_TEST_LIB_DIR;
        if (!subdir.empty()) {
            dir += "/" + subdir;
        }
        return library_images(dir + "/" + name + ".so", name);
    }

    ucs_status_t register_images(const char *name, const void *images,
                                 size_t size, ucp_ifunc_h *ifunc_p)
    {
        ucp_ifunc_code_params_t params = {};
        params.field_mask              = UCP_IFUNC_CODE_PARAM_FIELD_NAME |
                            UCP_IFUNC_CODE_PARAM_FIELD_IMAGES;
        params.name        = name;
        params.images      = images;
        params.images_size = size;
        return ucp_ifunc_code_register(context(), &params, ifunc_p);
    }

    /* The status of registering @a images as @a name, and that it logged
     * exactly one error line on failure. */
    ucs_status_t refusal(const std::vector<char> &images,
                         const char              *name = "counter")
    {
        WarningCounter errors("", UCS_LOG_LEVEL_ERROR);
        ucp_ifunc_h    ifunc = nullptr;
        ucs_status_t   status =
                register_images(name, images.data(), images.size(), &ifunc);
        if (status == UCS_OK) {
            ucp_deregister_ifunc(context(), ifunc);
        } else {
            EXPECT_EQ(nullptr, ifunc);
            EXPECT_EQ(1, errors.count()) << "one log line per refusal";
        }
        return status;
    }

    /* A message of @a ifunc carrying the 8-byte @a value. */
    static std::vector<char> frame_of(ucp_ifunc_h ifunc, int64_t value)
    {
        ucp_ifunc_msg_params_t params = {};
        params.field_mask             = UCP_IFUNC_MSG_FIELD_PAYLOAD;
        params.payload                = &value;
        params.payload_size           = sizeof(value);
        ucp_ifunc_msg_t msg;
        EXPECT_EQ(UCS_OK, ucp_ifunc_msg_build(ifunc, &params, &msg));
        std::vector<char> frame(static_cast<char *>(msg.frame),
                                static_cast<char *>(msg.frame) +
                                        msg.frame_size);
        ucp_ifunc_msg_free(msg);
        return frame;
    }

    static ucx_ifunc::FrameHeader header_of(const std::vector<char> &frame)
    {
        ucx_ifunc::FrameHeader header;
        std::memcpy(&header, frame.data(), sizeof(header));
        return header;
    }
};

TEST_F(CodeRegister, ImagesOfALibraryMakeItsFramesAndRun)
{
    std::vector<LibraryImage> images = images_of("counter");
    ASSERT_FALSE(images.empty());
    std::vector<char> all = back_to_back(images);

    ucp_ifunc_h from_file, from_memory;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(context(), "counter", &from_file));
    ASSERT_EQ(UCS_OK,
              register_images("counter", all.data(), all.size(), &from_memory));
    /* The images are the handle's own: the caller's buffer may go. */
    std::memset(all.data(), 0xa5, all.size());
    all.clear();
    all.shrink_to_fit();

    std::vector<char> a = frame_of(from_file, 5), b = frame_of(from_memory, 5);
    ASSERT_EQ(a.size(), b.size());
    ucx_ifunc::FrameHeader ha = header_of(a), hb = header_of(b);
    EXPECT_EQ(ha.code_id_lo, hb.code_id_lo);
    EXPECT_EQ(ha.code_id_hi, hb.code_id_hi);
    EXPECT_NE(ha.nonce, hb.nonce);
    /* Name, image and payload: the same bytes. */
    size_t body = offsetof(ucx_ifunc::FrameHeader, seal) + 8;
    EXPECT_EQ(0, std::memcmp(a.data() + body, b.data() + body,
                             a.size() - body - ucx_ifunc::kSealSize));

    /* It runs: sent to this process's own buffer over loopback. */
    Worker                 worker(context());
    RemoteBuffer           buffer(context(), worker, worker);
    ucp_ifunc_msg_params_t params = {};
    int64_t                value  = 7;
    params.field_mask             = UCP_IFUNC_MSG_FIELD_PAYLOAD;
    params.payload                = &value;
    params.payload_size           = sizeof(value);
    ucp_ifunc_msg_t msg;
    ASSERT_EQ(UCS_OK, ucp_ifunc_msg_build(from_memory, &params, &msg));
    ucs_status_t status = ucp_ifunc_send_nbix(
            buffer.ep.get(), msg, buffer.address, buffer.rkey.get());
    ASSERT_FALSE(UCS_STATUS_IS_ERR(status));
    ASSERT_EQ(UCS_OK, buffer.ep.flush(deadline_in(10)));
    int64_t counter = 0;
    EXPECT_EQ(UCS_OK,
              poll_until_result(context(), worker, buffer.memory, &counter));
    EXPECT_EQ(7, counter);
    ucp_ifunc_msg_free(msg);

    ucp_deregister_ifunc(context(), from_memory);
    ucp_deregister_ifunc(context(), from_file);
}

TEST_F(CodeRegister, NativeAndBitcodeImagesTogether)
{
    /* bc_pick.so carries this ISA's native image and its bitcode. */
    std::vector<LibraryImage> images = images_of("bc_pick");
    if (images.size() < 2) {
        GTEST_SKIP() << "no bc_pick.so with bitcode (built without LLVM)";
    }
    std::vector<char> all = back_to_back(images);
    ucp_ifunc_h       from_file, from_memory;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(context(), "bc_pick", &from_file));
    ASSERT_EQ(UCS_OK,
              register_images("bc_pick", all.data(), all.size(), &from_memory));
    ucx_ifunc::FrameHeader a = header_of(frame_of(from_file, 1));
    ucx_ifunc::FrameHeader b = header_of(frame_of(from_memory, 1));
    EXPECT_EQ(a.code_id_lo, b.code_id_lo);
    EXPECT_EQ(a.code_id_hi, b.code_id_hi);
    ucp_deregister_ifunc(context(), from_memory);
    ucp_deregister_ifunc(context(), from_file);

    /* Bitcode alone for this ISA: its messages carry the bitcode. */
    std::vector<LibraryImage> bitcode_only =
            images_of("bc_pick", "bitcode_only");
    ASSERT_EQ(1u, bitcode_only.size());
    all = back_to_back(bitcode_only);
    ASSERT_EQ(UCS_OK,
              register_images("bc_pick", all.data(), all.size(), &from_memory));
    ucx_ifunc::FrameHeader c = header_of(frame_of(from_memory, 1));
    EXPECT_EQ(all.size(), c.image_size);
    ucp_deregister_ifunc(context(), from_memory);
}

TEST_F(CodeRegister, MessagesFromSourceArgumentsAreUnsupported)
{
    std::vector<char> all = back_to_back(images_of("counter"));
    ucp_ifunc_h       ifunc;
    ASSERT_EQ(UCS_OK,
              register_images("counter", all.data(), all.size(), &ifunc));
    ucp_ifunc_msg_t msg;
    {
        WarningCounter errors("no payload functions", UCS_LOG_LEVEL_ERROR);
        EXPECT_EQ(UCS_ERR_UNSUPPORTED,
                  ucp_ifunc_msg_create(ifunc, nullptr, 0, &msg));
        EXPECT_EQ(1, errors.count());
    }
    ucp_ifunc_msg_params_t params = {};
    params.field_mask             = UCP_IFUNC_MSG_FIELD_SOURCE_ARGS;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, ucp_ifunc_msg_build(ifunc, &params, &msg));
    ucp_deregister_ifunc(context(), ifunc);
}

TEST_F(CodeRegister, BadArgumentsAreInvalid)
{
    std::vector<char>       all    = back_to_back(images_of("counter"));
    ucp_ifunc_h             ifunc  = nullptr;
    ucp_ifunc_code_params_t params = {};
    params.field_mask =
            UCP_IFUNC_CODE_PARAM_FIELD_NAME | UCP_IFUNC_CODE_PARAM_FIELD_IMAGES;
    params.name         = "counter";
    params.images       = all.data();
    params.images_size  = all.size();
    auto expect_invalid = [&](const ucp_ifunc_code_params_t *p,
                              ucp_context_h ctx, ucp_ifunc_h *out) {
        WarningCounter errors("", UCS_LOG_LEVEL_ERROR);
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_code_register(ctx, p, out));
        EXPECT_EQ(1, errors.count());
    };
    expect_invalid(&params, nullptr, &ifunc);
    expect_invalid(nullptr, context(), &ifunc);
    expect_invalid(&params, context(), nullptr);
    for (uint64_t mask : {uint64_t(UCP_IFUNC_CODE_PARAM_FIELD_NAME),
                          uint64_t(UCP_IFUNC_CODE_PARAM_FIELD_IMAGES),
                          params.field_mask | UCS_BIT(5)}) {
        ucp_ifunc_code_params_t p = params;
        p.field_mask              = mask;
        expect_invalid(&p, context(), &ifunc);
    }
    for (const char *name : {"", "9lives", "../counter", "a b"}) {
        ucp_ifunc_code_params_t p = params;
        p.name                    = name;
        expect_invalid(&p, context(), &ifunc);
    }
    std::string             long_name(UCP_IFUNC_NAME_MAX + 1, 'a');
    ucp_ifunc_code_params_t p = params;
    p.name                    = long_name.c_str();
    expect_invalid(&p, context(), &ifunc);
    p.name = nullptr;
    expect_invalid(&p, context(), &ifunc);
    p        = params;
    p.images = nullptr;
    expect_invalid(&p, context(), &ifunc);
    p.images_size = 0;
    expect_invalid(&p, context(), &ifunc);
    /* Sizes no set of images can have are refused before anything is
     * copied (SIZE_MAX used to wrap the copy's size: a heap overflow). */
    p = params;
    for (size_t size : {SIZE_MAX, SIZE_MAX - 6, size_t(1) << 62}) {
        WarningCounter errors("", UCS_LOG_LEVEL_ERROR);
        p.images_size = size;
        EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
                  ucp_ifunc_code_register(context(), &p, &ifunc))
                << size;
        EXPECT_EQ(1, errors.count());
    }
    EXPECT_EQ(nullptr, ifunc);
    /* ucp_ifunc_code_get takes a name only. */
    p = params;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_code_get(context(), &p, &ifunc));
}

TEST_F(CodeRegister, MalformedImagesAreRefused)
{
    std::vector<LibraryImage> images = images_of("counter");
    ASSERT_FALSE(images.empty());
    const std::vector<char> &host = images[0].bytes;
    ASSERT_EQ(0u, host.size() % 8);

    /* Truncated: anywhere in the image, and short of a descriptor. */
    for (size_t cut :
         {size_t(8), size_t(96), host.size() / 2, host.size() - 8}) {
        std::vector<char> truncated(host.begin(), host.end() - cut);
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(truncated)) << cut;
    }
    std::vector<char> stub(host.begin(), host.begin() + 100);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(stub));

    /* Bytes after the last image that are no image. */
    std::vector<char> trailing = host;
    trailing.resize(host.size() + 8, 0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(trailing));
    trailing.resize(host.size() + 4);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(trailing));

    /* A second image not at the end of the first: 4 bytes of padding
     * (at an offset that is no multiple of 8), or overlapping it (the
     * first claims 8 bytes of the second). */
    if (images.size() > 1) {
        const std::vector<char> &second = images[1].bytes;
        std::vector<char>        padded = host;
        padded.insert(padded.end(), 4, 0);
        padded.insert(padded.end(), second.begin(), second.end());
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(padded));

        std::vector<char> overlapping = host;
        overlapping.insert(overlapping.end(), second.begin(), second.end());
        uint64_t size = host.size() + 8;
        std::memcpy(overlapping.data() +
                            offsetof(ucp_ifunc_image_desc_t, image_size),
                    &size, sizeof(size));
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(overlapping));
    }

    /* Two native images for this ISA. */
    std::vector<char> twice = host;
    twice.insert(twice.end(), host.begin(), host.end());
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(twice));

    /* An image size that is no multiple of 8, or says less than there is
     * of the image. */
    for (uint64_t size : {uint64_t(host.size() - 4), uint64_t(host.size() - 8),
                          uint64_t(sizeof(ucp_ifunc_image_desc_t))}) {
        std::vector<char> wrong = host;
        std::memcpy(wrong.data() + offsetof(ucp_ifunc_image_desc_t, image_size),
                    &size, sizeof(size));
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(wrong)) << size;
    }

    /* Not an image at all; an ISA no code ships for (i386). */
    std::vector<char> zeros(host.size(), 0);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(zeros));
    std::vector<char> i386    = host;
    uint16_t          machine = 3;
    std::memcpy(i386.data() + offsetof(ucp_ifunc_image_desc_t, machine),
                &machine, sizeof(machine));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(i386));

    /* A bitcode image named for another ifunc than it holds. */
    std::vector<LibraryImage> bitcode = images_of("bc_pick", "bitcode_only");
    if (!bitcode.empty()) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM,
                  refusal(bitcode[0].bytes, "not_bc_pick"));
    }

    /* Images for other ISAs only. */
    if (images.size() > 1) {
        std::vector<LibraryImage> foreign(images.begin() + 1, images.end());
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, refusal(back_to_back(foreign)));
    }

    /* The registration that works still works. */
    EXPECT_EQ(UCS_OK, refusal(back_to_back(images)));
}

TEST_F(CodeRegister, ImageAtAnyAddressOfTheCallersBuffer)
{
    /* The caller's buffer need not be aligned: the images are copied. */
    std::vector<char> all = back_to_back(images_of("counter"));
    std::vector<char> shifted(all.size() + 1);
    std::memcpy(shifted.data() + 1, all.data(), all.size());
    ucp_ifunc_h ifunc;
    ASSERT_EQ(UCS_OK, register_images("counter", shifted.data() + 1, all.size(),
                                      &ifunc));
    ucp_deregister_ifunc(context(), ifunc);
}

} // namespace
} // namespace test
