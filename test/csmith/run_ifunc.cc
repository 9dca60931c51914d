/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The driver of the csmith differential test: ships wrapped csmith programs
 * (csmith_ifunc.c) from this process, the source, to a target process
 * through the real runtime, and prints the checksum each one computed
 * there.
 *
 *   csmith_ifunc_run [--timeout SECONDS] [--target-program PATH]
 *                    [--target-runner 'CMD ARGS'] [--target-lib-dir DIR]
 *                    [--target-machine E] [--sandbox] [--repeat RUNS]
 *                    NAME...
 *
 * Both processes load NAME.so from $UCX_IFUNC_LIB_DIR (the target checks
 * that the image it receives is its library's, the default trust policy);
 * the target from --target-lib-dir instead when given. The target is this
 * program again (or --target-program), started with exec so that it is a
 * fresh process, optionally under a runner: for a target of another
 * architecture, a build of this program for it under qemu-aarch64, say,
 * with that architecture's libraries in --target-lib-dir, and its ELF
 * machine number as --target-machine (183 for aarch64): the message then
 * carries the library's image for that machine (ucx-ifunc-cc --target
 * builds libraries with an image per ISA). With --sandbox the libraries
 * hold sandbox images (ucx-ifunc-cc --sandbox): the target runs them under
 * UCX_IFUNC_TRUST=sandboxed alone, without a library of its own, and its
 * result struct lies in memory from ucp_ifunc_sandbox_mem_alloc granted to
 * every NAME, the only memory of the target the code can write. One line
 * per name on stdout:
 *
 *   NAME ok CHECKSUM STATUS [bitcode]
 *                                the program ran; CHECKSUM as csmith prints
 *                                it; "bitcode" when the target ran code it
 *                                compiled from the library's bitcode
 *   NAME rejected REASON         the target refused the message
 *   NAME failed REASON           the source could not build or send it
 *   NAME timeout                 no answer in time (the target is killed)
 *   NAME target-died REASON      the target exited or crashed
 *   NAME not-run                 an earlier name ended the target
 *
 * With --repeat RUNS, each name that ran is shipped once more, to run its
 * program RUNS times in one message (the code is linked or compiled by
 * then), and a second line gives the target's time per run:
 *
 *   NAME time NS RUNS [bitcode]  ucp_poll_ifunc's time over RUNS, in ns
 *                                (the target thread's CPU time)
 *
 * Exit status: 0 when every name ran, 1 otherwise, 2 for bad usage.
 */
#include "csmith_result.h"

#include "../../tools/common/ucx.h"

#include <ucp/api/ucp_ifunc.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace {

/* Room for the frame: header, code image of a csmith program (tens of
 * KiB at most with the generator's limits) and the 4-byte payload. */
constexpr size_t kBufferSize   = 16u << 20;
constexpr double kSetupTimeout = 60;

struct TargetInfo {
    uint64_t buffer_address;
    uint64_t buffer_size;
};

/* The target's answer to each message. */
struct TargetReply {
    int32_t              poll_status; /* ucs_status_t of ucp_poll_ifunc */
    uint32_t             ran;         /* 1 when NAME_main stored a result */
    struct csmith_result result;
    uint64_t             poll_ns; /* ucp_poll_ifunc's thread CPU time */
};

/* --- target ------------------------------------------------------------ */

/* Where the shipped code writes its result: the target's stack, or for
 * sandboxed code a page granted to each of @a sandboxed_names. */
class ResultMemory {
public:
    explicit ResultMemory(const std::vector<std::string> &sandboxed_names)
    {
        if (sandboxed_names.empty()) {
            return;
        }
        check(ucp_ifunc_sandbox_mem_alloc(kPage, nullptr, &granted_),
              "ucp_ifunc_sandbox_mem_alloc");
        for (const std::string &name : sandboxed_names) {
            check(ucp_ifunc_sandbox_grant(granted_, kPage,
                                          UCP_IFUNC_SANDBOX_GRANT_READ |
                                                  UCP_IFUNC_SANDBOX_GRANT_WRITE,
                                          name.c_str(), nullptr),
                  "ucp_ifunc_sandbox_grant");
        }
    }

    ~ResultMemory()
    {
        if (granted_ != nullptr) {
            ucp_ifunc_sandbox_mem_free(granted_);
        }
    }

    ResultMemory(const ResultMemory &)            = delete;
    ResultMemory &operator=(const ResultMemory &) = delete;

    /* Cleared, for the next message. */
    struct csmith_result *fresh()
    {
        struct csmith_result *result =
                (granted_ != nullptr)
                        ? static_cast<struct csmith_result *>(granted_)
                        : &local_;
        *result = {};
        return result;
    }

private:
    static constexpr size_t kPage = 4096;

    static void check(ucs_status_t status, const char *what)
    {
        if (status != UCS_OK) {
            throw std::runtime_error(std::string(what) + ": " +
                                     ucs_status_string(status));
        }
    }

    void                *granted_ = nullptr;
    struct csmith_result local_   = {};
};

/* This thread's CPU time: what a run costs, without the time other
 * processes of a busy machine had the core. */
uint64_t thread_cpu_ns()
{
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return uint64_t(now.tv_sec) * 1000000000u + uint64_t(now.tv_nsec);
}

/* Runs messages until the source closes the channel. Every message gets a
 * reply, also a rejected one, so that the source never waits for nothing.
 * @a sandboxed_names: the names whose sandboxed code may run. */
int serve_target(int oob_fd, const std::vector<std::string> &sandboxed_names)
{
    ResultMemory         result_memory(sandboxed_names);
    ucx_util::OobChannel oob(oob_fd);
    ucx_util::Context    context(UCP_FEATURE_RMA);
    ucx_util::Worker     worker(context.get());
    ucx_util::Memory     buffer(context.get(), kBufferSize);

    oob.send(worker.address());
    ucx_util::oob_send(oob, TargetInfo{(uint64_t)(uintptr_t)buffer.address(),
                                       (uint64_t)buffer.size()});
    oob.send(buffer.packed_rkey());

    for (unsigned spin = 0;; ++spin) {
        /* A poll(2) per iteration would slow down shared memory; the
         * channel only matters once the source is done. */
        if (((spin % 4096) == 0) && oob.readable()) {
            return 0; /* closed by the source: nothing more is coming */
        }
        worker.progress();
        struct csmith_result *result = result_memory.fresh();
        uint64_t              start  = thread_cpu_ns();
        ucs_status_t status = ucp_poll_ifunc(context.get(), buffer.address(),
                                             buffer.size(), result);
        if (status == UCS_ERR_NO_MESSAGE) {
            continue;
        }
        TargetReply reply = {};
        reply.poll_ns     = thread_cpu_ns() - start;
        reply.poll_status = status;
        reply.ran         = (status == UCS_OK) ? 1 : 0;
        reply.result      = *result;
        ucx_util::oob_send(oob, reply);
    }
}

/* --- source ------------------------------------------------------------ */

std::vector<std::string> split_words(const std::string &text)
{
    std::istringstream       in(text);
    std::vector<std::string> words;
    for (std::string word; in >> word;) {
        words.push_back(word);
    }
    return words;
}

struct TargetCommand {
    std::string program; /* empty: this program */
    std::string runner;  /* words to put before it */
    std::string lib_dir; /* its UCX_IFUNC_LIB_DIR, if not the source's */
    std::vector<std::string> sandboxed; /* names it runs sandboxed, if any */
};

/* Starts the target: [runner...] PROGRAM --serve-target FD [NAME...], the
 * names of sandboxed code last. */
pid_t spawn_target(const TargetCommand &command, int target_fd)
{
    std::string program = command.program;
    if (program.empty()) {
        char    self[4096];
        ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (len <= 0) {
            throw std::runtime_error(
                    "cannot find this program (/proc/self/exe)");
        }
        program.assign(self, size_t(len));
    }

    std::vector<std::string> argv_words = split_words(command.runner);
    argv_words.push_back(program);
    argv_words.push_back("--serve-target");
    argv_words.push_back(std::to_string(target_fd));
    argv_words.insert(argv_words.end(), command.sandboxed.begin(),
                      command.sandboxed.end());

    pid_t pid = fork();
    if (pid < 0) {
        throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
        if (!command.lib_dir.empty()) {
            setenv("UCX_IFUNC_LIB_DIR", command.lib_dir.c_str(), 1);
        }
        if (!command.sandboxed.empty()) {
            /* Nothing but the verifier vouches for the code. */
            setenv("UCX_IFUNC_TRUST", "sandboxed", 1);
        }
        std::vector<char *> argv;
        for (std::string &word : argv_words) {
            argv.push_back(word.data());
        }
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        std::fprintf(stderr, "csmith_ifunc_run: cannot start %s: %s\n", argv[0],
                     std::strerror(errno));
        _exit(127);
    }
    return pid;
}

std::string describe_exit(int wait_status)
{
    if (WIFSIGNALED(wait_status)) {
        return std::string("signal ") + strsignal(WTERMSIG(wait_status));
    }
    return "exit status " + std::to_string(WEXITSTATUS(wait_status));
}

class Source {
public:
    Source(int oob_fd, pid_t target, double timeout, uint16_t machine)
        : oob_(oob_fd), target_(target), timeout_(timeout), machine_(machine),
          context_(UCP_FEATURE_RMA), worker_(context_.get())
    {
        auto deadline = ucx_util::deadline_in(kSetupTimeout);
        auto address  = oob_.recv(deadline);
        info_         = ucx_util::oob_recv<TargetInfo>(oob_, deadline);
        auto rkey     = oob_.recv(deadline);
        ep_           = std::make_unique<ucx_util::Endpoint>(worker_, address);
        rkey_         = std::make_unique<ucx_util::RemoteKey>(ep_->get(), rkey);
    }

    ~Source()
    {
        rkey_.reset();
        ep_.reset();
        if (target_ > 0) {
            kill(target_, SIGKILL);
            waitpid(target_, nullptr, 0);
        }
    }

    /* Ships NAME, to run its program RUNS times, and prints its line;
     * false when the target is gone and later names cannot run. */
    bool run(const std::string &name, bool *ok, uint32_t runs = 1)
    {
        *ok = false;
        ucp_ifunc_h  handle;
        ucs_status_t status =
                ucp_register_ifunc(context_.get(), name.c_str(), &handle);
        if (status != UCS_OK) {
            print(name, "failed register: ", ucs_status_string(status));
            return true;
        }
        ucp_ifunc_msg_t msg;
        status = ucp_ifunc_msg_create(handle, &runs, sizeof(runs), &msg);
        if (status != UCS_OK) {
            ucp_deregister_ifunc(context_.get(), handle);
            print(name, "failed msg_create: ", ucs_status_string(status));
            return true;
        }
        ucp_ifunc_send_params_t params = {};
        params.field_mask =
                UCP_IFUNC_SEND_FIELD_WORKER | UCP_IFUNC_SEND_FIELD_REMOTE_SIZE;
        params.worker      = worker_.get();
        params.remote_size = info_.buffer_size;
        if (machine_ != 0) {
            params.field_mask |= UCP_IFUNC_SEND_FIELD_MACHINE;
            params.machine = machine_;
        }
        status = ucp_ifunc_send_nbx(ep_->get(), msg, info_.buffer_address,
                                    rkey_->get(), &params);
        if (!UCS_STATUS_IS_ERR(status)) {
            status = ep_->flush(ucx_util::deadline_in(timeout_));
        }
        ucp_ifunc_msg_free(msg);
        ucp_deregister_ifunc(context_.get(), handle);
        if (status != UCS_OK) {
            print(name, "failed send: ", ucs_status_string(status));
            return true;
        }
        return await_reply(name, ok, runs);
    }

    /* Closes the channel, which tells the target to exit, and reaps it. */
    void finish()
    {
        oob_          = ucx_util::OobChannel();
        auto deadline = ucx_util::deadline_in(10);
        int  wait_status;
        while (waitpid(target_, &wait_status, WNOHANG) == 0) {
            if (ucx_util::Clock::now() > deadline) {
                return; /* the destructor kills it */
            }
            worker_.progress();
            usleep(1000);
        }
        target_ = -1;
    }

private:
    static void print(const std::string &name, const char *what,
                      const char *detail = "")
    {
        std::printf("%s %s%s\n", name.c_str(), what, detail);
        std::fflush(stdout);
    }

    /* Progresses the worker (over TCP the frame only moves while it does)
     * until the target answers, dies or runs out of time. */
    bool await_reply(const std::string &name, bool *ok, uint32_t runs)
    {
        auto deadline = ucx_util::deadline_in(timeout_);
        while (!oob_.readable()) {
            worker_.progress();
            if (ucx_util::Clock::now() > deadline) {
                print(name, "timeout");
                return false;
            }
        }
        TargetReply reply;
        try {
            reply = ucx_util::oob_recv<TargetReply>(oob_, deadline);
        } catch (const std::exception &) {
            int wait_status = 0;
            waitpid(target_, &wait_status, 0);
            target_ = -1;
            print(name, "target-died ", describe_exit(wait_status).c_str());
            return false;
        }
        auto status = static_cast<ucs_status_t>(reply.poll_status);
        if (!reply.ran) {
            print(name, "rejected ", ucs_status_string(status));
        } else if (reply.result.magic != CSMITH_RESULT_MAGIC) {
            print(name, "failed: the result does not carry the payload's "
                        "magic word");
        } else if (runs > 1) {
            /* A timing run: the checksum is of the runs after the first,
             * which start from the globals the earlier ones left. */
            std::printf("%s time %.1f %u%s\n", name.c_str(),
                        double(reply.poll_ns) / runs, (unsigned)runs,
                        (reply.result.flags & CSMITH_RESULT_FROM_BITCODE)
                                ? " bitcode"
                                : "");
            std::fflush(stdout);
            *ok = true;
        } else {
            std::printf("%s ok %X %d%s\n", name.c_str(),
                        (unsigned)reply.result.checksum,
                        (int)reply.result.status,
                        (reply.result.flags & CSMITH_RESULT_FROM_BITCODE)
                                ? " bitcode"
                                : "");
            std::fflush(stdout);
            *ok = true;
        }
        return true;
    }

    ucx_util::OobChannel                 oob_;
    pid_t                                target_;
    double                               timeout_;
    uint16_t                             machine_; /* 0: this process's */
    ucx_util::Context                    context_;
    ucx_util::Worker                     worker_;
    TargetInfo                           info_{};
    std::unique_ptr<ucx_util::Endpoint>  ep_;
    std::unique_ptr<ucx_util::RemoteKey> rkey_;
};

int usage()
{
    std::fprintf(stderr,
                 "usage: csmith_ifunc_run [--timeout SECONDS] "
                 "[--target-program PATH] [--target-runner 'CMD ARGS'] "
                 "[--target-lib-dir DIR] [--target-machine E] [--sandbox] "
                 "[--repeat RUNS] NAME...\n");
    return 2;
}

} // namespace

