/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Warnings about what peers send (a dropped message, a rejected image): one
 * line per dropped message, held back when a peer repeats itself, so that
 * a peer can neither flood the log nor silence it for other peers for
 * long. A line is about a key (a kind of problem, the source of the
 * message, and the peer it names or the code id it concerns) and counts
 * against the connection the message came on: both as the delivery path
 * knows them (PeerOrigin, set by am.cc: ids no later peer shares), never
 * an id inside the message, which any peer can invent; 0 where the path
 * knows none (a polled buffer, a channel, an active message without the
 * reply flag). Two limits, both bounded in memory:
 *  - per key: the first line at once, then at most one line per
 *    kKeyPeriodNs, which says how many were held back since. Keys live in a
 *    table of kMaxKeys, least recently used out first: a key pushed out is
 *    warned about afresh, so a peer that invents keys only earns itself
 *    more lines, never fewer for anyone else;
 *  - over all keys, at most kBurst lines per kWindowNs, shared out by
 *    connection: a connection's first line in a window goes out while the
 *    window holds fewer than kBurst, its others only while it holds fewer
 *    than kShared. A flood from one connection (whatever ids its messages
 *    claim) thus takes at most kShared lines of a window and leaves the
 *    rest to the first lines of others: another connection's first line is
 *    held back only once kBurst - kShared other connections were warned
 *    about in the same window, and then for the rest of that window (a
 *    second at most). The next line that gets through says how many lines
 *    about other keys were held back meanwhile.
 * A line held back is logged at debug level instead, so UCX_LOG_LEVEL=debug
 * shows every one. Each UCP context keeps its own (context.h).
 */
#ifndef UCP_IFUNC_PEER_LOG_H_
#define UCP_IFUNC_PEER_LOG_H_

#include <ucs/debug/log_def.h>

#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

namespace ucx_ifunc {

/* Where the message being handled came from, as its delivery path knows
 * it: the connection, which lines count against, and the source on it,
 * which keys are per (one connection may carry several sources, one after
 * the other: am.cc, KnownSource). 0: not known. */
struct PeerOrigin {
    uint64_t connection = 0;
    uint64_t source     = 0;
};

/* What went wrong with a peer's message: part of the key, so that one kind
 * of problem does not hold back lines about another. */
enum class PeerProblem : uint8_t {
    forged_code,     /* the code id is not the image's digest */
    unknown_code,    /* a reference to code this target does not hold */
    rejected_code,   /* a code image this target does not run */
    unknown_version, /* a frame format this target does not read */
    malformed_frame, /* sizes, offsets or seals that do not add up */
    am_message,      /* an active message that is not an ifunc message */
    am_too_large,    /* an active message beyond UCX_IFUNC_MAX_AM_* */
    bad_reply,       /* an AM reply that no target of ours sent */
    lost_reply       /* an answer to a source that closed or failed */
};

class PeerLog {
public:
    static constexpr size_t   kMaxKeys     = 1024;
    static constexpr uint64_t kKeyPeriodNs = 10ull * 1000 * 1000 * 1000;
    static constexpr uint64_t kWindowNs    = 1000ull * 1000 * 1000;
    static constexpr unsigned kBurst       = 16;
    static constexpr unsigned kShared      = kBurst / 2;

    /* The level to log one warning about @a problem from @a peer, a
     * message of this thread's origin (PeerOriginScope), at:
     * UCS_LOG_LEVEL_WARN, or UCS_LOG_LEVEL_DEBUG when it is held back. In
     * @a note, what to append to the line: empty, or how many lines were
     * held back since this key's last line (and about other keys). */
    ucs_log_level_t level(PeerProblem problem, uint64_t peer,
                          std::string *note);

    /* The level level() would give now, counting nothing: for lines that
     * may turn out not to be needed; call level() once one was logged (or
     * held back), so that it counts. */
    ucs_log_level_t peek(PeerProblem problem, uint64_t peer);

    /* The same for a message from @a origin at time @a now_ns (a
     * monotonic clock): for tests. */
    ucs_log_level_t level_at(PeerProblem problem, PeerOrigin origin,
                             uint64_t peer, uint64_t now_ns, std::string *note);

private:
    struct Key {
        PeerProblem problem;
        uint64_t    source;
        uint64_t    peer;
        bool        operator==(const Key &other) const
        {
            return (problem == other.problem) && (source == other.source) &&
                   (peer == other.peer);
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
    /* Starts a new window if the last one is over. */
    void roll_window(uint64_t now_ns);
    bool window_has(uint64_t connection) const;
    /* Whether the window has room for a line of @a connection. */
    bool may_log(uint64_t connection) const;

    std::mutex                              lock_;
    std::unordered_map<Key, Entry, KeyHash> entries_;
    std::list<Key>                          recency_; /* most recent first */
    uint64_t                                window_start_ns_  = 0;
    unsigned                                window_lines_     = 0;
    uint64_t                                others_held_back_ = 0;
    /* The connections with a line in this window (at most one per line). */
    std::array<uint64_t, kBurst> window_connections_{};
    unsigned                     window_connection_count_ = 0;
};

/* While one lives, the messages this thread handles come from @a origin;
 * the origin before comes back when it goes. Set by a delivery path around
 * the handling of one message. */
class PeerOriginScope {
public:
    explicit PeerOriginScope(PeerOrigin origin);
    ~PeerOriginScope();
    PeerOriginScope(const PeerOriginScope &)            = delete;
    PeerOriginScope &operator=(const PeerOriginScope &) = delete;

    /* This thread's: {0, 0} outside any. */
    static PeerOrigin current();

private:
    PeerOrigin previous_;
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
