/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * examples/record_insert: a source inserts a corpus of text records into a
 * target's SQLite database, three ways, over UCP active messages:
 *   ifunc  each record is zstd-compressed into an ifunc message
 *          (record_insert.so), sent as an active message
 *          (ucp_ifunc_am_send_nbx); the code that decompresses and
 *          inserts it travels with the first messages, by reference
 *          afterwards;
 *   ifunc_full  the same, with the code in every message (the paper's
 *          mode, UCP_IFUNC_SEND_FLAG_WITH_CODE), to show what sending it
 *          once saves;
 *   channel  the same messages on an ifunc channel (a ring in the
 *          target's memory, written with puts or direct stores);
 *   am     the same compressed record, to a handler compiled into this
 *          program in advance (the code of record_format.h, as the ifunc);
 *   raw    the record uncompressed, to a handler that inserts it.
 * After each variant the target checks that its table holds exactly the
 * corpus (count, bytes, hash of every row).
 *
 *     UCX_IFUNC_TRUST=signed UCX_IFUNC_TRUSTED_KEYS=<dir>/demo.pub \
 *         record_insert target [-p PORT] [-d DATABASE]
 *     UCX_IFUNC_LIB_DIR=<dir> record_insert source HOST [-p PORT]
 *         [-n RECORDS] [-V ifunc,ifunc_full,channel,am,raw] [-r RUNS]
 *         [-w WINDOW] [-v]
 */
#include "record_format.h"

#include "../../tools/common/oob.h"
#include "../../tools/common/ucx.h"

#include <ucp/api/ucp_ifunc.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

using namespace ucx_util;

namespace {

constexpr int      kDefaultPort     = 13340;
constexpr unsigned kAmIdCompressed  = 10; /* the ifunc path uses 240, 241 */
constexpr unsigned kAmIdRaw         = 11;
constexpr double   kVariantTimeout  = 300;
constexpr double   kIdleTimeout     = 10;
constexpr size_t   kAmFullHeader    = 16; /* docs/design.md, AM delivery */
constexpr size_t   kRefHeader       = 56; /* reference frame header */
constexpr size_t   kAmRefHeader     = 24; /* its code id and nonce, by AM */
constexpr size_t   kPayloadSizeWord = 40; /* offset in a full frame */

enum Variant : uint32_t { kIfunc, kIfuncFull, kChannel, kAm, kRaw, kVariants };
const char *const kVariantNames[kVariants] = {"ifunc", "ifunc_full", "channel",
                                              "am", "raw"};

/* The channel variant's ring: a slot holds a full frame (about 1.8 KiB
 * with the code), 256 of them let the source run well ahead. */
constexpr unsigned kChannelSlots    = 256;
constexpr size_t   kChannelSlotSize = 4096;

/* Out-of-band control messages, one struct for all of them. */
enum ControlType : uint32_t { kStart, kReady, kDone, kVerified, kQuit };
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

/* ---- the target ---- */

sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK) {
        throw std::runtime_error(std::string("sqlite: ") + sql + ": " +
                                 sqlite3_errmsg(db));
    }
    return stmt;
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

/* A fresh, empty table and the statements of one variant. */
void table_reset(record_target_t *t)
{
    exec(t->db, "DROP TABLE IF EXISTS records");
    exec(t->db, RECORD_TABLE_SQL);
    t->insert   = prepare(t->db, RECORD_INSERT_SQL);
    t->begin    = prepare(t->db, "BEGIN");
    t->commit   = prepare(t->db, "COMMIT");
    t->inserted = 0;
    t->failed   = 0;
}

void statements_finalize(record_target_t *t)
{
    sqlite3_finalize(t->insert);
    sqlite3_finalize(t->begin);
    sqlite3_finalize(t->commit);
    t->insert = t->begin = t->commit = nullptr;
}

record_checksum_t table_checksum(sqlite3 *db)
{
    record_checksum_t sum  = {};
    sqlite3_stmt     *stmt = prepare(db, "SELECT id, name, city, body "
                                             "FROM records");
    int               rc;
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
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        throw std::runtime_error("sqlite: reading the table failed");
    }
    return sum;
}

