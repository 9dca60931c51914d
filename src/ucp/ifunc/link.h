/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "link": turning the code image of a message into code that runs in
 * this process. The image is copied into private memory, relocated, its
 * imports resolved by name, the hidden GOT pointer set, and the pages made
 * read-only / executable (never both writable and executable). Linked code is
 * cached by code id (a hash of name and image) so later messages with the
 * same code skip all of this. Each UCP context has its own cache
 * (context.h): the statics of an ifunc live in its context.
 */
#ifndef UCP_IFUNC_LINK_H_
#define UCP_IFUNC_LINK_H_

#include "frame.h"
#include "registry.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace ucx_ifunc {

/* The entry point of shipped code: NAME_main. */
using MainFn = void (*)(void *payload, size_t payload_size, void *target_args);

struct LinkedCode;

/* Code ids whose rejection was logged, up to kMax. Thread-safe. */
class CodeIdSet {
public:
    static constexpr size_t kMax = 4096;

    bool contains(uint64_t code_id)
    {
        std::lock_guard<std::mutex> guard(lock_);
        return ids_.count(code_id) > 0;
    }

    void add(uint64_t code_id)
    {
        std::lock_guard<std::mutex> guard(lock_);
        if (ids_.size() < kMax) {
            ids_.insert(code_id);
        }
    }

private:
    std::mutex                   lock_;
    std::unordered_set<uint64_t> ids_;
};

/* The code one context has linked, by code id. Entries are never removed
 * while the cache lives, so pointers to them stay valid and threads may keep
 * them unlocked. Thread-safe. */
class CodeCache {
public:
    /* Imports resolve through the libraries of @a registry, which must
     * outlive the cache. */
    explicit CodeCache(Registry &registry);
    ~CodeCache();
    CodeCache(const CodeCache &)            = delete;
    CodeCache &operator=(const CodeCache &) = delete;

    /* Returns the entry point for the message with sealed, validated header
     * @a hdr at the start of @a frame, linking its code on first use. A
     * rejected image is logged as a warning (it is the peer's), a local
     * failure as an error. */
    ucs_status_t lookup(const FrameHeader &hdr, const void *frame,
                        MainFn *entry_p);

    /* Returns the entry point of the code with id @a code_id, which a
     * reference frame names. Links nothing: code this cache does not hold
     * is UCS_ERR_NO_ELEM, logged as a warning, and nothing runs. */
    ucs_status_t lookup_ref(uint64_t code_id, MainFn *entry_p);

    /* Whether no code was linked yet. */
    bool empty();

private:
    const LinkedCode *find(uint64_t code_id);
    ucs_status_t      link(const FrameHeader &hdr, const void *frame,
                           const LinkedCode **code_p);

    Registry                                                 &registry_;
    const uint64_t                                            serial_;
    std::shared_mutex                                         lock_;
    std::unordered_map<uint64_t, std::unique_ptr<LinkedCode>> codes_;
    CodeIdSet logged_rejections_;
};

} // namespace ucx_ifunc

#endif
