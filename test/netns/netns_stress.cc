/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The stress run as two programs that meet over the network, for faults a
 * single machine cannot make inside one process tree: test/netns/run.sh
 * starts the target in one network namespace and sources in another, joined
 * by a veth pair, then drops packets, takes the link down, or kills sources
 * in the middle of a frame.
 *
 *   ifunc_netns_stress target --port P --path raw|channel|am [options]
 *   ifunc_netns_stress source --host H --port P [options]
 *
 * The target serves one source at a time, each a session, for as long as it
 * runs: it hands the source its worker address (or, with --conn listener,
 * the port of a UCP listener) and what the path needs, then runs what
 * arrives. The ifunc (test/ifuncs/stress.c) checks every payload's checksum
 * and counts each sequence number's runs. A session ends when the source
 * reports what it sent (or its OOB socket closes: the source died); the
 * target then checks that every message the source was told completed ran,
 * and prints one line of figures. The target never runs a message twice or
 * a partial one, and survives whatever the source does.
 */
#include "../common/random.h"
#include "../../tools/common/ucx.h"
#include "../ifuncs/test_ifunc.h"

#include <ucp/api/ucp_ifunc.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using ucx_util::Clock;
using ucx_util::deadline_in;

enum class Path : uint32_t { raw, channel, am };

/* Target → source, first thing on the OOB socket; then the target's worker
 * address (address mode), then the rkey of the slots (raw) or the channel's
 * blob (channel). */
struct Hello {
    uint32_t path;
    uint32_t session;
    uint64_t seq_base;
    uint64_t region; /* raw: address of the first slot */
    uint64_t slots;
    uint64_t slot_size;
    uint32_t listener_port; /* 0: connect to the worker address */
    uint32_t reserved;
};

/* Source → target once the source stops sending. */
struct Done {
    uint64_t sent;      /* messages handed to the path */
    uint64_t confirmed; /* the first @a confirmed were told to be complete */
    uint64_t failed;    /* sends that reported an error */
    int32_t  status;    /* the first error, or UCS_OK */
    uint32_t reserved;
};

/* Target → source: the session's verdict. */
struct Verdict {
    uint64_t ran, corrupt, duplicate, missing;
};

constexpr double   kSetupTimeout  = 30;
constexpr uint64_t kSeqPerSession = 1ull << 32;

const char *path_name(Path path)
{
    return (path == Path::raw)       ? "raw"
           : (path == Path::channel) ? "channel"
                                     : "am";
}

Path parse_path(const std::string &name)
{
    for (Path path : {Path::raw, Path::channel, Path::am}) {
        if (name == path_name(path)) {
            return path;
        }
    }
    throw std::runtime_error("unknown path " + name);
}

using ucx_util::oob_recv;
using ucx_util::oob_send;

/* Command line: --name value pairs after the mode. */
class Args {
public:
    Args(int argc, char **argv)
    {
        for (int i = 2; i + 1 < argc; i += 2) {
            if (std::strncmp(argv[i], "--", 2) != 0) {
                throw std::runtime_error(std::string("bad option ") + argv[i]);
            }
            values_[argv[i] + 2] = argv[i + 1];
        }
        if ((argc % 2) != 0) {
            throw std::runtime_error("every option needs a value");
        }
    }

    std::string str(const char *name, const char *fallback) const
    {
        auto it = values_.find(name);
        return (it == values_.end()) ? fallback : it->second;
    }

    uint64_t num(const char *name, uint64_t fallback) const
    {
        auto it = values_.find(name);
        return (it == values_.end())
                       ? fallback
                       : std::strtoull(it->second.c_str(), nullptr, 0);
    }

private:
    std::map<std::string, std::string> values_;
};

struct sockaddr_storage ip_address(const std::string &host, uint16_t port)
{
    struct sockaddr_storage storage = {};
    auto *in4 = reinterpret_cast<struct sockaddr_in *>(&storage);
    auto *in6 = reinterpret_cast<struct sockaddr_in6 *>(&storage);
    if (host.empty()) {
        in4->sin_family      = AF_INET;
        in4->sin_addr.s_addr = INADDR_ANY;
        in4->sin_port        = htons(port);
    } else if (inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port   = htons(port);
    } else if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port   = htons(port);
    } else {
        throw std::runtime_error("not an IP address: " + host);
    }
    return storage;
}

