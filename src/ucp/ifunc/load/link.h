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

#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/base/peer_log.h"
#include "ucp/ifunc/load/registry.h"
#include "ucp/ifunc/sandbox/sandbox.h"
#include "ucp/ifunc/load/trust.h"

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
#include <vector>

namespace ucx_ifunc {

/* The entry point of shipped code: NAME_main. */
using MainFn = void (*)(void *payload, size_t payload_size, void *target_args);

struct LinkedCode;

/* Code ids this context rejected for good (malformed, for another ISA, not
 * trusted, an import it cannot resolve), with what the verdict depended on:
 * the name and, as it was then, the NAME.so the library policy compares
 * with. A frame naming such an id is dropped without copying, hashing,
 * verifying or loading anything, until that NAME.so changes. A fixed table
 * indexed by the id's low bits: no allocation beyond the names, bounded
 * memory; an id pushed out by another is checked afresh when it returns.
 * Thread-safe. */
class RejectedCodes {
public:
    static constexpr size_t kMax = 4096;

    struct Verdict {
        CodeId       code_id;
        std::string  name;
        bool         had_library = false; /* NAME.so was there */
        FileIdentity library{};           /* and was this file */
        ucs_status_t status = UCS_OK;
    };

    /* The verdict on @a code_id, if one is kept. */
    bool find(const CodeId &code_id, Verdict *verdict);
    void add(Verdict verdict);

private:
    std::mutex                lock_;
    std::array<Verdict, kMax> verdicts_{};
};

class CodeCache;
class PeerPins;

/* What a target would decide on the image of ifunc @a name (checked by
 * image_check(), its code id @a code_id) before it runs it, by the steps
 * linking takes: the trust policy @a trust and, for sandbox code, a slot
 * and the verifier (nothing runs; a native image's imports are left to
 * the link). Refusals are logged at @a level. The kind of trust that
 * accepted it (kTrust*) in @a accepted_by, the library that vouched, if
 * one did, in @a library. ucx-ifunc-info's verdict. */
ucs_status_t admit_image(Registry &registry, const TrustPolicy &trust,
                         const std::string &name, const char *image,
                         const CodeId &code_id, ucs_log_level_t level,
                         unsigned                 *accepted_by,
                         std::shared_ptr<Library> *library);

/* The code of one message while it runs: keeps it linked and mapped. */
class CodeUse {
public:
    CodeUse();
    ~CodeUse();
    CodeUse(const CodeUse &)            = delete;
    CodeUse &operator=(const CodeUse &) = delete;

    MainFn entry() const { return entry_; }

    /* Sandboxed code (image flag UCP_IFUNC_IMAGE_FLAG_SANDBOX): the slot
     * it runs in and its entry's image vaddr; run.cc runs it there, never
     * through entry(). nullptr for other code. */
    sandbox::Slot *slot() const { return slot_; }
    uint64_t       sandbox_entry() const { return sandbox_entry_; }

    /* The code's index in its cache (CodeCache::lookup_index): what a
     * source is told to name it by. */
    uint64_t code_index() const;

    /* The code as it was received, as a library to send it on with
     * (ucp_ifunc_code_get). */
    std::shared_ptr<Library> as_received() const;

private:
    friend class CodeCache;
    friend class PeerPins;
    const LinkedCode                 *code_          = nullptr;
    MainFn                            entry_         = nullptr;
    sandbox::Slot                    *slot_          = nullptr;
    uint64_t                          sandbox_entry_ = 0;
    std::shared_ptr<const LinkedCode> held_; /* when nested in other code */
};

/* Whether @a code_index is one a CodeCache can give (CodeUse::code_index():
 * a slot and that slot's generation, never 0, with bits 24-31 clear): what
 * a source checks in a target's reply before it names code by it. */
bool code_index_well_formed(uint64_t code_index);

/* The code one context has linked, by code id, within the limits
 * UCX_IFUNC_MAX_LINKED_CODES and UCX_IFUNC_MAX_LINKED_MEMORY: the oldest
 * code that no peer holds pinned (PeerPins) is evicted to make room, and
 * unmapped once no message runs it. Thread-safe. */
class CodeCache {
public:
    struct Stats {
        size_t   codes;         /* linked now */
        uint64_t memory;        /* bytes they take: mappings and the
                                   received copy of name and image */
        uint64_t evictions;     /* ever */
        size_t   pinned_codes;  /* held for peers */
        uint64_t pinned_memory; /* their bytes */
        uint64_t linked;        /* images linked, ever */
    };

    /* Libraries that vouch for code come from @a registry, and warnings
     * about peers go through @a peer_log; both must outlive the cache. */
    CodeCache(Registry &registry, PeerLog &peer_log);
    ~CodeCache();
    CodeCache(const CodeCache &)            = delete;
    CodeCache &operator=(const CodeCache &) = delete;

    /* Finds the code of the message with sealed, validated header @a hdr at
     * the start of @a frame, linking it on first use, for @a use. A
     * rejected image is logged as a warning (it is the peer's), a local
     * failure as an error. */
    ucs_status_t lookup(const FrameHeader &hdr, const void *frame,
                        CodeUse *use);

