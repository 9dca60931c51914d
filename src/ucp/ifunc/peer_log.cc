/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "peer_log.h"

#include <chrono>

namespace ucx_ifunc {

size_t PeerLog::KeyHash::operator()(const Key &key) const
{
    return std::hash<uint64_t>()(key.peer * 0x9e3779b97f4a7c15ull +
                                 uint64_t(key.problem));
}

PeerLog::Entry &PeerLog::entry(const Key &key)
{
    auto it = entries_.find(key);
    if (it != entries_.end()) {
        recency_.splice(recency_.begin(), recency_, it->second.recency);
        return it->second;
    }
    if (entries_.size() >= kMaxKeys) {
        entries_.erase(recency_.back());
        recency_.pop_back();
    }
    recency_.push_front(key);
    return entries_.emplace(key, Entry{false, 0, 0, recency_.begin()})
            .first->second;
}

namespace {

uint64_t monotonic_ns()
{
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count());
}

} // namespace

bool PeerLog::may_log(const Entry *e, uint64_t now_ns) const
{
    bool key_ok = (e == nullptr) || !e->logged ||
                  (now_ns - e->last_ns >= kKeyPeriodNs);
    bool window_ok = (now_ns - window_start_ns_ >= kWindowNs) ||
                     (window_lines_ < kBurst);
    return key_ok && window_ok;
}

ucs_log_level_t PeerLog::peek(PeerProblem problem, uint64_t peer)
{
    uint64_t                    now_ns = monotonic_ns();
    std::lock_guard<std::mutex> guard(lock_);
    auto                        it = entries_.find(Key{problem, peer});
    return may_log((it != entries_.end()) ? &it->second : nullptr, now_ns)
                   ? UCS_LOG_LEVEL_WARN
                   : UCS_LOG_LEVEL_DEBUG;
}

ucs_log_level_t PeerLog::level_at(PeerProblem problem, uint64_t peer,
                                  uint64_t now_ns, std::string *note)
{
    std::lock_guard<std::mutex> guard(lock_);
    Entry                      &e = entry(Key{problem, peer});
    bool key_ok = !e.logged || (now_ns - e.last_ns >= kKeyPeriodNs);
    if (now_ns - window_start_ns_ >= kWindowNs) {
        window_start_ns_ = now_ns;
        window_lines_    = 0;
    }
    if (!key_ok || (window_lines_ >= kBurst)) {
        ++e.held_back;
        if (key_ok) {
            ++others_held_back_; /* held back by the lines about others */
        }
        return UCS_LOG_LEVEL_DEBUG;
    }
    ++window_lines_;
    note->clear();
    if (e.held_back > 0) {
        *note += " (" + std::to_string(e.held_back) +
                 " more like it held back since its last line)";
    }
    if (others_held_back_ > 0) {
        *note += " (" + std::to_string(others_held_back_) +
                 " lines about other peers held back; UCX_LOG_LEVEL=debug "
                 "shows them)";
    }
    e.logged          = true;
    e.last_ns         = now_ns;
    e.held_back       = 0;
    others_held_back_ = 0;
    return UCS_LOG_LEVEL_WARN;
}

ucs_log_level_t PeerLog::level(PeerProblem problem, uint64_t peer,
                               std::string *note)
{
    return level_at(problem, peer, monotonic_ns(), note);
}

} // namespace ucx_ifunc