/* Whether peer failure is handled on an endpoint, and what it records. */
struct EpState {
    ucs_status_t status = UCS_OK;
};

void ep_error(void *arg, ucp_ep_h, ucs_status_t status)
{
    static_cast<EpState *>(arg)->status = status;
}

ucp_err_handling_mode_t parse_err_mode(const std::string &name)
{
    if (name == "peer") {
        return UCP_ERR_HANDLING_MODE_PEER;
    }
    if (name == "none") {
        return UCP_ERR_HANDLING_MODE_NONE;
    }
    throw std::runtime_error("--err-mode is peer or none");
}

/* --- target ------------------------------------------------------------ */

class Target {
public:
    explicit Target(const Args &args)
        : path_(parse_path(args.str("path", "raw"))),
          slots_(args.num("slots", 4)),
          slot_size_(args.num("slot-size", (1ull << 20) + (64 << 10))),
          listener_(int(args.num("port", 0))),
          context_(UCP_FEATURE_RMA | UCP_FEATURE_AM), worker_(context_.get()),
          err_mode_(parse_err_mode(args.str("err-mode", "peer")))
    {
        if (path_ == Path::raw) {
            /* Two regions: a session writes into the one its predecessor
             * did not, so that a dead source's last bytes still on their
             * way cannot land in the new session's slots. */
            memory_ = std::make_unique<ucx_util::Memory>(
                    context_.get(), 2 * slots_ * slot_size_);
        } else if (path_ == Path::am) {
            ucp_ifunc_am_params_t params = {};
            params.field_mask            = UCP_IFUNC_AM_FIELD_TARGET_ARGS;
            params.target_args           = &result_;
            ucx_util::check(ucp_ifunc_am_enable(context_.get(), worker_.get(),
                                                &params, &am_),
                            "ucp_ifunc_am_enable");
        }
        if (args.str("conn", "address") == "listener") {
            start_ucp_listener(uint16_t(args.num("ucx-port", 0)));
        }
        std::printf("target: %s path, OOB port %d%s\n", path_name(path_),
                    listener_.port(),
                    ucp_listener_ ? ", UCP listener" : ", worker address");
        std::fflush(stdout);
    }

    ~Target()
    {
        end_session_eps();
        for (ucp_ifunc_channel_h channel : channels_) {
            ucp_ifunc_channel_destroy(channel);
        }
        ucp_ifunc_am_disable(am_);
        if (ucp_listener_) {
            ucp_listener_destroy(ucp_listener_);
        }
    }

    /* Serves @a sessions sessions (0: until killed); returns whether every
     * one was clean. */
    bool serve(uint64_t sessions)
    {
        bool clean = true;
        for (uint32_t session = 0; (sessions == 0) || (session < sessions);
             ++session) {
            while (!listener_.pending()) {
                progress();
            }
            ucx_util::OobChannel oob = listener_.accept(deadline_in(1));
            clean                    = run_session(session, oob) && clean;
        }
        std::printf("target: %llu sessions, totals: ran %llu, corrupt %llu, "
                    "duplicate %llu, missing %llu, unknown %llu\n",
                    (unsigned long long)sessions,
                    (unsigned long long)total_.ran,
                    (unsigned long long)total_.corrupt,
                    (unsigned long long)total_.duplicate,
                    (unsigned long long)total_.missing,
                    (unsigned long long)unknown_);
        return clean;
    }

private:
    void start_ucp_listener(uint16_t port)
    {
        struct sockaddr_storage addr   = ip_address("", port);
        ucp_listener_params_t   params = {};
        params.field_mask              = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                            UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
        params.sockaddr.addr    = reinterpret_cast<sockaddr *>(&addr);
        params.sockaddr.addrlen = sizeof(struct sockaddr_in);
        params.conn_handler.cb  = [](ucp_conn_request_h request, void *arg) {
            static_cast<Target *>(arg)->conn_requests_.push_back(request);
        };
        params.conn_handler.arg = this;
        ucx_util::check(
                ucp_listener_create(worker_.get(), &params, &ucp_listener_),
                "ucp_listener_create");
        ucp_listener_attr_t attr = {};
        attr.field_mask          = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
        ucx_util::check(ucp_listener_query(ucp_listener_, &attr),
                        "ucp_listener_query");
        ucp_port_ = ntohs(reinterpret_cast<struct sockaddr_in *>(&attr.sockaddr)
                                  ->sin_port);
    }

