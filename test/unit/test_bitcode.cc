/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Bitcode images on the target (issue 32): the image check of version 4,
 * and frames whose image is bitcode, compiled by the JIT through the code
 * cache under the trust policy and the import rules. The bitcode is real
 * C compiled by clang (test/common/bitcode.h).
 */
#include "fixture.h"

#include "../common/bitcode.h"
#include "../common/frames.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/load/context.h"
#include "ucp/ifunc/load/jit.h"
#include "ucp/ifunc/load/link.h"

#include <sodium.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

namespace test {
namespace {

using ucx_ifunc::FrameHeader;

/* The test ifunc: statics, a pointer table, an import (strlen) and the
 * payload in place. */
const char *const kSource = R"(
#include <stddef.h>
extern size_t strlen(const char *);
static long calls;
static long add1(long x) { return x + 1; }
static long twice(long x) { return 2 * x; }
static long (*const table[])(long) = {add1, twice};
static const char word[] = "bitcode";
void bc_main(void *payload, size_t size, void *target_args)
{
    long *p = (long *)payload;
    (void)size;
    (void)target_args;
    p[1] = table[p[0] & 1](p[0]);
    p[2] = (long)strlen(word);
    p[3] = ++calls;
}
)";

std::vector<char> test_image(const std::string &bitcode)
{
    return bitcode_image("bc", bitcode, kBitcodeHostTriple, kBitcodeHostMachine,
                         {{"strlen"}});
}

ucs_status_t check(const std::vector<char> &image, const char *name = "bc",
                   size_t max = 256ul << 20)
{
    size_t size;
    return ucx_ifunc::image_check(image.data(), image.size(), name, max,
                                  UCS_LOG_LEVEL_DEBUG, &size);
}

ucp_ifunc_image_desc_t &desc_of(std::vector<char> &image)
{
    return *reinterpret_cast<ucp_ifunc_image_desc_t *>(image.data());
}

/* A frame of ifunc @a name with @a image and @a payload_size bytes of
 * payload, @a first_word its first 8. */
std::vector<uint64_t> frame_with(const std::string       &name,
                                 const std::vector<char> &image,
                                 size_t payload_size, long first_word)
{
    std::vector<char> prefix =
            ucx_ifunc::frame_prefix(name.c_str(), image.data(), image.size());
    size_t payload_offset = ucx_ifunc::align_up(prefix.size(), 16);
    size_t frame_size =
            payload_offset + ucx_ifunc::align_up(payload_size, 8) + 8;
    std::vector<uint64_t> frame(frame_size / 8, 0);
    std::memcpy(frame.data(), prefix.data(), prefix.size());
    std::memcpy(reinterpret_cast<char *>(frame.data()) + payload_offset,
                &first_word, sizeof(first_word));
    auto &hdr          = *reinterpret_cast<FrameHeader *>(frame.data());
    hdr.frame_size     = frame_size;
    hdr.nonce          = 1;
    hdr.payload_offset = uint32_t(payload_offset);
    hdr.payload_size   = uint32_t(payload_size);
    hdr.seal           = ucx_ifunc::frame_seal(hdr);
    frame.back()       = hdr.seal;
    return frame;
}

const long *payload_of(const std::vector<uint64_t> &frame)
{
    auto &hdr = *reinterpret_cast<const FrameHeader *>(frame.data());
    return reinterpret_cast<const long *>(
            reinterpret_cast<const char *>(frame.data()) + hdr.payload_offset);
}

/* A context made with UCX_IFUNC_TRUST=@a trust (and other variables set
 * meanwhile), which it reads when it first uses ifuncs. */
class ContextWith {
public:
    explicit ContextWith(
            const char                                      *trust,
            std::vector<std::pair<std::string, std::string>> vars = {})
    {
        vars.emplace_back("UCX_IFUNC_TRUST", trust);
        for (auto &var : vars) {
            setenv(var.first.c_str(), var.second.c_str(), 1);
        }
        /* The first use reads the settings. */
        ucx_ifunc::target_state(context_.get());
        for (auto &var : vars) {
            unsetenv(var.first.c_str());
        }
    }

    ucp_context_h get() const { return context_.get(); }

    ucx_ifunc::CodeCache::Stats stats()
    {
        return ucx_ifunc::target_state(context_.get()).code.stats();
    }

private:
    Context context_;
};

ucs_status_t poll(ucp_context_h context, std::vector<uint64_t> &frame)
{
    return ucp_poll_ifunc(context, frame.data(), frame.size() * 8, nullptr);
}

class BitcodeImage : public UnitTest {
protected:
    void SetUp() override
    {
        UnitTest::SetUp();
        /* Stand-in bitcode for the checks: the magic and some bytes. */
        bitcode_ = std::string("BC\xc0\xde", 4) + std::string(60, '\x11');
    }

