/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The cost of the sandbox on the code it runs: each NAME is an ifunc built
 * natively (NAME.so) and for the sandbox (NAME_sbx.so, ucx-ifunc-cc
 * --sandbox) in $UCX_IFUNC_LIB_DIR. This process is source and target: it
 * builds each one's message, then runs it through ucp_poll_ifunc under
 * UCX_IFUNC_TRUST=library,sandboxed (the sandbox image runs in its slot),
 * natively and sandboxed in turn, and times only the polls.
 *
 *   overhead_bench [--rounds N] [--target-us US] KIND NAME...
 *
 * KIND says what the code is and what it gets:
 *   csmith  test/csmith/csmith_ifunc.c: each message runs the program as
 *           many times as make a native message last about US
 *           microseconds (default 2000)
 *   chase   chase_kernel.c, the pointer chase's ifunc: 1024 chases of
 *           256 hops over 2^20 nodes on one rank
 *   record  record_kernel.c: 16384 inserts of 150-byte records
 * Each side's target arguments lie in memory from
 * ucp_ifunc_sandbox_mem_alloc (granted to NAME_sbx): the same memory as
 * far as caches go. One CSV line a name on stdout:
 *   name,messages,native_ns,sandboxed_ns,ratio,min_ratio,max_ratio,same
 * with the median time of a message over N rounds (the sides alternate
 * round by round), the ratio of the medians and the spread of the
 * rounds' ratios, and whether both sides ended with the same result.
 * A name that takes over 30 s is left out, with a line on stderr.
 */
#include "overhead_kernels.h"

#include "../../examples/pointer_chase/chase_shared.h"
#include "../../tools/common/ucx.h"
#include "../csmith/csmith_result.h"

#include <ucp/api/ucp_ifunc.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace {

void check(ucs_status_t status, const std::string &what)
{
    if (status != UCS_OK) {
        throw std::runtime_error(what + ": " + ucs_status_string(status));
    }
}

/* Memory from the sandbox's allocator, granted to one name. */
class GrantedMemory {
public:
    GrantedMemory(size_t length, const std::string &granted_to)
        : length_((length + 4095) & ~size_t(4095))
    {
        check(ucp_ifunc_sandbox_mem_alloc(length_, nullptr, &address_),
              "ucp_ifunc_sandbox_mem_alloc");
        check(ucp_ifunc_sandbox_grant(address_, length_,
                                      UCP_IFUNC_SANDBOX_GRANT_READ |
                                              UCP_IFUNC_SANDBOX_GRANT_WRITE,
                                      granted_to.c_str(), nullptr),
              "ucp_ifunc_sandbox_grant");
    }
    ~GrantedMemory() { ucp_ifunc_sandbox_mem_free(address_); }
    GrantedMemory(const GrantedMemory &)            = delete;
    GrantedMemory &operator=(const GrantedMemory &) = delete;

    template <typename T>
    T *as()
    {
        return static_cast<T *>(address_);
    }
    char *bytes() { return as<char>(); }

private:
    size_t length_;
    void  *address_ = nullptr;
};

/* One ifunc's messages, from the source's context. */
class Messages {
public:
    Messages(ucp_context_h source, const std::string &name) : source_(source)
    {
        check(ucp_register_ifunc(source, name.c_str(), &handle_),
              "ucp_register_ifunc " + name);
    }
    ~Messages()
    {
        clear();
        ucp_deregister_ifunc(source_, handle_);
    }
    Messages(const Messages &)            = delete;
    Messages &operator=(const Messages &) = delete;

    void add(const void *source_args, size_t size)
    {
        ucp_ifunc_msg_t msg;
        check(ucp_ifunc_msg_create(handle_, const_cast<void *>(source_args),
                                   size, &msg),
              "ucp_ifunc_msg_create");
        msgs_.push_back(msg);
    }
    void clear()
    {
        for (ucp_ifunc_msg_t &msg : msgs_) {
            ucp_ifunc_msg_free(msg);
        }
        msgs_.clear();
    }
    const std::vector<ucp_ifunc_msg_t> &all() const { return msgs_; }

private:
    ucp_context_h                source_;
    ucp_ifunc_h                  handle_ = nullptr;
    std::vector<ucp_ifunc_msg_t> msgs_;
};

using Clock = std::chrono::steady_clock;

/* The target: polls a copy of each frame, timing only the poll. */
class Target {
public:
    Target() : buffer_(kBufferSize / 8) {}

    /* Seconds to run every message of @a messages once. */
    double run(const Messages &messages, void *target_args)
    {
        double took = 0;
        for (const ucp_ifunc_msg_t &msg : messages.all()) {
            if (msg.frame_size > kBufferSize) {
                throw std::runtime_error("frame too large");
            }
            memcpy(buffer_.data(), msg.frame, msg.frame_size);
            auto         start  = Clock::now();
            ucs_status_t status = ucp_poll_ifunc(context_.get(), buffer_.data(),
                                                 kBufferSize, target_args);
            took += std::chrono::duration<double>(Clock::now() - start).count();
            check(status, "ucp_poll_ifunc");
        }
        return took;
    }

private:
    static constexpr size_t kBufferSize = 4u << 20;
    ucx_util::Context       context_;
    std::vector<uint64_t>   buffer_;
};

