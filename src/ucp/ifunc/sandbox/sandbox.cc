/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/sandbox/sandbox.h"

#include "ucp/ifunc/base/api_guard.h"
#include "ucp/ifunc/base/config.h"

#include <ucp/api/ucp_ifunc.h>

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <map>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <thread>
#include <unordered_map>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <sys/auxv.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif

/* The runtime is x86-64 Linux only; elsewhere slots cannot be made and
 * sandbox code is refused (sandbox_supported() says why). */
#if defined(__x86_64__) && defined(__linux__)
#define UCX_IFUNC_SANDBOX_X86 1
#else
#define UCX_IFUNC_SANDBOX_X86 0
#endif

namespace ucx_ifunc {
namespace sandbox {
namespace {

constexpr uint64_t kPage = 4096;
/* Twice a slot, so that a 4 GiB-aligned slot lies inside. */
constexpr uint64_t kReserve = 2 * kSlotSize;
/* The watchdog's signal: sent to a thread over its budget. */
const int        kBudgetSignal = SIGRTMIN + 5;
constexpr size_t kAltStackSize = 64 * 1024;

uint64_t round_up(uint64_t value, uint64_t align)
{
    return (value + align - 1) & ~(align - 1);
}

} // namespace
} // namespace sandbox
} // namespace ucx_ifunc

#if UCX_IFUNC_SANDBOX_X86
/* The state of the thread in a sandbox, read by sandbox_entry.S (the
 * offsets there) and by the signal handlers. Plain data: initial-exec TLS
 * needs no constructor, so the assembly reaches it with one %fs load. */
struct UcxIfuncSandboxThread {
    uint64_t                  host_rsp;     /* the host frame of enter */
    uint64_t                  sandbox_rsp;  /* during a host call */
    uint64_t                  sandbox_ret;  /* during a host call */
    int64_t                   leave_status; /* nonzero: leave after host call */
    uint64_t                  base;         /* the slot's, 0 outside */
    uint64_t                  gs_base;      /* last written */
    uint32_t                  sandbox_mxcsr; /* during a host call */
    uint16_t                  sandbox_fcw;   /* during a host call */
    std::atomic<uint64_t>     seq;           /* odd while in a message */
    std::atomic<uint64_t>     kill_seq;      /* the message the watchdog ends */
    int                       fault_signal;
    uint64_t                  fault_pc;
    uint64_t                  fault_address;
    pthread_t                 thread;
    bool                      set_up;
    ucx_ifunc::sandbox::Slot *slot; /* the slot it runs, for host calls */
    const char               *refused_call; /* the host function it called */
    bool                      bad_stack;    /* a gate entered with a bad %rsp */
    unsigned                  signal_scopes;   /* SignalScopes held */
    unsigned                  signal_batches;  /* SignalBatches held */
    bool                      batch_unblocked; /* in this batch */
    uint64_t                  batch_blocked;   /* bits of signals it blocked */
};

extern "C" {
__attribute__((visibility("hidden"),
               tls_model("initial-exec"))) __thread UcxIfuncSandboxThread
        ucx_ifunc_sbx_thread;

__attribute__((visibility("hidden"))) int
ucx_ifunc_sbx_enter(uint64_t base, uint64_t entry, void *payload, size_t size,
                    void *target_args);
__attribute__((visibility("hidden"))) void ucx_ifunc_sbx_exit();
__attribute__((visibility("hidden"))) void ucx_ifunc_sbx_leave();
__attribute__((visibility("hidden"))) void ucx_ifunc_sbx_code_end();
__attribute__((visibility("hidden"))) void ucx_ifunc_sbx_host_call();
/* Whether XGETBV with %ecx = 1 tells if the x87 unit is in use; set before
 * the first sandbox runs (sandbox_entry.S). */
__attribute__((visibility("hidden"))) unsigned char ucx_ifunc_sbx_xinuse;
}

static_assert(offsetof(UcxIfuncSandboxThread, host_rsp) == 0, "entry.S");
static_assert(offsetof(UcxIfuncSandboxThread, sandbox_rsp) == 8, "entry.S");
static_assert(offsetof(UcxIfuncSandboxThread, sandbox_ret) == 16, "entry.S");
static_assert(offsetof(UcxIfuncSandboxThread, leave_status) == 24, "entry.S");
static_assert(offsetof(UcxIfuncSandboxThread, base) == 32, "entry.S");
static_assert(offsetof(UcxIfuncSandboxThread, gs_base) == 40, "entry.S");
static_assert(offsetof(UcxIfuncSandboxThread, sandbox_mxcsr) == 48, "entry.S");
static_assert(offsetof(UcxIfuncSandboxThread, sandbox_fcw) == 52, "entry.S");

namespace ucx_ifunc {
namespace sandbox {
namespace {

using Thread = UcxIfuncSandboxThread;

/* The slot the calling thread runs; only valid while it is in one. */
Slot *current_slot()
{
    return ucx_ifunc_sbx_thread.slot;
}

/* Ends a host call: the sandbox leaves with @a status on its return. */
uint64_t refuse_host_call(const char *function)
{
    Thread &thread       = ucx_ifunc_sbx_thread;
    thread.leave_status  = UCS_ERR_REJECTED;
    thread.fault_signal  = 0;
    thread.fault_pc      = uint32_t(thread.sandbox_ret); /* the caller */
    thread.fault_address = 0;
    thread.refused_call  = function;
    return 0;
}

} // namespace
} // namespace sandbox
} // namespace ucx_ifunc

/* The checking wrappers the gate stubs call, on the host's stack. Each
 * takes the sandbox's arguments as they are and checks every range against
 * the slot's regions before it touches memory. */