/* The handlers of the am and raw variants: compiled into the target in
 * advance, they run inside ucp_worker_progress as the ifunc does. A record
 * is far below the rendezvous threshold; one that came by rendezvous would
 * need a receive and counts as failed. */
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

/* The target's end of the channel variant's ring, and the blob that
 * opens it on the source. */
struct Channel {
    ucp_ifunc_channel_h channel = nullptr;
    std::vector<char>   blob;

    Channel(ucp_context_h context, bool create)
    {
        if (!create) {
            return;
        }
        ucp_ifunc_channel_params_t params = {};
        params.field_mask                 = UCP_IFUNC_CHANNEL_FIELD_SLOTS |
                            UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE;
        params.slots     = kChannelSlots;
        params.slot_size = kChannelSlotSize;
        check(ucp_ifunc_channel_create(context, &params, &channel),
              "ucp_ifunc_channel_create");
        void        *data;
        size_t       size;
        ucs_status_t status = ucp_ifunc_channel_pack(channel, &data, &size);
        if (status != UCS_OK) {
            ucp_ifunc_channel_destroy(channel);
            check(status, "ucp_ifunc_channel_pack");
        }
        blob.assign(static_cast<char *>(data),
                    static_cast<char *>(data) + size);
        ucp_ifunc_channel_blob_release(data);
    }
    ~Channel() { ucp_ifunc_channel_destroy(channel); }
    Channel(const Channel &)                       = delete;
    Channel            &operator=(const Channel &) = delete;
    ucp_ifunc_channel_h get() const { return channel; }
};

/* Progresses until @a count records were handled; false if none arrived
 * for kIdleTimeout seconds (a message the target rejected, say: it logs
 * why) or the variant took longer than kVariantTimeout. */
bool wait_records(Worker &worker, ucp_ifunc_channel_h channel,
                  record_target_t *t, uint64_t count)
{
    Deadline deadline = deadline_in(kVariantTimeout);
    Deadline idle     = deadline_in(kIdleTimeout);
    uint64_t seen     = 0;
    for (unsigned i = 1; t->inserted + t->failed < count; ++i) {
        worker.progress();
        /* A rejected message was logged; the count tells the rest. */
        if (channel != nullptr) {
            (void)ucp_ifunc_channel_poll(channel, kChannelSlots, t, nullptr);
        }
        if ((i % 4096) == 0) {
            Clock::time_point now = Clock::now();
            if (t->inserted + t->failed != seen) {
                seen = t->inserted + t->failed;
                idle = deadline_in(kIdleTimeout);
            } else if (now > idle) {
                return false;
            }
            if (now > deadline) {
                return false;
            }
        }
    }
    return true;
}

