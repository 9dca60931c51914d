/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Tests of the delivery paths with code sent once: a channel the target
 * creates and polls, or the active-message service, which runs messages
 * while the target progresses its worker. The source peer opens the path
 * and sends; the test is the target.
 */
#ifndef UCX_IFUNC_TEST_PATH_H_
#define UCX_IFUNC_TEST_PATH_H_

#include "target.h"

#include <ucp/api/ucp_ifunc.h>

#include <tuple>

namespace test {

enum class Path { channel, am };

/* The target's end of one path, for one peer: a channel, or the AM service
 * (one per target, shared by its peers). */
class PathEnd {
public:
    static constexpr size_t   kResultSize = 256;
    static constexpr unsigned kSlots      = 16;
    static constexpr size_t   kSlotSize   = 96 * 1024;

    /* Messages get @a target_args, or result() when it is NULL. */
    PathEnd(Target &target, Path path, unsigned slots = kSlots,
            size_t slot_size = kSlotSize, void *target_args = nullptr);
    ~PathEnd();
    PathEnd(const PathEnd &)            = delete;
    PathEnd &operator=(const PathEnd &) = delete;

    /* Has peer @a peer open its end (closing what it had open); on the AM
     * path, @a flags may ask for an endpoint to the target's listener
     * (kPathListener, the port in @a port). */
    void open(size_t peer = 0, uint32_t flags = 0, uint16_t port = 0);

    /* Forgets peer @a peer (killed): its end is not closed. */
    void forget(size_t peer);

    /* Takes what is ready (channels; the AM path runs messages while the
     * worker progresses); records rejections. */
    void poll(unsigned max_count = 64);

    /* Asks peer @a peer and waits, polling. */
    Reply call(size_t peer, Request req, const void *data = nullptr,
               size_t size = 0);

    /* @a count messages of ifunc @a handle of peer @a peer. */
    Reply send(size_t peer, uint32_t handle, uint64_t count,
               const void *args = nullptr, size_t args_size = 0,
               uint32_t flags = 0);

    /* Polls until @a done or @a seconds passed; returns done(). */
    template <typename Done>
    bool poll_until(Done done, double seconds = 60)
    {
        auto deadline = deadline_in(seconds);
        while (!done() && (Clock::now() < deadline)) {
            target_.worker().progress();
            poll();
        }
        return done();
    }

    /* (sent with code, sent by reference) as peer @a peer counts them. */
    std::pair<uint64_t, uint64_t> sent(size_t peer = 0);

    /* Where NAME_main writes its results (target_args of every message). */
    template <typename T>
    T &result()
    {
        static_assert(sizeof(T) <= kResultSize, "result too large");
        return *reinterpret_cast<T *>(results_);
    }

    Path                             path() const { return path_; }
    ucp_ifunc_channel_h              channel() const { return channel_; }
    const std::vector<ucs_status_t> &errors() const { return errors_; }

private:
    Target                   &target_;
    Path                      path_;
    ucp_ifunc_channel_h       channel_ = nullptr;
    ucp_ifunc_am_h            am_      = nullptr;
    std::vector<ucs_status_t> errors_;
    std::vector<size_t>       opened_; /* peers with their end open */
    alignas(64) char results_[kResultSize] = {};
    void *target_args_;
};

/* The end for a second source, peer @a peer: the AM service @a first
 * (one per target), or a channel of its own, kept in @a own. Opened. */
PathEnd &second_source_end(Target &target, PathEnd &first, size_t peer,
                           std::unique_ptr<PathEnd> *own);

/* Registers ifunc @a name on peer @a peer; returns its handle there. */
uint32_t register_on_peer(Target &target, size_t peer, const char *name);

/* Tests parameterised by transport and path. */
using PathParam = std::tuple<std::string, Path>;

class PathTest : public ::testing::TestWithParam<PathParam> {
protected:
    void SetUp() override;
    void TearDown() override;

    const std::string &tls() const { return std::get<0>(GetParam()); }
    Path               path() const { return std::get<1>(GetParam()); }

    /* UCX 1.13's TCP PUT receive crashed now and then in a context with
     * UCP_FEATURE_AM (SIGSEGV in libuct, 1 run in 3 of these tests);
     * without TCP PUT, UCP carries the puts as its own messages. */
    std::unique_ptr<ScopedEnv> tcp_put_;
    /* What end_'s messages get (NULL: its result()); set before SetUp. */
    void                    *target_args_ = nullptr;
    std::unique_ptr<Target>  target_;
    std::unique_ptr<PathEnd> end_;
};

std::string path_param_name(const ::testing::TestParamInfo<PathParam> &info);

/* Every transport and path. */
#define INSTANTIATE_PATH_TESTS(_suite)                                         \
    INSTANTIATE_TEST_SUITE_P(                                                  \
            Paths, _suite,                                                     \
            ::testing::Combine(::testing::Values("sm", "tcp"),                 \
                               ::testing::Values(Path::channel, Path::am)),    \
            path_param_name)

} // namespace test

#endif
