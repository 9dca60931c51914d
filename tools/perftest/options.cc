/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Command line of ucx_ifunc_perftest, with ucx_perftest's habits.
 */
#include "perftest.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace perftest {

const TestInfo kTests[kTestCount] = {
        {Test::ifunc_lat, "ifunc_lat", true,
         "ifunc over a channel, code sent once"},
        {Test::ifunc_bw, "ifunc_bw", false, ""},
        {Test::ifunc_full_lat, "ifunc_full_lat", true,
         "ifunc into a ring slot, code in every message"},
        {Test::ifunc_full_bw, "ifunc_full_bw", false, ""},
        {Test::ifunc_am_lat, "ifunc_am_lat", true,
         "ifunc by active message, code sent once"},
        {Test::ifunc_am_bw, "ifunc_am_bw", false, ""},
        {Test::ifunc_bigcode_lat, "ifunc_bigcode_lat", true,
         "big ifunc (>16 KiB code), channel, code once"},
        {Test::ifunc_bigcode_full_lat, "ifunc_bigcode_full_lat", true,
         "the same, code in every message"},
        {Test::am_lat, "am_lat", true, "UCP active message"},
        {Test::am_bw, "am_bw", false, ""},
        {Test::put_lat, "put_lat", true,
         "put of payload + sequence number (the floor)"},
        {Test::put_bw, "put_bw", false, ""},
        {Test::ifunc_auto_lat, "ifunc_auto_lat", true,
         "the default path (peers): payload sent in one call"},
        {Test::ifunc_auto_bw, "ifunc_auto_bw", false, ""},
};

const TestInfo &test_info(Test test)
{
    return kTests[static_cast<size_t>(test)];
}

bool needs_rma(Test test)
{
    /* The streams of these report their progress by active message. */
    switch (test) {
        case Test::ifunc_am_lat:
        case Test::ifunc_am_bw:
        case Test::am_lat:
        case Test::am_bw:
        case Test::ifunc_auto_lat:
        case Test::ifunc_auto_bw:
            return false;
        default:
            return true;
    }
}

namespace {

std::vector<std::string> split(const std::string &text, char separator)
{
    std::vector<std::string> parts;
    std::stringstream        stream(text);
    std::string              part;
    while (std::getline(stream, part, separator)) {
        parts.push_back(part);
    }
    return parts;
}

/* "64", "8K", "1M", "1G" */
size_t parse_size(const std::string &text)
{
    char              *end;
    unsigned long long value = strtoull(text.c_str(), &end, 10);
    std::string        unit(end);
    size_t             scale = 1;
    if ((unit == "K") || (unit == "k")) {
        scale = 1ul << 10;
    } else if ((unit == "M") || (unit == "m")) {
        scale = 1ul << 20;
    } else if ((unit == "G") || (unit == "g")) {
        scale = 1ul << 30;
    } else if (!unit.empty() || (end == text.c_str())) {
        throw std::invalid_argument("bad size '" + text +
                                    "' (use a number with an optional K, M "
                                    "or G)");
    }
    return size_t(value) * scale;
}

/* "1,8,64" and power-of-two ranges "1:1M", or both: "1:64,1M" */
std::vector<size_t> parse_sizes(const std::string &text)
{
    std::vector<size_t> sizes;
    for (const std::string &item : split(text, ',')) {
        auto range = split(item, ':');
        if (range.size() == 1) {
            sizes.push_back(parse_size(range[0]));
        } else if (range.size() == 2) {
            size_t first = parse_size(range[0]), last = parse_size(range[1]);
            if ((first == 0) || (first > last)) {
                throw std::invalid_argument("bad size range '" + item +
                                            "' (use FIRST:LAST, 0 < FIRST "
                                            "<= LAST)");
            }
            for (size_t size = first; size <= last; size *= 2) {
                sizes.push_back(size);
            }
        } else {
            throw std::invalid_argument("bad size range '" + item + "'");
        }
    }
    return sizes;
}

std::vector<Test> parse_tests(const std::string &text)
{
    std::vector<Test> tests;
    for (const std::string &name : split(text, ',')) {
        if (name == "all") {
            for (const TestInfo &info : kTests) {
                tests.push_back(info.test);
            }
            continue;
        }
        auto it =
                std::find_if(std::begin(kTests), std::end(kTests),
                             [&](const TestInfo &t) { return name == t.name; });
        if (it == std::end(kTests)) {
            throw std::invalid_argument("unknown test '" + name + "'");
        }
        tests.push_back(it->test);
    }
    return tests;
}

uint64_t parse_count(const char *text, const char *what)
{
    char              *end;
    unsigned long long value = strtoull(text, &end, 10);
    if ((*end != '\0') || (end == text)) {
        throw std::invalid_argument(std::string("bad ") + what + " '" + text +
                                    "'");
    }
    return value;
}

} // namespace