int run_target(int port, const char *db_path)
{
    /* RMA for the channel variant's ring. */
    Context         context(UCP_FEATURE_AM | UCP_FEATURE_RMA);
    Worker          worker(context.get());
    record_target_t target = {};
    ucp_ifunc_am_h  am     = nullptr;
    bool            all_ok = true;

    if (sqlite3_open(db_path, &target.db) != SQLITE_OK) {
        fprintf(stderr, "record_insert target: cannot open %s\n", db_path);
        return 1;
    }
    try {
        ucp_ifunc_am_params_t params = {};
        params.field_mask            = UCP_IFUNC_AM_FIELD_TARGET_ARGS;
        params.target_args           = &target;
        check(ucp_ifunc_am_enable(context.get(), worker.get(), &params, &am),
              "ucp_ifunc_am_enable");
        set_handler(worker.get(), kAmIdCompressed, on_compressed, &target);
        set_handler(worker.get(), kAmIdRaw, on_raw, &target);

        OobListener listener(port);
        printf("record_insert target: database %s, waiting on port %d\n",
               db_path, listener.port());
        fflush(stdout);
        OobChannel oob = listener.accept(deadline_in(60));
        oob.send(worker.address());

        std::unique_ptr<Channel> channel;
        for (;;) {
            /* Progress while waiting: over TCP the source's last channel
             * operations (a credit read) complete only while the target
             * progresses. */
            for (Deadline idle = deadline_in(600); !oob.readable();) {
                worker.progress();
                if (Clock::now() > idle) {
                    throw std::runtime_error("the source went quiet");
                }
            }
            Control start = oob_recv<Control>(oob, deadline_in(60));
            /* The source closed its end of the last channel before it
             * sent this: the ring may go. */
            channel.reset();
            if (start.type == kQuit) {
                break;
            }
            if ((start.type != kStart) || (start.variant >= kVariants)) {
                throw std::runtime_error("unexpected control message");
            }
            table_reset(&target);
            /* A new channel for every run: its source starts from its
             * first slot, and knows nothing of the code. */
            channel = std::make_unique<Channel>(context.get(),
                                                start.variant == kChannel);
            oob_send(oob, control(kReady));
            if (start.variant == kChannel) {
                oob.send(channel->blob);
            }

            bool arrived =
                    wait_records(worker, channel->get(), &target, start.count);
            Control done = control(kDone);
            /* The last, partial batch's transaction is still open. */
            if ((target.inserted % RECORD_BATCH) != 0) {
                exec(target.db, "COMMIT");
            }
            if (!arrived) {
                fprintf(stderr,
                        "record_insert target: %s: only %" PRIu64 " of %" PRIu64
                        " records arrived\n",
                        kVariantNames[start.variant],
                        target.inserted + target.failed, start.count);
            }
            done.count  = target.inserted;
            done.failed = target.failed + (arrived ? 0 : 1);
            oob_send(oob, done);

            Control verified  = control(kVerified);
            verified.sum      = table_checksum(target.db);
            verified.verified = arrived && (target.failed == 0) &&
                                (verified.sum.count == start.sum.count) &&
                                (verified.sum.bytes == start.sum.bytes) &&
                                (verified.sum.hash == start.sum.hash);
            statements_finalize(&target);
            printf("record_insert target: %s: %" PRIu64 " rows, %" PRIu64
                   " failed, checksum %016" PRIx64 " (expected %016" PRIx64
                   "): %s\n",
                   kVariantNames[start.variant], verified.sum.count,
                   target.failed, verified.sum.hash, start.sum.hash,
                   verified.verified ? "verified" : "MISMATCH");
            fflush(stdout);
            all_ok = all_ok && verified.verified;
            oob_send(oob, verified);
        }
    } catch (const std::exception &e) {
        fprintf(stderr, "record_insert target: %s\n", e.what());
        all_ok = false;
    }
    statements_finalize(&target);
    ucp_ifunc_am_disable(am);
    ZSTD_freeDCtx(target.dctx);
    sqlite3_close(target.db);
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
    Variant  variant;
    unsigned run;
    double   seconds;
    uint64_t wire_bytes;
    uint64_t with_code;
    uint64_t by_ref;
    bool     verified;
};

/* One send in flight and what it must keep alive. */
struct Slot {
    ucs_status_ptr_t  request = nullptr;
    ucp_ifunc_msg_t   msg     = {nullptr, 0};
    std::vector<char> buffer;
};

void slot_complete(Worker &worker, Slot &slot)
{
    if (slot.request != nullptr) {
        ucs_status_t status;
        while ((status = ucp_request_check_status(slot.request)) ==
               UCS_INPROGRESS) {
            worker.progress();
        }
        ucp_request_free(slot.request);
        slot.request = nullptr;
        check(status, "send");
    }
    ucp_ifunc_msg_free(slot.msg);
    slot.msg = {nullptr, 0};
}

/* Completes the puts of the channel messages in @a msgs, then frees them. */
void flush_and_free(Endpoint &ep, std::vector<ucp_ifunc_msg_t> &msgs)
{
    if (msgs.empty()) {
        return;
    }
    check(ep.flush(deadline_in(kVariantTimeout)), "ucp_ep_flush_nbx");
    for (ucp_ifunc_msg_t &msg : msgs) {
        ucp_ifunc_msg_free(msg);
    }
    msgs.clear();
}

