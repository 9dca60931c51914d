/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Output: a table for people, or CSV (-v) with one row per test and size.
 */
#include "perftest.h"

#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstdlib>

namespace perftest {

namespace {

constexpr char kCsvHeader[] = "test,payload_size,frame_size,iterations,"
                              "lat_median_us,lat_avg_us,msg_rate,"
                              "bandwidth_MBps";
/* The name column fits the longest test name, ifunc_bigcode_full_lat. */
constexpr char kRule[] = "+------------------------+-----------+-----------+"
                         "------------+------------+------------+"
                         "--------------+------------+";

} // namespace

void print_banner(const Options &options)
{
    if (options.final_only || options.csv) {
        return;
    }
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    const char *tls = getenv("UCX_TLS");
    std::printf("# ucx_ifunc_perftest: UCX %u.%u.%u, UCX_TLS=%s", major, minor,
                release, tls ? tls : "(default)");
    if (!options.cpus.empty()) {
        std::printf(", CPUs");
        for (int cpu : options.cpus) {
            std::printf(" %d", cpu);
        }
    }
    std::printf("\n# latencies are one-way (half the round trip), in "
                "microseconds; frame = bytes sent per message\n");
}

void print_table_header(const Options &options)
{
    if (options.csv) {
        std::printf("%s\n", kCsvHeader);
    } else {
        std::printf("%s\n| %-22s | %9s | %9s | %10s | %10s | %10s | %12s | "
                    "%10s |\n%s\n",
                    kRule, "test", "payload", "frame", "iterations",
                    "lat med us", "lat avg us", "msg/s", "MB/s", kRule);
    }
    std::fflush(stdout);
}

void print_result(const Options &options, const Result &r)
{
    const char *name = test_info(r.test).name;
    if (options.csv) {
        std::printf(
                "%s,%zu,%zu,%llu,%.3f,%.3f,%.0f,%.3f\n", name, r.payload_size,
                r.frame_size, static_cast<unsigned long long>(r.iterations),
                r.lat_median_us, r.lat_avg_us, r.msg_rate, r.bandwidth_MBps);
    } else {
        /* A latency test measures no rate and a rate test no latency: the
         * table shows "-" there, where the CSV keeps 0 for scripts. */
        std::printf("| %-22s | %9zu | %9zu | %10llu | ", name, r.payload_size,
                    r.frame_size,
                    static_cast<unsigned long long>(r.iterations));
        if (test_info(r.test).latency) {
            std::printf("%10.3f | %10.3f | %12s | %10s |\n", r.lat_median_us,
                        r.lat_avg_us, "-", "-");
        } else {
            std::printf("%10s | %10s | %12.0f | %10.2f |\n", "-", "-",
                        r.msg_rate, r.bandwidth_MBps);
        }
    }
    std::fflush(stdout);
}

} // namespace perftest
