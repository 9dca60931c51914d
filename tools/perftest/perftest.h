/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * ucx_ifunc_perftest: ifunc against UCP active messages and plain puts,
 * latency and message rate, in one harness. See docs/benchmarks.md.
 */
#ifndef UCX_IFUNC_PERFTEST_H_
#define UCX_IFUNC_PERFTEST_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace perftest {

enum class Test : uint32_t {
    ifunc_lat, /* channel, code sent once */
    ifunc_bw,
    ifunc_full_lat, /* ucp_ifunc_send_nbx into a slot, code in every message */
    ifunc_full_bw,
    ifunc_am_lat, /* ifunc by active message, code sent once */
    ifunc_am_bw,
    ifunc_bigcode_lat,      /* perf_bigcode over a channel, code once */
    ifunc_bigcode_full_lat, /* the same with the code in every message */
    am_lat,
    am_bw,
    put_lat,
    put_bw,
    ifunc_auto_lat, /* the default path: ucp_ifunc_peer_send_nbx */
    ifunc_auto_bw
};

struct TestInfo {
    Test        test;
    const char *name;
    bool        latency; /* ping-pong; otherwise a stream (message rate) */
    const char *summary; /* for -h */
};

constexpr size_t kTestCount = 14;

/* Whether @a test needs UCP_FEATURE_RMA in both sides' contexts (puts,
 * channels, ring slots). The others (active messages, the default path)
 * run on contexts with active messages only, which no network peer can
 * write through UCP, and report a stream's progress by active message. */
bool                  needs_rma(Test test);
extern const TestInfo kTests[kTestCount];
const TestInfo       &test_info(Test test);

struct Options {
    std::string             host; /* empty: this is the server */
    int                     port     = 13337;
    bool                    loopback = false; /* -l: both sides, this host */
    std::vector<Test>       tests;
    std::vector<size_t>     sizes;
    std::optional<uint64_t> iterations; /* default: chosen per size */
    std::optional<uint64_t> warmup;     /* default: chosen per size */
    std::vector<int>        cpus;
    bool                    final_only = false; /* -f */
    bool                    csv        = false; /* -v */
    std::string             lib_dir;            /* -L */
};

/* Parses the command line; throws std::invalid_argument with a message
 * for the user. */
Options parse_options(int argc, char **argv);
void    print_usage();

/* What the client asks the server to run. */
struct RunParams {
    Test     test;
    uint32_t reserved;
    uint64_t payload_size;
    uint64_t iterations;
    uint64_t warmup;
};

struct Result {
    Test     test;
    size_t   payload_size;
    size_t   frame_size; /* bytes that travel per message */
    uint64_t iterations;
    double   lat_median_us; /* one-way; 0 for rate tests */
    double   lat_avg_us;
    double   msg_rate; /* messages per second; 0 for latency tests */
    double   bandwidth_MBps;
};

/* Iterations and warmup for @a params when the user gave none. */
RunParams make_run_params(const Options &options, Test test, size_t size);

void print_banner(const Options &options);
void print_table_header(const Options &options);
void print_result(const Options &options, const Result &result);

} // namespace perftest

#endif
