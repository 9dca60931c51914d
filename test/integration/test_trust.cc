/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The target's trust policy (UCX_IFUNC_TRUST, docs/security.md) with real
 * peers: targets with an empty UCX_IFUNC_LIB_DIR run signed code, or any
 * code where told so, that calls libc, libm, zlib and the target program;
 * the default policy runs nothing of another build, a tampered image or a
 * signature by a key it does not list, and logs each rejected code once.
 */
#include "../common/frames.h"
#include "constructs.h"
#include "target.h"

#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/format/image.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <cstring>

namespace test {
namespace {

constexpr size_t kSlot = 1ul << 20;

std::string key_path(const char *name)
{
    return std::string(UCX_IFUNC_TEST_KEY_DIR) + "/" + name + ".pub";
}


class Trust : public TransportTest {
protected:
    /* A target with @a env set, whose peer loads its libraries from
     * @a peer_dir (a subdirectory of the test libraries). The variables are
     * set after the target starts (it sets its own UCX_IFUNC_LIB_DIR) and
     * stay set while it lives: its context reads the policy when it first
     * polls. */
    void restart(const std::string                                &peer_dir,
                 std::vector<std::pair<const char *, std::string>> env)
    {
        target_.reset();
        env_.clear();
        std::string peer_lib_dir = peer_ifunc_lib_dir() + "/" + peer_dir;
        target_ = std::make_unique<Target>(GetParam(), peer_lib_dir);
        for (auto &[name, value] : env) {
            env_.push_back(std::make_unique<ScopedEnv>(name, value.c_str()));
        }
    }

    void TearDown() override
    {
        target_.reset();
        env_.clear();
    }

    /* Sends constructs_signed with a selector; returns the poll status. */
    ucs_status_t send_constructs(constructs_result *result)
    {
        uint32_t handle   = target_->register_ifunc("constructs_signed");
        int32_t  selector = 3;
        EXPECT_EQ(UCS_OK,
                  target_->send(handle, 0, &selector, sizeof(selector)).status);
        return target_->poll_until_result(0, kSlot, result);
    }

    EmptyDir                                empty_;
    std::vector<std::unique_ptr<ScopedEnv>> env_;
};

TEST_P(Trust, SignedCodeRunsOnATargetWithoutTheLibrary)
{
    restart("signed", {{"UCX_IFUNC_LIB_DIR", empty_.path()},
                       {"UCX_IFUNC_TRUSTED_KEYS",
                        key_path("other") + ":" + key_path("site")}});
    long              before = ucx_ifunc_test_target_global;
    constructs_result result = {};
    ASSERT_EQ(UCS_OK, send_constructs(&result));
    /* libc, libm, zlib and the program's global: all in the checks. */
    expect_constructs_passed("constructs_signed", result);
    EXPECT_EQ(before + 3, ucx_ifunc_test_target_global);
    std::string library = ifunc_lib_dir() + "/signed/constructs_signed.so";
    EXPECT_EQ(nullptr, dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD))
            << "the target loaded the ifunc's library";
}

TEST_P(Trust, AnyCodeRunsOnATargetWithoutTheLibraryWhenTrustIsAny)
{
    /* Unsigned code (constructs_O2 is built without --sign). */
    restart(".",
            {{"UCX_IFUNC_LIB_DIR", empty_.path()}, {"UCX_IFUNC_TRUST", "any"}});
    uint32_t          handle   = target_->register_ifunc("constructs_O2");
    int32_t           selector = 3;
    constructs_result result   = {};
    ASSERT_EQ(UCS_OK,
              target_->send(handle, 0, &selector, sizeof(selector)).status);
    ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &result));
    expect_constructs_passed("constructs_O2", result);
}

TEST_P(Trust, SignatureByAKeyTheTargetDoesNotListIsRejected)
{
    restart("signed_other", {{"UCX_IFUNC_LIB_DIR", empty_.path()},
                             {"UCX_IFUNC_TRUSTED_KEYS", key_path("site")}});
    WarningCounter    warnings("rejected under UCX_IFUNC_TRUST");
    constructs_result result = {};
    EXPECT_EQ(UCS_ERR_REJECTED, send_constructs(&result));
    EXPECT_EQ(UCS_ERR_REJECTED, send_constructs(&result));
    EXPECT_EQ(0u, result.calls);
    EXPECT_EQ(1, warnings.count()) << "one log line per code id";
}