    std::string bitcode_;
};

TEST_F(BitcodeImage, ValidAndSaysSo)
{
    auto image = test_image(bitcode_);
    ASSERT_EQ(UCS_OK, check(image));
    auto d = ucx_ifunc::image_desc(image.data());
    EXPECT_TRUE(ucx_ifunc::image_is_bitcode(d));
    EXPECT_FALSE(ucx_ifunc::image_is_sandboxed(d));
    EXPECT_STREQ(kBitcodeHostTriple,
                 ucx_ifunc::image_bitcode_triple(image.data(), d));
    /* The wrapper's magic too. */
    std::string wrapped = std::string("\xde\xc0\x17\x0b", 4) + bitcode_;
    EXPECT_EQ(UCS_OK, check(test_image(wrapped)));
}

TEST_F(BitcodeImage, EveryBadFieldIsRejected)
{
    auto bad = [&](const char *what, auto edit,
                   ucs_status_t expected = UCS_ERR_INVALID_PARAM) {
        auto image = test_image(bitcode_);
        edit(image, desc_of(image));
        EXPECT_EQ(expected, check(image)) << what;
    };
    using Image = std::vector<char>;
    using Desc  = ucp_ifunc_image_desc_t;
    bad("version 4 without the flag", [](Image &, Desc &d) { d.flags = 0; });
    bad("version 4 with the sandbox's flag too",
        [](Image &, Desc &d) { d.flags |= UCP_IFUNC_IMAGE_FLAG_SANDBOX; });
    bad("native version with the bitcode flag",
        [](Image &, Desc &d) { d.version = UCP_IFUNC_IMAGE_VERSION; });
    bad("sandbox version with the bitcode flag",
        [](Image &, Desc &d) { d.version = UCP_IFUNC_IMAGE_VERSION_SANDBOX; });
    bad("a page size", [](Image &, Desc &d) { d.page_align = 4096; });
    bad("a map size", [](Image &, Desc &d) { d.map_size = 4096; });
    bad("an entry", [](Image &, Desc &d) { d.entry_vaddr = 16; });
    bad("a GOT pointer", [](Image &, Desc &d) { d.got_ptr_vaddr = 8; });
    bad("relocations", [](Image &, Desc &d) { d.n_relocs = 1; });
    bad("a relocation table", [](Image &, Desc &d) { d.relocs_offset = 8; });
    bad("a data segment",
        [](Image &, Desc &d) { d.seg[UCP_IFUNC_SEG_DATA].mem_size = 8; });
    bad("a read-only segment",
        [](Image &, Desc &d) { d.seg[UCP_IFUNC_SEG_RELRO].vaddr = 4096; });
    bad("bitcode at a vaddr",
        [](Image &, Desc &d) { d.seg[UCP_IFUNC_SEG_TEXT].vaddr = 4096; });
    bad("bitcode of no bytes", [](Image &, Desc &d) {
        d.seg[UCP_IFUNC_SEG_TEXT].file_size = 0;
        d.seg[UCP_IFUNC_SEG_TEXT].mem_size  = 0;
    });
    bad("bitcode with a zero-filled tail",
        [](Image &, Desc &d) { d.seg[UCP_IFUNC_SEG_TEXT].mem_size += 8; });
    bad("bitcode not 16-aligned",
        [](Image &, Desc &d) { d.seg[UCP_IFUNC_SEG_TEXT].file_offset -= 8; });
    bad("bitcode beyond the image",
        [](Image &, Desc &d) { d.seg[UCP_IFUNC_SEG_TEXT].file_offset += 64; });
    bad("bitcode over the descriptor",
        [](Image &, Desc &d) { d.seg[UCP_IFUNC_SEG_TEXT].file_offset = 0; });
    bad("no bitcode magic", [](Image &image, Desc &d) {
        image[d.seg[UCP_IFUNC_SEG_TEXT].file_offset] = 'X';
    });
    bad("no triple",
        [](Image &image, Desc &d) { image[d.strtab_offset] = '\0'; });
    bad("a triple with a space",
        [](Image &image, Desc &d) { image[d.strtab_offset + 3] = ' '; });
    bad("two symbols", [](Image &, Desc &d) { d.n_symbols = 2; });
    bad("no symbol", [](Image &, Desc &d) { d.n_symbols = 0; });
    bad("a symbol of size",
        [](Image &image, Desc &d) { image[d.symbols_offset + 16] = 1; });
    /* The triple of another ISA than the descriptor's machine. */
    auto other = bitcode_image("bc", bitcode_, kBitcodeForeignTriple,
                               kBitcodeHostMachine);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, check(other));
    /* Code for another ISA: what the target says of any image. */
    auto foreign = bitcode_image("bc", bitcode_, kBitcodeForeignTriple,
                                 kBitcodeForeignMachine);
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, check(foreign));
    /* The symbol must be NAME_main of the frame's name. */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, check(test_image(bitcode_), "other"));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, check(test_image(bitcode_), "b"));
    /* Bitcode counts against UCX_IFUNC_MAX_IMAGE_SIZE. */
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, check(test_image(bitcode_), "bc", 32));
}

