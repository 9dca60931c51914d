/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "link": turning the code image of a message into code that runs in
 * this process. The image is copied into private memory, checked against its
 * code id and the trust policy (trust.h), its imports resolved (resolve.h),
 * relocated, the hidden GOT pointer set, and the pages made read-only /
 * executable (never both writable and executable). Linked code is cached by
 * code id (code_id.h) so later messages with the same code skip all of
 * this, within limits, with eviction of code that is not running. Each UCP context has its own cache
 * (context.h): the statics of an ifunc live in its context.
 */
#ifndef UCP_IFUNC_LINK_H_
#define UCP_IFUNC_LINK_H_

#include "frame.h"
#include "registry.h"
#include "trust.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <mutex>
#include <array>
#include <atomic>
#include <deque>
#include <unordered_map>
#include <unordered_set>

namespace ucx_ifunc {

/* The entry point of shipped code: NAME_main. */
using MainFn = void (*)(void *payload, size_t payload_size, void *target_args);

struct LinkedCode;

/* Code ids whose rejection was logged: a fixed table, indexed by the id's
 * low bits, so remembering costs no allocation and the memory is bounded;
 * an id pushed out by another is logged again. Thread-safe. */
class CodeIdSet {
public:
    static constexpr size_t kMax = 4096;

    bool contains(const CodeId &code_id)
    {
        std::lock_guard<std::mutex> guard(lock_);
        return ids_[code_id.lo % kMax] == code_id;
    }

    void add(const CodeId &code_id)
    {
        std::lock_guard<std::mutex> guard(lock_);
        ids_[code_id.lo % kMax] = code_id;
    }

private:
    std::mutex               lock_;
    std::array<CodeId, kMax> ids_{};
};

/* Remembers up to kMax keys, so that something is logged once per key
 * (for example once per peer) and the memory for it stays bounded. */
class OnceSet {
public:
    static constexpr size_t kMax = 1024;

    /* True the first time @a key is seen while fewer than kMax are kept. */
    bool first(uint64_t key);

private:
    std::mutex                   lock_;
    std::unordered_set<uint64_t> seen_;
};

class CodeCache;

/* The code of one message while it runs: keeps it linked and mapped. */
class CodeUse {
public:
    CodeUse();
    ~CodeUse();
    CodeUse(const CodeUse &)            = delete;
    CodeUse &operator=(const CodeUse &) = delete;

    MainFn entry() const { return entry_; }

    /* The code as it was received, as a library to send it on with
     * (ucp_ifunc_code_get); built on first use, then shared. */
    std::shared_ptr<Library> as_received() const;

private:
    friend class CodeCache;
    const LinkedCode                 *code_  = nullptr;
    MainFn                            entry_ = nullptr;
    std::shared_ptr<const LinkedCode> held_; /* when nested in other code */
};

/* The code one context has linked, by code id, within the limits
 * UCX_IFUNC_MAX_LINKED_CODES and UCX_IFUNC_MAX_LINKED_MEMORY: the oldest
 * code no path has announced to a source is evicted to make room, and
 * unmapped once no message runs it. Thread-safe. */
class CodeCache {
public:
    struct Stats {
        size_t   codes;     /* linked now */
        uint64_t memory;    /* bytes they map */
        uint64_t evictions; /* ever */
    };

    /* Libraries that vouch for code come from @a registry, which must
     * outlive the cache. */
    explicit CodeCache(Registry &registry);
    ~CodeCache();
    CodeCache(const CodeCache &)            = delete;
    CodeCache &operator=(const CodeCache &) = delete;

    /* Finds the code of the message with sealed, validated header @a hdr at
     * the start of @a frame, linking it on first use, for @a use. A
     * rejected image is logged as a warning (it is the peer's), a local
     * failure as an error. */
    ucs_status_t lookup(const FrameHeader &hdr, const void *frame,
                        CodeUse *use);

    /* Finds the code with id @a code_id, which a reference frame from
     * source @a source (nonce_source_id) names. Links nothing: code this
     * cache does not hold is UCS_ERR_NO_ELEM, logged as a warning once per
     * source (the id is the peer's choice), and nothing runs. */
    ucs_status_t lookup_ref(const CodeId &code_id, uint32_t source,
                            CodeUse *use);

    /* Marks the code of @a use as held for a source that will send
     * references to it: it is not evicted from now on. False if it was
     * evicted meanwhile (then do not tell the source). */
    bool announce(const CodeUse &use);

    /* The most recently linked code named @a name, as a library to send it
     * on with; nullptr if none is linked. */
    std::shared_ptr<Library> as_received(const std::string &name);

    /* Whether no code was linked yet. */
    bool  empty();
    Stats stats();

private:
    std::shared_ptr<const LinkedCode> find(const CodeId &code_id);
    ucs_status_t use(const CodeId &code_id, uint32_t source,
                     const FrameHeader *hdr, const void *frame, CodeUse *use);
    ucs_status_t link(const FrameHeader &hdr, const void *frame,
                      std::shared_ptr<const LinkedCode> *code_p);
    bool         make_room(uint64_t memory);

    Registry             &registry_;
    const TrustPolicy     trust_;
    const uint64_t        serial_;
    const size_t          max_codes_;
    const uint64_t        max_memory_;
    std::atomic<uint64_t> generation_{0};
    std::shared_mutex     lock_;
    std::unordered_map<CodeId, std::shared_ptr<const LinkedCode>, CodeIdHash>
                       codes_;
    std::deque<CodeId> link_order_; /* oldest first */
    uint64_t           linked_memory_ = 0;
    uint64_t           evictions_     = 0;
    CodeIdSet          logged_rejections_;
    /* Sources told once that their frame names code it does not carry or
     * this target does not hold: those ids are the peer's choice, so they
     * are neither remembered nor logged once each. */
    OnceSet forged_ids_;
};

} // namespace ucx_ifunc

#endif
