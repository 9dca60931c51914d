/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * libFuzzer harness over everything a peer controls on the target: the
 * bytes of one target buffer, i.e. a frame as a peer wrote it (header,
 * name, code image with its descriptor, segments, imports, relocations and
 * string table, payload, seal), of any format version.
 *
 * It takes the target's steps one by one, as poll.cc does, and stops where
 * the target would call the shipped code: the envelope check
 * (envelope_sealed), frame_validate or ref_validate, image_check, and the
 * link step (CodeCache::lookup: copy, check, relocate, resolve imports,
 * protect), then lookup_ref. Running the code would prove nothing: random
 * machine code crashes.
 *
 * Hash checks: random bytes almost never carry the right seal or code id,
 * so fix_up_hashes() recomputes both over the input before the steps run;
 * only it knows which words are hashes of which bytes. The unpatched input
 * goes through the envelope check first, so that path sees raw bytes too.
 *
 * A full frame goes to two targets: one under the trust policy "signed"
 * (trusting the test key of the build's test/ifuncs/keys), which checks
 * signatures and links only code signed by it, and one under "any", which
 * links whatever is well formed: the image checker, the import resolver
 * (the process's scope, then the libraries the image names by soname) and
 * the relocations see every input. Test ifunc libraries of
 * UCX_IFUNC_LIB_DIR (by default the build's test/ifuncs/lib) are loaded
 * once.
 * Log lines are formatted, as they would be, and dropped.
 */
#include "test/fuzz/drop_log.h"
#include "test/fuzz/fix_up_hashes.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/load/link.h"
#include "ucp/ifunc/load/registry.h"
#include "test/ifuncs/test_ifunc.h"

#include <ucs/debug/log_def.h>

#include <dirent.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace ucx_ifunc;

/* The target program's global that the constructs ifuncs import. */
extern "C" long TEST_TARGET_GLOBAL;
long            TEST_TARGET_GLOBAL = 0;

namespace {

/* An independent check of what image_check() promised for an image that
 * was linked: every byte the link step wrote lies inside the mapping. A
 * failure is a bug of image_check, whatever the input. */
void check_linked_image(const char *image)
{
    auto d   = image_desc(image);
    auto die = [](const char *what) {
        std::fprintf(stderr, "fuzz_frame: linked image with %s\n", what);
        std::abort();
    };
    for (const ucp_ifunc_image_seg_t &s : d.seg) {
        if ((s.vaddr > d.map_size) || (s.mem_size > d.map_size - s.vaddr) ||
            (s.file_size > s.mem_size) || (s.file_offset > d.image_size) ||
            (s.file_size > d.image_size - s.file_offset)) {
            die("a segment outside the mapping or the image");
        }
    }
    if ((d.entry_vaddr >= d.map_size) || (d.got_ptr_vaddr > d.map_size - 8)) {
        die("its entry point or GOT pointer outside the mapping");
    }
    for (uint32_t i = 0; i < d.n_relocs; ++i) {
        if (image_reloc(image, d, i).vaddr > d.map_size - 8) {
            die("a relocation outside the mapping");
        }
    }
}

/* A registry made under trust policy @a trust (it reads the policy when
 * it is made). */
std::unique_ptr<Registry> registry_under(const char *trust)
{
    setenv("UCX_IFUNC_TRUST", trust, 1);
    setenv("UCX_IFUNC_TRUSTED_KEYS", UCX_IFUNC_TEST_KEY_DIR "/site.pub", 1);
    auto registry = std::make_unique<Registry>();
    unsetenv("UCX_IFUNC_TRUST");
    unsetenv("UCX_IFUNC_TRUSTED_KEYS");
    return registry;
}

/* The targets' registries, and every test library held loaded, so that
 * inputs do not pay for dlopen/dlclose. */
struct Target {
    std::unique_ptr<Registry> signed_only = registry_under("signed");
    std::unique_ptr<Registry> any_code    = registry_under("any");
    Registry                 &registry    = *any_code;
    PeerLog                   peer_log;
    std::vector<std::shared_ptr<Library>> libraries;

    Target()
    {
        const char *dir_name = std::getenv("UCX_IFUNC_LIB_DIR");
        DIR        *dir      = opendir(dir_name);
        for (dirent *e; (dir != nullptr) && ((e = readdir(dir)) != nullptr);) {
            std::string file = e->d_name;
            if ((file.size() <= 3) ||
                (file.compare(file.size() - 3, 3, ".so") != 0)) {
                continue;
            }
            std::string              name = file.substr(0, file.size() - 3);
            std::shared_ptr<Library> lib;
            if (ifunc_name_valid(name.c_str()) &&
                (registry.get(name.c_str(), UCS_LOG_LEVEL_DEBUG, &lib) ==
                 UCS_OK)) {
                libraries.push_back(lib);
            }
        }
        if (dir != nullptr) {
            closedir(dir);
        }
        std::fprintf(stderr, "fuzz_frame: %zu ifunc libraries from %s\n",
                     libraries.size(), dir_name);
    }
};

Target *target;

/* A full frame, as poll_slot() takes it. */
void take_full_frame(const char *buffer, size_t buffer_size)
{
    FrameHeader hdr;
    snapshot_header(buffer, &hdr);
    if (frame_validate(hdr, buffer_size, target->peer_log) != UCS_OK) {
        return;
    }
    /* The image on its own, whatever the name (link checks the name first) */
    const char *image = buffer + frame_image_offset(hdr.name_length);
    size_t      image_size;
    image_check(image, hdr.image_size, "fuzz",
                target->registry.max_image_size(), UCS_LOG_LEVEL_WARN,
                &image_size);

    /* A cache per input and policy: a cache keeps what it linked */
    {
        CodeCache signed_cache(*target->signed_only, target->peer_log);
        CodeUse   use;
        if (signed_cache.lookup(hdr, buffer, &use) == UCS_OK) {
            check_linked_image(image);
        }
    }
    CodeCache cache(*target->any_code, target->peer_log);
    MainFn    entry = nullptr;
    {
        CodeUse use;
        if (cache.lookup(hdr, buffer, &use) != UCS_OK) {
            return;
        }
        entry = use.entry();
    }
    check_linked_image(image);
    CodeUse again, by_ref;
    if ((entry == nullptr) || (cache.lookup(hdr, buffer, &again) != UCS_OK) ||
        (again.entry() != entry) ||
        (cache.lookup_index(again.code_index(), nonce_source_id(hdr.nonce),
                            &by_ref) != UCS_OK) ||
        (by_ref.entry() != entry)) {
        std::fprintf(stderr, "fuzz_frame: cache lookups disagree\n");
        std::abort();
    }
}

/* A reference frame (version 3): its code index names nothing this
 * target holds (its cache is empty). */
void take_ref_frame(const char *buffer, size_t buffer_size)
{
    RefHeader hdr;
    std::memcpy(&hdr, buffer, sizeof(hdr));
    if (ref_validate(hdr, buffer_size, target->peer_log) != UCS_OK) {
        return;
    }
    CodeCache cache(target->registry, target->peer_log);
    CodeUse   use;
    if (cache.lookup_index(hdr.code_index, nonce_source_id(hdr.nonce), &use) ==
        UCS_OK) {
        std::fprintf(stderr, "fuzz_frame: empty cache holds code\n");
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
    setenv("UCX_IFUNC_LIB_DIR", UCX_IFUNC_TEST_LIB_DIR, 0);
    ucs_log_push_handler(fuzz::drop_log_line);
    target = new Target();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A buffer of exactly the input's size (rounded up to whole words, as
     * every target buffer is), so that the sanitizer sees any read beyond. */
    size_t            buffer_size = align_up(std::max(size, kMinFrameSize), 8);
    std::vector<char> buffer(buffer_size, 0);
    std::memcpy(buffer.data(), data, size);

    uint64_t word0;
    std::memcpy(&word0, buffer.data(), sizeof(word0));
    size_t   header_size = frame_header_size(word0);
    uint64_t seal;
    bool     envelope_ok = (header_size >= kMinHeaderSize) &&
                       (header_size <= kMaxHeaderSize) && !(header_size % 8) &&
                       (header_size + kSealSize <= buffer_size);
    if (envelope_ok) {
        envelope_sealed(buffer.data(), header_size, &seal);
    }

    fuzz::fix_up_hashes(buffer.data(), buffer_size);
    if (word0 == frame_magic_word()) {
        take_full_frame(buffer.data(), buffer_size);
    } else if (word0 == ref_magic_word()) {
        take_ref_frame(buffer.data(), buffer_size);
    } else if (envelope_ok &&
               !envelope_sealed(buffer.data(), header_size, &seal)) {
        std::fprintf(stderr, "fuzz_frame: resealed envelope not sealed\n");
        std::abort();
    }
    return 0;
}
