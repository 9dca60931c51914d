/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * examples/record_insert: a source inserts a corpus of text records into a
 * target's SQLite database, four ways:
 *   ifunc  each record is zstd-compressed into the source's memory and
 *          sent from there with ucp_ifunc_peer_send_nbx (the default
 *          path): the code that decompresses and inserts it
 *          (record_insert.so) travels with the first messages, by
 *          reference afterwards; by channel where the target is on this
 *          host with shared memory, by active message elsewhere;
 *   ifunc_full  the same, with the code in every message (the paper's
 *          mode, UCP_IFUNC_SEND_FLAG_WITH_CODE), to show what sending it
 *          once saves;
 *   am     the same compressed record, by active message to a handler
 *          compiled into this program in advance (the code of
 *          record_format.h, as the ifunc);
 *   raw    the record uncompressed, to a handler that inserts it.
 * The target listens (ucp_ifunc_listen), the source connects
 * (ucp_ifunc_peer_connect); the target runs the shipped code, the two
 * handlers and the control messages of the source inside
 * ucp_ifunc_worker_progress (and progresses its UCP worker as well while
 * the handlers' variants run). After each variant it checks that its table
 * holds exactly the corpus (count, bytes, hash of every row).
 *
 *     UCX_IFUNC_TRUST=signed UCX_IFUNC_TRUSTED_KEYS=<dir>/demo.pub \
 *         record_insert target [-p PORT] [-d DATABASE]
 *     UCX_IFUNC_LIB_DIR=<dir> record_insert source HOST [-p PORT]
 *         [-n RECORDS] [-V ifunc,ifunc_full,am,raw] [-r RUNS] [-w WINDOW]
 *         [-v]
 */
#include "record_format.h"

#include "../../tools/common/ucx.h"

#include <ucp/api/ucp_ifunc.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace ucx_util;

namespace {

constexpr int      kDefaultPort    = 13340;
constexpr unsigned kAmIdCompressed = 10; /* the ifunc worker uses 240-242 */
constexpr unsigned kAmIdRaw        = 11;
constexpr unsigned kAmIdControl    = 12; /* source to target */
constexpr unsigned kAmIdAnswer     = 13; /* target to source */
constexpr double   kVariantTimeout = 300;
constexpr double   kIdleTimeout    = 10;
constexpr double   kControlTimeout = 600; /* the target, between variants */

/* What the ifunc variants hand to UCX or store into the peer's ring
 * (docs/design.md, "Frame format" and "Delivery by active message"). */
constexpr size_t kAmFullHeader = 8;  /* then the full frame */
constexpr size_t kAmRefHeader  = 16; /* the code id, then the payload */
constexpr size_t kRefFrameHead = 56; /* a reference frame in a slot */
constexpr size_t kFrameAlign   = 8;

enum Variant : uint32_t { kIfunc, kIfuncFull, kAm, kRaw, kVariants };
const char *const kVariantNames[kVariants] = {"ifunc", "ifunc_full", "am",
                                              "raw"};

bool is_ifunc(Variant v)
{
    return (v == kIfunc) || (v == kIfuncFull);
}

/* Control messages, by active message, one struct for all of them (the AM
 * header; the target's answer to hello has its worker address as data). */
enum ControlType : uint32_t {
    kHello,
    kStart,
    kReady,
    kDone,
    kVerified,
    kQuit,
    kBad /* what arrived was no control message */
};
struct Control {
    uint32_t          type;
    uint32_t          variant;
    uint64_t          count; /* start: records; done: inserted */
    uint64_t          failed;
    uint64_t          verified;
    record_checksum_t sum; /* start: the corpus; verified: the table */
};

Control control(ControlType type)
{
    Control c = {};
    c.type    = type;
    return c;
}

/* Frees what a C library allocated, for std::unique_ptr. */
template <auto Free>
struct Freer {
    template <typename T>
    void operator()(T *p) const
    {
        Free(p);
    }
};
using Database  = std::unique_ptr<sqlite3, Freer<sqlite3_close>>;
using Statement = std::unique_ptr<sqlite3_stmt, Freer<sqlite3_finalize>>;
using ZstdCCtx  = std::unique_ptr<ZSTD_CCtx, Freer<ZSTD_freeCCtx>>;

/* ---- the corpus ---- */

const char *const kFirst[] = {"Ada",   "Bruno", "Chloe", "Dmitri", "Elena",
                              "Farid", "Grace", "Hiro",  "Ingrid", "Jonas",
                              "Keiko", "Lucas", "Maya",  "Nils",   "Olga",
                              "Pedro", "Quinn", "Rosa",  "Samir",  "Tara"};
const char *const kLast[]  = {"Almeida", "Berg",    "Chen",     "Dubois",
                              "Eriksen", "Fischer", "Garcia",   "Hansen",
                              "Ivanova", "Jensen",  "Kowalski", "Larsen",
                              "Moreau",  "Novak",   "Okafor",   "Petrov",
                              "Rossi",   "Schmidt", "Tanaka",   "Weber"};
const char *const kCity[]  = {"Aarhus",  "Berlin",  "Bologna", "Cork",
                              "Dresden", "Gdansk",  "Geneva",  "Lyon",
                              "Malmo",   "Porto",   "Seville", "Tampere",
                              "Utrecht", "Vilnius", "Zagreb",  "Zurich"};
const char *const kWords[] = {
        "customer",  "reports",   "that",         "the",       "invoice",
        "for",       "order",     "was",          "charged",   "twice",
        "after",     "payment",   "gateway",      "timeout",   "and",
        "requests",  "a",         "refund",       "to",        "card",
        "on",        "file",      "shipment",     "arrived",   "damaged",
        "box",       "opened",    "missing",      "item",      "replaced",
        "agent",     "escalated", "ticket",       "second",    "line",
        "support",   "confirmed", "address",      "changed",   "before",
        "dispatch",  "warehouse", "delayed",      "by",        "two",
        "days",      "due",       "weather",      "account",   "locked",
        "password",  "reset",     "link",         "expired",   "sent",
        "new",       "one",       "subscription", "renewed",   "cancelled",
        "upgrade",   "plan",      "premium",      "discount",  "applied",
        "not",       "visible",   "in",           "statement", "will",
        "check",     "again",     "tomorrow",     "morning",   "callback",
        "scheduled", "closed",    "resolved",     "pending",   "review",
        "billing",   "team"};

template <typename T, size_t N>
constexpr size_t count_of(T (&)[N])
{
    return N;
}

/* splitmix64: a fixed seed gives the same corpus on every machine. */
struct Prng {
    uint64_t state;
    uint64_t next()
    {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

/* Records like a support desk's log: "ID\tNAME\tCITY\tTIME ticket N
 * priority P: free text", 250 to 500 bytes each. */
struct Corpus {
    std::string         text;
    std::vector<size_t> offsets; /* record i: [offsets[i], offsets[i+1]) */
    record_checksum_t   sum = {};

    explicit Corpus(uint64_t count)
    {
        static const char *const priority[] = {"low", "normal", "high"};
        Prng                     prng{20260523};
        char                     head[128];
        offsets.push_back(0);
        for (uint64_t id = 1; id <= count; ++id) {
            snprintf(head, sizeof(head),
                     "%" PRIu64
                     "\t%s %s\t%s\t2026-%02zu-%02zuT%02zu:%02zu:%02zuZ"
                     " ticket %zu priority %s:",
                     id, kFirst[prng.below(count_of(kFirst))],
                     kLast[prng.below(count_of(kLast))],
                     kCity[prng.below(count_of(kCity))], 1 + prng.below(12),
                     1 + prng.below(28), prng.below(24), prng.below(60),
                     prng.below(60), 10000 + prng.below(90000),
                     priority[prng.below(3)]);
            text += head;
            for (size_t w = 0, n = 30 + prng.below(40); w < n; ++w) {
                text += ' ';
                text += kWords[prng.below(count_of(kWords))];
            }
            text += '.';
            offsets.push_back(text.size());

            record_fields_t f;
            if (record_parse(record(id - 1), size(id - 1), &f) != 0) {
                throw std::runtime_error("corpus: a record does not parse");
            }
            record_checksum_add(&sum, &f);
        }
    }
    uint64_t    count() const { return offsets.size() - 1; }
    const char *record(uint64_t i) const { return text.data() + offsets[i]; }
    size_t      size(uint64_t i) const { return offsets[i + 1] - offsets[i]; }
};

/* ---- both sides ---- */

/* Control messages as they arrive: the handler, which runs inside
 * progress, only stores them. */
struct Inbox {
    std::deque<Control> messages;
    std::vector<char>   data;               /* of the last one */
    ucp_ep_h            reply_ep = nullptr; /* where it came from */
};

ucs_status_t on_control(void *arg, const void *header, size_t header_length,
                        void *data, size_t length,
                        const ucp_am_recv_param_t *param)
{
    auto   *inbox = static_cast<Inbox *>(arg);
    Control c     = control(kBad);
    if ((header_length == sizeof(c)) &&
        !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        std::memcpy(&c, header, sizeof(c));
        inbox->data.assign(static_cast<char *>(data),
                           static_cast<char *>(data) + length);
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) {
        inbox->reply_ep = param->reply_ep;
    }
    inbox->messages.push_back(c);
    return UCS_OK;
}

void set_handler(ucp_worker_h worker, unsigned id, ucp_am_recv_callback_t cb,
                 void *arg)
{
    ucp_am_handler_param_t param = {};
    param.field_mask             = UCP_AM_HANDLER_PARAM_FIELD_ID |
                       UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG;
    param.id  = id;
    param.cb  = cb;
    param.arg = arg;
    check(ucp_worker_set_am_recv_handler(worker, &param),
          "ucp_worker_set_am_recv_handler");
}

/* An ifunc worker on a UCP worker; it notes the endpoints of the peers
 * that fail. The handle of a failed peer that a listener accepted is gone
 * once peer_cb returns (the library closes it), so the endpoint is taken
 * there. */
class IfuncWorker {
public:
    IfuncWorker(Context &context, Worker &worker, void *target_args)
    {
        ucp_ifunc_worker_params_t params = {};
        params.field_mask                = UCP_IFUNC_WORKER_FIELD_TARGET_ARGS |
                            UCP_IFUNC_WORKER_FIELD_PEER_CB;
        params.target_args = target_args;
        params.peer_cb     = on_peer;
        params.peer_cb_arg = this;
        check(ucp_ifunc_worker_create(context.get(), worker.get(), &params,
                                      &iworker_),
              "ucp_ifunc_worker_create");
    }
    ~IfuncWorker() { ucp_ifunc_worker_destroy(iworker_); }
    IfuncWorker(const IfuncWorker &)            = delete;
    IfuncWorker &operator=(const IfuncWorker &) = delete;

    ucp_ifunc_worker_h get() const { return iworker_; }
    unsigned progress() { return ucp_ifunc_worker_progress(iworker_); }
    /* The UCP worker of the peers a listener accepts or that connect by
     * address: messages sent on their endpoints arrive there. */
    ucp_worker_h net_worker() const
    {
        ucp_ifunc_worker_attr_t attr = {};
        attr.field_mask              = UCP_IFUNC_WORKER_ATTR_FIELD_NET_WORKER;
        check(ucp_ifunc_worker_query(iworker_, &attr),
              "ucp_ifunc_worker_query");
        return attr.net_worker;
    }
    /* The endpoints of the peers that failed since the last clear. */
    const std::vector<ucp_ep_h> &failed() const { return failed_; }
    void                         clear_failed() { failed_.clear(); }

private:
    static void on_peer(ucp_ifunc_peer_h peer, ucs_status_t status, void *arg)
    {
        ucp_ifunc_peer_attr_t attr = {};
        attr.field_mask            = UCP_IFUNC_PEER_ATTR_FIELD_EP;
        if ((status != UCS_OK) &&
            (ucp_ifunc_peer_query(peer, &attr) == UCS_OK)) {
            static_cast<IfuncWorker *>(arg)->failed_.push_back(attr.ep);
        }
    }

    ucp_ifunc_worker_h    iworker_ = nullptr;
    std::vector<ucp_ep_h> failed_;
};

/* Sends a control message (and @a data) on @a ep, and waits until UCP is
 * done with it. The reply flag lets the target answer on the endpoint it
 * came by. */
template <typename Progress>
void send_control(Progress &&progress, ucp_ep_h ep, unsigned id,
                  const Control &c, const std::vector<char> &data = {})
{
    ucp_request_param_t param = {};
    param.op_attr_mask        = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags               = UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t request  = ucp_am_send_nbx(
             ep, id, &c, sizeof(c), data.data(), data.size(), &param);
    ucs_status_t status = UCS_PTR_STATUS(request);
    if (UCS_PTR_IS_PTR(request)) {
        while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
            progress();
        }
        ucp_request_free(request);
    }
    check(status, "sending a control message");
}

/* Progresses until a control message arrives; throws after @a seconds. */
template <typename Progress>
Control next_control(Progress &&progress, Inbox &inbox, double seconds)
{
    Deadline deadline = deadline_in(seconds);
    for (unsigned i = 1; inbox.messages.empty(); ++i) {
        progress();
        if (((i % 4096) == 0) && (Clock::now() > deadline)) {
            throw std::runtime_error("no control message in time");
        }
    }
    Control c = inbox.messages.front();
    inbox.messages.pop_front();
    return c;
}

/* ---- the target ---- */

Statement prepare(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK) {
        throw std::runtime_error(std::string("sqlite: ") + sql + ": " +
                                 sqlite3_errmsg(db));
    }
    return Statement(stmt);
}

void exec(sqlite3 *db, const char *sql)
{
    char *error = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
        std::string what = std::string("sqlite: ") + sql + ": " +
                           (error ? error : "error");
        sqlite3_free(error);
        throw std::runtime_error(what);
    }
}

/* The database and the state handed to the code that inserts into it
 * (record_target_t), with the decompression context that code creates. */
struct Target {
    Database        db;
    record_target_t state = {};

    explicit Target(const char *path)
    {
        sqlite3 *handle = nullptr;
        int      rc     = sqlite3_open(path, &handle);
        db.reset(handle);
        if (rc != SQLITE_OK) {
            throw std::runtime_error(std::string("sqlite: cannot open ") +
                                     path);
        }
        state.db = handle;
    }
    ~Target() { ZSTD_freeDCtx(state.dctx); }
    Target(const Target &)            = delete;
    Target &operator=(const Target &) = delete;
};

/* A fresh, empty table, and the statements of one variant, which @a t
 * uses while the Table lives. */
struct Table {
    Statement insert, begin, commit;

    explicit Table(record_target_t &t)
    {
        exec(t.db, "DROP TABLE IF EXISTS records");
        exec(t.db, RECORD_TABLE_SQL);
        insert     = prepare(t.db, RECORD_INSERT_SQL);
        begin      = prepare(t.db, "BEGIN");
        commit     = prepare(t.db, "COMMIT");
        t.insert   = insert.get();
        t.begin    = begin.get();
        t.commit   = commit.get();
        t.inserted = 0;
        t.failed   = 0;
    }
};

record_checksum_t table_checksum(sqlite3 *db)
{
    record_checksum_t sum = {};
    Statement select = prepare(db, "SELECT id, name, city, body FROM records");
    sqlite3_stmt *stmt = select.get();
    int           rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        record_fields_t f;
        f.id   = sqlite3_column_int64(stmt, 0);
        f.name = reinterpret_cast<const char *>(sqlite3_column_text(stmt, 1));
        f.name_size = static_cast<size_t>(sqlite3_column_bytes(stmt, 1));
        f.city = reinterpret_cast<const char *>(sqlite3_column_text(stmt, 2));
        f.city_size = static_cast<size_t>(sqlite3_column_bytes(stmt, 2));
        f.body = reinterpret_cast<const char *>(sqlite3_column_text(stmt, 3));
        f.body_size = static_cast<size_t>(sqlite3_column_bytes(stmt, 3));
        record_checksum_add(&sum, &f);
    }
    if (rc != SQLITE_DONE) {
        throw std::runtime_error("sqlite: reading the table failed");
    }
    return sum;
}