class BitcodeFrame : public UnitTest {
protected:
    void SetUp() override
    {
        UnitTest::SetUp();
        if (!ucx_ifunc::jit_available()) {
            return;
        }
        ASSERT_TRUE(bitcode_clang_available());
        bitcode_ = bitcode_of(kSource, kBitcodeHostTriple);
        ASSERT_FALSE(bitcode_.empty());
        image_ = test_image(bitcode_);
    }

    std::string       bitcode_;
    std::vector<char> image_;
};

#define REQUIRE_JIT()                                                          \
    if (!ucx_ifunc::jit_available()) {                                         \
        GTEST_SKIP() << "built without LLVM";                                  \
    }

TEST_F(BitcodeFrame, WithoutLlvmRefusedInOneLine)
{
    if (ucx_ifunc::jit_available()) {
        GTEST_SKIP() << "built with LLVM: the other tests run";
    }
    ContextWith any("any");
    auto        image =
            test_image(std::string("BC\xc0\xde", 4) + std::string(60, '\x11'));
    auto           frame = frame_with("bc", image, 32, 1);
    WarningCounter said("built without LLVM");
    EXPECT_EQ(UCS_ERR_UNSUPPORTED, poll(any.get(), frame));
    EXPECT_EQ(1, said.count());
}

TEST_F(BitcodeFrame, CompiledOnceAndRunWhereAnyCodeIsTrusted)
{
    REQUIRE_JIT();
    ContextWith any("any");
    for (long i = 0; i < 4; ++i) {
        auto frame = frame_with("bc", image_, 32, i + 10);
        ASSERT_EQ(UCS_OK, poll(any.get(), frame)) << i;
        const long *p = payload_of(frame);
        EXPECT_EQ(p[1], (i + 10) & 1 ? 2 * (i + 10) : i + 11);
        EXPECT_EQ(p[2], 7) << "strlen, an import";
        EXPECT_EQ(p[3], i + 1) << "the statics persist between messages";
    }
    auto stats = any.stats();
    EXPECT_EQ(1u, stats.linked);
    EXPECT_EQ(1u, stats.codes);
    /* Its memory counts the compiled code, a page at least, and the
     * received copy. */
    EXPECT_GE(stats.memory, 4096u + image_.size());
}

/* The compiled code counts toward UCX_IFUNC_MAX_LINKED_MEMORY: beyond it
 * the code is refused after compiling, and its memory freed at once. */
TEST_F(BitcodeFrame, CompiledCodeCountsTowardTheMemoryLimit)
{
    REQUIRE_JIT();
    size_t      before = ucx_ifunc::jit_memory_in_use();
    ContextWith small("any", {{"UCX_IFUNC_MAX_LINKED_MEMORY",
                               std::to_string(image_.size() + 4096)}});
    auto        frame = frame_with("bc", image_, 32, 1);
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, poll(small.get(), frame));
    EXPECT_EQ(0u, small.stats().linked);
    EXPECT_EQ(before, ucx_ifunc::jit_memory_in_use());
    /* With room for it, the same code runs, and holds its pages until its
     * context goes. */
    {
        ContextWith roomy("any", {{"UCX_IFUNC_MAX_LINKED_MEMORY", "1m"}});
        auto        again = frame_with("bc", image_, 32, 1);
        EXPECT_EQ(UCS_OK, poll(roomy.get(), again));
        EXPECT_GT(ucx_ifunc::jit_memory_in_use(), before);
    }
    EXPECT_EQ(before, ucx_ifunc::jit_memory_in_use());
}