int main(int argc, char **argv)
{
    if ((argc >= 3) && !std::strcmp(argv[1], "--serve-target")) {
        try {
            return serve_target(
                    std::atoi(argv[2]),
                    std::vector<std::string>(argv + 3, argv + argc));
        } catch (const std::exception &err) {
            std::fprintf(stderr, "csmith_ifunc_run (target): %s\n", err.what());
            return 1;
        }
    }

    double                   timeout = 20;
    TargetCommand            target_command;
    uint16_t                 machine = 0;
    bool                     sandbox = false;
    uint32_t                 repeat  = 0;
    std::vector<std::string> names;
    for (int i = 1; i < argc; ++i) {
        bool has_value = (i + 1 < argc);
        if (!std::strcmp(argv[i], "--timeout") && has_value) {
            timeout = std::atof(argv[++i]);
        } else if (!std::strcmp(argv[i], "--target-program") && has_value) {
            target_command.program = argv[++i];
        } else if (!std::strcmp(argv[i], "--target-runner") && has_value) {
            target_command.runner = argv[++i];
        } else if (!std::strcmp(argv[i], "--target-lib-dir") && has_value) {
            target_command.lib_dir = argv[++i];
        } else if (!std::strcmp(argv[i], "--target-machine") && has_value) {
            machine = uint16_t(std::atoi(argv[++i]));
        } else if (!std::strcmp(argv[i], "--sandbox")) {
            sandbox = true;
        } else if (!std::strcmp(argv[i], "--repeat") && has_value) {
            repeat = uint32_t(std::strtoul(argv[++i], nullptr, 10));
        } else if (argv[i][0] == '-') {
            return usage();
        } else {
            names.push_back(argv[i]);
        }
    }
    if (names.empty() || (timeout <= 0)) {
        return usage();
    }
    if (sandbox) {
        target_command.sandboxed = names;
    }

    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        std::perror("csmith_ifunc_run: socketpair");
        return 1;
    }
    /* The target's end must survive its exec. */
    int target_fd = dup(fds[1]);
    close(fds[1]);
    pid_t target;
    try {
        target = spawn_target(target_command, target_fd);
    } catch (const std::exception &err) {
        std::fprintf(stderr, "csmith_ifunc_run: %s\n", err.what());
        return 1;
    }
    close(target_fd);

    size_t all_ok = 0, done = 0;
    bool   have_source = false; /* its destructor ends the target */
    try {
        Source source(fds[0], target, timeout, machine);
        have_source = true;
        for (; done < names.size(); ++done) {
            bool ok;
            bool target_alive = source.run(names[done], &ok);
            if (ok && target_alive && (repeat > 1)) {
                bool timed;
                target_alive = source.run(names[done], &timed, repeat);
            }
            all_ok += ok ? 1 : 0;
            if (!target_alive) {
                ++done;
                break;
            }
        }
        source.finish();
    } catch (const std::exception &err) {
        std::fprintf(stderr, "csmith_ifunc_run: %s\n", err.what());
        if (!have_source) {
            /* Setup failed: the target may wait for us forever. */
            kill(target, SIGKILL);
            waitpid(target, nullptr, 0);
        }
    }
    for (; done < names.size(); ++done) {
        std::printf("%s not-run\n", names[done].c_str());
    }
    return (all_ok == names.size()) ? 0 : 1;
}