/* The handlers of the am and raw variants: compiled into the target in
 * advance, they run inside progress as the ifunc does. A record is far
 * below the rendezvous threshold; one that came by rendezvous would need a
 * receive and counts as failed. */
ucs_status_t on_compressed(void *arg, const void *, size_t, void *data,
                           size_t length, const ucp_am_recv_param_t *param)
{
    auto *t = static_cast<record_target_t *>(arg);
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        ++t->failed;
        return UCS_OK;
    }
    record_insert_compressed(t, data, length);
    return UCS_OK;
}

ucs_status_t on_raw(void *arg, const void *, size_t, void *data, size_t length,
                    const ucp_am_recv_param_t *param)
{
    auto *t = static_cast<record_target_t *>(arg);
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        (length > RECORD_MAX)) {
        ++t->failed;
        return UCS_OK;
    }
    record_insert_text(t, static_cast<const char *>(data), length);
    return UCS_OK;
}

/* Progresses until @a count records were handled; false if none arrived
 * for kIdleTimeout seconds (a message the target rejected, say: it logs
 * why) or the variant took longer than kVariantTimeout. */
template <typename Progress>
bool wait_records(Progress &&progress, const record_target_t &t, uint64_t count)
{
    Deadline deadline = deadline_in(kVariantTimeout);
    Deadline idle     = deadline_in(kIdleTimeout);
    uint64_t seen     = 0;
    for (unsigned i = 1; t.inserted + t.failed < count; ++i) {
        progress();
        if ((i % 4096) == 0) {
            Clock::time_point now = Clock::now();
            if (t.inserted + t.failed != seen) {
                seen = t.inserted + t.failed;
                idle = deadline_in(kIdleTimeout);
            } else if ((now > idle) || (now > deadline)) {
                return false;
            }
        }
    }
    return true;
}

