/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/base/counters.h"

#include <cinttypes>
#include <cstdio>

namespace ucx_ifunc {
namespace {

std::atomic<uint64_t> next_serial{0};
std::atomic<uint64_t> next_token{0};
/* Names this thread to the shards it owns; 0 until it first counts. */
UCX_IFUNC_TLS uint64_t thread_token = 0;

const char *const run_path_names[] = {"raw", "channel", "am", "peer"};
const char *const reject_names[]   = {
          "untrusted",     "bad_frame",      "bad_version", "bad_code",
          "wrong_isa",     "missing_import", "too_large",   "unknown_code",
          "busy",          "lost",           "other",       "sandbox_fault",
          "sandbox_budget"};
static_assert(sizeof(run_path_names) / sizeof(run_path_names[0]) == kRunPaths,
              "a name per path");
static_assert(sizeof(reject_names) / sizeof(reject_names[0]) == kRejectReasons,
              "a name per reason");

} // namespace

const char *run_path_name(RunPath path)
{
    return run_path_names[size_t(path)];
}

const char *reject_name(Reject reason)
{
    return reject_names[size_t(reason)];
}

Counters::Counters() : serial_(++next_serial)
{
    for (Shard *shard = shards_; shard <= &shared_; ++shard) {
        for (auto &value : shard->value) {
            value.store(0, std::memory_order_relaxed);
        }
        shard->owner.store(0, std::memory_order_relaxed);
    }
    for (auto &count : rejected_) {
        count.store(0, std::memory_order_relaxed);
    }
}

/* The shard this thread owns, or claims now; the shared one when all are
 * taken. Once per thread and object, unless the thread counts in several
 * contexts by turns (then once per turn: a scan of kShards lines). */
Counters::Shard *Counters::claim_shard()
{
    if (thread_token == 0) {
        thread_token = next_token.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    Shard *mine = nullptr;
    for (Shard &shard : shards_) {
        if (shard.owner.load(std::memory_order_relaxed) == thread_token) {
            mine = &shard;
            break;
        }
    }
    for (size_t i = 0; (mine == nullptr) && (i < kShards); ++i) {
        uint64_t free = 0;
        if (shards_[i].owner.compare_exchange_strong(
                    free, thread_token, std::memory_order_relaxed)) {
            mine = &shards_[i];
        }
    }
    if (mine == nullptr) {
        mine = &shared_;
    }
    counter_shard = {serial_, mine};
    return mine;
}

CounterValues Counters::read() const
{
    CounterValues values;
    for (const Shard *shard = shards_; shard <= &shared_; ++shard) {
        for (size_t path = 0; path < kRunPaths; ++path) {
            values.runs[path] +=
                    shard->value[path].load(std::memory_order_relaxed);
        }
        values.bytes_received +=
                shard->value[kBytesIndex].load(std::memory_order_relaxed);
    }
    for (size_t reason = 0; reason < kRejectReasons; ++reason) {
        values.rejected[reason] =
                rejected_[reason].load(std::memory_order_relaxed);
    }
    return values;
}

std::string counters_text(const CounterValues &values, const CodeCounts &codes,
                          const std::string &title)
{
    std::string text = "# " + title + "\n";
    auto        line = [&](const std::string &name, uint64_t value) {
        char buffer[96];
        std::snprintf(buffer, sizeof(buffer), "#   %-24s %" PRIu64 "\n",
                             name.c_str(), value);
        text += buffer;
    };
    for (size_t path = 0; path < kRunPaths; ++path) {
        line(std::string("run_") + run_path_names[path], values.runs[path]);
    }
    line("bytes_received", values.bytes_received);
    for (size_t reason = 0; reason < kRejectReasons; ++reason) {
        line(std::string("rejected_") + reject_names[reason],
             values.rejected[reason]);
    }
    line("codes_linked", codes.linked);
    line("codes_evicted", codes.evicted);
    line("codes_held", codes.held);
    line("code_memory", codes.memory);
    return text;
}

} // namespace ucx_ifunc