    /* Finds the code a reference names by its index here
     * (CodeUse::code_index(): a slot and that slot's generation, so that
     * an index of evicted code never names the code linked after it).
     * Links nothing: an index that names no code this cache holds is
     * UCS_ERR_NO_ELEM, logged as a warning (it is the peer's choice), and
     * nothing runs. @a source keys the warning. */
    ucs_status_t lookup_index(uint64_t code_index, uint32_t source,
                              CodeUse *use);

    /* Maps the payload area of sandboxed code @a use's slot to take
     * @a size bytes, counting what it adds toward
     * UCX_IFUNC_MAX_LINKED_MEMORY first: room is made as for new code
     * (never by evicting this code), and code pinned for peers grows only
     * within their half. UCS_ERR_EXCEEDS_LIMIT if it does not fit, is
     * beyond the slot's payload limit, or the code was evicted meanwhile.
     * Called only when the payload exceeds Slot::payload_room(). */
    ucs_status_t grow_payload(const CodeUse &use, size_t size);

    /* The most recently linked code named @a name, as a library to send it
     * on with; nullptr if none is linked. */
    std::shared_ptr<Library> as_received(const std::string &name);

    /* Whether no code was linked yet. */
    bool  empty();
    Stats stats();

private:
    friend class PeerPins;

    std::shared_ptr<const LinkedCode> find(const CodeId &code_id);
    std::shared_ptr<const LinkedCode> find_index(uint64_t code_index);
    uint64_t                          take_index();
    void                              release_index(uint64_t code_index);
    void  hand_out(std::shared_ptr<const LinkedCode> code, void *recent_slot,
                   uint64_t generation, CodeUse *use);
    void *recent_slot(uint64_t key);
    template <typename Matches>
    bool take_recent(void *recent_slot, uint64_t generation, CodeUse *use,
                     const Matches &matches);
    ucs_status_t link(const FrameHeader &hdr, const void *frame,
                      std::shared_ptr<const LinkedCode> *code_p);
    bool         rejected_before(const FrameHeader &hdr, const void *frame,
                                 ucs_status_t *status);
    /* @a final: whatever the status, the same code fails again (a
     * bitcode compile past its limits). */
    void remember_rejection(const FrameHeader &hdr, const void *frame,
                            ucs_status_t status, bool final = false);
    bool make_room(uint64_t memory, const LinkedCode *growing);
    /* Pins and unpins for one more or one less peer (PeerPins). */
    bool pin(const LinkedCode *code);
    void unpin(const LinkedCode *code);

    Registry             &registry_;
    PeerLog              &peer_log_;
    const TrustPolicy     trust_;
    const uint64_t        serial_;
    const uint32_t        first_generation_; /* of every slot (random) */
    const size_t          max_codes_;
    const uint64_t        max_memory_;
    std::atomic<uint64_t> generation_{0};
    std::shared_mutex     lock_;
    std::unordered_map<CodeId, std::shared_ptr<const LinkedCode>, CodeIdHash>
                       codes_;
    std::deque<CodeId> link_order_; /* oldest first */
    /* Linked code by index: a slot, reused after eviction with the next
     * generation. */
    struct IndexSlot {
        std::shared_ptr<const LinkedCode> code;
        uint32_t                          generation;
    };
    std::vector<IndexSlot> index_slots_;
    std::vector<uint32_t>  free_index_slots_;
    uint64_t               linked_memory_ = 0;
    uint64_t               evictions_     = 0;
    uint64_t               linked_        = 0;
    size_t                 pinned_codes_  = 0;
    uint64_t               pinned_memory_ = 0;
    RejectedCodes          rejected_;
};

/* The code one peer was told this target holds (a channel; one source of
 * the AM service): pinned in the cache, so that the peer's references
 * always find it, until this object goes. A peer pins at most
 * kMaxPerPeer codes (what a source remembers), and all peers together at
 * most half of UCX_IFUNC_MAX_LINKED_CODES and of
 * UCX_IFUNC_MAX_LINKED_MEMORY: the other half stays for code that is
 * linked but not announced, so a peer that pins all it can never stops
 * another peer's code from linking; code that cannot be pinned runs all
 * the same, and its source keeps sending it in full. Thread-safe. */
class PeerPins {
public:
    static constexpr size_t kMaxPerPeer = 64;

    /* @a cache must outlive this object. */
    explicit PeerPins(CodeCache &cache) : cache_(cache) {}
    ~PeerPins();
    PeerPins(const PeerPins &)            = delete;
    PeerPins &operator=(const PeerPins &) = delete;

    /* Pins the code of @a use for this peer; true if the peer may be told
     * that this target holds it. */
    bool pin(const CodeUse &use);

private:
    CodeCache &cache_;
    /* The code pinned last, checked without the lock: a stream of one
     * ifunc's full frames (UCP_IFUNC_SEND_FLAG_WITH_CODE) takes no lock. */
    std::atomic<const LinkedCode *> last_{nullptr};
    std::mutex                      lock_;
    std::vector<const LinkedCode *> codes_;
};

} // namespace ucx_ifunc

#endif