void print_usage()
{
    std::printf(
            "Usage: ucx_ifunc_perftest [HOST] [options]\n"
            "  Without HOST: the server, waiting for a client. With HOST: the\n"
            "  client, which runs the tests against the server on HOST and\n"
            "  prints the results. -l runs both on this host.\n"
            "\n"
            "  -t TESTS   comma-separated, or all; default: those of active\n"
            "             messages and the default path (no remote memory\n"
            "             access, which over TCP lets any peer write this\n"
            "             process); see below\n"
            "  -s SIZES   payload sizes: list and power-of-two ranges, e.g.\n"
            "             1,8,64 or 1:1M (default 8)\n"
            "  -n ITERS   measured iterations (default: chosen per size)\n"
            "  -w WARMUP  warm-up iterations, 0 for none (default: chosen per "
            "size)\n"
            "  -p PORT    out-of-band TCP port (default 13337; with -l, 0 "
            "picks "
            "a\n"
            "             free one)\n"
            "  -c CPUS    pin to CPU; with -l, SERVER,CLIENT (e.g. 0,1)\n"
            "  -l         loopback: run server and client on this host\n"
            "  -f         print final numbers only (no banner)\n"
            "  -v         print CSV\n"
            "  -L DIR     directory of perf_bump.so and perf_bigcode.so\n"
            "             (default: $UCX_IFUNC_LIB_DIR, else the installed "
            "one)\n"
            "  -h, --help print this help and exit\n"
            "  --version  print the version and exit\n"
            "\n"
            "  UCX_TLS selects the transport, e.g. UCX_TLS=sm or "
            "UCX_TLS=tcp.\n"
            "\n"
            "Tests (*_lat: ping-pong latency; *_bw: message rate):\n");
    /* A latency test and the rate test after it share one line. */
    size_t i = 0;
    while (i < kTestCount) {
        std::string names   = kTests[i].name;
        const char *summary = kTests[i].summary;
        if ((i + 1 < kTestCount) && !kTests[i + 1].latency) {
            names += std::string(", ") + kTests[++i].name;
        }
        std::printf("  %-31s %s\n", names.c_str(), summary);
        ++i;
    }
}

Options parse_options(int argc, char **argv)
{
    Options options;
    options.sizes = {8};
    /* By default the tests that need no remote memory access: a context
     * with it lets any peer that reaches it over TCP write the process
     * (-t all asks for the others too). */
    for (const TestInfo &info : kTests) {
        if (!needs_rma(info.test)) {
            options.tests.push_back(info.test);
        }
    }

    for (int i = 1; i < argc; ++i) {
        std::string arg   = argv[i];
        auto        value = [&]() -> const char        *{
            if (i + 1 >= argc) {
                throw std::invalid_argument("option " + arg + " needs a value");
            }
            return argv[++i];
        };
        if (arg == "-t") {
            options.tests = parse_tests(value());
        } else if (arg == "-s") {
            options.sizes = parse_sizes(value());
        } else if (arg == "-n") {
            options.iterations = parse_count(value(), "iteration count");
            if (*options.iterations == 0) {
                throw std::invalid_argument("-n must be at least 1");
            }
        } else if (arg == "-w") {
            options.warmup = parse_count(value(), "warm-up count");
        } else if (arg == "-p") {
            options.port = int(parse_count(value(), "port"));
        } else if (arg == "-c") {
            for (const std::string &cpu : split(value(), ',')) {
                options.cpus.push_back(int(parse_count(cpu.c_str(), "CPU")));
            }
        } else if (arg == "-L") {
            options.lib_dir = value();
        } else if (arg == "-l") {
            options.loopback = true;
        } else if (arg == "-f") {
            options.final_only = true;
        } else if (arg == "-v") {
            options.csv = true;
        } else if ((arg[0] != '-') && options.host.empty()) {
            options.host = arg;
        } else {
            throw std::invalid_argument("unknown option '" + arg + "'");
        }
    }
    if (options.loopback && !options.host.empty()) {
        throw std::invalid_argument("-l runs both sides here: give no HOST");
    }
    if (options.tests.empty() || options.sizes.empty()) {
        throw std::invalid_argument("no tests or no sizes to run");
    }
    return options;
}

RunParams make_run_params(const Options &options, Test test, size_t size)
{
    /* Enough messages for stable numbers, fewer for large payloads so that
     * one size takes well under a second or two. */
    size_t   bytes = std::max<size_t>(size, 64);
    uint64_t iterations =
            test_info(test).latency
                    ? std::clamp<uint64_t>((256ull << 20) / bytes, 200, 20000)
                    : std::clamp<uint64_t>((2ull << 30) / bytes, 500, 200000);
    RunParams params{};
    params.test         = test;
    params.payload_size = size;
    params.iterations   = options.iterations.value_or(iterations);
    params.warmup       = options.warmup.value_or(
                  std::max<uint64_t>(params.iterations / 10, 10));
    return params;
}

} // namespace perftest