extern "C" {
/* Called by the gate stub instead of the wrapper when the sandbox's %rsp
 * (at slot offset @a rsp_offset) leaves no return address to read inside
 * its stack: the message ends. */
__attribute__((visibility("hidden"))) uint64_t
ucx_ifunc_sbx_refuse_stack(uint64_t rsp_offset)
{
    UcxIfuncSandboxThread &thread = ucx_ifunc_sbx_thread;
    thread.leave_status           = UCS_ERR_REJECTED;
    thread.fault_signal           = 0;
    thread.fault_pc               = 0;
    thread.fault_address          = rsp_offset;
    thread.refused_call           = nullptr;
    thread.bad_stack              = true;
    return 0;
}

using ucx_ifunc::sandbox::current_slot;
using ucx_ifunc::sandbox::kSlotRead;
using ucx_ifunc::sandbox::kSlotWrite;
using ucx_ifunc::sandbox::refuse_host_call;

/* memcpy and memmove for sandboxed code: both move, as an overlap is the
 * sandbox's own memory only and memmove is as cheap. */
static inline uint64_t sbx_checked_move(uint64_t dst, uint64_t src, uint64_t n,
                                        const char *name)
{
    uint64_t d, s;
    if (!current_slot()->check_range(dst, n, kSlotWrite, &d) ||
        !current_slot()->check_range(src, n, kSlotRead, &s)) {
        return refuse_host_call(name);
    }
    memmove(reinterpret_cast<void *>(d), reinterpret_cast<void *>(s), n);
    return dst;
}

__attribute__((visibility("hidden"))) uint64_t
ucx_ifunc_sbx_host_memcpy(uint64_t dst, uint64_t src, uint64_t n)
{
    return sbx_checked_move(dst, src, n, "memcpy");
}

__attribute__((visibility("hidden"))) uint64_t
ucx_ifunc_sbx_host_memmove(uint64_t dst, uint64_t src, uint64_t n)
{
    return sbx_checked_move(dst, src, n, "memmove");
}

__attribute__((visibility("hidden"))) uint64_t
ucx_ifunc_sbx_host_memset(uint64_t dst, uint64_t c, uint64_t n)
{
    uint64_t d;
    if (!current_slot()->check_range(dst, n, kSlotWrite, &d)) {
        return refuse_host_call("memset");
    }
    memset(reinterpret_cast<void *>(d), int(c), n);
    return dst;
}

__attribute__((visibility("hidden"))) uint64_t
ucx_ifunc_sbx_host_memcmp(uint64_t a, uint64_t b, uint64_t n)
{
    uint64_t x, y;
    if (!current_slot()->check_range(a, n, kSlotRead, &x) ||
        !current_slot()->check_range(b, n, kSlotRead, &y)) {
        return refuse_host_call("memcmp");
    }
    return uint64_t(int64_t(memcmp(reinterpret_cast<void *>(x),
                                   reinterpret_cast<void *>(y), n)));
}

__attribute__((visibility("hidden"))) uint64_t
ucx_ifunc_sbx_host_strlen(uint64_t s)
{
    uint64_t host;
    if (!current_slot()->check_range(s, 1, kSlotRead, &host)) {
        return refuse_host_call("strlen");
    }
    /* The string must end inside the region it starts in. */
    uint64_t room = 1;
    while (current_slot()->check_range(s, room * 2, kSlotRead, &host) &&
           (room < (uint64_t(1) << 32))) {
        room *= 2;
    }
    uint64_t low = room, high = room * 2; /* low fits, high does not */
    while (high - low > 1) {
        uint64_t mid = low + (high - low) / 2;
        if (current_slot()->check_range(s, mid, kSlotRead, &host)) {
            low = mid;
        } else {
            high = mid;
        }
    }
    current_slot()->check_range(s, 1, kSlotRead, &host);
    size_t length = strnlen(reinterpret_cast<const char *>(host), low);
    if (length == low) {
        return refuse_host_call("strlen");
    }
    return length;
}
}

namespace ucx_ifunc {
namespace sandbox {
namespace {

/* A function a sandbox may import: its checking wrapper, which the gate
 * bundle names to ucx_ifunc_sbx_host_call. */
struct HostFunction {
    std::string name;
    uintptr_t   wrapper;
};

/* The functions a sandbox may import: the memory functions here, and what
 * layers above add with grant_host_function() (which loads with the
 * library, before any slot is made). */
class HostFunctions {
public:
    static HostFunctions &get()
    {
        static HostFunctions functions;
        return functions;
    }

    void add(const char *name, uintptr_t wrapper)
    {
        std::lock_guard<std::mutex> lock(lock_);
        for (HostFunction &function : functions_) {
            if (function.name == name) {
                function.wrapper = wrapper;
                return;
            }
        }
        functions_.push_back(HostFunction{name, wrapper});
    }

    /* The wrapper of @a name, or 0 if it is not granted. */
    uintptr_t find(const std::string &name)
    {
        std::lock_guard<std::mutex> lock(lock_);
        for (const HostFunction &function : functions_) {
            if (function.name == name) {
                return function.wrapper;
            }
        }
        return 0;
    }

    std::vector<std::string> names()
    {
        std::lock_guard<std::mutex> lock(lock_);
        std::vector<std::string>    names;
        for (const HostFunction &function : functions_) {
            names.push_back(function.name);
        }
        return names;
    }

private:
    template <typename Wrapper>
    static uintptr_t address(Wrapper wrapper)
    {
        return reinterpret_cast<uintptr_t>(wrapper);
    }

    HostFunctions()
        : functions_{{"memcpy", address(ucx_ifunc_sbx_host_memcpy)},
                     {"memmove", address(ucx_ifunc_sbx_host_memmove)},
                     {"memset", address(ucx_ifunc_sbx_host_memset)},
                     {"memcmp", address(ucx_ifunc_sbx_host_memcmp)},
                     {"strlen", address(ucx_ifunc_sbx_host_strlen)}}
    {
    }

    std::mutex                lock_;
    std::vector<HostFunction> functions_;
};

bool host_function_granted(const std::string &name)
{
    return HostFunctions::get().find(name) != 0;
}

/* --- signals ------------------------------------------------------------ */

const int fault_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP};
struct sigaction
        previous_actions[sizeof(fault_signals) / sizeof(fault_signals[0])];

bool pc_in_slot(const Thread &thread, uint64_t pc)
{
    return (thread.base != 0) && (pc - thread.base < kSlotSize);
}

/* Leaves the sandbox from a signal: the thread resumes at the exit path
 * with @a status, which restores the host's registers and stack. */
void leave_from_signal(ucontext_t *context, ucs_status_t status)
{
    context->uc_mcontext.gregs[REG_RIP] =
            greg_t(reinterpret_cast<uintptr_t>(ucx_ifunc_sbx_leave));
    context->uc_mcontext.gregs[REG_RDI] = greg_t(status);
}

void chain(int signal, siginfo_t *info, void *context)
{
    size_t i = 0;
    while (fault_signals[i] != signal) {
        ++i;
    }
    const struct sigaction &previous = previous_actions[i];
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(signal, info, context);
    } else if ((previous.sa_handler == SIG_DFL) ||
               (previous.sa_handler == SIG_IGN)) {
        /* The default action: the fault recurs on return, or the signal
         * is delivered again once this handler returns. */
        struct sigaction action = {};
        action.sa_handler       = SIG_DFL;
        sigaction(signal, &action, nullptr);
        raise(signal);
    } else {
        previous.sa_handler(signal);
    }
}

void fault_handler(int signal, siginfo_t *info, void *context)
{
    Thread     &thread = ucx_ifunc_sbx_thread;
    ucontext_t *uc     = static_cast<ucontext_t *>(context);
    uint64_t    pc     = uint64_t(uc->uc_mcontext.gregs[REG_RIP]);
    if (!pc_in_slot(thread, pc)) {
        chain(signal, info, context);
        return;
    }
    thread.fault_signal = signal;
    thread.fault_pc     = pc - thread.base;
    thread.fault_address =
            reinterpret_cast<uint64_t>(info->si_addr) - thread.base;
    leave_from_signal(uc, UCS_ERR_REJECTED);
}

void budget_handler(int, siginfo_t *, void *context)
{
    Thread  &thread = ucx_ifunc_sbx_thread;
    uint64_t seq    = thread.seq.load(std::memory_order_relaxed);
    if (((seq & 1) == 0) ||
        (thread.kill_seq.load(std::memory_order_relaxed) != seq)) {
        return; /* that message ended already */
    }
    ucontext_t *uc       = static_cast<ucontext_t *>(context);
    uint64_t    pc       = uint64_t(uc->uc_mcontext.gregs[REG_RIP]);
    thread.fault_signal  = 0;
    thread.fault_pc      = pc_in_slot(thread, pc) ? pc - thread.base : 0;
    thread.fault_address = 0;
    if (pc_in_slot(thread, pc)) {
        leave_from_signal(uc, UCS_ERR_TIMED_OUT);
    } else {
        /* In a host call or on the way in or out: the gate stub leaves when
         * the call returns; otherwise the next look sends again. */
        thread.leave_status = UCS_ERR_TIMED_OUT;
    }
}

/* Whether XGETBV with %ecx = 1 reports the x87 unit's use (XINUSE): an
 * OS that enabled XSAVE on a CPU that has it. */
bool xinuse_supported()
{
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE) ||
        (__get_cpuid_max(0, nullptr) < 0xd)) {
        return false;
    }
    __cpuid_count(0xd, 1, eax, ebx, ecx, edx);
    return (eax & (1u << 2)) != 0;
}