/* What one side (native or sandboxed) of a kernel needs. */
struct Side {
    std::unique_ptr<Messages>      messages;
    std::unique_ptr<GrantedMemory> memory;
    std::function<void()>          reset;  /* before each round */
    std::function<uint64_t()>      result; /* to compare the sides with */
};

double median(std::vector<double> values)
{
    std::sort(values.begin(), values.end());
    size_t n = values.size();
    return (n % 2) ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

struct Options {
    int    rounds    = 31;
    double target_us = 2000;
};

/* --- kernels ------------------------------------------------------------ */

constexpr unsigned kSecondsPerName = 30;
constexpr uint64_t kChaseNodes     = 1u << 20;
constexpr uint32_t kChaseHops      = 256;
constexpr uint32_t kChaseMsgs      = 1024;
constexpr int      kRecordMsgs     = 16384;
constexpr size_t   kRecordBytes    = 150;

/* The native side first (*runs 0): it sets *runs from its second message
 * of one run; the sandboxed side gets the same two messages, so that both
 * start the measured ones from the same globals. */
void setup_csmith(Side &side, ucp_context_h source, const std::string &name,
                  const std::string &granted_to, Target &target,
                  double target_us, uint32_t *runs)
{
    side.messages = std::make_unique<Messages>(source, name);
    side.memory   = std::make_unique<GrantedMemory>(4096, granted_to);
    auto *result  = side.memory->as<struct csmith_result>();
    side.reset    = [] {};
    side.result   = [result] { return uint64_t(result->checksum); };
    uint32_t one  = 1;
    side.messages->add(&one, sizeof(one));
    target.run(*side.messages, result); /* links */
    double once = target.run(*side.messages, result);
    if (*runs == 0) {
        *runs = uint32_t(std::clamp(target_us * 1e-6 / once, 1.0, 1e6));
    }
    side.messages->clear();
    side.messages->add(runs, sizeof(*runs));
}

/* examples/pointer_chase's structures on one rank, the origin of every
 * chase. */
struct ChaseMemory {
    chase_target_args_t args;
    chase_results_t     results;
    uint64_t            value[kChaseMsgs];
    uint32_t            completed[kChaseMsgs];
    chase_node_t        nodes[kChaseNodes];
};

void setup_chase(Side &side, ucp_context_h source, const std::string &name,
                 const std::string &granted_to)
{
    side.messages = std::make_unique<Messages>(source, name);
    side.memory =
            std::make_unique<GrantedMemory>(sizeof(ChaseMemory), granted_to);
    auto *memory = side.memory->as<ChaseMemory>();
    /* One random cycle through every node, the example's structure. */
    std::vector<uint64_t> order(kChaseNodes);
    for (uint64_t i = 0; i < kChaseNodes; ++i) {
        order[i] = i;
    }
    std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
    for (uint64_t i = 0; i < kChaseNodes; ++i) {
        chase_node_t &node = memory->nodes[order[i]];
        node.key           = order[i];
        node.value         = order[i] * 3 + 1;
        node.next          = order[(i + 1) % kChaseNodes];
    }
    memory->results.value     = memory->value;
    memory->results.completed = memory->completed;
    memory->args.nodes        = memory->nodes;
    memory->args.rank         = 0;
    memory->args.nprocs       = 1;
    memory->args.results      = &memory->results;
    std::mt19937_64 random(7);
    for (uint32_t i = 0; i < kChaseMsgs; ++i) {
        chase_msg_t msg = {};
        msg.index       = random() % kChaseNodes;
        msg.chase_id    = i;
        msg.hops        = kChaseHops;
        side.messages->add(&msg, sizeof(msg));
    }
    side.reset  = [memory] { memory->results.count = 0; };
    side.result = [memory] {
        uint64_t sum = memory->results.count + memory->args.errors;
        for (uint64_t value : memory->value) {
            sum = sum * 31 + value;
        }
        return sum;
    };
}

void setup_record(Side &side, ucp_context_h source, const std::string &name,
                  const std::string &granted_to)
{
    side.messages = std::make_unique<Messages>(source, name);
    size_t heap   = kRecordMsgs * (kRecordBytes + 64);
    side.memory   = std::make_unique<GrantedMemory>(
            sizeof(record_kernel_args_t) + 2 * kRecordMsgs * 8 + heap,
            granted_to);
    auto *args      = side.memory->as<record_kernel_args_t>();
    args->ids       = reinterpret_cast<uint64_t *>(args + 1);
    args->rows      = args->ids + kRecordMsgs;
    args->heap      = reinterpret_cast<char *>(args->rows + kRecordMsgs);
    args->heap_size = heap;
    args->capacity  = kRecordMsgs;
    /* Ids mostly ascending, as the example's generator writes them, some
     * out of order. */
    std::mt19937_64 random(11);
    for (int i = 0; i < kRecordMsgs; ++i) {
        uint64_t    id = (random() % 8 == 0) ? random() % (uint64_t(i) * 10 + 1)
                                             : uint64_t(i) * 10 + 5;
        std::string text = std::to_string(id) + "\tname" + std::to_string(i) +
                           "\tcity" + std::to_string(i % 97) + "\t";
        text.append(kRecordBytes - text.size(), char('a' + i % 26));
        side.messages->add(text.data(), text.size());
    }
    side.reset = [args] {
        args->count     = 0;
        args->heap_used = 0;
    };
    side.result = [args] {
        uint64_t sum = args->count * 1000003 + args->failed;
        for (uint64_t i = 0; i < args->count; ++i) {
            sum = sum * 31 + args->ids[i];
        }
        return sum;
    };
}

/* Runs both sides round by round; prints the CSV line. */
void measure(const std::string &name, Side &native, Side &sandboxed,
             Target &target, const Options &options)
{
    std::vector<double> native_s, sandboxed_s, ratios;
    size_t              n = native.messages->all().size();
    for (int round = -1; round < options.rounds; ++round) { /* -1: warm-up */
        native.reset();
        double a = target.run(*native.messages, native.memory->bytes());
        sandboxed.reset();
        double b = target.run(*sandboxed.messages, sandboxed.memory->bytes());
        if (round >= 0) {
            native_s.push_back(a / n);
            sandboxed_s.push_back(b / n);
            ratios.push_back(b / a);
        }
    }
    double a = median(native_s), b = median(sandboxed_s);
    std::printf("%s,%zu,%.0f,%.0f,%.4f,%.4f,%.4f,%s\n", name.c_str(), n,
                a * 1e9, b * 1e9, b / a,
                *std::min_element(ratios.begin(), ratios.end()),
                *std::max_element(ratios.begin(), ratios.end()),
                (native.result() == sandboxed.result()) ? "yes" : "no");
    std::fflush(stdout);
}

/* Measures one name; the exit status: 0, or 1 when the sides disagree
 * or something failed. */
int measure_name(const std::string &kind, const std::string &name,
                 const Options &options)
{
    try {
        ucx_util::Context source;
        Target            target;
        std::string       sbx = name + "_sbx";
        Side              native, sandboxed;
        if (kind == "csmith") {
            uint32_t runs = 0;
            setup_csmith(native, source.get(), name, sbx, target,
                         options.target_us, &runs);
            setup_csmith(sandboxed, source.get(), sbx, sbx, target,
                         options.target_us, &runs);
        } else if (kind == "chase") {
            setup_chase(native, source.get(), name, sbx);
            setup_chase(sandboxed, source.get(), sbx, sbx);
        } else {
            setup_record(native, source.get(), name, sbx);
            setup_record(sandboxed, source.get(), sbx, sbx);
        }
        measure(name, native, sandboxed, target, options);
        return (native.result() == sandboxed.result()) ? 0 : 1;
    } catch (const std::exception &err) {
        std::fprintf(stderr, "overhead_bench: %s: %s\n", name.c_str(),
                     err.what());
        return 1;
    }
}

int usage()
{
    std::fprintf(stderr, "usage: overhead_bench [--rounds N] [--target-us US] "
                         "csmith|chase|record NAME...\n");
    return 2;
}

} // namespace