    /* Accepts the session's connection request with peer failure handling:
     * the endpoint the target creates is the one a dying source fails. */
    void accept_conn_requests()
    {
        while (!conn_requests_.empty()) {
            ucp_conn_request_h request = conn_requests_.front();
            conn_requests_.pop_front();
            ucp_ep_params_t params = {};
            params.field_mask      = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                                UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                UCP_EP_PARAM_FIELD_ERR_HANDLER;
            params.conn_request    = request;
            params.err_mode        = err_mode_;
            auto state             = std::make_unique<EpState>();
            params.err_handler.cb  = ep_error;
            params.err_handler.arg = state.get();
            ucp_ep_h     ep;
            ucs_status_t status = ucp_ep_create(worker_.get(), &params, &ep);
            if (status != UCS_OK) {
                std::printf("target: accepting a connection: %s\n",
                            ucs_status_string(status));
                continue;
            }
            eps_.push_back(std::make_unique<ucx_util::Endpoint>(worker_, ep));
            ep_states_.push_back(std::move(state));
        }
    }

    /* Closes the endpoints of sessions that are over. */
    void end_session_eps()
    {
        eps_.clear();
        ep_states_.clear();
    }

    void progress()
    {
        worker_.progress();
        accept_conn_requests();
        close_failed_eps();
    }

    /* An endpoint whose peer failed is closed at once, so that nothing
     * more is sent on it (its state stays until the session ends). */
    void close_failed_eps()
    {
        for (size_t i = 0; i < eps_.size(); ++i) {
            if (eps_[i] && (ep_states_[i]->status != UCS_OK)) {
                eps_[i].reset();
            }
        }
    }

    /* Runs what is ready on the path; returns how many messages were taken
     * from slots (raw path). */
    unsigned poll_path()
    {
        if (path_ == Path::raw) {
            char *slot = memory_->address() + region_ +
                         (consumed_ % slots_) * slot_size_;
            ucs_status_t status =
                    ucp_poll_ifunc(context_.get(), slot, slot_size_, &result_);
            if (status == UCS_ERR_NO_MESSAGE) {
                return 0;
            }
            if (status != UCS_OK) {
                ++rejected_;
            }
            ++consumed_;
            return 1;
        }
        if (path_ == Path::channel) {
            unsigned     count = 0;
            ucs_status_t status =
                    ucp_ifunc_channel_poll(channel_, 16, &result_, &count);
            if (status != UCS_OK) {
                ++rejected_;
            }
        }
        return 0;
    }

    void send_hello(uint32_t session, ucx_util::OobChannel &oob)
    {
        Hello hello         = {};
        hello.path          = uint32_t(path_);
        hello.session       = session;
        hello.seq_base      = session * kSeqPerSession;
        hello.slots         = slots_;
        hello.slot_size     = slot_size_;
        hello.listener_port = ucp_port_;
        if (path_ == Path::raw) {
            region_   = (session % 2) * slots_ * slot_size_;
            consumed_ = 0;
            hello.region =
                    reinterpret_cast<uint64_t>(memory_->address()) + region_;
        }
        oob_send(oob, hello);
        if (!ucp_listener_) {
            oob.send(worker_.address());
        }
        if (path_ == Path::raw) {
            oob.send(memory_->packed_rkey());
        } else if (path_ == Path::channel) {
            new_channel();
            void  *blob;
            size_t blob_size;
            ucx_util::check(ucp_ifunc_channel_pack(channel_, &blob, &blob_size),
                            "ucp_ifunc_channel_pack");
            oob.send(blob, blob_size);
            ucp_ifunc_channel_blob_release(blob);
        } else {
            oob.send(nullptr, 0);
        }
    }

    /* A new channel per session; the one before stays mapped for one more
     * session (a dead source's last puts may still be on their way). */
    void new_channel()
    {
        if (channels_.size() >= 2) {
            ucp_ifunc_channel_destroy(channels_.front());
            channels_.erase(channels_.begin());
        }
        ucp_ifunc_channel_params_t params = {};
        params.field_mask                 = UCP_IFUNC_CHANNEL_FIELD_SLOTS |
                            UCP_IFUNC_CHANNEL_FIELD_SLOT_SIZE;
        params.slots     = unsigned(slots_);
        params.slot_size = slot_size_;
        ucx_util::check(
                ucp_ifunc_channel_create(context_.get(), &params, &channel_),
                "ucp_ifunc_channel_create");
        channels_.push_back(channel_);
    }