/* Inserts what one variant sends, answers how it went; false if the table
 * does not hold exactly the corpus. */
template <typename Progress>
bool target_variant(Progress &&progress, Target &target, ucp_ep_h source,
                    const Control &start)
{
    record_target_t &t = target.state;
    Table            table(t);
    send_control(progress, source, kAmIdAnswer, control(kReady));

    bool arrived = wait_records(progress, t, start.count);
    /* The last, partial batch's transaction is still open. */
    if ((t.inserted % RECORD_BATCH) != 0) {
        exec(t.db, "COMMIT");
    }
    if (!arrived) {
        fprintf(stderr,
                "record_insert target: %s: only %" PRIu64 " of %" PRIu64
                " records arrived\n",
                kVariantNames[start.variant], t.inserted + t.failed,
                start.count);
    }
    Control done = control(kDone);
    done.count   = t.inserted;
    done.failed  = t.failed + (arrived ? 0 : 1);
    send_control(progress, source, kAmIdAnswer, done);

    Control verified  = control(kVerified);
    verified.sum      = table_checksum(t.db);
    verified.verified = arrived && (t.failed == 0) &&
                        (verified.sum.count == start.sum.count) &&
                        (verified.sum.bytes == start.sum.bytes) &&
                        (verified.sum.hash == start.sum.hash);
    printf("record_insert target: %s: %" PRIu64 " rows, %" PRIu64
           " failed, checksum %016" PRIx64 " (expected %016" PRIx64 "): %s\n",
           kVariantNames[start.variant], verified.sum.count, t.failed,
           verified.sum.hash, start.sum.hash,
           verified.verified ? "verified" : "MISMATCH");
    fflush(stdout);
    send_control(progress, source, kAmIdAnswer, verified);
    return verified.verified;
}