/* Bytes of a full frame's payload (docs/design.md, "Frame format"). */
uint64_t frame_payload_size(const ucp_ifunc_msg_t &msg)
{
    uint64_t size;
    std::memcpy(&size, static_cast<const char *>(msg.frame) + kPayloadSizeWord,
                sizeof(size));
    return size;
}

Result run_variant(const Options &opt, const Corpus &corpus, Variant variant,
                   OobChannel &oob, Worker &worker, Endpoint &ep,
                   ucp_ifunc_am_h am, ucp_ifunc_h ifunc, ZSTD_CCtx *cctx)
{
    Result              result = {variant, 0, 0, 0, 0, 0, false};
    std::vector<Slot>   slots(opt.window);
    ucp_request_param_t param  = {};
    ucp_ifunc_am_ep_h   am_ep  = nullptr;
    ucp_ifunc_ep_attr_t attr   = {};
    uint64_t            by_ref = 0;

    attr.field_mask = UCP_IFUNC_EP_ATTR_FIELD_SENT_WITH_CODE |
                      UCP_IFUNC_EP_ATTR_FIELD_SENT_BY_REF;
    ucp_ifunc_channel_send_params_t send_params = {};
    if (variant == kIfuncFull) {
        send_params.field_mask = UCP_IFUNC_CHANNEL_SEND_FIELD_FLAGS;
        send_params.flags      = UCP_IFUNC_SEND_FLAG_WITH_CODE;
    }
    /* A new AM endpoint knows nothing of the target: the first messages
     * carry the code again, as for a target seen for the first time. */
    if ((variant == kIfunc) || (variant == kIfuncFull)) {
        check(ucp_ifunc_am_ep_create(am, ep.get(), &am_ep),
              "ucp_ifunc_am_ep_create");
    }

    Control start = control(kStart);
    start.variant = variant;
    start.count   = corpus.count();
    start.sum     = corpus.sum;
    oob_send(oob, start);
    if (oob_recv<Control>(oob, deadline_in(60)).type != kReady) {
        throw std::runtime_error("the target is not ready");
    }
    ucp_ifunc_channel_ep_h       channel_ep = nullptr;
    std::vector<ucp_ifunc_msg_t> unflushed; /* channel messages put */
    if (variant == kChannel) {
        std::vector<char> blob = oob.recv(deadline_in(60));
        check(ucp_ifunc_channel_open(worker.get(), ep.get(), blob.data(),
                                     blob.size(), nullptr, &channel_ep),
              "ucp_ifunc_channel_open");
    }

    Clock::time_point t0 = Clock::now();
    for (uint64_t i = 0; i < corpus.count(); ++i) {
        Slot &slot = slots[i % slots.size()];
        slot_complete(worker, slot);
        record_source_args_t args = {corpus.record(i), corpus.size(i), cctx};
        if ((variant == kIfunc) || (variant == kIfuncFull)) {
            check(ucp_ifunc_msg_create(ifunc, &args, sizeof(args), &slot.msg),
                  "ucp_ifunc_msg_create");
            slot.request = ucp_ifunc_am_send_nbx(am_ep, slot.msg, &param,
                                                 &send_params);
            check(ucp_ifunc_am_ep_query(am_ep, &attr), "ucp_ifunc_am_ep_query");
            /* What ucp_am_send_nbx was given: AM header + data. */
            result.wire_bytes +=
                    (attr.sent_by_ref > by_ref)
                            ? kAmRefHeader + frame_payload_size(slot.msg)
                            : kAmFullHeader + slot.msg.frame_size;
            by_ref = attr.sent_by_ref;
        } else if (variant == kChannel) {
            ucp_ifunc_msg_t msg;
            check(ucp_ifunc_msg_create(ifunc, &args, sizeof(args), &msg),
                  "ucp_ifunc_msg_create");
            ucs_status_t status;
            while ((status = ucp_ifunc_channel_send_nbx(
                            channel_ep, msg, nullptr)) == UCS_ERR_NO_RESOURCE) {
                worker.progress(); /* the ring is full: wait for credits */
            }
            if (UCS_STATUS_IS_ERR(status)) {
                ucp_ifunc_msg_free(msg);
                check(status, "ucp_ifunc_channel_send_nbx");
            }
            check(ucp_ifunc_channel_ep_query(channel_ep, &attr),
                  "ucp_ifunc_channel_ep_query");
            /* The frame written into the slot: a reference frame is its
             * 56-byte header and the payload padded to 8 bytes. */
            result.wire_bytes +=
                    (attr.sent_by_ref > by_ref)
                            ? kRefHeader +
                                      ((frame_payload_size(msg) + 7) & ~7ull)
                            : msg.frame_size;
            by_ref = attr.sent_by_ref;
            if (status == UCS_OK) {
                ucp_ifunc_msg_free(msg); /* stored directly: done */
            } else {
                /* Put: keep it until a flush of the endpoint completed. */
                unflushed.push_back(msg);
                if (unflushed.size() >= opt.window) {
                    flush_and_free(ep, unflushed);
                }
            }
        } else if (variant == kAm) {
            size_t n = record_payload_bound(args.size);
            slot.buffer.resize(n);
            if (record_compress(&args, slot.buffer.data(), &n) != 0) {
                throw std::runtime_error("zstd: cannot compress a record");
            }
            slot.request = ucp_am_send_nbx(ep.get(), kAmIdCompressed, nullptr,
                                           0, slot.buffer.data(), n, &param);
            result.wire_bytes += n;
        } else {
            slot.request = ucp_am_send_nbx(ep.get(), kAmIdRaw, nullptr, 0,
                                           args.text, args.size, &param);
            result.wire_bytes += args.size;
        }
        if (UCS_PTR_IS_ERR(slot.request)) {
            ucs_status_t status = UCS_PTR_STATUS(slot.request);
            slot.request        = nullptr;
            check(status, "send");
        }
        /* Sends over shared memory often complete at once; progress anyway,
         * as any UCX sender does, so that the target's replies (the ifunc
         * path learns from them that it may send by reference) and TCP's
         * completions are seen. */
        worker.progress();
    }
    for (Slot &slot : slots) {
        slot_complete(worker, slot);
    }
    flush_and_free(ep, unflushed);
    /* The target answers once it has inserted (and committed) them all;
     * keep progressing meanwhile: the ifunc path's replies arrive here. */
    while (!oob.readable()) {
        worker.progress();
    }
    Control done     = oob_recv<Control>(oob, deadline_in(kVariantTimeout));
    result.seconds   = std::chrono::duration<double>(Clock::now() - t0).count();
    Control verified = oob_recv<Control>(oob, deadline_in(kVariantTimeout));
    if ((done.type != kDone) || (verified.type != kVerified)) {
        throw std::runtime_error("unexpected control message");
    }
    result.verified = verified.verified && (done.failed == 0);

    if (am_ep != nullptr) {
        check(ucp_ifunc_am_ep_query(am_ep, &attr), "ucp_ifunc_am_ep_query");
        ucp_ifunc_am_ep_destroy(am_ep);
    }
    if (channel_ep != nullptr) {
        check(ucp_ifunc_channel_ep_query(channel_ep, &attr),
              "ucp_ifunc_channel_ep_query");
        ucp_ifunc_channel_close(channel_ep);
    }
    result.with_code = attr.sent_with_code;
    result.by_ref    = attr.sent_by_ref;
    return result;
}