TEST_F(BitcodeFrame, ConcurrentFirstMessagesCompileOnce)
{
    REQUIRE_JIT();
    ContextWith                        any("any");
    constexpr int                      kThreads = 4;
    std::vector<std::vector<uint64_t>> frames;
    for (int i = 0; i < kThreads; ++i) {
        frames.push_back(frame_with("bc", image_, 32, 3));
    }
    std::atomic<int>          ready{0};
    std::vector<ucs_status_t> results(kThreads, UCS_ERR_LAST);
    std::vector<std::thread>  threads;
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
            ready.fetch_add(1);
            while (ready.load() < kThreads) {
            }
            results[i] = poll(any.get(), frames[i]);
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    std::vector<long> counts;
    for (int i = 0; i < kThreads; ++i) {
        EXPECT_EQ(UCS_OK, results[i]);
        counts.push_back(payload_of(frames[i])[3]);
    }
    std::sort(counts.begin(), counts.end());
    EXPECT_EQ(counts, std::vector<long>({1, 2, 3, 4})) << "one code's statics";
    EXPECT_EQ(1u, any.stats().linked) << "compiled once";
}

TEST_F(BitcodeFrame, NameTheImageDoesNotListIsRefused)
{
    REQUIRE_JIT();
    /* The module calls getpid; the image lists strlen only. */
    const char    *source = R"(
#include <stddef.h>
extern int getpid(void);
void bc_main(void *payload, size_t size, void *args)
{
    (void)size; (void)args;
    *(long *)payload = getpid();
}
)";
    auto           image  = test_image(bitcode_of(source, kBitcodeHostTriple));
    ContextWith    any("any");
    auto           frame = frame_with("bc", image, 32, 0);
    WarningCounter said("refers to 'getpid', which its image does not list");
    EXPECT_EQ(UCS_ERR_REJECTED, poll(any.get(), frame));
    EXPECT_EQ(1, said.count());
    EXPECT_EQ(0, payload_of(frame)[0]);
    /* Listed, it runs. */
    auto listed = bitcode_image("bc", bitcode_of(source, kBitcodeHostTriple),
                                kBitcodeHostTriple, kBitcodeHostMachine,
                                {{"getpid"}});
    auto frame2 = frame_with("bc", listed, 32, 0);
    EXPECT_EQ(UCS_OK, poll(any.get(), frame2));
    EXPECT_EQ(getpid(), payload_of(frame2)[0]);
}

TEST_F(BitcodeFrame, MissingImportIsOneLineAndNothingRuns)
{
    REQUIRE_JIT();
    const char *source = R"(
#include <stddef.h>
extern long no_such_function_here(void);
void bc_main(void *payload, size_t size, void *args)
{
    (void)size; (void)args;
    *(long *)payload = no_such_function_here();
}
)";
    auto image = bitcode_image("bc", bitcode_of(source, kBitcodeHostTriple),
                               kBitcodeHostTriple, kBitcodeHostMachine,
                               {{"no_such_function_here"}});
    ContextWith    any("any");
    auto           frame = frame_with("bc", image, 32, 0);
    WarningCounter said("no_such_function_here");
    EXPECT_EQ(UCS_ERR_NO_ELEM, poll(any.get(), frame));
    EXPECT_EQ(1, said.count());
}

TEST_F(BitcodeFrame, SandboxedPolicyRefusesBitcodeAndSaysWhy)
{
    REQUIRE_JIT();
    ContextWith    sandboxed("sandboxed");
    auto           frame = frame_with("bc", image_, 32, 1);
    WarningCounter said("never runs under 'sandboxed'");
    EXPECT_EQ(UCS_ERR_REJECTED, poll(sandboxed.get(), frame));
    EXPECT_EQ(1, said.count());
    EXPECT_EQ(0u, sandboxed.stats().linked);
}

TEST_F(BitcodeFrame, DefaultPolicyRejectsUnknownBitcode)
{
    REQUIRE_JIT();
    auto frame = frame_with("bc", image_, 32, 1);
    EXPECT_EQ(UCS_ERR_REJECTED, poll(context(), frame));
}

/* Signs @a image for ifunc @a name with @a secret (libsodium's 64-byte
 * secret key): appends the signature block. */
std::vector<char> signed_image(std::vector<char> image, const std::string &name,
                               const unsigned char *public_key,
                               const unsigned char *secret)
{
    ucp_ifunc_image_signature_t sig = {};
    size_t                      at  = image.size();
    image.resize(at + sizeof(sig));
    auto &d            = desc_of(image);
    d.image_size       = image.size();
    d.signature_offset = at;
    std::vector<unsigned char> message;
    const char                 domain[] = UCP_IFUNC_IMAGE_SIGNATURE_DOMAIN;
    message.insert(message.end(), domain, domain + sizeof(domain));
    message.insert(message.end(), name.c_str(), name.c_str() + name.size() + 1);
    message.insert(message.end(), image.data(), image.data() + at);
    std::memcpy(sig.public_key, public_key, 32);
    crypto_sign_detached(sig.signature, nullptr, message.data(), message.size(),
                         secret);
    std::memcpy(image.data() + at, &sig, sizeof(sig));
    return image;
}