int run_target(int port, const char *db_path)
{
    bool all_ok = true;
    try {
        /* Both outlive the worker, whose handlers use them. */
        Target target(db_path);
        Inbox  inbox;
        /* Active messages only: the ifunc worker maps channels with a
         * context of its own, and no network peer can put here. */
        Context     context(UCP_FEATURE_AM);
        Worker      worker(context.get());
        IfuncWorker iworker(context, worker, &target.state);
        set_handler(worker.get(), kAmIdCompressed, on_compressed,
                    &target.state);
        set_handler(worker.get(), kAmIdRaw, on_raw, &target.state);
        /* Control messages come on the peers' endpoints. */
        set_handler(iworker.net_worker(), kAmIdControl, on_control, &inbox);

        std::string                 address = std::to_string(port);
        ucp_ifunc_listener_params_t lparams = {};
        lparams.field_mask                  = UCP_IFUNC_LISTENER_FIELD_ADDRESS;
        lparams.address                     = address.c_str();
        ucp_ifunc_listener_h listener;
        /* Closed with the ifunc worker, as are the peers it accepts. */
        check(ucp_ifunc_listen(iworker.get(), &lparams, &listener),
              "ucp_ifunc_listen");
        ucp_ifunc_listener_attr_t lattr = {};
        lattr.field_mask                = UCP_IFUNC_LISTENER_ATTR_FIELD_PORT;
        check(ucp_ifunc_listener_query(listener, &lattr),
              "ucp_ifunc_listener_query");
        printf("record_insert target: database %s, listening on port %u\n",
               db_path, unsigned(lattr.port));
        fflush(stdout);

        /* Everything runs in here: the shipped code, the handlers, the
         * control messages. The source connects a new peer for each run
         * of an ifunc variant and closes it after (the library closes our
         * end); the end of the peer the control messages come by is an
         * error. */
        auto progress = [&]() {
            unsigned count = iworker.progress();
            if (ucs_unlikely(!iworker.failed().empty())) {
                const std::vector<ucp_ep_h> &failed = iworker.failed();
                /* Its last control message (quit) may come in the same
                 * progress call as its close: that is read first. */
                if (std::find(failed.begin(), failed.end(), inbox.reply_ep) !=
                    failed.end()) {
                    if (inbox.messages.empty()) {
                        throw std::runtime_error("the source went away");
                    }
                    return count;
                }
                iworker.clear_failed();
            }
            return count;
        };
        /* The am and raw variants' handlers need UCP's progress, which
         * the ifunc worker makes on every 256th call only while all its
         * peers use channels: a program of handlers progresses its worker
         * itself. */
        auto progress_handlers = [&]() {
            return progress() + worker.progress();
        };
        for (;;) {
            Control start = next_control(progress, inbox, kControlTimeout);
            if (start.type == kQuit) {
                break;
            }
            if (start.type == kHello) {
                send_control(progress, inbox.reply_ep, kAmIdAnswer,
                             control(kHello), worker.address());
                continue;
            }
            if ((start.type != kStart) || (start.variant >= kVariants)) {
                throw std::runtime_error("unexpected control message");
            }
            bool ok = is_ifunc(Variant(start.variant))
                              ? target_variant(progress, target, inbox.reply_ep,
                                               start)
                              : target_variant(progress_handlers, target,
                                               inbox.reply_ep, start);
            all_ok  = ok && all_ok;
        }
    } catch (const std::exception &e) {
        fprintf(stderr, "record_insert target: %s\n", e.what());
        all_ok = false;
    }
    return all_ok ? 0 : 1;
}