    void reset_result(uint32_t session, uint64_t count)
    {
        seen_.assign(count, 0);
        unknown_ += result_.unknown;
        result_            = {};
        result_.seen       = seen_.data();
        result_.seen_base  = session * kSeqPerSession;
        result_.seen_count = count;
    }

    /* Serves one source; returns whether the session was clean. */
    bool run_session(uint32_t session, ucx_util::OobChannel &oob)
    {
        auto start = Clock::now();
        bool gone  = false;
        Done done  = {};
        try {
            /* The source says how many messages it will send at most. */
            uint64_t count =
                    oob_recv<uint64_t>(oob, deadline_in(kSetupTimeout));
            reset_result(session, count);
            send_hello(session, oob);
            for (;;) {
                progress();
                if (poll_path() > 0) {
                    oob_send(oob, consumed_); /* a credit */
                }
                if (oob.readable()) {
                    done = oob_recv<Done>(oob, deadline_in(kSetupTimeout));
                    break;
                }
            }
        } catch (const std::exception &e) {
            gone = true; /* the source died */
        }

        /* Whatever the source was told completed must run: wait for it. */
        uint64_t confirmed = std::min<uint64_t>(done.confirmed, seen_.size());
        auto     all_ran   = [&] {
            return std::all_of(seen_.begin(), seen_.begin() + confirmed,
                                     [](uint8_t runs) { return runs > 0; });
        };
        auto deadline = deadline_in(gone ? 0.2 : 10);
        while (!all_ran() && (Clock::now() < deadline)) {
            progress();
            if ((poll_path() > 0) && !gone) {
                try {
                    oob_send(oob, consumed_);
                } catch (const std::exception &) {
                    gone = true;
                }
            }
        }
        if (gone) {
            /* Let the dead source's last bytes arrive, and its endpoint
             * fail, before the next session starts. */
            auto until = deadline_in(0.2);
            while (Clock::now() < until) {
                progress();
                poll_path();
            }
        }

        Verdict verdict   = {};
        verdict.ran       = result_.executed;
        verdict.corrupt   = result_.corrupt;
        verdict.duplicate = result_.duplicate;
        verdict.missing   = uint64_t(
                  std::count(seen_.begin(), seen_.begin() + confirmed, 0));
        total_.ran += verdict.ran;
        total_.corrupt += verdict.corrupt;
        total_.duplicate += verdict.duplicate;
        total_.missing += verdict.missing;
        double seconds =
                std::chrono::duration<double>(Clock::now() - start).count();
        std::printf("session %u %s: %s; sent %llu, completed %llu, failed "
                    "%llu (%s); ran %llu, corrupt %llu, duplicate %llu, "
                    "missing %llu, rejected %llu, %.2f s\n",
                    session, path_name(path_),
                    gone ? "source gone" : "source done",
                    (unsigned long long)done.sent,
                    (unsigned long long)done.confirmed,
                    (unsigned long long)done.failed,
                    ucs_status_string(ucs_status_t(done.status)),
                    (unsigned long long)verdict.ran,
                    (unsigned long long)verdict.corrupt,
                    (unsigned long long)verdict.duplicate,
                    (unsigned long long)verdict.missing,
                    (unsigned long long)rejected_, seconds);
        std::fflush(stdout);
        rejected_ = 0;
        if (!gone) {
            try {
                oob_send(oob, verdict);
            } catch (const std::exception &) {
            }
        }
        end_session_eps();
        return (verdict.corrupt == 0) && (verdict.duplicate == 0) &&
               (verdict.missing == 0);
    }