TEST_F(BitcodeFrame, SignedBitcodeRunsAndAChangedByteIsRefused)
{
    REQUIRE_JIT();
    ASSERT_GE(sodium_init(), 0);
    unsigned char public_key[crypto_sign_PUBLICKEYBYTES];
    unsigned char secret[crypto_sign_SECRETKEYBYTES];
    crypto_sign_keypair(public_key, secret);
    char dir[] = "/tmp/ifunc_bitcode_key_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    std::string        key_path = std::string(dir) + "/test.pub";
    std::ostringstream hex;
    for (unsigned char byte : public_key) {
        char two[3];
        snprintf(two, sizeof(two), "%02x", byte);
        hex << two;
    }
    std::ofstream(key_path) << "ucx-ifunc-ed25519-public " << hex.str() << "\n";
    ContextWith trusting("signed", {{"UCX_IFUNC_TRUSTED_KEYS", key_path}});
    unlink(key_path.c_str());
    rmdir(dir);

    auto image = signed_image(image_, "bc", public_key, secret);
    auto frame = frame_with("bc", image, 32, 4);
    ASSERT_EQ(UCS_OK, poll(trusting.get(), frame));
    EXPECT_EQ(5, payload_of(frame)[1]);
    /* One byte of the bitcode changed after signing. */
    auto changed = image;
    changed[desc_of(changed).seg[UCP_IFUNC_SEG_TEXT].file_offset + 20] ^= 1;
    auto frame2 = frame_with("bc", changed, 32, 4);
    EXPECT_EQ(UCS_ERR_REJECTED, poll(trusting.get(), frame2));
    /* Unsigned. */
    auto frame3 = frame_with("bc", image_, 32, 4);
    EXPECT_EQ(UCS_ERR_REJECTED, poll(trusting.get(), frame3));
    EXPECT_EQ(1u, trusting.stats().linked);
}

/* A module that takes seconds to compile (load/jit tests measure it):
 * refused within UCX_IFUNC_JIT_TIMEOUT, and for good, so a second frame
 * of it costs nothing. */
TEST_F(BitcodeFrame, BombRefusedWithinTheBoundAndRemembered)
{
    REQUIRE_JIT();
    std::ostringstream ir;
    const int          blocks = 20000;
    ir << "define void @bc_main(i8* %p, i64 %n, i8* %a) {\nentry:\n"
          "  %q = bitcast i8* %p to i64*\n  br label %b0\n";
    for (int i = 0; i < blocks; ++i) {
        ir << "b" << i << ":\n  %v" << i << " = load volatile i64, i64* %q\n"
           << "  %c" << i << " = icmp eq i64 %v" << i << ", " << i
           << "\n  br i1 %c" << i << ", label %b" << (i + 1) << ", label %x"
           << i << "\nx" << i << ":\n  store volatile i64 %v" << i
           << ", i64* %q\n  br label %b" << (i + 1) << "\n";
    }
    ir << "b" << blocks << ":\n  %s0 = add i64 0, 0\n";
    for (int i = 0; i < blocks; ++i) {
        ir << "  %s" << (i + 1) << " = mul i64 %s" << i << ", %v" << i << "\n";
    }
    ir << "  store i64 %s" << blocks << ", i64* %q\n  ret void\n}\n";
    std::string bomb = bitcode_of(ir.str(), kBitcodeHostTriple,
                                  "-O0 -Wno-override-module", true);
    ASSERT_FALSE(bomb.empty());
    ContextWith  bounded("any", {{"UCX_IFUNC_JIT_TIMEOUT", "200ms"}});
    auto         image  = bitcode_image("bc", bomb);
    auto         frame  = frame_with("bc", image, 32, 0);
    auto         start  = std::chrono::steady_clock::now();
    ucs_status_t status = poll(bounded.get(), frame);
    double       took   = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    EXPECT_LT(took, 1.5);
    if (status == UCS_ERR_TIMED_OUT) {
        /* The child had less than half the bound on a CPU (a loaded
         * machine): refused, but not for good, by design. */
        GTEST_SKIP() << "the compiling child was starved; remembering "
                        "not checked";
    }
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, status);
    auto again = frame_with("bc", image, 32, 0);
    start      = std::chrono::steady_clock::now();
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT, poll(bounded.get(), again));
    took = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
                   .count();
    EXPECT_LT(took, 0.1) << "remembered, not compiled again";
    EXPECT_EQ(0u, bounded.stats().linked);
}

} // namespace
} // namespace test
