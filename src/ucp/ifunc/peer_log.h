/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Warnings about what peers send (a dropped message, a rejected image): one
 * line per dropped message, held back when a peer repeats itself, so that
 * a peer can neither flood the log nor silence it for other peers for
 * long. Two limits, both bounded in memory:
 *  - per key (a kind of problem and the peer it came from, or the code id
 *    it concerns): the first line at once, then at most one line per
 *    kKeyPeriodNs, which says how many were held back since. Keys live in a
 *    table of kMaxKeys, least recently used out first: a key pushed out is
 *    warned about afresh, so a peer that invents keys only earns itself
 *    more lines, never fewer for anyone else;
 *  - over all keys, at most kBurst lines per kWindowNs: a peer that invents
 *    keys fills at most that window, and the next line that gets through
 *    says how many lines about other keys were held back meanwhile.
 * A line held back is logged at debug level instead, so UCX_LOG_LEVEL=debug
 * shows every one. Each UCP context keeps its own (context.h).
 */
#ifndef UCP_IFUNC_PEER_LOG_H_
#define UCP_IFUNC_PEER_LOG_H_

#include <ucs/debug/log_def.h>

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ucx_ifunc {

/* What went wrong with a peer's message: part of the key, so that one kind
 * of problem does not hold back lines about another. */
enum class PeerProblem : uint8_t {
    forged_code,     /* the code id is not the image's digest */
    unknown_code,    /* a reference to code this target does not hold */
    rejected_code,   /* a code image this target does not run */
    unknown_version, /* a frame format this target does not read */
    malformed_frame, /* sizes, offsets or seals that do not add up */
    am_message,      /* an active message that is not an ifunc message */
    am_too_large     /* an active message beyond UCX_IFUNC_MAX_AM_* */
};

class PeerLog {
public:
    static constexpr size_t   kMaxKeys     = 1024;
    static constexpr uint64_t kKeyPeriodNs = 10ull * 1000 * 1000 * 1000;
    static constexpr uint64_t kWindowNs    = 1000ull * 1000 * 1000;
    static constexpr unsigned kBurst       = 16;

    /* The level to log one warning about @a problem from @a peer at:
     * UCS_LOG_LEVEL_WARN, or UCS_LOG_LEVEL_DEBUG when it is held back. In
     * @a note, what to append to the line: empty, or how many lines were
     * held back since this key's last line (and about other keys). */
    ucs_log_level_t level(PeerProblem problem, uint64_t peer,
                          std::string *note);

    /* The level level() would give now, counting nothing: for lines that
     * may turn out not to be needed; call level() once one was logged (or
     * held back), so that it counts. */
    ucs_log_level_t peek(PeerProblem problem, uint64_t peer);

    /* The same at time @a now_ns (a monotonic clock): for tests. */
    ucs_log_level_t level_at(PeerProblem problem, uint64_t peer,
                             uint64_t now_ns, std::string *note);

private:
    struct Key {
        PeerProblem problem;
        uint64_t    peer;
        bool        operator==(const Key &other) const
        {
            return (problem == other.problem) && (peer == other.peer);
        }
    };
    struct KeyHash {
        size_t operator()(const Key &key) const;
    };
    struct Entry {
        bool                     logged;    /* a line went out */
        uint64_t                 last_ns;   /* of its last line */
        uint64_t                 held_back; /* lines since */
        std::list<Key>::iterator recency;
    };

    Entry &entry(const Key &key);
    bool   may_log(const Entry *entry, uint64_t now_ns) const;

    std::mutex                              lock_;
    std::unordered_map<Key, Entry, KeyHash> entries_;
    std::list<Key>                          recency_; /* most recent first */
    uint64_t                                window_start_ns_  = 0;
    unsigned                                window_lines_     = 0;
    uint64_t                                others_held_back_ = 0;
};

} // namespace ucx_ifunc

/* Logs a warning about a peer's message through @a _log (a PeerLog); the
 * format is a string literal. ucs_log evaluates its level more than once,
 * hence the local. */
#define ucx_ifunc_peer_warn(_log, _problem, _peer, _fmt, ...)                  \
    do {                                                                       \
        std::string     _note;                                                 \
        ucs_log_level_t _level = (_log).level((_problem), (_peer), &_note);    \
        ucs_log(_level, _fmt "%s", ##__VA_ARGS__, _note.c_str());              \
    } while (0)

#endif