/* ---- the source ---- */

struct Options {
    const char          *host    = nullptr;
    int                  port    = kDefaultPort;
    uint64_t             records = 10000;
    unsigned             window  = 64;
    unsigned             repeats = 1;
    bool                 csv     = false;
    std::vector<Variant> variants;
};

struct Result {
    Variant          variant;
    unsigned         run;
    ucp_ifunc_path_t path;
    double           seconds;
    uint64_t         wire_bytes;
    uint64_t         with_code;
    uint64_t         by_ref;
    bool             verified;
};

/* A peer this source connected to. Closing it sends what is under way
 * first. */
class Peer {
public:
    Peer(IfuncWorker &iworker, const std::string &address)
    {
        ucp_ifunc_peer_params_t params = {};
        params.field_mask              = UCP_IFUNC_PEER_FIELD_ADDRESS;
        params.address                 = address.c_str();
        check(ucp_ifunc_peer_connect(iworker.get(), &params, &peer_),
              "ucp_ifunc_peer_connect");
    }
    ~Peer() { ucp_ifunc_peer_close(peer_); }
    Peer(const Peer &)            = delete;
    Peer &operator=(const Peer &) = delete;

    ucp_ifunc_peer_h      get() const { return peer_; }
    ucp_ifunc_peer_attr_t query(uint64_t fields) const
    {
        ucp_ifunc_peer_attr_t attr = {};
        attr.field_mask            = fields;
        check(ucp_ifunc_peer_query(peer_, &attr), "ucp_ifunc_peer_query");
        return attr;
    }

private:
    ucp_ifunc_peer_h peer_ = nullptr;
};

/* An ifunc library loaded from UCX_IFUNC_LIB_DIR. */
class RegisteredIfunc {
public:
    RegisteredIfunc(ucp_context_h context, const char *name) : context_(context)
    {
        check(ucp_register_ifunc(context, name, &ifunc_),
              "ucp_register_ifunc: is UCX_IFUNC_LIB_DIR set?");
    }
    ~RegisteredIfunc() { ucp_deregister_ifunc(context_, ifunc_); }
    RegisteredIfunc(const RegisteredIfunc &)            = delete;
    RegisteredIfunc &operator=(const RegisteredIfunc &) = delete;
    ucp_ifunc_h      get() const { return ifunc_; }

private:
    ucp_context_h context_;
    ucp_ifunc_h   ifunc_ = nullptr;
};

/* Bytes of a full frame of @a ifunc other than its payload and the
 * payload's padding: header, name, code image, seal (docs/design.md,
 * "Frame format"), the same for every payload. record_insert.so holds one
 * ISA's image, so a message is one frame. */
size_t full_frame_base(ucp_ifunc_h ifunc)
{
    const uint64_t         payload = 0;
    ucp_ifunc_msg_params_t params  = {};
    params.field_mask              = UCP_IFUNC_MSG_FIELD_PAYLOAD;
    params.payload                 = &payload;
    params.payload_size            = sizeof(payload);
    ucp_ifunc_msg_t msg;
    check(ucp_ifunc_msg_build(ifunc, &params, &msg), "ucp_ifunc_msg_build");
    size_t base = msg.frame_size - sizeof(payload);
    ucp_ifunc_msg_free(msg);
    return base;
}

/* The sends of the am and raw variants in flight, at most one per slot,
 * and the payloads they send from. */
class Window {
public:
    struct Slot {
        ucs_status_ptr_t  request = nullptr;
        std::vector<char> buffer;
    };

    Window(Worker &worker, const Peer &control, unsigned size)
        : worker_(worker), control_(control), slots_(size)
    {
    }
    ~Window()
    {
        for (Slot &slot : slots_) {
            (void)complete(slot, deadline_in(kIdleTimeout));
        }
    }
    Window(const Window &)            = delete;
    Window &operator=(const Window &) = delete;

    /* The slot of send @a i, its previous send completed. */
    Slot &at(uint64_t i)
    {
        Slot &slot = slots_[i % slots_.size()];
        check(complete(slot, deadline_in(kVariantTimeout)), "ucp_am_send_nbx");
        return slot;
    }
    void drain()
    {
        for (Slot &slot : slots_) {
            check(complete(slot, deadline_in(kVariantTimeout)),
                  "ucp_am_send_nbx");
        }
    }

private:
    /* Waits for the send in @a slot, as long as the target lives (an
     * endpoint without error handling does not tell) and until
     * @a deadline. */
    ucs_status_t complete(Slot &slot, Deadline deadline)
    {
        if (slot.request == nullptr) {
            return UCS_OK;
        }
        ucs_status_t status;
        for (unsigned i = 1;
             (status = ucp_request_check_status(slot.request)) ==
             UCS_INPROGRESS;
             ++i) {
            worker_.progress();
            if ((i % 1024) == 0) {
                status =
                        control_.query(UCP_IFUNC_PEER_ATTR_FIELD_STATUS).status;
                if ((status != UCS_OK) || (Clock::now() > deadline)) {
                    status = (status != UCS_OK) ? status : UCS_ERR_TIMED_OUT;
                    break;
                }
            }
        }
        ucp_request_free(slot.request); /* UCP's, if it never completes */
        slot.request = nullptr;
        return status;
    }

