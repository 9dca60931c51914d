/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/base/peer_log.h"
#include "ucp/ifunc/base/tls.h"

#include <algorithm>
#include <chrono>

namespace ucx_ifunc {

namespace {

UCX_IFUNC_TLS uint64_t current_connection = 0;
UCX_IFUNC_TLS uint64_t current_source     = 0;

uint64_t monotonic_ns()
{
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count());
}

} // namespace

PeerOriginScope::PeerOriginScope(PeerOrigin origin) : previous_(current())
{
    current_connection = origin.connection;
    current_source     = origin.source;
}

PeerOriginScope::~PeerOriginScope()
{
    current_connection = previous_.connection;
    current_source     = previous_.source;
}

PeerOrigin PeerOriginScope::current()
{
    return PeerOrigin{current_connection, current_source};
}

size_t PeerLog::KeyHash::operator()(const Key &key) const
{
    return std::hash<uint64_t>()((key.peer * 0x9e3779b97f4a7c15ull) ^
                                 (key.source * 0xc2b2ae3d27d4eb4full) ^
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

void PeerLog::roll_window(uint64_t now_ns)
{
    if (now_ns - window_start_ns_ >= kWindowNs) {
        window_start_ns_         = now_ns;
        window_lines_            = 0;
        window_connection_count_ = 0;
    }
}

bool PeerLog::window_has(uint64_t connection) const
{
    auto end = window_connections_.begin() + window_connection_count_;
    return std::find(window_connections_.begin(), end, connection) != end;
}

/* With the window rolled to now. */
bool PeerLog::may_log(uint64_t connection) const
{
    unsigned room = window_has(connection) ? kShared : kBurst;
    return window_lines_ < room;
}

ucs_log_level_t PeerLog::peek(PeerProblem problem, uint64_t peer)
{
    uint64_t                    now_ns = monotonic_ns();
    PeerOrigin                  origin = PeerOriginScope::current();
    std::lock_guard<std::mutex> guard(lock_);
    roll_window(now_ns);
    auto it     = entries_.find(Key{problem, origin.source, peer});
    bool key_ok = (it == entries_.end()) || !it->second.logged ||
                  (now_ns - it->second.last_ns >= kKeyPeriodNs);
    return (key_ok && may_log(origin.connection)) ? UCS_LOG_LEVEL_WARN
                                                  : UCS_LOG_LEVEL_DEBUG;
}

ucs_log_level_t PeerLog::level_at(PeerProblem problem, PeerOrigin origin,
                                  uint64_t peer, uint64_t now_ns,
                                  std::string *note)
{
    uint64_t                    connection = origin.connection;
    std::lock_guard<std::mutex> guard(lock_);
    Entry                      &e = entry(Key{problem, origin.source, peer});
    bool key_ok = !e.logged || (now_ns - e.last_ns >= kKeyPeriodNs);
    roll_window(now_ns);
    if (!key_ok || !may_log(connection)) {
        ++e.held_back;
        if (key_ok) {
            ++others_held_back_; /* held back by the lines about others */
        }
        return UCS_LOG_LEVEL_DEBUG;
    }
    ++window_lines_;
    if (!window_has(connection)) {
        window_connections_[window_connection_count_++] = connection;
    }
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
    return level_at(problem, PeerOriginScope::current(), peer, monotonic_ns(),
                    note);
}

} // namespace ucx_ifunc