/* Compression alone, on the source: what the compressed variants pay per
 * record before anything is sent. */
struct Compressed {
    size_t bytes   = 0;
    double seconds = 0;
};

Compressed compress_corpus(const Corpus &corpus, ZSTD_CCtx *cctx)
{
    Compressed        out;
    std::vector<char> buffer(record_payload_bound(RECORD_MAX));
    Clock::time_point t0 = Clock::now();
    for (uint64_t i = 0; i < corpus.count(); ++i) {
        record_source_args_t args = {corpus.record(i), corpus.size(i), cctx};
        size_t               n    = buffer.size();
        if (record_compress(&args, buffer.data(), &n) != 0) {
            throw std::runtime_error("zstd: cannot compress a record");
        }
        out.bytes += n;
    }
    out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return out;
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
    printf("%-10s %-5s %4s %11s %11s %11s %12s %9s %10s %8s %s\n", "variant",
           "tls", "runs", "records/s", "min", "max", "wire bytes", "B/record",
           "with code", "by ref", "verified");
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
        printf("%-10s %-5s %4zu %11.0f %11.0f %11.0f %12" PRIu64
               " %9.1f %10" PRIu64 " %8" PRIu64 " %s\n",
               kVariantNames[v], tls, runs.size(), corpus.count() / m.seconds,
               corpus.count() / runs.front()->seconds,
               corpus.count() / runs.back()->seconds, m.wire_bytes,
               double(m.wire_bytes) / corpus.count(), m.with_code, m.by_ref,
               verified ? "yes" : "NO");
    }
    if (opt.csv) {
        printf("\ncsv,variant,tls,run,records,seconds,records_per_s,"
               "wire_bytes,bytes_per_record,sent_with_code,sent_by_ref,"
               "verified\n");
        for (const Result &r : results) {
            printf("csv,%s,%s,%u,%" PRIu64 ",%.6f,%.0f,%" PRIu64
                   ",%.1f,%" PRIu64 ",%" PRIu64 ",%s\n",
                   kVariantNames[r.variant], tls, r.run, corpus.count(),
                   r.seconds, corpus.count() / r.seconds, r.wire_bytes,
                   double(r.wire_bytes) / corpus.count(), r.with_code, r.by_ref,
                   r.verified ? "yes" : "no");
        }
    }
    fflush(stdout);
}

