/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Runtime counters of one UCP context (context.h owns them): messages run
 * per delivery path, bytes received, and messages dropped per reason, read
 * by ucp_ifunc_context_query() and printed at ucp_ifunc_context_release()
 * with UCX_IFUNC_PRINT_COUNTERS=y.
 *
 * Counting a message that runs must cost next to nothing: no lock and no
 * atomic read-modify-write on the message path. So the counts of messages
 * run and bytes received live in shards of one cache line each, one per
 * thread that counts (its first count in a context claims a shard); the
 * owner adds with a plain load and store, readers sum the shards. Threads
 * beyond kShards share one more shard, which they add to atomically. A
 * thread keeps the shard it used last (one context) in initial-exec TLS.
 * Drops are rare and counted with relaxed atomic additions.
 */
#ifndef UCP_IFUNC_COUNTERS_H_
#define UCP_IFUNC_COUNTERS_H_

#include "ucp/ifunc/base/tls.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ucx_ifunc {

/* The path a message that ran came by. The default path (peers) delivers
 * by channel or active message; its messages count as peer, not as those. */
enum class RunPath : unsigned { raw, channel, am, peer, count };

/* Why a target dropped a message (each drop is also one warning, within
 * PeerLog's limits). */
enum class Reject : unsigned {
    untrusted,      /* its code is not trusted (UCX_IFUNC_TRUST) */
    bad_frame,      /* malformed frame or active message: sizes, seal */
    bad_version,    /* a frame format version this target does not read */
    bad_code,       /* a malformed code image, or one that is not its id */
    wrong_isa,      /* code for another ISA */
    missing_import, /* an import or library this process does not have */
    too_large,      /* beyond a limit: UCX_IFUNC_MAX_AM_MESSAGE,
                       UCX_IFUNC_MAX_IMAGE_SIZE, UCX_IFUNC_MAX_LINKED_* */
    unknown_code,   /* a reference to code this target does not hold */
    busy,           /* no room to wait for a receive (the source resends) */
    lost,           /* its data never arrived (the source failed) */
    other,          /* a local failure: memory, mappings */
    sandbox_fault,  /* sandboxed code faulted or made a refused host call */
    sandbox_budget, /* sandboxed code ran over UCX_IFUNC_SANDBOX_BUDGET */
    count
};

constexpr size_t kRunPaths      = size_t(RunPath::count);
constexpr size_t kRejectReasons = size_t(Reject::count);

/* The counters' names, as ucp_ifunc_context_attr_t's fields without their
 * prefix ("raw", "untrusted"). */
const char *run_path_name(RunPath path);
const char *reject_name(Reject reason);

/* The shard of Counters this thread used last, by the object's serial.
 * Defined here (inline, constant-initialised) so that every use reads it
 * straight from the thread pointer, without a TLS wrapper call. */
struct CounterShard {
    uint64_t serial;
    void    *shard;
};
inline UCX_IFUNC_TLS CounterShard counter_shard = {0, nullptr};

/* What the counters say at one moment. */
struct CounterValues {
    uint64_t runs[kRunPaths]          = {};
    uint64_t bytes_received           = 0;
    uint64_t rejected[kRejectReasons] = {};
};

class Counters {
public:
    static constexpr unsigned kShards = 32;

    Counters();
    Counters(const Counters &)            = delete;
    Counters &operator=(const Counters &) = delete;

    /* A message delivered by @a path is about to run; @a bytes more were
     * received (as count_bytes(); 0 where they were counted on arrival).
     * One shard lookup for both. */
    void count_run(RunPath path, uint64_t bytes)
    {
        Shard *shard = this_thread_shard();
        add(shard, size_t(path), 1);
        add(shard, kBytesIndex, bytes);
    }

    /* A message of @a bytes (as it arrived: header, code and payload) was
     * taken from a buffer, a slot or an active message, run or not. */
    void count_bytes(uint64_t bytes)
    {
        add(this_thread_shard(), kBytesIndex, bytes);
    }

    /* @a n messages were dropped for @a reason. */
    void count_reject(Reject reason, uint64_t n = 1)
    {
        rejected_[size_t(reason)].fetch_add(n, std::memory_order_relaxed);
    }

    /* The sums now (relaxed: a count being added may be missed). */
    CounterValues read() const;

private:
    static constexpr size_t kBytesIndex = kRunPaths;
    static constexpr size_t kHot        = kRunPaths + 1;

    struct alignas(64) Shard {
        std::atomic<uint64_t> value[kHot];
        std::atomic<uint64_t> owner; /* a thread's token, 0 while free */
    };

    Shard *this_thread_shard()
    {
        return (counter_shard.serial == serial_)
                       ? static_cast<Shard *>(counter_shard.shard)
                       : claim_shard();
    }

    void add(Shard *shard, size_t index, uint64_t n)
    {
        std::atomic<uint64_t> &value = shard->value[index];
        if (shard != &shared_) {
            /* Only this thread writes its shard. */
            value.store(value.load(std::memory_order_relaxed) + n,
                        std::memory_order_relaxed);
        } else {
            value.fetch_add(n, std::memory_order_relaxed);
        }
    }

    Shard *claim_shard();

    const uint64_t        serial_; /* tells this object from every other */
    Shard                 shards_[kShards];
    Shard                 shared_;
    std::atomic<uint64_t> rejected_[kRejectReasons];
};

/* What a context's code cache says of the code it linked (link.h). */
struct CodeCounts {
    uint64_t linked;  /* images linked, ever */
    uint64_t evicted; /* of them, evicted */
    uint64_t held;    /* images linked now */
    uint64_t memory;  /* the bytes they take */
};

/* The counters as text in ucx_info's style, for UCX_IFUNC_PRINT_COUNTERS:
 * a comment line naming @a title, then one "#   NAME VALUE" line per
 * counter, its name that of its field in ucp_ifunc_context_attr_t. */
std::string counters_text(const CounterValues &values, const CodeCounts &codes,
                          const std::string &title);

} // namespace ucx_ifunc

#endif