/* The signals sandboxed code needs delivered, whatever the thread blocks:
 * its faults and the watchdog's. */
const sigset_t &sandbox_signals()
{
    static const sigset_t set = [] {
        sigset_t signals;
        sigemptyset(&signals);
        for (int signal : fault_signals) {
            sigaddset(&signals, signal);
        }
        sigaddset(&signals, kBudgetSignal);
        return signals;
    }();
    return set;
}

void install_handlers()
{
    ucx_ifunc_sbx_xinuse    = xinuse_supported() ? 1 : 0;
    struct sigaction action = {};
    action.sa_sigaction     = fault_handler;
    action.sa_flags         = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < sizeof(fault_signals) / sizeof(fault_signals[0]);
         ++i) {
        sigaction(fault_signals[i], &action, &previous_actions[i]);
    }
    action.sa_sigaction = budget_handler;
    action.sa_flags     = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigaction(kBudgetSignal, &action, nullptr);
}

/* --- the watchdog ------------------------------------------------------- */

using Clock = std::chrono::steady_clock;

/* Looks at every thread that ran sandboxed code, a few times per budget,
 * and signals one that is in the same message longer than the budget. The
 * threads only count messages (Thread::seq): no clock on their path. */
class Watchdog {
public:
    static Watchdog &get()
    {
        /* Never destroyed: threads may end, and unregister, after static
         * destructors ran; the thread ends with the process. */
        union Holder {
            Watchdog watchdog;
            Holder() : watchdog() {}
            ~Holder() {}
        };
        static Holder holder;
        return holder.watchdog;
    }

    void set_budget(double seconds)
    {
        budget_ns_.store(int64_t(seconds * 1e9), std::memory_order_relaxed);
    }

    void add(Thread *thread)
    {
        std::lock_guard<std::mutex> lock(lock_);
        threads_[thread] = Seen{0, Clock::now()};
        start();
    }

    /* After fork() the child has only the thread that forked and no
     * watchdog: that thread's next message starts one. */
    void start_again()
    {
        std::lock_guard<std::mutex> lock(lock_);
        start();
    }

    void remove(Thread *thread)
    {
        std::lock_guard<std::mutex> lock(lock_);
        threads_.erase(thread);
    }

private:
    struct Seen {
        uint64_t          seq;
        Clock::time_point since;
    };

    Watchdog()
    {
        set_budget(config_read().sandbox_budget);
        pthread_atfork([] { get().lock_.lock(); }, [] { get().lock_.unlock(); },
                       after_fork_in_child);
    }

    static void after_fork_in_child()
    {
        Watchdog &watchdog = get();
        watchdog.lock_.unlock();
        Thread *self = &ucx_ifunc_sbx_thread;
        for (auto it = watchdog.threads_.begin();
             it != watchdog.threads_.end();) {
            it = (it->first == self) ? std::next(it)
                                     : watchdog.threads_.erase(it);
        }
        watchdog.started_ = false;
        self->set_up      = false;
    }

    void start()
    {
        if (!started_) {
            started_ = true;
            std::thread([this] { watch(); }).detach();
        }
    }

    void watch()
    {
        std::unique_lock<std::mutex> lock(lock_);
        for (;;) {
            auto budget = std::chrono::nanoseconds(
                    budget_ns_.load(std::memory_order_relaxed));
            auto tick = std::max<std::chrono::nanoseconds>(
                    budget / 8, std::chrono::microseconds(500));
            wake_.wait_for(lock, tick);
            auto now = Clock::now();
            for (auto &entry : threads_) {
                Thread  *thread = entry.first;
                uint64_t seq    = thread->seq.load(std::memory_order_relaxed);
                if (seq != entry.second.seq) {
                    entry.second = Seen{seq, now};
                } else if ((seq & 1) && (now - entry.second.since >= budget)) {
                    thread->kill_seq.store(seq, std::memory_order_relaxed);
                    pthread_kill(thread->thread, kBudgetSignal);
                }
            }
        }
    }

    std::atomic<int64_t>               budget_ns_{100000000};
    std::mutex                         lock_;
    std::condition_variable            wake_;
    std::unordered_map<Thread *, Seen> threads_;
    bool                               started_ = false;
};

/* A thread's part: its alternate signal stack and its watchdog entry,
 * from its first message to its end. */