int run_source(const Options &opt)
{
    Corpus              corpus(opt.records);
    Context             context(UCP_FEATURE_AM | UCP_FEATURE_RMA);
    Worker              worker(context.get());
    std::vector<Result> results;
    ucp_ifunc_am_h      am    = nullptr;
    ucp_ifunc_h         ifunc = nullptr;
    ZSTD_CCtx          *cctx  = ZSTD_createCCtx();
    Compressed          compressed;
    bool                ok = true;

    try {
        if (cctx == nullptr) {
            throw std::runtime_error("zstd: cannot create a context");
        }
        compressed     = compress_corpus(corpus, cctx);
        OobChannel oob = oob_connect(opt.host, opt.port, deadline_in(30));
        Endpoint   ep(worker, oob.recv(deadline_in(30)));
        /* The source's service receives the target's replies (which code
         * it holds). */
        check(ucp_ifunc_am_enable(context.get(), worker.get(), nullptr, &am),
              "ucp_ifunc_am_enable");
        check(ucp_register_ifunc(context.get(), "record_insert", &ifunc),
              "ucp_register_ifunc(record_insert): is UCX_IFUNC_LIB_DIR set?");
        /* Round robin: a disturbance of the machine spreads over the
         * variants instead of hitting the runs of one. */
        for (unsigned run = 1; run <= opt.repeats; ++run) {
            for (Variant v : opt.variants) {
                results.push_back(run_variant(opt, corpus, v, oob, worker, ep,
                                              am, ifunc, cctx));
                results.back().run = run;
                ok                 = ok && results.back().verified;
            }
        }
        oob_send(oob, control(kQuit));
        ep.flush(deadline_in(10));
    } catch (const std::exception &e) {
        fprintf(stderr, "record_insert source: %s\n", e.what());
        ok = false;
    }
    ucp_deregister_ifunc(context.get(), ifunc);
    ucp_ifunc_am_disable(am);
    ZSTD_freeCCtx(cctx);
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
            "[-V ifunc,ifunc_full,channel,am,raw] [-r RUNS] [-w WINDOW] [-v]\n"
            "  DATABASE: an SQLite file name, default :memory:\n"
            "  -r: run every variant RUNS times, round robin; the table "
            "shows the median\n"
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
        opt.variants = {kIfunc, kIfuncFull, kChannel, kAm, kRaw};
    }
    return run_source(opt);
}