    Path                                             path_;
    uint64_t                                         slots_;
    uint64_t                                         slot_size_;
    ucx_util::OobListener                            listener_;
    ucx_util::Context                                context_;
    ucx_util::Worker                                 worker_;
    ucp_err_handling_mode_t                          err_mode_;
    std::unique_ptr<ucx_util::Memory>                memory_;
    uint64_t                                         region_   = 0;
    uint64_t                                         consumed_ = 0;
    uint64_t                                         rejected_ = 0;
    uint64_t                                         unknown_  = 0;
    std::vector<ucp_ifunc_channel_h>                 channels_;
    ucp_ifunc_channel_h                              channel_      = nullptr;
    ucp_ifunc_am_h                                   am_           = nullptr;
    ucp_listener_h                                   ucp_listener_ = nullptr;
    uint16_t                                         ucp_port_     = 0;
    std::deque<ucp_conn_request_h>                   conn_requests_;
    std::vector<std::unique_ptr<ucx_util::Endpoint>> eps_;
    std::vector<std::unique_ptr<EpState>>            ep_states_;
    stress_result                                    result_ = {};
    std::vector<uint8_t>                             seen_;
    Verdict                                          total_ = {};
};

/* --- source ------------------------------------------------------------ */

class Source {
public:
    explicit Source(const Args &args)
        : host_(args.str("host", "")), count_(args.num("count", 1000)),
          min_size_(args.num("min-size", 0)),
          max_size_(args.num("max-size", 64 << 10)), seed_(args.num("seed", 1)),
          die_after_(args.num("die-after", ~0ull)),
          die_delay_us_(args.num("die-delay-us", 0)),
          seconds_(double(args.num("seconds", 0))),
          err_mode_(parse_err_mode(args.str("err-mode", "peer"))),
          oob_(ucx_util::oob_connect(
                  host_, int(args.num("port", 0)),
                  deadline_in(double(args.num("connect-timeout", 30))))),
          context_(UCP_FEATURE_RMA | UCP_FEATURE_AM), worker_(context_.get())
    {
        if (max_size_ < min_size_) {
            throw std::runtime_error("--max-size below --min-size");
        }
        auto deadline = deadline_in(kSetupTimeout);
        oob_send(oob_, count_);
        hello_ = oob_recv<Hello>(oob_, deadline);
        path_  = Path(hello_.path);
        create_ep(deadline);
        std::vector<char> blob = oob_.recv(deadline);
        if (path_ == Path::raw) {
            rkey_ = std::make_unique<ucx_util::RemoteKey>(ep_->get(), blob);
        } else if (path_ == Path::channel) {
            ucx_util::check(ucp_ifunc_channel_open(worker_.get(), ep_->get(),
                                                   blob.data(), blob.size(),
                                                   nullptr, &channel_),
                            "ucp_ifunc_channel_open");
        } else {
            ucx_util::check(ucp_ifunc_am_enable(context_.get(), worker_.get(),
                                                nullptr, &am_),
                            "ucp_ifunc_am_enable");
            ucx_util::check(ucp_ifunc_am_ep_create(am_, ep_->get(), &am_ep_),
                            "ucp_ifunc_am_ep_create");
        }
        ucx_util::check(ucp_register_ifunc(context_.get(), "stress", &ifunc_),
                        "ucp_register_ifunc stress");
    }

    ~Source()
    {
        ucp_ifunc_channel_close(channel_);
        ucp_ifunc_am_ep_destroy(am_ep_);
        ucp_ifunc_am_disable(am_);
        ucp_deregister_ifunc(context_.get(), ifunc_);
    }

