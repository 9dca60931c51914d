/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * ifunc_run_time: how long shipped code takes to run on the target, for
 * comparing one ifunc's native image with its bitcode compiled on arrival
 * (issue 32, point 4). One process, one core, the raw path (a message into
 * a buffer of this process, ucp_poll_ifunc runs it): the first message
 * (link or compile, then run) and the later ones, whose time is the scan's.
 * The ifunc is perf_scan (perf_scan.h): a sum over RECORDS records of 8
 * bytes, with a compare per record, a loop the compiler vectorises.
 *
 *     ifunc_run_time -L DIR [-n RECORDS] [-m MESSAGES] [-r ROUNDS]
 *
 * DIR holds perf_scan.so: built natively (the baseline ISA) or with
 * ucx-ifunc-cc --bitcode-only, which the target compiles for its CPU.
 * Prints a table and a CSV line (csv,first_ms,median_ns,min_ns,ns_per_record).
 */
#include "../common/ucx.h"
#include "perf_scan.h"

#include <ucp/api/ucp_ifunc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr size_t   kBufferSize = 1ul << 16;
constexpr uint32_t kKeyBelow   = 500;

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point start)
{
    return std::chrono::duration<double, std::nano>(Clock::now() - start)
            .count();
}

} // namespace

int main(int argc, char **argv)
{
    uint64_t records = 65536, messages = 2000, rounds = 5;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if ((arg == "-L") && (i + 1 < argc)) {
            setenv("UCX_IFUNC_LIB_DIR", argv[++i], 1);
        } else if ((arg == "-n") && (i + 1 < argc)) {
            records = std::strtoull(argv[++i], nullptr, 10);
        } else if ((arg == "-m") && (i + 1 < argc)) {
            messages = std::strtoull(argv[++i], nullptr, 10);
        } else if ((arg == "-r") && (i + 1 < argc)) {
            rounds = std::strtoull(argv[++i], nullptr, 10);
        } else {
            std::fprintf(stderr, "usage: ifunc_run_time -L DIR [-n RECORDS] "
                                 "[-m MESSAGES] [-r ROUNDS]\n");
            return 2;
        }
    }
    if ((records == 0) || (messages == 0) || (rounds == 0)) {
        std::fprintf(stderr, "ifunc_run_time: -n, -m and -r must be > 0\n");
        return 2;
    }

    try {
        ucx_util::Context context(UCP_FEATURE_RMA | UCP_FEATURE_AM);
        ucp_ifunc_h       ifunc;
        ucx_util::check(ucp_register_ifunc(context.get(), "perf_scan", &ifunc),
                        "ucp_register_ifunc(perf_scan) (see -L)");
        ucx_util::Worker    worker(context.get());
        ucx_util::Endpoint  ep(worker, worker.address());
        ucx_util::Memory    buffer(context.get(), kBufferSize);
        ucx_util::RemoteKey rkey(ep.get(), buffer.packed_rkey());
        uint64_t remote = reinterpret_cast<uint64_t>(buffer.address());

        /* The table, and the sum the scan must find. */
        std::vector<uint64_t> storage(2 + records);
        auto *table   = reinterpret_cast<perf_scan_table *>(storage.data());
        table->count  = records;
        uint64_t want = 0;
        for (uint64_t i = 0; i < records; ++i) {
            table->records[i].key   = uint32_t((i * 2654435761u) % 1000);
            table->records[i].value = uint32_t(i & 0xffff);
            want += (table->records[i].key < kKeyBelow)
                            ? table->records[i].value
                            : 0;
        }

        perf_scan_query query = {kKeyBelow, 0};
        ucp_ifunc_msg_t msg;
        ucx_util::check(
                ucp_ifunc_msg_create(ifunc, &query, sizeof(query), &msg),
                "ucp_ifunc_msg_create");
        auto send_run = [&]() {
            ucx_util::check(
                    ucp_ifunc_send_nbix(ep.get(), msg, remote, rkey.get()),
                    "ucp_ifunc_send_nbix");
            return ucp_poll_ifunc(context.get(), buffer.address(), kBufferSize,
                                  table);
        };

        /* The first message links (or compiles) the code, then runs. */
        table->sum            = 0;
        auto         start    = Clock::now();
        ucs_status_t status   = send_run();
        double       first_ns = ns_since(start);
        if ((status != UCS_OK) || (table->sum != want)) {
            throw std::runtime_error("the first message did not run or "
                                     "summed wrong (see the log)");
        }
        std::vector<double> per_message;
        for (uint64_t round = 0; round < rounds; ++round) {
            start = Clock::now();
            for (uint64_t m = 0; m < messages; ++m) {
                table->sum = 0;
                ucx_util::check(send_run(), "ucp_poll_ifunc");
            }
            per_message.push_back(ns_since(start) / double(messages));
            if (table->sum != want) {
                throw std::runtime_error("a later message summed wrong");
            }
        }
        ucp_ifunc_msg_free(msg);
        std::sort(per_message.begin(), per_message.end());
        double median = per_message[per_message.size() / 2];
        std::printf("%10s %12s %14s %12s %12s\n", "records", "first ms",
                    "median ns/msg", "min ns/msg", "ns/record");
        std::printf("%10llu %12.3f %14.1f %12.1f %12.3f\n",
                    (unsigned long long)records, first_ns / 1e6, median,
                    per_message.front(), median / double(records));
        std::printf("csv,%.3f,%.1f,%.1f,%.4f\n", first_ns / 1e6, median,
                    per_message.front(), median / double(records));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ifunc_run_time: %s\n", e.what());
        return 1;
    }
    return 0;
}