int main(int argc, char **argv)
{
    Options                  options;
    std::string              kind;
    std::vector<std::string> names;
    for (int i = 1; i < argc; ++i) {
        bool has_value = (i + 1 < argc);
        if (!std::strcmp(argv[i], "--rounds") && has_value) {
            options.rounds = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--target-us") && has_value) {
            options.target_us = std::atof(argv[++i]);
        } else if (argv[i][0] == '-') {
            return usage();
        } else if (kind.empty()) {
            kind = argv[i];
        } else {
            names.push_back(argv[i]);
        }
    }
    if (names.empty() || (options.rounds < 1) ||
        ((kind != "csmith") && (kind != "chase") && (kind != "record"))) {
        return usage();
    }
    /* Read when each context first uses ifuncs: the native image is
     * trusted as its library's, the other runs in its slot. */
    setenv("UCX_IFUNC_TRUST", "library,sandboxed", 1);
    setenv("UCX_IFUNC_SANDBOX_BUDGET", "10s", 0);
    std::printf("name,messages,native_ns,sandboxed_ns,ratio,min_ratio,"
                "max_ratio,same\n");
    std::fflush(stdout);
    int failed = 0;
    for (const std::string &name : names) {
        /* Each name in a child of its own, UCX included: a csmith program
         * run again starts from the globals its last run left, and some
         * then loop for long (natively too, where nothing ends them). */
        pid_t child = fork();
        if (child == 0) {
            alarm(kSecondsPerName);
            _exit(measure_name(kind, name, options));
        }
        int status = 0;
        waitpid(child, &status, 0);
        if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGALRM)) {
            std::fprintf(stderr, "overhead_bench: %s left out: over %u s\n",
                         name.c_str(), kSecondsPerName);
        } else if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
            ++failed;
        }
    }
    return failed ? 1 : 0;
}