    /* Streams the messages; returns whether the target found them whole,
     * each run once, and every completed one run. */
    bool run()
    {
        auto                 start = Clock::now();
        Done                 done  = {};
        uint64_t             state = seed_ | 1;
        std::vector<uint8_t> bytes(max_size_ + 8);
        ucs_status_t         status  = UCS_OK;
        uint64_t             flushed = 0; /* sends flushed without error */
        auto stop = start + std::chrono::microseconds(int64_t(seconds_ * 1e6));
        for (uint64_t i = 0; (i < count_) && (status == UCS_OK); ++i) {
            if ((seconds_ > 0) && (Clock::now() > stop)) {
                break;
            }
            size_t size =
                    test::random_bytes(&bytes, &state, min_size_, max_size_);
            stress_args     args = {hello_.seq_base + i, size, bytes.data()};
            ucp_ifunc_msg_t msg;
            status = ucp_ifunc_msg_create(ifunc_, &args, sizeof(args), &msg);
            if (status != UCS_OK) {
                break;
            }
            status = send_one(i, msg);
            ++done.sent;
            if (status == UCS_OK) {
                ++flushed;
            } else {
                ++done.failed;
            }
            ucp_ifunc_msg_free(msg);
        }
        /* The put paths put a message's seal after its flush completed:
         * a message counts as completed once a flush after its seal did.
         * Closing the channel waits for the last seals. */
        if (status == UCS_OK) {
            ucp_ifunc_channel_close(channel_);
            channel_ = nullptr;
            status   = wait_credits(done.sent);
            if (status == UCS_OK) {
                status = ep_->flush(deadline_in(kSetupTimeout));
            }
        }
        if (status == UCS_OK) {
            done.confirmed = flushed;
        } else if (path_ == Path::am) {
            done.confirmed = flushed;
        } else {
            done.confirmed = (flushed > 2) ? flushed - 2 : 0;
        }
        done.status = status;
        oob_send(oob_, done);
        Verdict verdict = {};
        for (auto deadline = deadline_in(60);;) {
            std::vector<char> data = oob_.recv(deadline);
            if (data.size() == sizeof(verdict)) { /* else a late credit */
                std::memcpy(&verdict, data.data(), sizeof(verdict));
                break;
            }
        }
        double seconds =
                std::chrono::duration<double>(Clock::now() - start).count();
        std::printf("source: %s path, session %u: sent %llu, completed %llu, "
                    "failed %llu (%s); target: ran %llu, corrupt %llu, "
                    "duplicate %llu, missing %llu; %.2f s\n",
                    path_name(path_), hello_.session,
                    (unsigned long long)done.sent,
                    (unsigned long long)done.confirmed,
                    (unsigned long long)done.failed, ucs_status_string(status),
                    (unsigned long long)verdict.ran,
                    (unsigned long long)verdict.corrupt,
                    (unsigned long long)verdict.duplicate,
                    (unsigned long long)verdict.missing, seconds);
        return (status == UCS_OK) && (verdict.ran == done.sent) &&
               (verdict.corrupt == 0) && (verdict.duplicate == 0) &&
               (verdict.missing == 0);
    }

private:
    void create_ep(ucx_util::Deadline deadline)
    {
        ucp_ep_params_t         params = {};
        std::vector<char>       address;
        struct sockaddr_storage addr;
        params.field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                            UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.err_mode        = err_mode_;
        params.err_handler.cb  = ep_error;
        params.err_handler.arg = &ep_state_;
        if (hello_.listener_port != 0) {
            addr = ip_address(host_, uint16_t(hello_.listener_port));
            params.field_mask |=
                    UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
            params.flags            = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
            params.sockaddr.addr    = reinterpret_cast<sockaddr *>(&addr);
            params.sockaddr.addrlen = (addr.ss_family == AF_INET)
                                              ? sizeof(struct sockaddr_in)
                                              : sizeof(struct sockaddr_in6);
        } else {
            address = oob_.recv(deadline);
            params.field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
            params.address =
                    reinterpret_cast<const ucp_address_t *>(address.data());
        }
        ucp_ep_h ep;
        ucx_util::check(ucp_ep_create(worker_.get(), &params, &ep),
                        "ucp_ep_create");
        ep_ = std::make_unique<ucx_util::Endpoint>(worker_, ep);
    }