TEST_P(Trust, DefaultPolicyRejectsAnotherBuildOfTheSameLibrary)
{
    /* The target has rebuilt.so v1; the source sends v2. */
    restart("rebuilt_v2",
            {{"UCX_IFUNC_LIB_DIR", ifunc_lib_dir() + "/rebuilt_v1"}});
    WarningCounter warnings("differs from the image of");
    uint32_t       handle = target_->register_ifunc("rebuilt");
    int64_t        value  = 0;
    ASSERT_EQ(UCS_OK, target_->send(handle, 0).status);
    EXPECT_EQ(UCS_ERR_REJECTED, target_->poll_until_result(0, kSlot, &value));
    EXPECT_EQ(0, value);
    EXPECT_EQ(1, warnings.count());
}

TEST_P(Trust, DefaultPolicyRejectsATamperedImage)
{
    /* Signed by the site key and the target's own library: then one byte
     * of its code changes, and the code id with it (a consistent frame). */
    restart("signed", {{"UCX_IFUNC_LIB_DIR", ifunc_lib_dir() + "/signed"},
                       {"UCX_IFUNC_TRUSTED_KEYS", key_path("site")}});
    uint32_t          handle   = target_->register_ifunc("constructs_signed");
    int32_t           selector = 3;
    std::vector<char> bytes =
            target_->get_frame(handle, &selector, sizeof(selector));
    ASSERT_GE(bytes.size(), sizeof(ucx_ifunc::FrameHeader));
    auto  &hdr   = *reinterpret_cast<ucx_ifunc::FrameHeader *>(bytes.data());
    size_t image = ucx_ifunc::frame_image_offset(hdr.name_length);
    auto   desc  = reinterpret_cast<ucp_ifunc_image_desc_t *>(&bytes[image]);
    bytes[image + desc->seg[UCP_IFUNC_SEG_TEXT].file_offset + 1] ^= 0x40;
    ucx_ifunc::set_header_code_id(
            &hdr, ucx_ifunc::code_id_of(&bytes[ucx_ifunc::kNameOffset],
                                        image + hdr.image_size -
                                                ucx_ifunc::kNameOffset));
    hdr.seal = ucx_ifunc::frame_seal(hdr);
    std::memcpy(&bytes[bytes.size() - 8], &hdr.seal, 8);

    WarningCounter    warnings("does not verify");
    constructs_result result = {};
    ASSERT_EQ(UCS_OK, target_->put_raw(0, bytes.data(), bytes.size()).status);
    EXPECT_EQ(UCS_ERR_REJECTED, target_->poll_until_result(0, kSlot, &result));
    EXPECT_EQ(0u, result.calls);
    EXPECT_EQ(1, warnings.count());

    /* The untouched frame runs: the rejection was the tampering's. */
    std::vector<char> good =
            target_->get_frame(handle, &selector, sizeof(selector));
    ASSERT_EQ(UCS_OK, target_->put_raw(0, good.data(), good.size()).status);
    ASSERT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &result));
    expect_constructs_passed("constructs_signed", result);
}

TEST_P(Trust, UnsignedCodeNeedsTheLibraryUnderTheDefaultPolicy)
{
    restart(".", {{"UCX_IFUNC_LIB_DIR", empty_.path()}});
    WarningCounter warnings("no loadable counter.so");
    uint32_t       handle  = target_->register_ifunc("counter");
    int64_t        counter = 0;
    ASSERT_EQ(UCS_OK, target_->send(handle, 0).status);
    EXPECT_EQ(UCS_ERR_REJECTED, target_->poll_until_result(0, kSlot, &counter));
    EXPECT_EQ(0, counter);
    EXPECT_EQ(1, warnings.count());

    /* Once the library is there, the next message runs. */
    setenv("UCX_IFUNC_LIB_DIR", ifunc_lib_dir().c_str(), 1);
    ASSERT_EQ(UCS_OK, target_->send(handle, 0).status);
    EXPECT_EQ(UCS_OK, target_->poll_until_result(0, kSlot, &counter));
    EXPECT_EQ(1, counter);
}

INSTANTIATE_TEST_SUITE_P(Transports, Trust, ::testing::Values("sm", "tcp"),
                         transport_name);

} // namespace
} // namespace test