class ThreadSetup {
public:
    ThreadSetup()
    {
        Thread &thread = ucx_ifunc_sbx_thread;
        thread.thread  = pthread_self();
        stack_t current;
        if ((sigaltstack(nullptr, &current) == 0) &&
            (current.ss_flags & SS_DISABLE)) {
            void *memory = mmap(nullptr, kAltStackSize, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (memory != MAP_FAILED) {
                stack_t stack  = {};
                stack.ss_sp    = memory;
                stack.ss_size  = kAltStackSize;
                stack.ss_flags = 0;
                if (sigaltstack(&stack, nullptr) == 0) {
                    alt_stack_ = memory;
                } else {
                    munmap(memory, kAltStackSize);
                }
            }
        }
        if ((alt_stack_ == nullptr) && (current.ss_flags & SS_DISABLE)) {
            ucs_warn("sandbox: no alternate signal stack for this thread: a "
                     "fault at the sandbox's stack guard ends the process");
        }
        Watchdog::get().add(&thread);
        thread.set_up = true;
    }

    ~ThreadSetup()
    {
        Watchdog::get().remove(&ucx_ifunc_sbx_thread);
        ucx_ifunc_sbx_thread.set_up = false;
        if (alt_stack_ != nullptr) {
            stack_t stack  = {};
            stack.ss_flags = SS_DISABLE;
            sigaltstack(&stack, nullptr);
            munmap(alt_stack_, kAltStackSize);
        }
    }

private:
    void *alt_stack_ = nullptr;
};

void set_up_thread()
{
    /* A function-local static rather than std::call_once, whose
     * thread-locals are libstdc++'s: the library's initial-exec TLS model
     * (base/tls.h) would make them static TLS that a late dlopen of the
     * library cannot get once libstdc++ has given them out dynamically. */
    static const bool handlers_installed = (install_handlers(), true);
    (void)handlers_installed;
    thread_local ThreadSetup setup;
    (void)setup;
    if (!ucx_ifunc_sbx_thread.set_up) { /* set up before a fork() */
        Watchdog::get().start_again();
        ucx_ifunc_sbx_thread.set_up = true;
    }
}

bool fsgsbase()
{
    static const bool present = (getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE) != 0;
    return present;
}

const char *signal_name(int signal)
{
    switch (signal) {
        case SIGSEGV:
            return "a memory access outside its rights (SIGSEGV)";
        case SIGBUS:
            return "a bus error (SIGBUS)";
        case SIGILL:
            return "an illegal instruction (SIGILL)";
        case SIGFPE:
            return "an arithmetic fault (SIGFPE)";
        case SIGTRAP:
            return "a trap (SIGTRAP)";
        default:
            return "a signal";
    }
}

#else
namespace ucx_ifunc {
namespace sandbox {
namespace {

bool host_function_granted(const std::string &)
{
    return false;
}

#endif

/* --- granted memory ------------------------------------------------------ */

/* The process's memory that sandboxes may be granted: a memory file mapped
 * in a 4 GiB-aligned window at offsets [kGrantOffset, kGrantEnd), so that
 * the same file offset maps into a slot at the same low 32 bits. Holds the
 * grants and the live slots, to map each grant into the slots it names. */
class GrantWindow {
public:
    static GrantWindow &get()
    {
        /* Never destroyed: slots that outlive static destructors (held by
         * a context nobody released) still detach from it. */
        union Holder {
            GrantWindow window;
            Holder() : window() {}
            ~Holder() {}
        };
        static Holder holder;
        return holder.window;
    }

    int fd() const { return fd_; }

    ucs_status_t alloc(size_t length, void **address)
    {
        std::lock_guard<std::mutex> lock(lock_);
        ucs_status_t                status = open();
        if (status != UCS_OK) {
            return status;
        }
        length = round_up(std::max<size_t>(length, 1), kPage);
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second < length) {
                continue;
            }
            uint64_t offset = it->first, rest = it->second - length;
            free_.erase(it);
            if (rest != 0) {
                free_[offset + length] = rest;
            }
            void *at = mmap(reinterpret_cast<void *>(base_ + offset), length,
                            PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_,
                            off_t(offset));
            if (at == MAP_FAILED) {
                ucs_error("sandbox: cannot map granted memory: %m");
                give_back(offset, length);
                return UCS_ERR_NO_MEMORY;
            }
            used_[offset] = length;
            *address      = at;
            return UCS_OK;
        }
        return UCS_ERR_NO_MEMORY;
    }

    ucs_status_t free(void *address)
    {
        std::lock_guard<std::mutex> lock(lock_);
        uint64_t offset = reinterpret_cast<uintptr_t>(address) - base_;
        auto     it     = used_.find(offset);
        if ((base_ == 0) || (it == used_.end())) {
            return UCS_ERR_INVALID_PARAM;
        }
        uint64_t length = it->second;
        used_.erase(it);
        for (auto grant = grants_.begin(); grant != grants_.end();) {
            if ((grant->offset >= offset) &&
                (grant->offset < offset + length)) {
                grant = grants_.erase(grant);
            } else {
                ++grant;
            }
        }
        for (Slot *slot : slots_) {
            slot->map_granted(offset, length, 0);
        }
        mmap(address, length, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        /* The pages go back to the system; the file keeps its size. */
        fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  off_t(offset), off_t(length));
        give_back(offset, length);
        return UCS_OK;
    }

    ucs_status_t grant(uintptr_t address, uint64_t length, unsigned rights,
                       const std::string &name, const uint8_t *signer)
    {
        std::lock_guard<std::mutex> lock(lock_);
        uint64_t                    offset = address - base_;
        auto                        it     = used_.upper_bound(offset);
        if ((base_ == 0) || (address < base_) || (it == used_.begin()) ||
            (offset - std::prev(it)->first >= std::prev(it)->second) ||
            (length > std::prev(it)->first + std::prev(it)->second - offset)) {
            return UCS_ERR_INVALID_PARAM;
        }
        Grant grant{offset, length, rights, name, signer != nullptr, {}};
        if (signer != nullptr) {
            memcpy(grant.signer.data(), signer, grant.signer.size());
        }
        for (Slot *slot : slots_) {
            if (matches(grant, *slot)) {
                ucs_status_t status = slot->map_granted(offset, length, rights);
                if (status != UCS_OK) {
                    return status;
                }
            }
        }
        grants_.push_back(std::move(grant));
        return UCS_OK;
    }

    /* A new slot gets what is granted to its code. */
    ucs_status_t attach(Slot *slot)
    {
        std::lock_guard<std::mutex> lock(lock_);
        for (const Grant &grant : grants_) {
            if (matches(grant, *slot)) {
                ucs_status_t status = slot->map_granted(
                        grant.offset, grant.length, grant.rights);
                if (status != UCS_OK) {
                    return status;
                }
            }
        }
        slots_.push_back(slot);
        return UCS_OK;
    }

    void detach(Slot *slot)
    {
        std::lock_guard<std::mutex> lock(lock_);
        slots_.erase(std::remove(slots_.begin(), slots_.end(), slot),
                     slots_.end());
    }

private:
    struct Grant {
        uint64_t                offset;
        uint64_t                length;
        unsigned                rights;
        std::string             name;
        bool                    has_signer;
        std::array<uint8_t, 32> signer;
    };

    GrantWindow() = default;

    static bool matches(const Grant &grant, const Slot &slot)
    {
        return (grant.name == slot.name()) &&
               (!grant.has_signer || slot.signed_by(grant.signer));
    }