    /* Sends message @a i and waits until it is complete; with --die-after,
     * dies that many microseconds after posting message @a i. */
    ucs_status_t send_one(uint64_t i, const ucp_ifunc_msg_t &msg)
    {
        auto         deadline = deadline_in(kSetupTimeout * 4);
        ucs_status_t status   = UCS_OK;
        if (path_ == Path::raw) {
            if (i >= hello_.slots) {
                status = wait_credits(i - hello_.slots + 1);
            }
            if (status == UCS_OK) {
                ucp_ifunc_send_params_t params = {};
                params.field_mask              = UCP_IFUNC_SEND_FIELD_WORKER |
                                    UCP_IFUNC_SEND_FIELD_REMOTE_SIZE;
                params.worker      = worker_.get();
                params.remote_size = hello_.slot_size;
                status             = ucp_ifunc_send_nbx(
                                    ep_->get(), msg,
                                    hello_.region + (i % hello_.slots) * hello_.slot_size,
                                    rkey_->get(), &params);
                maybe_die(i);
                if (!UCS_STATUS_IS_ERR(status)) {
                    status = ep_->flush(deadline);
                }
            }
        } else if (path_ == Path::channel) {
            for (;;) {
                status = ucp_ifunc_channel_send_nbx(channel_, msg, nullptr);
                if (status != UCS_ERR_NO_RESOURCE) {
                    break;
                }
                worker_.progress();
                if ((ep_state_.status != UCS_OK) || (Clock::now() > deadline)) {
                    status = (ep_state_.status != UCS_OK) ? ep_state_.status
                                                          : UCS_ERR_TIMED_OUT;
                    break;
                }
            }
            maybe_die(i);
            if (!UCS_STATUS_IS_ERR(status)) {
                status = ep_->flush(deadline);
            }
        } else {
            ucs_status_ptr_t request =
                    ucp_ifunc_am_send_nbx(am_ep_, msg, nullptr, nullptr);
            maybe_die(i);
            status = worker_.wait(request, deadline);
            if (status == UCS_OK) {
                status = ep_->flush(deadline);
            }
        }
        return (status == UCS_OK) ? ep_state_.status : status;
    }

    void maybe_die(uint64_t i)
    {
        if (i != die_after_) {
            return;
        }
        auto until = Clock::now() + std::chrono::microseconds(die_delay_us_);
        while (Clock::now() < until) {
            worker_.progress();
        }
        kill(getpid(), SIGKILL);
    }

    /* Raw path: waits until the target has consumed @a count messages. */
    ucs_status_t wait_credits(uint64_t count)
    {
        if (path_ != Path::raw) {
            return UCS_OK;
        }
        auto deadline = deadline_in(kSetupTimeout * 4);
        while (consumed_ < count) {
            if (oob_.readable()) {
                consumed_ = oob_recv<uint64_t>(oob_, deadline);
            } else {
                worker_.progress();
            }
            if (ep_state_.status != UCS_OK) {
                return ep_state_.status;
            }
            if (Clock::now() > deadline) {
                return UCS_ERR_TIMED_OUT;
            }
        }
        return UCS_OK;
    }

    std::string                          host_;
    uint64_t                             count_;
    uint64_t                             min_size_;
    uint64_t                             max_size_;
    uint64_t                             seed_;
    uint64_t                             die_after_;
    uint64_t                             die_delay_us_;
    double                               seconds_; /* 0: no time limit */
    ucp_err_handling_mode_t              err_mode_;
    ucx_util::OobChannel                 oob_;
    ucx_util::Context                    context_;
    ucx_util::Worker                     worker_;
    Hello                                hello_ = {};
    Path                                 path_  = Path::raw;
    EpState                              ep_state_;
    std::unique_ptr<ucx_util::Endpoint>  ep_;
    std::unique_ptr<ucx_util::RemoteKey> rkey_;
    ucp_ifunc_h                          ifunc_    = nullptr;
    ucp_ifunc_channel_ep_h               channel_  = nullptr;
    ucp_ifunc_am_h                       am_       = nullptr;
    ucp_ifunc_am_ep_h                    am_ep_    = nullptr;
    uint64_t                             consumed_ = 0;
};

int usage(const char *argv0)
{
    std::fprintf(stderr,
                 "usage: %s target --port P [--path raw|channel|am] "
                 "[--conn address|listener] [--ucx-port P] [--slots N] "
                 "[--slot-size B] [--sessions N] [--err-mode peer|none]\n"
                 "       %s source --host IP --port P [--count N] "
                 "[--min-size B] [--max-size B] [--seed S] [--seconds S] "
                 "[--connect-timeout S] "
                 "[--die-after I --die-delay-us US] [--err-mode peer|none]\n",
                 argv0, argv0);
    return 2;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2) {
        return usage(argv[0]);
    }
    std::string mode = argv[1];
    /* A dead peer's socket fails the write instead of killing us. */
    signal(SIGPIPE, SIG_IGN);
    try {
        Args args(argc, argv);
        if (mode == "target") {
            Target target(args);
            return target.serve(args.num("sessions", 0)) ? 0 : 1;
        }
        if (mode == "source") {
            Source source(args);
            return source.run() ? 0 : 1;
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ifunc_netns_stress %s: %s\n", mode.c_str(),
                     e.what());
        return 1;
    }
    return usage(argv[0]);
}