    Worker           &worker_;
    const Peer       &control_;
    std::vector<Slot> slots_;
};

/* Compression alone, on the source: what the compressed variants pay per
 * record before anything is sent. */
struct Compressed {
    size_t bytes   = 0;
    double seconds = 0;
};

/* The source's end: a peer to the target for the control messages, a new
 * one for each run of an ifunc variant, and a plain UCP endpoint for the
 * am and raw variants. */
class Source {
public:
    Source(const Options &opt, const Corpus &corpus)
        : opt_(opt), corpus_(corpus), cctx_(ZSTD_createCCtx()),
          address_(std::string(opt.host) + ":" + std::to_string(opt.port)),
          context_(UCP_FEATURE_AM), worker_(context_.get()),
          iworker_(context_, worker_, nullptr), control_(iworker_, address_),
          control_ep_(control_.query(UCP_IFUNC_PEER_ATTR_FIELD_EP).ep),
          ifunc_(context_.get(), "record_insert"),
          frame_base_(full_frame_base(ifunc_.get()))
    {
        if (cctx_ == nullptr) {
            throw std::runtime_error("zstd: cannot create a context");
        }
        set_handler(iworker_.net_worker(), kAmIdAnswer, on_control, &inbox_);
        /* The am and raw variants send on an endpoint without error
         * handling, as a program without ifuncs would: UCX 1.13 gives a
         * peer's endpoint, which has it, TCP lanes only, where this one
         * uses shared memory on the same host. */
        tell(control(kHello));
        if (answer(kIdleTimeout).type != kHello) {
            throw std::runtime_error("no worker address from the target");
        }
        am_ep_.emplace(worker_, inbox_.data);
    }

    Compressed compress_corpus();

    /* Runs every variant opt.repeats times, round robin (a disturbance of
     * the machine spreads over the variants instead of hitting the runs of
     * one), then tells the target to quit. */
    void run(std::vector<Result> &results)
    {
        for (unsigned run = 1; run <= opt_.repeats; ++run) {
            for (Variant v : opt_.variants) {
                results.push_back(run_variant(v));
                results.back().run = run;
            }
        }
        tell(control(kQuit));
    }

private:
    /* Progresses the ifunc worker; a failed peer (the target died) ends
     * the program. */
    unsigned progress()
    {
        unsigned count = iworker_.progress();
        if (ucs_unlikely(!iworker_.failed().empty())) {
            throw std::runtime_error("the target went away");
        }
        return count;
    }
    /* A control message to the target, and the target's next answer. */
    void tell(const Control &c)
    {
        send_control([this]() { return progress(); }, control_ep_, kAmIdControl,
                     c);
    }
    Control answer(double seconds)
    {
        return next_control([this]() { return progress(); }, inbox_, seconds);
    }
    Result                run_variant(Variant variant);
    std::vector<uint32_t> send_ifunc(Peer &peer, bool with_code);
    uint64_t              send_am(Variant variant);
    uint64_t wire_bytes(const std::vector<uint32_t> &sizes, uint64_t with_code,
                        ucp_ifunc_path_t path) const;

    const Options  &opt_;
    const Corpus   &corpus_;
    ZstdCCtx        cctx_;
    std::string     address_; /* the target's HOST:PORT */
    Inbox           inbox_;   /* the target's answers; outlives the worker */
    Context         context_;
    Worker          worker_;
    IfuncWorker     iworker_;
    Peer            control_;
    ucp_ep_h        control_ep_;
    RegisteredIfunc ifunc_;
    size_t          frame_base_;
    std::optional<Endpoint> am_ep_;
};

Compressed Source::compress_corpus()
{
    Compressed        out;
    std::vector<char> buffer(record_payload_bound(RECORD_MAX));
    Clock::time_point t0 = Clock::now();
    for (uint64_t i = 0; i < corpus_.count(); ++i) {
        record_source_args_t args = {corpus_.record(i), corpus_.size(i),
                                     cctx_.get()};
        size_t               n    = buffer.size();
        if (record_compress(&args, buffer.data(), &n) != 0) {
            throw std::runtime_error("zstd: cannot compress a record");
        }
        out.bytes += n;
    }
    out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return out;
}

/* The ifunc variants: each record compressed into one buffer of this
 * process and sent from it (the peer copies what it cannot send at once).
 * Returns the payload sizes, in order. */
std::vector<uint32_t> Source::send_ifunc(Peer &peer, bool with_code)
{
    ucp_ifunc_peer_send_params_t params = {};
    if (with_code) {
        params.field_mask = UCP_IFUNC_PEER_SEND_FIELD_FLAGS;
        params.flags      = UCP_IFUNC_SEND_FLAG_WITH_CODE;
    }
    std::vector<char>     payload(record_payload_bound(RECORD_MAX));
    std::vector<uint32_t> sizes;
    sizes.reserve(corpus_.count());
    for (uint64_t i = 0; i < corpus_.count(); ++i) {
        record_source_args_t args = {corpus_.record(i), corpus_.size(i),
                                     cctx_.get()};
        size_t               n    = payload.size();
        if (record_compress(&args, payload.data(), &n) != 0) {
            throw std::runtime_error("zstd: cannot compress a record");
        }
        ucs_status_t status;
        /* The peer's queue of sends waiting for room is full: progress
         * sends them. */
        while ((status = ucp_ifunc_peer_send_nbx(peer.get(), ifunc_.get(),
                                                 payload.data(), n, &params)) ==
               UCS_ERR_NO_RESOURCE) {
            progress();
        }
        check(status, "ucp_ifunc_peer_send_nbx");
        sizes.push_back(static_cast<uint32_t>(n));
        /* As any UCX sender does: the target's answer that it holds the
         * code (after which the messages name it) arrives here. */
        progress();
    }
    return sizes;
}