    ucs_status_t open()
    {
        if (fd_ >= 0) {
            return UCS_OK;
        }
        void *reservation =
                mmap(nullptr, kReserve, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (reservation == MAP_FAILED) {
            ucs_error("sandbox: cannot reserve the grant window: %m");
            return UCS_ERR_NO_MEMORY;
        }
        uintptr_t start = reinterpret_cast<uintptr_t>(reservation);
        uintptr_t base  = round_up(start, kSlotSize);
        if (base > start) {
            munmap(reservation, base - start);
        }
        munmap(reinterpret_cast<void *>(base + kSlotSize),
               start + kReserve - (base + kSlotSize));
        int fd = memfd_create("ucx-ifunc-sandbox-grants", MFD_CLOEXEC);
        if ((fd < 0) || (ftruncate(fd, off_t(kGrantEnd)) != 0)) {
            ucs_error("sandbox: cannot create the grants' memory file: %m");
            if (fd >= 0) {
                close(fd);
            }
            munmap(reinterpret_cast<void *>(base), kSlotSize);
            return UCS_ERR_NO_MEMORY;
        }
        fd_                 = fd;
        base_               = base;
        free_[kGrantOffset] = kGrantEnd - kGrantOffset;
        return UCS_OK;
    }

    /* Returns [offset, + length) to the free blocks, merged with its
     * neighbours. */
    void give_back(uint64_t offset, uint64_t length)
    {
        auto next = free_.lower_bound(offset);
        if ((next != free_.end()) && (next->first == offset + length)) {
            length += next->second;
            next = free_.erase(next);
        }
        if (next != free_.begin()) {
            auto previous = std::prev(next);
            if (previous->first + previous->second == offset) {
                previous->second += length;
                return;
            }
        }
        free_[offset] = length;
    }

    std::mutex                   lock_;
    int                          fd_   = -1;
    uintptr_t                    base_ = 0;
    std::map<uint64_t, uint64_t> free_; /* offset: length */
    std::map<uint64_t, uint64_t> used_;
    std::vector<Grant>           grants_;
    std::vector<Slot *>          slots_;
};

} // namespace

bool sandbox_supported(std::string *why)
{
#if UCX_IFUNC_SANDBOX_X86
    if (fsgsbase()) {
        return true;
    }
    if (why != nullptr) {
        *why = "the kernel does not offer FSGSBASE (HWCAP2_FSGSBASE: Linux "
               "5.9 or later on a CPU that has it)";
    }
#else
    if (why != nullptr) {
        *why = "the sandbox runs on x86-64 Linux only";
    }
#endif
    return false;
}

void sandbox_set_budget(double seconds)
{
#if UCX_IFUNC_SANDBOX_X86
    Watchdog::get().set_budget(seconds);
#else
    (void)seconds;
#endif
}

std::vector<std::string> granted_functions()
{
#if UCX_IFUNC_SANDBOX_X86
    return HostFunctions::get().names();
#else
    return {};
#endif
}

void grant_host_function(const char *name, HostCall wrapper)
{
#if UCX_IFUNC_SANDBOX_X86
    HostFunctions::get().add(name, reinterpret_cast<uintptr_t>(wrapper));
#else
    (void)name;
    (void)wrapper;
#endif
}

Slot *running_slot()
{
#if UCX_IFUNC_SANDBOX_X86
    return (ucx_ifunc_sbx_thread.base != 0) ? ucx_ifunc_sbx_thread.slot
                                            : nullptr;
#else
    return nullptr;
#endif
}

SignalScope::SignalScope()
{
#if UCX_IFUNC_SANDBOX_X86
    auto &thread = ucx_ifunc_sbx_thread;
    if (thread.signal_batches > 0) {
        /* The batch restores the mask when it ends. */
        in_batch_ = true;
        if (!thread.batch_unblocked) {
            sigset_t old;
            pthread_sigmask(SIG_UNBLOCK, &sandbox_signals(), &old);
            thread.batch_blocked = 0;
            for (int sig = 1; sig < 64; ++sig) {
                if (sigismember(&sandbox_signals(), sig) &&
                    sigismember(&old, sig)) {
                    thread.batch_blocked |= uint64_t(1) << sig;
                }
            }
            thread.batch_unblocked = true;
        }
        return;
    }
    outermost_ = (ucx_ifunc_sbx_thread.signal_scopes++ == 0);
    if (outermost_) {
        pthread_sigmask(SIG_UNBLOCK, &sandbox_signals(), &thread_mask_);
    }
#endif
}

SignalScope::~SignalScope()
{
#if UCX_IFUNC_SANDBOX_X86
    if (in_batch_) {
        return;
    }
    --ucx_ifunc_sbx_thread.signal_scopes;
    sigset_t blocked;
    if (outermost_ &&
        (sigandset(&blocked, &thread_mask_, &sandbox_signals()) == 0) &&
        !sigisemptyset(&blocked)) {
        pthread_sigmask(SIG_SETMASK, &thread_mask_, nullptr);
    }
#endif
}

SignalBatch::SignalBatch()
{
#if UCX_IFUNC_SANDBOX_X86
    ++ucx_ifunc_sbx_thread.signal_batches;
#endif
}

SignalBatch::~SignalBatch()
{
#if UCX_IFUNC_SANDBOX_X86
    auto &thread = ucx_ifunc_sbx_thread;
    if ((--thread.signal_batches == 0) && thread.batch_unblocked) {
        thread.batch_unblocked = false;
        if (thread.batch_blocked != 0) {
            sigset_t again;
            sigemptyset(&again);
            for (int sig = 1; sig < 64; ++sig) {
                if (thread.batch_blocked & (uint64_t(1) << sig)) {
                    sigaddset(&again, sig);
                }
            }
            pthread_sigmask(SIG_BLOCK, &again, nullptr);
        }
    }
#endif
}

/* --- the slot ------------------------------------------------------------ */

ucs_status_t Slot::create(const SlotImage &image, std::unique_ptr<Slot> *slot)
{
    std::string why;
    if (!UCX_IFUNC_SANDBOX_X86 && !sandbox_supported(&why)) {
        ucs_warn("ifunc '%s': no sandbox here: %s", image.name.c_str(),
                 why.c_str());
        return UCS_ERR_UNSUPPORTED;
    }
    if (image.imports.size() > kMaxGateImports) {
        ucs_warn("ifunc '%s': %zu imports, the sandbox's gate has %u",
                 image.name.c_str(), image.imports.size(), kMaxGateImports);
        return UCS_ERR_INVALID_PARAM;
    }
    for (const std::string &import : image.imports) {
        if (!host_function_granted(import)) {
            ucs_warn("ifunc '%s': imports '%s', which the sandbox does not "
                     "grant",
                     image.name.c_str(), import.c_str());
            return UCS_ERR_NO_ELEM;
        }
    }
    if ((image.map_size == 0) ||
        (image.map_size > kImageEnd - kImageOffset - kPage) ||
        (image.payload_limit > kPayloadEnd - kPayloadOffset)) {
        ucs_warn("ifunc '%s': image of %lu bytes or payload limit %zu does "
                 "not fit a sandbox slot",
                 image.name.c_str(), image.map_size, image.payload_limit);
        return UCS_ERR_EXCEEDS_LIMIT;
    }

    auto  created = std::make_unique<Slot>(Token{});
    void *reservation =
            mmap(nullptr, kReserve, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reservation == MAP_FAILED) {
        ucs_error("sandbox: cannot reserve %lu bytes of address space: %m",
                  kReserve);
        return UCS_ERR_NO_MEMORY;
    }
    uintptr_t start = reinterpret_cast<uintptr_t>(reservation);
    uintptr_t base  = round_up(start, kSlotSize);
    /* Keep the slot only: what lies before and after it goes back. */
    if (base > start) {
        munmap(reservation, base - start);
    }
    if (start + kReserve > base + kSlotSize) {
        munmap(reinterpret_cast<void *>(base + kSlotSize),
               start + kReserve - (base + kSlotSize));
    }
    created->reservation_   = base;
    created->base_          = base;
    created->name_          = image.name;
    created->n_imports_     = uint32_t(image.imports.size());
    created->map_size_      = image.map_size;
    created->payload_limit_ = image.payload_limit;
    created->has_signer_    = image.has_signer;
    created->signer_        = image.signer;

    ucs_status_t status = created->map_image(image);
    if (status != UCS_OK) {
        return status;
    }
    created->write_gate(image);
    status = created->map_region(kStackBase, kStackTop - kStackBase,
                                 kSlotRead | kSlotWrite);
    if (status != UCS_OK) {
        return status;
    }
    created->fixed_bytes_ += kGateSize + (kStackTop - kStackBase);
    /* The payload area as small messages need it; grow_payload() maps
     * more when a larger one comes (its owner counts it first). */
    size_t room =
            std::min(round_up(std::max<size_t>(image.payload_limit, 1), kPage),
                     round_up(kInitialPayloadRoom, kPage));
    status = created->map_region(kPayloadOffset, room, kSlotRead | kSlotWrite);
    if (status != UCS_OK) {
        return status;
    }
    created->payload_room_.store(room, std::memory_order_relaxed);
    status = GrantWindow::get().attach(created.get());
    if (status != UCS_OK) {
        return status;
    }
    created->attached_ = true;
    *slot              = std::move(created);
    return UCS_OK;
}

Slot::~Slot()
{
    if (attached_) {
        GrantWindow::get().detach(this);
    }
    if (base_ != 0) {
        munmap(reinterpret_cast<void *>(base_), kSlotSize);
    }
}

const uint8_t *Slot::text() const
{
    return reinterpret_cast<const uint8_t *>(base_ + kImageOffset +
                                             text_vaddr_);
}

uint8_t *Slot::payload_area() const
{
    return reinterpret_cast<uint8_t *>(base_ + kPayloadOffset);
}

ucs_status_t Slot::grow_payload(size_t room)
{
    if (round_up(room, kPage) > round_up(payload_limit_, kPage)) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    std::lock_guard<std::mutex> lock(run_lock_);
    uint64_t                    mapped = payload_room();
    uint64_t                    wanted = round_up(room, kPage);
    if (wanted <= mapped) {
        return UCS_OK; /* another thread grew it */
    }
    void *at = mmap(
            payload_area() + mapped, wanted - mapped, PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (at == MAP_FAILED) {
        ucs_error("sandbox: cannot map %lu bytes of a slot's payload area: %m",
                  wanted - mapped);
        return UCS_ERR_NO_MEMORY;
    }
    for (Region &region : regions_) {
        if (region.begin == kPayloadOffset) {
            region.end = kPayloadOffset + wanted;
        }
    }
    payload_room_.store(wanted, std::memory_order_relaxed);
    return UCS_OK;
}

ucs_status_t Slot::map_region(uint64_t offset, uint64_t length, unsigned rights)
{
    int prot = ((rights & kSlotRead) ? PROT_READ : 0) |
               ((rights & kSlotWrite) ? PROT_WRITE : 0);
    void *at = mmap(reinterpret_cast<void *>(base_ + offset), length, prot,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
                    0);
    if (at == MAP_FAILED) {
        ucs_error("sandbox: cannot map %lu bytes of a slot: %m", length);
        return UCS_ERR_NO_MEMORY;
    }
    regions_.push_back(Region{offset, offset + length, rights});
    return UCS_OK;
}

ucs_status_t Slot::map_image(const SlotImage &image)
{
    uint64_t size  = round_up(image.map_size, kPage);
    bool     table = image.got_ptr_vaddr != 0;
    uint64_t extra =
            table ? round_up(8 * std::max<size_t>(image.imports.size(), 1),
                             kPage)
                  : 0;
    uint8_t *start  = reinterpret_cast<uint8_t *>(base_ + kImageOffset);
    void    *mapped = mmap(start, size + extra, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (mapped == MAP_FAILED) {
        ucs_error("sandbox: cannot map an image of %lu bytes: %m", size);
        return UCS_ERR_NO_MEMORY;
    }
    fixed_bytes_ += size + extra;
    bool have_text = false;
    for (const SlotSegment &segment : image.segments) {
        if ((segment.vaddr % kPage) || (segment.file_size > segment.mem_size) ||
            (segment.vaddr + segment.mem_size > image.map_size) ||
            (segment.vaddr + segment.mem_size < segment.vaddr)) {
            ucs_warn("ifunc '%s': a segment outside the image",
                     image.name.c_str());
            return UCS_ERR_INVALID_PARAM;
        }
        /* A segment of zeroes only may have no bytes (NULL), which
         * memcpy must not be given even for 0 bytes. */
        if (segment.file_size != 0) {
            memcpy(start + segment.vaddr, segment.bytes, segment.file_size);
        }
        if (segment.rights & kSlotExec) {
            if (have_text || (segment.rights & kSlotWrite)) {
                ucs_warn("ifunc '%s': a second or writable text",
                         image.name.c_str());
                return UCS_ERR_INVALID_PARAM;
            }
            have_text   = true;
            text_vaddr_ = segment.vaddr;
            text_size_  = round_up(segment.mem_size, kBundleSize);
            text_map_   = round_up(segment.mem_size, kPage);
            /* What follows the code on its last page halts. */
            memset(start + segment.vaddr + segment.mem_size, 0xf4,
                   text_map_ - segment.mem_size);
        }
    }
    if (!have_text) {
        ucs_warn("ifunc '%s': no text", image.name.c_str());
        return UCS_ERR_INVALID_PARAM;
    }

    /* The gate bundle of import i; the table of them the GOT names. */
    auto gate_bundle = [this](uint32_t index) {
        return uint64_t(base_ + kGateOffset + kBundleSize * (1 + index));
    };
    for (const SlotReloc &reloc : image.relocs) {
        if ((reloc.vaddr % 8) || (reloc.vaddr + 8 > image.map_size) ||
            (reloc.import && (reloc.import_index >= image.imports.size()))) {
            ucs_warn("ifunc '%s': a bad relocation", image.name.c_str());
            return UCS_ERR_INVALID_PARAM;
        }
        uint64_t value = reloc.import ? gate_bundle(reloc.import_index)
                                      : base_ + kImageOffset;
        value += uint64_t(reloc.addend);
        memcpy(start + reloc.vaddr, &value, sizeof(value));
    }
    if (table) {
        if ((image.got_ptr_vaddr % 8) ||
            (image.got_ptr_vaddr + 8 > image.map_size)) {
            ucs_warn("ifunc '%s': a bad GOT pointer", image.name.c_str());
            return UCS_ERR_INVALID_PARAM;
        }
        uint64_t table_address = base_ + kImageOffset + size;
        for (uint32_t i = 0; i < image.imports.size(); ++i) {
            uint64_t value = gate_bundle(i);
            memcpy(start + size + 8 * i, &value, sizeof(value));
        }
        memcpy(start + image.got_ptr_vaddr, &table_address,
               sizeof(table_address));
        mprotect(start + size, extra, PROT_READ);
        regions_.push_back(Region{kImageOffset + size,
                                  kImageOffset + size + extra, kSlotRead});
    }

    /* The text read-only until seal(); the rest as its segment says, and
     * pages of no segment inaccessible. */
    mprotect(start, size, PROT_NONE);
    for (const SlotSegment &segment : image.segments) {
        uint64_t length = round_up(segment.mem_size, kPage);
        unsigned rights = segment.rights & (kSlotRead | kSlotWrite);
        if (segment.rights & kSlotExec) {
            rights = kSlotRead;
        }
        int prot = ((rights & kSlotRead) ? PROT_READ : 0) |
                   ((rights & kSlotWrite) ? PROT_WRITE : 0);
        if ((length != 0) &&
            (mprotect(start + segment.vaddr, length, prot) != 0)) {
            ucs_error("sandbox: mprotect: %m");
            return UCS_ERR_IO_ERROR;
        }
        if (length != 0) {
            regions_.push_back(Region{kImageOffset + segment.vaddr,
                                      kImageOffset + segment.vaddr + length,
                                      rights});
        }
    }
    return UCS_OK;
}

void Slot::write_gate(const SlotImage &image)
{
#if UCX_IFUNC_SANDBOX_X86
    uint8_t *gate = reinterpret_cast<uint8_t *>(base_ + kGateOffset);
    mmap(gate, kGateSize, PROT_READ | PROT_WRITE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    memset(gate, 0xf4, kGateSize); /* hlt: a fault */
    /* movabs $address, %r11 (0x49 0xbb) or %rax (0x48 0xb8) */
    auto movabs = [](uint8_t *at, bool r11, uint64_t address) {
        at[0] = r11 ? 0x49 : 0x48;
        at[1] = r11 ? 0xbb : 0xb8;
        memcpy(at + 2, &address, sizeof(address));
        return at + 10;
    };
    /* Bundle 0: jmp *%r11 to the exit. */
    uint8_t *at =
            movabs(gate, true, reinterpret_cast<uintptr_t>(ucx_ifunc_sbx_exit));
    at[0] = 0x41;
    at[1] = 0xff;
    at[2] = 0xe3;
    /* Bundle 1 + i: the wrapper in %r11, jmp *%rax to the host call (%rax
     * is the call's result: the caller keeps nothing there). */
    for (size_t i = 0; i < image.imports.size(); ++i) {
        at    = movabs(gate + kBundleSize * (1 + i), true,
                       HostFunctions::get().find(image.imports[i]));
        at    = movabs(at, false,
                       reinterpret_cast<uintptr_t>(ucx_ifunc_sbx_host_call));
        at[0] = 0xff;
        at[1] = 0xe0;
    }
    mprotect(gate, kGateSize, PROT_READ | PROT_EXEC);
#else
    (void)image;
#endif
}

ucs_status_t Slot::seal()
{
    if (mprotect(reinterpret_cast<void *>(base_ + kImageOffset + text_vaddr_),
                 text_map_, PROT_READ | PROT_EXEC) != 0) {
        ucs_error("sandbox: mprotect: %m");
        return UCS_ERR_IO_ERROR;
    }
    sealed_ = true;
    return UCS_OK;
}

ucs_status_t Slot::map_granted(uint64_t offset, uint64_t length,
                               unsigned rights)
{
    std::lock_guard<std::mutex> lock(run_lock_);
    void                       *at;
    if (rights == 0) {
        at = mmap(reinterpret_cast<void *>(base_ + offset), length, PROT_NONE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
                  0);
    } else {
        int prot = PROT_READ | ((rights & kSlotWrite) ? PROT_WRITE : 0);
        at       = mmap(reinterpret_cast<void *>(base_ + offset), length, prot,
                        MAP_SHARED | MAP_FIXED, GrantWindow::get().fd(),
                        off_t(offset));
    }
    if (at == MAP_FAILED) {
        ucs_error("sandbox: cannot map granted memory into a slot: %m");
        return UCS_ERR_NO_MEMORY;
    }
    drop_regions(offset, offset + length);
    if (rights != 0) {
        regions_.push_back(Region{offset, offset + length,
                                  kSlotRead | (rights & kSlotWrite)});
    }
    return UCS_OK;
}

void Slot::drop_regions(uint64_t begin, uint64_t end)
{
    std::vector<Region> kept;
    for (const Region &region : regions_) {
        if ((region.end <= begin) || (region.begin >= end)) {
            kept.push_back(region);
            continue;
        }
        if (region.begin < begin) {
            kept.push_back(Region{region.begin, begin, region.rights});
        }
        if (region.end > end) {
            kept.push_back(Region{end, region.end, region.rights});
        }
    }
    regions_ = std::move(kept);
}

bool Slot::check_range(uint64_t address, uint64_t length, unsigned rights,
                       uint64_t *host) const
{
    uint64_t offset = uint32_t(address);
    if (length > kSlotSize) {
        return false;
    }
    for (const Region &region : regions_) {
        if ((offset >= region.begin) && (offset < region.end) &&
            (length <= region.end - offset) &&
            ((region.rights & rights) == rights)) {
            *host = base_ + offset;
            return true;
        }
    }
    if (length == 0) {
        *host = base_ + offset; /* touches nothing */
        return true;
    }
    return false;
}

ucs_status_t Slot::run(uint64_t entry_vaddr, const void *payload, size_t size,
                       void *target_args)
{
#if UCX_IFUNC_SANDBOX_X86
    Thread &thread = ucx_ifunc_sbx_thread;
    if (thread.base != 0) {
        return UCS_ERR_BUSY; /* in a host call of a sandbox */
    }
    if (!fsgsbase()) {
        return UCS_ERR_UNSUPPORTED;
    }
    if (!sealed_) {
        return UCS_ERR_REJECTED;
    }
    if (size > payload_room()) { /* it only grows: no lock needed */
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (entry_vaddr - text_vaddr_ >= text_size_) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (!thread.set_up) {
        set_up_thread();
    }

    std::lock_guard<std::mutex> lock(run_lock_);
    SignalScope                 signals;
    memcpy(payload_area(), payload, size);
    thread.slot         = this;
    thread.leave_status = 0;
    thread.bad_stack    = false;
    thread.base         = base_;
    uint64_t seq        = thread.seq.load(std::memory_order_relaxed);
    thread.seq.store(seq + 1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    auto status = ucs_status_t(
            ucx_ifunc_sbx_enter(base_, base_ + kImageOffset + entry_vaddr,
                                payload_area(), size, target_args));
    std::atomic_signal_fence(std::memory_order_seq_cst);
    thread.seq.store(seq + 2, std::memory_order_relaxed);
    thread.base = 0;
    if (status != UCS_OK) {
        last_fault_ = SlotFault{thread.fault_signal, thread.fault_pc,
                                thread.fault_address};
        if (!warned_.exchange(true)) {
            if (status == UCS_ERR_TIMED_OUT) {
                ucs_warn("ifunc '%s': sandboxed code ran over its budget "
                         "(UCX_IFUNC_SANDBOX_BUDGET) at slot offset 0x%lx; "
                         "the message was ended (warned once per code)",
                         name_.c_str(), thread.fault_pc);
            } else if (thread.bad_stack) {
                ucs_warn("ifunc '%s': sandboxed code entered a host call "
                         "with its stack pointer at slot offset 0x%lx, "
                         "where no return address can be read; the message "
                         "was ended (warned once per code)",
                         name_.c_str(), thread.fault_address);
            } else if (thread.fault_signal == 0) {
                ucs_warn("ifunc '%s': sandboxed code called %s with an "
                         "argument outside its memory (returning to slot "
                         "offset 0x%lx); the message was ended (warned once "
                         "per code)",
                         name_.c_str(), thread.refused_call, thread.fault_pc);
            } else {
                ucs_warn("ifunc '%s': sandboxed code ended by %s at slot "
                         "offset 0x%lx, address offset 0x%lx (warned once "
                         "per code)",
                         name_.c_str(), signal_name(thread.fault_signal),
                         thread.fault_pc, thread.fault_address);
            }
        }
    }
    return status;
#else
    (void)entry_vaddr;
    (void)payload;
    (void)size;
    (void)target_args;
    return UCS_ERR_UNSUPPORTED;
#endif
}

/* --- images -------------------------------------------------------------- */

ucs_status_t slot_image_from(const char                   *image,
                             const ucp_ifunc_image_desc_t &desc,
                             const std::string &name, size_t payload_limit,
                             SlotImage *slot_image)
{
    const uint8_t *bytes = reinterpret_cast<const uint8_t *>(image);
    SlotImage      out;
    out.name                                          = name;
    out.map_size                                      = desc.map_size;
    out.got_ptr_vaddr                                 = desc.got_ptr_vaddr;
    out.payload_limit                                 = payload_limit;
    static const unsigned rights[UCP_IFUNC_SEG_COUNT] = {
            kSlotRead | kSlotExec, kSlotRead, kSlotRead | kSlotWrite};
    for (int i = 0; i < UCP_IFUNC_SEG_COUNT; ++i) {
        const ucp_ifunc_image_seg_t &seg = desc.seg[i];
        if ((seg.mem_size == 0) && (i != UCP_IFUNC_SEG_TEXT)) {
            continue;
        }
        out.segments.push_back(SlotSegment{seg.vaddr, seg.mem_size,
                                           bytes + seg.file_offset,
                                           seg.file_size, rights[i]});
    }
    /* The tables may be unaligned in the received copy: read them by
     * copying. */
    for (uint32_t i = 0; i < desc.n_imports; ++i) {
        ucp_ifunc_image_import_t import;
        memcpy(&import, bytes + desc.imports_offset + i * sizeof(import),
               sizeof(import));
        out.imports.push_back(reinterpret_cast<const char *>(
                bytes + desc.strtab_offset + import.name_offset));
    }
    for (uint32_t i = 0; i < desc.n_relocs; ++i) {
        ucp_ifunc_image_reloc_t reloc;
        memcpy(&reloc, bytes + desc.relocs_offset + i * sizeof(reloc),
               sizeof(reloc));
        if ((reloc.type != UCP_IFUNC_RELOC_RELATIVE) &&
            (reloc.type != UCP_IFUNC_RELOC_IMPORT)) {
            return UCS_ERR_INVALID_PARAM;
        }
        out.relocs.push_back(SlotReloc{reloc.vaddr,
                                       reloc.type == UCP_IFUNC_RELOC_IMPORT,
                                       reloc.import_index, reloc.addend});
    }
    *slot_image = std::move(out);
    return UCS_OK;
}

} // namespace sandbox
} // namespace ucx_ifunc

using ucx_ifunc::api_call;
using ucx_ifunc::sandbox::GrantWindow;

namespace ucx_ifunc {

ucs_status_t sandbox_mem_alloc(size_t                                length,
                               const ucp_ifunc_sandbox_mem_params_t *params,
                               void                                **address_p)
{
    if ((address_p == nullptr) || (length == 0) ||
        (length >
         ucx_ifunc::sandbox::kGrantEnd - ucx_ifunc::sandbox::kGrantOffset) ||
        ((params != nullptr) && (params->field_mask != 0))) {
        ucs_error("ucp_ifunc_sandbox_mem_alloc: a bad argument (length "
                  "%zu)",
                  length);
        return UCS_ERR_INVALID_PARAM;
    }
    return GrantWindow::get().alloc(length, address_p);
}

ucs_status_t sandbox_mem_free(void *address)
{
    ucs_status_t status = GrantWindow::get().free(address);
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_sandbox_mem_free: %p is not an address "
                  "ucp_ifunc_sandbox_mem_alloc returned",
                  address);
    }
    return status;
}

ucs_status_t sandbox_grant(void *address, size_t length, unsigned rights,
                           const char                             *ifunc_name,
                           const ucp_ifunc_sandbox_grant_params_t *params)
{
    const uint64_t page = 4096;
    const uint8_t *signer =
            ((params != nullptr) &&
             (params->field_mask & UCP_IFUNC_SANDBOX_GRANT_FIELD_SIGNER))
                    ? params->signer
                    : nullptr;
    if ((ifunc_name == nullptr) || (length == 0) ||
        ((rights != UCP_IFUNC_SANDBOX_GRANT_READ) &&
         (rights !=
          (UCP_IFUNC_SANDBOX_GRANT_READ | UCP_IFUNC_SANDBOX_GRANT_WRITE))) ||
        ((params != nullptr) &&
         (params->field_mask &
          ~uint64_t(UCP_IFUNC_SANDBOX_GRANT_FIELD_SIGNER))) ||
        ((params != nullptr) &&
         (params->field_mask & UCP_IFUNC_SANDBOX_GRANT_FIELD_SIGNER) &&
         (signer == nullptr))) {
        ucs_error("ucp_ifunc_sandbox_grant: a bad argument: the ifunc's "
                  "name, a length and rights READ or READ|WRITE are "
                  "needed");
        return UCS_ERR_INVALID_PARAM;
    }
    uintptr_t start = reinterpret_cast<uintptr_t>(address);
    if ((start % page) || (length % page) ||
        (GrantWindow::get().grant(
                 start, length,
                 ucx_ifunc::sandbox::kSlotRead |
                         ((rights & UCP_IFUNC_SANDBOX_GRANT_WRITE)
                                  ? unsigned(ucx_ifunc::sandbox::kSlotWrite)
                                  : 0),
                 ifunc_name, signer) != UCS_OK)) {
        ucs_error("ucp_ifunc_sandbox_grant: [%p, +%zu) is not whole pages "
                  "of one allocation of ucp_ifunc_sandbox_mem_alloc; "
                  "allocate the memory that sandboxed code may reach "
                  "with it",
                  address, length);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

} // namespace ucx_ifunc
