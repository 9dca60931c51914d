/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * ucx_ifunc_perftest: server without HOST, client with HOST, both with -l.
 * The client drives: for each test and size it sends the run parameters,
 * both sides run, and the client prints the result.
 */
#include "harness.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

using namespace perftest;

namespace {

/* What the client sends before each run, or to say it is done. */
struct Command {
    uint32_t  quit;
    uint32_t  reserved;
    RunParams run;
};

constexpr double kConnectTimeout = 30;
constexpr double kServerWait     = 24 * 3600.0;

void pin_to_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        throw std::runtime_error("cannot pin to CPU " + std::to_string(cpu));
    }
}

/* perf_bump.so: -L, else $UCX_IFUNC_LIB_DIR, else where it was installed. */
void select_lib_dir(const Options &options)
{
    if (!options.lib_dir.empty()) {
        setenv("UCX_IFUNC_LIB_DIR", options.lib_dir.c_str(), 1);
    } else {
        setenv("UCX_IFUNC_LIB_DIR", PERFTEST_LIB_DIR, 0);
    }
}

void serve(ucx_util::OobListener &listener)
{
    /* The client says which features its tests need before either side
     * makes its context. */
    ucx_util::OobChannel oob =
            listener.accept(ucx_util::deadline_in(kServerWait));
    auto features = oob_recv<uint64_t>(oob, ucx_util::deadline_in(kServerWait));
    Peer peer(std::move(oob), features);
    for (;;) {
        auto command = oob_recv<Command>(peer.oob(),
                                         ucx_util::deadline_in(kServerWait));
        if (command.quit) {
            return;
        }
        try {
            run_server(peer, command.run);
        } catch (const SetupError &) {
            /* The client reports it; wait for its next command. */
        }
    }
}

/* Returns whether every test ran: one that either side could not set up is
 * reported on stderr and skipped, and the others still run. */
bool drive(const Options &options, const std::string &host, int port)
{
    uint64_t features = UCP_FEATURE_AM;
    for (Test test : options.tests) {
        features |= needs_rma(test) ? uint64_t(UCP_FEATURE_RMA) : 0;
    }
    ucx_util::OobChannel oob = ucx_util::oob_connect(
            host, port, ucx_util::deadline_in(kConnectTimeout));
    oob_send(oob, features);
    Peer peer(std::move(oob), features);
    peer.set_server_host(host);
    print_banner(options);
    print_table_header(options);
    bool all_ran = true;
    for (Test test : options.tests) {
        for (size_t size : options.sizes) {
            Command command{};
            command.run = make_run_params(options, test, size);
            oob_send(peer.oob(), command);
            try {
                print_result(options, run_client(peer, command.run));
            } catch (const SetupError &e) {
                std::fprintf(stderr, "ucx_ifunc_perftest: %s (skipped)\n",
                             e.what());
                all_ran = false;
            }
        }
    }
    Command quit{};
    quit.quit = 1;
    oob_send(peer.oob(), quit);
    return all_ran;
}

/* -l: the server in a child process, the client here. The socket listens
 * before the fork, so the client never races the server's start, and -p 0
 * can pick a free port. */
int loopback(const Options &options)
{
    ucx_util::OobListener listener(options.port);
    pid_t                 server = fork();
    if (server == 0) {
        try {
            if (!options.cpus.empty()) {
                pin_to_cpu(options.cpus[0]);
            }
            serve(listener);
            _exit(0);
        } catch (const std::exception &e) {
            std::fprintf(stderr, "ucx_ifunc_perftest (server): %s\n", e.what());
            _exit(1);
        }
    }
    if (options.cpus.size() > 1) {
        pin_to_cpu(options.cpus[1]);
    }
    int  status  = 0;
    bool all_ran = false;
    try {
        all_ran = drive(options, "localhost", listener.port());
    } catch (...) {
        kill(server, SIGTERM);
        waitpid(server, &status, 0);
        throw;
    }
    waitpid(server, &status, 0);
    return (all_ran && WIFEXITED(status) && (WEXITSTATUS(status) == 0)) ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    Options options;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            if ((arg == "-h") || (arg == "--help")) {
                print_usage();
                return 0;
            }
            if (arg == "--version") {
                std::printf("ucx_ifunc_perftest %s\n", PACKAGE_VERSION);
                return 0;
            }
        }
        options = parse_options(argc, argv);
    } catch (const std::invalid_argument &e) {
        std::fprintf(stderr, "ucx_ifunc_perftest: %s (-h for help)\n",
                     e.what());
        return 2;
    }

    try {
        select_lib_dir(options);
        if (options.loopback) {
            return loopback(options);
        }
        if (!options.cpus.empty()) {
            pin_to_cpu(options.cpus[0]);
        }
        if (options.host.empty()) {
            ucx_util::OobListener listener(options.port);
            serve(listener);
        } else if (!drive(options, options.host, options.port)) {
            return 1;
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ucx_ifunc_perftest: %s\n", e.what());
        return 1;
    }
    return 0;
}