/* The am and raw variants: ucp_am_send_nbx, at most opt.window sends in
 * flight, progressing the UCP worker as a program without ifuncs would.
 * Returns the bytes sent. */
uint64_t Source::send_am(Variant variant)
{
    Window              window(worker_, control_, opt_.window);
    ucp_request_param_t param = {};
    uint64_t            bytes = 0;
    for (uint64_t i = 0; i < corpus_.count(); ++i) {
        Window::Slot        &slot = window.at(i);
        record_source_args_t args = {corpus_.record(i), corpus_.size(i),
                                     cctx_.get()};
        const void          *data = args.text;
        size_t               n    = args.size;
        unsigned             id   = kAmIdRaw;
        if (variant == kAm) {
            slot.buffer.resize(record_payload_bound(args.size));
            n = slot.buffer.size();
            if (record_compress(&args, slot.buffer.data(), &n) != 0) {
                throw std::runtime_error("zstd: cannot compress a record");
            }
            data = slot.buffer.data();
            id   = kAmIdCompressed;
        }
        ucs_status_ptr_t request =
                ucp_am_send_nbx(am_ep_->get(), id, nullptr, 0, data, n, &param);
        if (UCS_PTR_IS_ERR(request)) {
            check(UCS_PTR_STATUS(request), "ucp_am_send_nbx");
        }
        slot.request = request; /* NULL: done already */
        bytes += n;
        worker_.progress();
    }
    window.drain();
    return bytes;
}

/* What the ifunc variants handed to UCX (active messages: AM header and
 * data) or stored into the target's ring (channel: the frame). A peer
 * sends the code until the target has said it holds it, and names it from
 * then on: the first @a with_code sends carried it. */
uint64_t Source::wire_bytes(const std::vector<uint32_t> &sizes,
                            uint64_t with_code, ucp_ifunc_path_t path) const
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
        uint64_t n      = sizes[i];
        uint64_t padded = (n + kFrameAlign - 1) / kFrameAlign * kFrameAlign;
        bool     full   = (i < with_code);
        if (path == UCP_IFUNC_PATH_CHANNEL) {
            bytes += full ? frame_base_ + padded : kRefFrameHead + padded;
        } else {
            bytes += full ? kAmFullHeader + frame_base_ + padded
                          : kAmRefHeader + n;
        }
    }
    return bytes;
}

Result Source::run_variant(Variant variant)
{
    Result result  = {};
    result.variant = variant;
    result.path    = UCP_IFUNC_PATH_AM;
    /* A new peer for each run of an ifunc variant: it knows nothing of the
     * target, so its first messages carry the code again, as to a target
     * seen for the first time. */
    std::optional<Peer> peer;
    if (is_ifunc(variant)) {
        peer.emplace(iworker_, address_);
    }

    Control start = control(kStart);
    start.variant = variant;
    start.count   = corpus_.count();
    start.sum     = corpus_.sum;
    tell(start);
    if (answer(kVariantTimeout).type != kReady) {
        throw std::runtime_error("the target is not ready");
    }

    std::vector<uint32_t> sizes;
    Clock::time_point     t0 = Clock::now();
    if (peer) {
        sizes = send_ifunc(*peer, variant == kIfuncFull);
    } else {
        result.wire_bytes = send_am(variant);
    }
    /* The target answers once it has inserted (and committed) them all. */
    Control done     = answer(kVariantTimeout);
    result.seconds   = std::chrono::duration<double>(Clock::now() - t0).count();
    Control verified = answer(kVariantTimeout);
    if ((done.type != kDone) || (verified.type != kVerified)) {
        throw std::runtime_error("unexpected control message");
    }
    result.verified = verified.verified && (done.failed == 0) &&
                      (done.count == corpus_.count());

    if (peer) {
        ucp_ifunc_peer_attr_t attr =
                peer->query(UCP_IFUNC_PEER_ATTR_FIELD_PATH |
                            UCP_IFUNC_PEER_ATTR_FIELD_SENT_WITH_CODE |
                            UCP_IFUNC_PEER_ATTR_FIELD_SENT_BY_REF);
        result.path       = attr.path;
        result.with_code  = attr.sent_with_code;
        result.by_ref     = attr.sent_by_ref;
        result.wire_bytes = wire_bytes(sizes, attr.sent_with_code, attr.path);
    }
    return result;
}

const char *path_name(ucp_ifunc_path_t path)
{
    return (path == UCP_IFUNC_PATH_CHANNEL) ? "channel" : "am";
}

void print_results(const Options &opt, const Corpus &corpus,
                   const Compressed          &compressed,
                   const std::vector<Result> &results)
{
    const char *tls = getenv("UCX_TLS") ? getenv("UCX_TLS") : "default";
    printf("\n%" PRIu64 " records, %zu bytes of text (%zu compressed, "
           "%.2f us per record to compress on the source); UCX_TLS=%s; a "
           "transaction per %d records\n",
           corpus.count(), corpus.text.size(), compressed.bytes,
           compressed.seconds * 1e6 / corpus.count(), tls, RECORD_BATCH);
    /* Per variant, the run of median rate (its bytes and counts), and
     * the slowest and fastest run. */
    printf("%-10s %-7s %-7s %4s %11s %11s %11s %12s %9s %10s %8s %s\n",
           "variant", "tls", "path", "runs", "records/s", "min", "max",
           "wire bytes", "B/record", "with code", "by ref", "verified");
    for (Variant v : opt.variants) {
        std::vector<const Result *> runs;
        bool                        verified = true;
        for (const Result &r : results) {
            if (r.variant == v) {
                runs.push_back(&r);
                verified = verified && r.verified;
            }
        }
        if (runs.empty()) {
            continue;
        }
        std::sort(runs.begin(), runs.end(),
                  [](const Result *a, const Result *b) {
                      return a->seconds > b->seconds;
                  });
        const Result &m = *runs[runs.size() / 2];
        printf("%-10s %-7s %-7s %4zu %11.0f %11.0f %11.0f %12" PRIu64
               " %9.1f %10" PRIu64 " %8" PRIu64 " %s\n",
               kVariantNames[v], tls, path_name(m.path), runs.size(),
               corpus.count() / m.seconds,
               corpus.count() / runs.front()->seconds,
               corpus.count() / runs.back()->seconds, m.wire_bytes,
               double(m.wire_bytes) / corpus.count(), m.with_code, m.by_ref,
               verified ? "yes" : "NO");
    }
    if (opt.csv) {
        printf("\ncsv,variant,tls,path,run,records,seconds,records_per_s,"
               "wire_bytes,bytes_per_record,sent_with_code,sent_by_ref,"
               "verified\n");
        for (const Result &r : results) {
            /* UCX_TLS may hold commas: quoted. */
            printf("csv,%s,\"%s\",%s,%u,%" PRIu64 ",%.6f,%.0f,%" PRIu64
                   ",%.1f,%" PRIu64 ",%" PRIu64 ",%s\n",
                   kVariantNames[r.variant], tls, path_name(r.path), r.run,
                   corpus.count(), r.seconds, corpus.count() / r.seconds,
                   r.wire_bytes, double(r.wire_bytes) / corpus.count(),
                   r.with_code, r.by_ref, r.verified ? "yes" : "no");
        }
    }
    fflush(stdout);
}

int run_source(const Options &opt)
{
    Corpus              corpus(opt.records);
    std::vector<Result> results;
    Compressed          compressed;
    bool                ok = true;
    try {
        Source source(opt, corpus);
        compressed = source.compress_corpus();
        source.run(results);
    } catch (const std::exception &e) {
        fprintf(stderr, "record_insert source: %s\n", e.what());
        ok = false;
    }
    for (const Result &r : results) {
        ok = ok && r.verified;
    }
    if (!results.empty()) {
        print_results(opt, corpus, compressed, results);
    }
    return ok ? 0 : 1;
}

int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s target [-p PORT] [-d DATABASE]\n"
            "       %s source HOST [-p PORT] [-n RECORDS] "
            "[-V ifunc,ifunc_full,am,raw] [-r RUNS] [-w WINDOW] [-v]\n"
            "  DATABASE: an SQLite file name, default :memory:\n"
            "  -r: run every variant RUNS times, round robin; the table "
            "shows the median\n"
            "  -w: sends in flight of the am and raw variants\n"
            "  -v: also print every run as CSV\n",
            argv0, argv0);
    return 2;
}

bool parse_variants(const std::string &list, std::vector<Variant> &out)
{
    size_t begin = 0;
    while (begin <= list.size()) {
        size_t      end  = list.find(',', begin);
        std::string name = list.substr(begin, end - begin);
        uint32_t    v    = 0;
        while ((v < kVariants) && (name != kVariantNames[v])) {
            ++v;
        }
        if (v == kVariants) {
            return false;
        }
        out.push_back(static_cast<Variant>(v));
        if (end == std::string::npos) {
            break;
        }
        begin = end + 1;
    }
    return true;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2) {
        return usage(argv[0]);
    }
    std::string mode = argv[1];
    Options     opt;
    const char *db_path = ":memory:";
    for (int i = 2; i < argc; ++i) {
        std::string arg = argv[i];
        bool        has = (i + 1 < argc);
        if ((arg == "-p") && has) {
            opt.port = atoi(argv[++i]);
        } else if ((arg == "-d") && has) {
            db_path = argv[++i];
        } else if ((arg == "-n") && has) {
            opt.records = strtoull(argv[++i], nullptr, 10);
        } else if ((arg == "-r") && has) {
            opt.repeats = static_cast<unsigned>(atoi(argv[++i]));
        } else if ((arg == "-w") && has) {
            opt.window = static_cast<unsigned>(atoi(argv[++i]));
        } else if ((arg == "-V") && has) {
            if (!parse_variants(argv[++i], opt.variants)) {
                return usage(argv[0]);
            }
        } else if (arg == "-v") {
            opt.csv = true;
        } else if ((mode == "source") && (opt.host == nullptr) &&
                   (arg[0] != '-')) {
            opt.host = argv[i];
        } else {
            return usage(argv[0]);
        }
    }
    if (mode == "target") {
        return run_target(opt.port, db_path);
    }
    if ((mode != "source") || (opt.host == nullptr) || (opt.records == 0) ||
        (opt.window == 0) || (opt.repeats == 0)) {
        return usage(argv[0]);
    }
    if (opt.variants.empty()) {
        opt.variants = {kIfunc, kIfuncFull, kAm, kRaw};
    }
    return run_source(opt);
}
