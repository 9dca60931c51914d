/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The JIT module (libucp_ifunc_jit.so, jit_module.h): LLVM's part of the
 * step "jit" (jit.h), loaded by jit.cc on the first bitcode compile, so
 * that a process that never compiles bitcode does not load LLVM. Built
 * without RTTI, as LLVM is.
 */
#include "ucp/ifunc/load/jit_module.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>

/* libtool's -DPIC would rename a parameter in LLVM's headers. */
#undef PIC
#include <llvm/ADT/Triple.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/ExecutionEngine/JITLink/JITLinkMemoryManager.h>
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutorProcessControl.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/Orc/Shared/AllocationActions.h>
#include <llvm/ExecutionEngine/Orc/TaskDispatch.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Process.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* LLVM 14's JITLink links x86-64 and aarch64 ELF objects, not ppc64: there
 * the JIT links with RuntimeDyld. */
#if defined(__powerpc64__)
#define UCX_IFUNC_JIT_RTDYLD 1
#else
#define UCX_IFUNC_JIT_RTDYLD 0
#endif

namespace ucx_ifunc {

namespace {

std::atomic<size_t> memory_in_use{0};

/* What jit.h calls a JitResolver, and its limits, inside the module. */
using JitResolver =
        std::function<ucs_status_t(const std::string &name, uint64_t *address)>;
struct JitLimits {
    double timeout;
    size_t max_memory;
};

} // namespace


namespace {

/* Every use of LLVM in this process, so that no thread is inside LLVM (and
 * none of its locks is held) when a compile forks. */
std::mutex llvm_lock;
/* One compile at a time: the memory limit is per compile. */
std::mutex compile_lock;

#if UCX_IFUNC_JIT_RTDYLD
/* The weak imports of the compile under way that this process lacks, under
 * compile_lock: the child compiles them as null, since RuntimeDyld aborts
 * the process on an import it cannot resolve, weak or not. */
std::set<std::string> absent_weak;
#endif

void init_llvm()
{
    static std::once_flag once;
    std::call_once(once, [] {
#if UCX_IFUNC_JIT_RTDYLD
        /* By the process's ISA, not LLVM_NATIVE_*: a cross build may use
         * another ISA's llvm-config.h (docs/toolchain.md). */
        LLVMInitializePowerPCTargetInfo();
        LLVMInitializePowerPCTarget();
        LLVMInitializePowerPCTargetMC();
        LLVMInitializePowerPCAsmPrinter();
#else
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
#endif
    });
}

/* What the child reports before its object or its error text. */
struct ChildReport {
    uint32_t status; /* kChild* */
    uint32_t reserved;
    uint64_t size; /* bytes that follow */
};

enum : uint32_t {
    kChildOk      = 0,
    kChildInvalid = 1, /* does not parse, verify or compile */
    kChildArch    = 2, /* the module is for another architecture */
};

/* Exit codes of a child that could not report. */
enum { kExitMemory = 97, kExitFatal = 98, kExitIo = 99 };

/* Exit code of a child that could not set its limits. */
constexpr int kExitSetup = 100;

std::string llvm_text(llvm::Error error)
{
    return llvm::toString(std::move(error));
}

/* The module, optimised and compiled for this CPU into an ELF object in
 * @a object; kChildOk, else the reason in @a error. Runs in the child. */
uint32_t child_build(const void *bitcode, size_t size, const std::string &entry,
                     llvm::SmallVectorImpl<char> *object, std::string *error)
{
    llvm::LLVMContext context;
    auto              buffer = llvm::MemoryBuffer::getMemBuffer(
                         llvm::StringRef(static_cast<const char *>(bitcode), size),
                         "bitcode", false);
    auto module = llvm::parseBitcodeFile(buffer->getMemBufferRef(), context);
    if (!module) {
        *error = "bitcode does not parse: " + llvm_text(module.takeError());
        return kChildInvalid;
    }
    llvm::Module &m = **module;

    llvm::Triple host(llvm::sys::getProcessTriple());
    llvm::Triple triple(m.getTargetTriple());
    if (triple.getArch() != host.getArch()) {
        *error = "the module's triple '" + m.getTargetTriple() +
                 "' is not for this machine's architecture";
        return kChildArch;
    }

    std::string              problems;
    llvm::raw_string_ostream problem_stream(problems);
    if (llvm::verifyModule(m, &problem_stream)) {
        problem_stream.flush();
        *error = "bitcode does not verify: " + problems.substr(0, 200);
        return kChildInvalid;
    }

#if UCX_IFUNC_JIT_RTDYLD
    for (const std::string &name : absent_weak) {
        llvm::GlobalValue *value = m.getNamedValue(name);
        if ((value != nullptr) && value->isDeclaration() &&
            value->hasExternalWeakLinkage()) {
            value->replaceAllUsesWith(
                    llvm::Constant::getNullValue(value->getType()));
            value->eraseFromParent();
        }
    }
#endif

    llvm::Function *main_fn = m.getFunction(entry);
    if ((main_fn == nullptr) || main_fn->isDeclaration() ||
        !main_fn->hasExternalLinkage()) {
        *error = "the module defines no function " + entry;
        return kChildInvalid;
    }
    for (const llvm::GlobalVariable &global : m.globals()) {
        /* Linked code has no thread-local storage of its own, as with
         * native images. */
        if (global.isThreadLocal()) {
            *error = "the module uses thread-local storage (" +
                     global.getName().str() + ")";
            return kChildInvalid;
        }
    }

    auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!builder) {
        *error = "no target for this host: " + llvm_text(builder.takeError());
        return kChildInvalid;
    }
    builder->setCodeGenOptLevel(llvm::CodeGenOpt::Default);
    builder->setRelocationModel(llvm::Reloc::PIC_);
    builder->setCodeModel(llvm::CodeModel::Small);
    auto machine = builder->createTargetMachine();
    if (!machine) {
        *error = "no target machine: " + llvm_text(machine.takeError());
        return kChildInvalid;
    }
    llvm::TargetMachine &tm = **machine;
    m.setTargetTriple(tm.getTargetTriple().str());
    m.setDataLayout(tm.createDataLayout());
    /* The front end named the baseline CPU of the triple in every
     * function; compiling for this CPU is the point. */
    const std::string cpu      = tm.getTargetCPU().str();
    const std::string features = tm.getTargetFeatureString().str();
    for (llvm::Function &function : m) {
        if (function.isDeclaration()) {
            continue;
        }
        function.removeFnAttr("target-cpu");
        function.removeFnAttr("target-features");
        function.removeFnAttr("tune-cpu");
        function.addFnAttr("target-cpu", cpu);
        function.addFnAttr("target-features", features);
    }

    /* -O2 may call a library function the code does not (printf of
     * "%s\n" becomes puts, exp2 ldexp, ...): a name the image did not list,
     * which the resolver refuses. Only the functions the module names, and
     * the memory functions codegen calls anyway (link.cc), are there. */
    llvm::TargetLibraryInfoImpl library(tm.getTargetTriple());
    {
        llvm::TargetLibraryInfo names(library);
        for (unsigned i = 0; i < llvm::NumLibFuncs; ++i) {
            auto                  func  = static_cast<llvm::LibFunc>(i);
            llvm::StringRef       name  = names.getName(func);
            const llvm::Function *named = m.getFunction(name);
            if ((named == nullptr) && (name != "memcpy") &&
                (name != "memmove") && (name != "memset")) {
                library.setUnavailable(func);
            }
        }
    }
    {
        llvm::LoopAnalysisManager     loops;
        llvm::FunctionAnalysisManager functions;
        functions.registerPass(
                [&library]() { return llvm::TargetLibraryAnalysis(library); });
        llvm::CGSCCAnalysisManager  cgscc;
        llvm::ModuleAnalysisManager modules;
        /* What clang's -O2 turns on: LLVM's own defaults leave the SLP
         * vectorizer off, and straight-line code (csmith's, say) runs
         * 1.2-3x slower without it on a wide CPU. */
        llvm::PipelineTuningOptions tuning;
        tuning.LoopInterleaving  = true;
        tuning.LoopVectorization = true;
        tuning.SLPVectorization  = true;
        tuning.LoopUnrolling     = true;
        llvm::PassBuilder passes(&tm, tuning);
        passes.registerModuleAnalyses(modules);
        passes.registerCGSCCAnalyses(cgscc);
        passes.registerFunctionAnalyses(functions);
        passes.registerLoopAnalyses(loops);
        passes.crossRegisterProxies(loops, functions, cgscc, modules);
        llvm::ModulePassManager pipeline = passes.buildPerModuleDefaultPipeline(
                llvm::OptimizationLevel::O2);
        pipeline.run(m, modules);
    }

    llvm::raw_svector_ostream stream(*object);
    llvm::legacy::PassManager codegen;
    if (tm.addPassesToEmitFile(codegen, stream, nullptr,
                               llvm::CGFT_ObjectFile)) {
        *error = "this target cannot emit objects";
        return kChildInvalid;
    }
    codegen.run(m);
    return kChildOk;
}

bool write_all(int fd, const void *data, size_t size)
{
    const char *p = static_cast<const char *>(data);
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

void child_fatal(void *, const char *, bool)
{
    _exit(kExitFatal);
}

void child_bad_alloc(void *, const char *, bool)
{
    _exit(kExitMemory);
}

void child_new_failed()
{
    _exit(kExitMemory);
}

/* Closes descriptors @a first to @a last: close_range, or one by one
 * where the kernel has none. */
void close_descriptors(unsigned first, unsigned last)
{
    if (syscall(SYS_close_range, first, last, 0) == 0) {
        return;
    }
    struct rlimit files {};
    getrlimit(RLIMIT_NOFILE, &files);
    rlim_t end =
            std::min<rlim_t>(files.rlim_cur, static_cast<rlim_t>(last) + 1);
    for (rlim_t i = first; i < end; ++i) {
        close(static_cast<int>(i));
    }
}

/* The child: limits itself, compiles, writes the report to @a fd and
 * exits without running anything of the parent's (no atexit handlers, no
 * stdio flush). */
[[noreturn]] void child_main(int fd, const void *bitcode, size_t size,
                             const std::string &entry, rlim_t address_space,
                             rlim_t cpu_seconds)
{
    /* The parent's handlers (UCX's backtrace printer, gtest's) have no
     * business in here: a crash or a limit just ends the child. */
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGXCPU, SIGPIPE,
                    SIGTERM}) {
        signal(sig, SIG_DFL);
    }
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, nullptr);

    /* Nothing of the parent's descriptors but the pipe: a peer's socket
     * or a file kept open by the child would outlive the parent's close
     * of it for as long as the compile runs. */
    if (fd > 3) {
        close_descriptors(3, fd - 1);
    }
    close_descriptors(fd + 1, ~0U);

    /* Unlimited is not an option: without the limits, no compile. */
    struct rlimit limit = {address_space, address_space};
    if (setrlimit(RLIMIT_AS, &limit) != 0) {
        _exit(kExitSetup);
    }
    limit = {cpu_seconds, cpu_seconds + 1};
    if (setrlimit(RLIMIT_CPU, &limit) != 0) {
        _exit(kExitSetup);
    }
    limit = {0, 0};
    setrlimit(RLIMIT_CORE, &limit); /* only spares the disk */

    llvm::install_fatal_error_handler(child_fatal, nullptr);
    llvm::install_bad_alloc_error_handler(child_bad_alloc, nullptr);
    std::set_new_handler(child_new_failed);

    llvm::SmallVector<char, 0> object;
    std::string                error;
    ChildReport                report{};
    try {
        report.status = child_build(bitcode, size, entry, &object, &error);
    } catch (const std::bad_alloc &) {
        _exit(kExitMemory);
    } catch (...) {
        _exit(kExitFatal);
    }
    const char *data = object.data();
    report.size      = object.size();
    if (report.status != kChildOk) {
        data        = error.data();
        report.size = error.size();
    }
    if (!write_all(fd, &report, sizeof(report)) ||
        !write_all(fd, data, report.size)) {
        _exit(kExitIo);
    }
    _exit(0);
}

/* Bytes of address space this process has mapped now; 0 when
 * /proc/self/statm cannot be read (no /proc, out of descriptors). */
size_t address_space_now()
{
    size_t pages = 0;
    FILE  *statm = fopen("/proc/self/statm", "re");
    if (statm != nullptr) {
        if (fscanf(statm, "%zu", &pages) != 1) {
            pages = 0;
        }
        fclose(statm);
    }
    return pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

/* UCX's memunits parser gives (size_t)-1 for "inf" and (size_t)-2 for
 * "auto" (UCS_MEMUNITS_INF, UCS_MEMUNITS_AUTO). */
constexpr size_t kMemoryInf  = ~static_cast<size_t>(0);
constexpr size_t kMemoryAuto = ~static_cast<size_t>(0) - 1;
/* "auto": the default of UCX_IFUNC_JIT_MAX_MEMORY. */
constexpr size_t kMemoryAutoBytes = 512ul << 20;
/* The object a child may send back, whatever the memory limit (also
 * "inf"): no image is near it. */
constexpr size_t kMaxObjectBytes = 1ul << 30;

size_t saturating_add(size_t a, size_t b)
{
    return (a > ~static_cast<size_t>(0) - b) ? ~static_cast<size_t>(0) : a + b;
}

/* The parent's hold on a compiling child and its pipe: on every way out
 * of compile_in_child (an exception too), the descriptors closed and the
 * child, if not reaped yet, killed and reaped: no process, zombie or
 * descriptor outlives the compile. */
struct ChildGuard {
    int   read_fd;
    int   write_fd;
    pid_t pid = -1;

    ChildGuard(int read_end, int write_end)
        : read_fd(read_end), write_fd(write_end)
    {
    }
    ChildGuard(const ChildGuard &)            = delete;
    ChildGuard &operator=(const ChildGuard &) = delete;

    ~ChildGuard()
    {
        close_read();
        close_write();
        if (pid > 0) {
            kill(pid, SIGKILL);
            reap(nullptr, nullptr);
        }
    }

    void close_read()
    {
        if (read_fd >= 0) {
            close(read_fd);
            read_fd = -1;
        }
    }

    void close_write()
    {
        if (write_fd >= 0) {
            close(write_fd);
            write_fd = -1;
        }
    }

    /* Waits for the child to end: true with its status, false when it
     * cannot be waited for (SIGCHLD ignored, reaped elsewhere). */
    bool reap(int *wstatus, struct rusage *usage)
    {
        int           ignored_status;
        struct rusage ignored_usage;
        for (;;) {
            pid_t r =
                    wait4(pid, (wstatus != nullptr) ? wstatus : &ignored_status,
                          0, (usage != nullptr) ? usage : &ignored_usage);
            if (r == pid) {
                pid = -1;
                return true;
            }
            if (r < 0 && errno != EINTR) {
                pid = -1;
                return false;
            }
        }
    }
};

/* Compiles in a child process within @a limits: the object in @a object. */
ucs_status_t compile_in_child(const void *bitcode, size_t size,
                              const std::string &entry, const JitLimits &limits,
                              std::string *object, std::string *why)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        *why = std::string("pipe: ") + strerror(errno);
        return UCS_ERR_IO_ERROR;
    }
    const size_t max_memory = (limits.max_memory == kMemoryAuto)
                                      ? kMemoryAutoBytes
                                      : limits.max_memory;
    const size_t mapped     = address_space_now();
    if ((mapped == 0) && (max_memory != kMemoryInf)) {
        /* A limit from 0 would fail every compile, and say it is the
         * code's: the system's failure, for this message only. */
        close(fds[0]);
        close(fds[1]);
        *why = "cannot read /proc/self/statm for the memory limit";
        return UCS_ERR_IO_ERROR;
    }
    /* "inf": no limit of address space, and no overflow making one. */
    const rlim_t address_space =
            (max_memory == kMemoryInf)
                    ? RLIM_INFINITY
                    : static_cast<rlim_t>(std::min<size_t>(
                              saturating_add(mapped, max_memory),
                              RLIM_INFINITY - 1));
    const rlim_t cpu_seconds =
            static_cast<rlim_t>(limits.timeout > 0 ? limits.timeout : 0) + 1;
    const auto deadline =
            std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(limits.timeout));
    ChildGuard child(fds[0], fds[1]);
    {
        std::lock_guard<std::mutex> guard(llvm_lock);
        init_llvm();
        child.pid = fork();
    }
    if (child.pid == 0) {
        close(fds[0]);
        child_main(fds[1], bitcode, size, entry, address_space, cpu_seconds);
    }
    int saved_errno = errno;
    child.close_write();
    if (child.pid < 0) {
        *why = std::string("fork: ") + strerror(saved_errno);
        return UCS_ERR_IO_ERROR;
    }

    /* Read what it sends until it closes the pipe, within the deadline and
     * the size the limits allow. */
    const size_t cap =
            sizeof(ChildReport) + std::min(max_memory, kMaxObjectBytes);
    bool        eof       = false;
    bool        timed_out = false;
    bool        too_large = false;
    std::string data;
    char        chunk[65536];
    while (!eof) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pfd   = {child.read_fd, POLLIN, 0};
        int           ready = poll(&pfd, 1, static_cast<int>(left));
        if (ready < 0 && errno != EINTR) {
            break;
        }
        if (ready <= 0) {
            continue;
        }
        ssize_t n = read(child.read_fd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            break;
        }
        if (n == 0) {
            eof = true;
        } else if (data.size() + static_cast<size_t>(n) > cap) {
            too_large = true;
            break;
        } else {
            data.append(chunk, static_cast<size_t>(n)); /* may throw */
        }
    }
    child.close_read();
    if (!eof) {
        kill(child.pid, SIGKILL);
    }
    int           wstatus = 0;
    struct rusage usage {};
    const bool    waited = child.reap(&wstatus, &usage);

    /* Only what the code makes the compiler do is final (the caller
     * remembers UCS_ERR_EXCEEDS_LIMIT and UCS_ERR_INVALID_PARAM): a child
     * that ran out of CPU time, not one this process or the machine held
     * up (a slow fork, a loaded machine, the OOM killer's SIGKILL). */
    const double cpu_used =
            static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
            static_cast<double>(usage.ru_utime.tv_usec +
                                usage.ru_stime.tv_usec) /
                    1e6;
    char limit_text[64];
    if ((waited && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGXCPU) ||
        (timed_out && waited && (cpu_used >= limits.timeout / 2))) {
        snprintf(limit_text, sizeof(limit_text), "%.3g s", limits.timeout);
        *why = std::string("compiling took longer than ") + limit_text +
               " (UCX_IFUNC_JIT_TIMEOUT)";
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (timed_out) {
        /* Under half the time on a CPU: this process or the machine held
         * it up; the next message may compile. */
        snprintf(limit_text, sizeof(limit_text), "%.3g s (%.3g s of CPU)",
                 limits.timeout, cpu_used);
        *why = std::string("the compiler did not finish within ") + limit_text +
               " (UCX_IFUNC_JIT_TIMEOUT; not for good)";
        return UCS_ERR_TIMED_OUT;
    }
    if (too_large ||
        (waited && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == kExitMemory)) {
        snprintf(limit_text, sizeof(limit_text), "%zu bytes",
                 std::min(max_memory, kMaxObjectBytes));
        *why = std::string("compiling took more memory than ") + limit_text +
               " (UCX_IFUNC_JIT_MAX_MEMORY)";
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    ChildReport report{};
    if (!eof || data.size() < sizeof(report) ||
        (memcpy(&report, data.data(), sizeof(report)),
         data.size() - sizeof(report) != report.size) ||
        (waited && !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0))) {
        if (waited && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL) {
            /* Not ours (we kill only on the deadline or size): the OOM
             * killer's or an operator's, not the code's doing. */
            *why = "the compiler was killed (SIGKILL)";
            return UCS_ERR_NO_RESOURCE;
        }
        if (waited && WIFEXITED(wstatus) &&
            (WEXITSTATUS(wstatus) == kExitIo ||
             WEXITSTATUS(wstatus) == kExitSetup)) {
            *why = "the compiler could not set its limits or send its report";
            return UCS_ERR_NO_RESOURCE;
        }
        if (!waited || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)) {
            *why = "the compiler's report was cut short";
            return UCS_ERR_IO_ERROR;
        }
        if (waited && WIFSIGNALED(wstatus)) {
            *why = "the compiler crashed (signal " +
                   std::to_string(WTERMSIG(wstatus)) + ")";
        } else if (waited && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
            *why = "the compiler failed (exit " +
                   std::to_string(WEXITSTATUS(wstatus)) + ")";
        } else {
            *why = "the compiler's report was cut short";
        }
        return UCS_ERR_INVALID_PARAM;
    }
    data.erase(0, sizeof(report));
    if (report.status != kChildOk) {
        /* Names from the bitcode end up in the text, which is logged with
         * %s: no escape sequence or line of the sender's reaches a
         * terminal or a log as such. */
        for (char &c : data) {
            const auto byte = static_cast<unsigned char>(c);
            if ((byte < 0x20) || (byte >= 0x7f)) {
                c = '?';
            }
        }
    }
    if (report.status == kChildArch) {
        *why = std::move(data);
        return UCS_ERR_UNSUPPORTED;
    }
    if (report.status != kChildOk) {
        *why = std::move(data);
        return UCS_ERR_INVALID_PARAM;
    }
    *object = std::move(data);
    return UCS_OK;
}

/* The memory of one code's link graph: one private mapping, its standard
 * segments first, each given its protection when the link finalizes (never
 * writable and executable at once), the segments needed only while
 * linking unmapped then, and the rest unmapped when the code goes. Its own
 * rather than LLVM 14's in-process manager, which keeps the pages mapped
 * after deallocation; and it counts what it holds. One per code, used
 * under llvm_lock only. */
class CodeMemory : public llvm::jitlink::JITLinkMemoryManager {
public:
    CodeMemory(size_t page_size, size_t limit)
        : page_size_(page_size), limit_(limit)
    {
    }

    ~CodeMemory() override
    {
        for (auto &entry : mappings_) {
            release(entry.first, entry.second.size);
        }
    }

    using JITLinkMemoryManager::allocate;
    using JITLinkMemoryManager::deallocate;

    void allocate(const llvm::jitlink::JITLinkDylib *,
                  llvm::jitlink::LinkGraph &graph,
                  OnAllocatedFunction       done) override;

    void deallocate(std::vector<FinalizedAlloc> allocs,
                    OnDeallocatedFunction       done) override
    {
        llvm::Error error = llvm::Error::success();
        for (FinalizedAlloc &alloc : allocs) {
            char *base  = alloc.release().toPtr<char *>();
            auto  found = mappings_.find(base);
            if (found == mappings_.end()) {
                continue;
            }
            error = llvm::joinErrors(std::move(error),
                                     llvm::orc::shared::runDeallocActions(
                                             found->second.dealloc_actions));
            release(base, found->second.size);
            mappings_.erase(found);
        }
        done(std::move(error));
    }

    size_t held() const { return held_; }

private:
    class InFlight;
    struct Mapping {
        size_t                                              size;
        std::vector<llvm::orc::shared::WrapperFunctionCall> dealloc_actions;
    };
    struct Segment {
        char                  *start;
        size_t                 size;
        llvm::jitlink::MemProt protection;
    };

    void release(char *base, size_t size)
    {
        munmap(base, size);
        held_ -= size;
        memory_in_use.fetch_sub(size, std::memory_order_relaxed);
    }

    size_t                    page_size_;
    size_t                    limit_;
    size_t                    held_ = 0;
    std::map<char *, Mapping> mappings_;
};

class CodeMemory::InFlight
    : public llvm::jitlink::JITLinkMemoryManager::InFlightAlloc {
public:
    InFlight(CodeMemory &memory, llvm::orc::shared::AllocActions actions,
             char *base, size_t standard, size_t finalize,
             std::vector<Segment> segments)
        : memory_(memory), actions_(std::move(actions)), base_(base),
          standard_(standard), finalize_(finalize),
          segments_(std::move(segments))
    {
    }

    ~InFlight() override
    {
        if (base_ != nullptr) {
            memory_.release(base_, standard_);
            munmap(base_ + standard_, finalize_);
        }
    }

    void abandon(OnAbandonedFunction done) override
    {
        memory_.release(base_, standard_);
        munmap(base_ + standard_, finalize_);
        base_ = nullptr;
        done(llvm::Error::success());
    }

    void finalize(OnFinalizedFunction done) override
    {
        for (const Segment &segment : segments_) {
            using llvm::jitlink::MemProt;
            auto bits       = static_cast<unsigned>(segment.protection);
            int  protection = 0;
            if ((bits & static_cast<unsigned>(MemProt::Read)) != 0) {
                protection |= PROT_READ;
            }
            if ((bits & static_cast<unsigned>(MemProt::Write)) != 0) {
                protection |= PROT_WRITE;
            }
            if ((bits & static_cast<unsigned>(MemProt::Exec)) != 0) {
                protection |= PROT_EXEC;
            }
            if ((protection & PROT_EXEC) != 0) {
                __builtin___clear_cache(segment.start,
                                        segment.start + segment.size);
            }
            if (mprotect(segment.start, segment.size, protection) != 0) {
                done(llvm::errorCodeToError(
                        std::error_code(errno, std::generic_category())));
                return;
            }
        }
        auto dealloc_actions = llvm::orc::shared::runFinalizeActions(actions_);
        if (!dealloc_actions) {
            done(dealloc_actions.takeError());
            return;
        }
        munmap(base_ + standard_, finalize_);
        memory_.mappings_[base_] = {standard_, std::move(*dealloc_actions)};
        char *base               = base_;
        base_                    = nullptr;
        done(FinalizedAlloc(llvm::orc::ExecutorAddr::fromPtr(base)));
    }

private:
    CodeMemory                     &memory_;
    llvm::orc::shared::AllocActions actions_;
    char                           *base_;
    size_t                          standard_;
    size_t                          finalize_;
    std::vector<Segment>            segments_;
};

void CodeMemory::allocate(const llvm::jitlink::JITLinkDylib *,
                          llvm::jitlink::LinkGraph &graph,
                          OnAllocatedFunction       done)
{
    llvm::jitlink::BasicLayout layout(graph);
    auto sizes = layout.getContiguousPageBasedLayoutSizes(page_size_);
    if (!sizes) {
        done(sizes.takeError());
        return;
    }
    if (held_ + sizes->StandardSegs > limit_) {
        done(llvm::make_error<llvm::StringError>(
                "the linked code would exceed UCX_IFUNC_JIT_MAX_MEMORY",
                llvm::inconvertibleErrorCode()));
        return;
    }
    void *mapping = mmap(nullptr, sizes->total(), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED) {
        done(llvm::errorCodeToError(
                std::error_code(errno, std::generic_category())));
        return;
    }
    char                *base     = static_cast<char *>(mapping);
    char                *standard = base;
    char                *finalize = base + sizes->StandardSegs;
    std::vector<Segment> segments;
    for (auto &entry : layout.segments()) {
        const auto &group   = entry.first;
        auto       &segment = entry.second;
        bool        kept    = group.getMemDeallocPolicy() ==
                    llvm::jitlink::MemDeallocPolicy::Standard;
        char *&next = kept ? standard : finalize;
        size_t size = llvm::alignTo(segment.ContentSize + segment.ZeroFillSize,
                                    page_size_);
        segment.WorkingMem = next;
        segment.Addr       = llvm::orc::ExecutorAddr::fromPtr(next);
        segments.push_back({next, size, group.getMemProt()});
        next += size;
    }
    held_ += sizes->StandardSegs;
    memory_in_use.fetch_add(sizes->StandardSegs, std::memory_order_relaxed);
    auto in_flight = std::make_unique<InFlight>(
            *this, std::move(layout.graphAllocActions()), base,
            sizes->StandardSegs, sizes->FinalizeSegs, std::move(segments));
    if (llvm::Error error = layout.apply()) {
        done(std::move(error)); /* in_flight unmaps it */
        return;
    }
    done(std::move(in_flight));
}

#if UCX_IFUNC_JIT_RTDYLD
/* RuntimeDyld's pages for one code, counted against its limit like
 * CodeMemory's. SectionMemoryManager protects them (never writable and
 * executable at once) and syncs the instruction cache. */
class CountedMapper : public llvm::SectionMemoryManager::MemoryMapper {
public:
    explicit CountedMapper(size_t limit) : limit_(limit) {}

    llvm::sys::MemoryBlock
    allocateMappedMemory(llvm::SectionMemoryManager::AllocationPurpose,
                         size_t size, const llvm::sys::MemoryBlock *near,
                         unsigned flags, std::error_code &error) override
    {
        if (held_ + size > limit_) {
            error = std::make_error_code(std::errc::not_enough_memory);
            return {};
        }
        /* Each block right after the highest one so far, and never one
         * further than kWindow from the others: ppc64 code finds its TOC
         * (in a data section) at a 32-bit offset from itself
         * (R_PPC64_REL16_HA/LO on .TOC.), which RuntimeDyld truncates
         * silently. SectionMemoryManager asks for each purpose's blocks
         * near that purpose's last one only, which another purpose's
         * block may hold: the kernel (QEMU under test/cross) then put a
         * data block 0x3f00000000 bytes away, and the code read through
         * a wrong TOC pointer. */
        llvm::sys::MemoryBlock        after(reinterpret_cast<void *>(end_), 0);
        const llvm::sys::MemoryBlock *hint = (end_ != 0) ? &after : near;
        llvm::sys::MemoryBlock block = llvm::sys::Memory::allocateMappedMemory(
                size, hint, flags, error);
        if (error) {
            return block;
        }
        uintptr_t start = reinterpret_cast<uintptr_t>(block.base());
        uintptr_t end   = start + block.allocatedSize();
        uintptr_t low   = (end_ == 0) ? start : std::min(begin_, start);
        uintptr_t high  = std::max(end_, end);
        if (high - low > kWindow) {
            llvm::sys::Memory::releaseMappedMemory(block);
            error = std::make_error_code(std::errc::address_not_available);
            return {};
        }
        begin_ = low;
        end_   = high;
        held_ += block.allocatedSize();
        memory_in_use.fetch_add(block.allocatedSize(),
                                std::memory_order_relaxed);
        return block;
    }

    std::error_code protectMappedMemory(const llvm::sys::MemoryBlock &block,
                                        unsigned flags) override
    {
        return llvm::sys::Memory::protectMappedMemory(block, flags);
    }

    std::error_code releaseMappedMemory(llvm::sys::MemoryBlock &block) override
    {
        size_t size = block.allocatedSize();
        held_ -= size;
        memory_in_use.fetch_sub(size, std::memory_order_relaxed);
        return llvm::sys::Memory::releaseMappedMemory(block);
    }

    size_t held() const { return held_; }

private:
    /* The most the blocks of one code may span (a 32-bit signed offset
     * with room to spare). */
    static constexpr size_t kWindow = size_t(1) << 30;

    size_t    limit_;
    size_t    held_  = 0;
    uintptr_t begin_ = 0; /* the lowest block's start */
    uintptr_t end_   = 0; /* the highest block's end; 0: no block yet */
};
#endif

/* The caller's resolver while its compile links; nothing resolves after. */
struct ResolveState {
    const JitResolver *resolve = nullptr;
    ucs_status_t       status  = UCS_OK; /* the first refusal */
    std::string        refused;
    std::string        errors; /* the session's first error */
};

/* Defines each name the object needs as the resolver answers: the only
 * way anything outside the code reaches it. */
class ResolverGenerator : public llvm::orc::DefinitionGenerator {
public:
    explicit ResolverGenerator(ResolveState *state) : state_(state) {}

    llvm::Error tryToGenerate(llvm::orc::LookupState &, llvm::orc::LookupKind,
                              llvm::orc::JITDylib &dylib,
                              llvm::orc::JITDylibLookupFlags,
                              const llvm::orc::SymbolLookupSet &names) override
    {
        llvm::orc::SymbolMap found;
        for (const auto &name : names) {
            std::string  text    = (*name.first).str();
            uint64_t     address = 0;
            ucs_status_t status  = (state_->resolve != nullptr)
                                           ? (*state_->resolve)(text, &address)
                                           : UCS_ERR_NO_ELEM;
            if (status == UCS_OK) {
                found[name.first] = llvm::JITEvaluatedSymbol(
                        address, llvm::JITSymbolFlags::Exported);
            } else if (status != UCS_ERR_NO_ELEM) {
                if (state_->status == UCS_OK) {
                    state_->status  = status;
                    state_->refused = text;
                }
                return llvm::make_error<llvm::StringError>(
                        "import refused: " + text,
                        llvm::inconvertibleErrorCode());
            }
        }
        if (found.empty()) {
            return llvm::Error::success();
        }
        return dylib.define(llvm::orc::absoluteSymbols(std::move(found)));
    }

private:
    ResolveState *state_; /* the code's (CompiledCode), outlives this */
};

} // namespace

/* One compiled code: its session, which holds its memory. */
struct CompiledCode {
    /* First, so that it outlives the session, whose generator and error
     * reporter point to it. */
    ResolveState state;
#if UCX_IFUNC_JIT_RTDYLD
    /* Outlives the session, whose memory managers use it. */
    std::unique_ptr<CountedMapper> mapper;
#endif
    std::unique_ptr<llvm::orc::ExecutionSession> session;
    std::unique_ptr<llvm::orc::ObjectLayer>      layer;
    void                                        *entry  = nullptr;
    size_t                                       memory = 0;

    ~CompiledCode()
    {
        std::lock_guard<std::mutex> guard(llvm_lock);
        if (session) {
            /* Unlinks everything: the memory manager unmaps the code. */
            llvm::consumeError(session->endSession());
        }
        layer.reset();
        session.reset();
    }
};

namespace {

#if !UCX_IFUNC_JIT_RTDYLD
/* LLVM 14's JITLink gives every section that is not code read+write: the
 * object's constants and its relocated pointer tables are made read-only
 * again, as a native image's are. The fixups are written before the memory
 * manager applies the protections (CodeMemory::InFlight::finalize). */
class ReadOnlyData : public llvm::orc::ObjectLinkingLayer::Plugin {
public:
    void modifyPassConfig(llvm::orc::MaterializationResponsibility &,
                          llvm::jitlink::LinkGraph &,
                          llvm::jitlink::PassConfiguration &config) override
    {
        config.PrePrunePasses.push_back([](llvm::jitlink::LinkGraph &graph) {
            for (llvm::jitlink::Section &section : graph.sections()) {
                llvm::StringRef name = section.getName();
                if (name.startswith(".rodata") ||
                    name.startswith(".data.rel.ro")) {
                    section.setMemProt(llvm::jitlink::MemProt::Read);
                }
            }
            return llvm::Error::success();
        });
    }

    llvm::Error
    notifyFailed(llvm::orc::MaterializationResponsibility &) override
    {
        return llvm::Error::success();
    }

    llvm::Error notifyRemovingResources(llvm::orc::ResourceKey) override
    {
        return llvm::Error::success();
    }

    void notifyTransferringResources(llvm::orc::ResourceKey,
                                     llvm::orc::ResourceKey) override
    {
    }
};
#endif

/* Links @a object in a session of its own, resolving through @a resolve. */
ucs_status_t link_object(const std::string &object, const std::string &entry,
                         const JitResolver &resolve, const JitLimits &limits,
                         std::unique_ptr<CompiledCode> *code, std::string *why)
{
    /* Declared before the lock: on failure ~CompiledCode takes it to end
     * the session. */
    auto          impl  = std::make_unique<CompiledCode>();
    ResolveState *state = &impl->state;
    state->resolve      = &resolve;

    std::lock_guard<std::mutex> guard(llvm_lock);
    auto                        memory = std::make_unique<CodeMemory>(
            static_cast<size_t>(sysconf(_SC_PAGESIZE)), limits.max_memory);
    auto *counted = memory.get();
    auto  control = llvm::orc::SelfExecutorProcessControl::Create(
             nullptr, /* LLVM makes the string pool */
             std::make_unique<llvm::orc::InPlaceTaskDispatcher>(),
             std::move(memory));
    if (!control) {
        *why = "no JIT session: " + llvm_text(control.takeError());
        return UCS_ERR_NO_MEMORY;
    }
    impl->session =
            std::make_unique<llvm::orc::ExecutionSession>(std::move(*control));
    impl->session->setErrorReporter([state](llvm::Error error) {
        if (state->errors.empty()) {
            state->errors = llvm_text(std::move(error));
        } else {
            llvm::consumeError(std::move(error));
        }
    });
#if UCX_IFUNC_JIT_RTDYLD
    impl->mapper = std::make_unique<CountedMapper>(limits.max_memory);
    auto *mapper = impl->mapper.get();
    impl->layer  = std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
            *impl->session, [mapper]() {
                return std::make_unique<llvm::SectionMemoryManager>(mapper);
            });
#else
    auto linking =
            std::make_unique<llvm::orc::ObjectLinkingLayer>(*impl->session);
    linking->addPlugin(std::make_unique<ReadOnlyData>());
    impl->layer = std::move(linking);
#endif
    llvm::orc::JITDylib &dylib = impl->session->createBareJITDylib("ifunc");
    dylib.addGenerator(std::make_unique<ResolverGenerator>(state));

    ucs_status_t status = UCS_OK;
    llvm::Error  added  = impl->layer->add(
              dylib, llvm::MemoryBuffer::getMemBufferCopy(object, "ifunc.o"));
    if (added) {
        *why   = "the object does not link: " + llvm_text(std::move(added));
        status = UCS_ERR_INVALID_PARAM;
    } else {
        auto symbol =
                impl->session->lookup({&dylib}, impl->session->intern(entry));
        if (symbol) {
            state->resolve = nullptr;
            void *address  = reinterpret_cast<void *>(
                    static_cast<uintptr_t>(symbol->getAddress()));
            impl->entry = address;
#if UCX_IFUNC_JIT_RTDYLD
            impl->memory = mapper->held();
            (void)counted;
#else
            impl->memory = counted->held();
#endif
            *code = std::move(impl);
            return UCS_OK;
        }
        std::string failure = llvm_text(symbol.takeError());
        if (state->status != UCS_OK) {
            *why   = "import " + state->refused + " refused";
            status = state->status;
        } else {
            *why = "the code does not link: " +
                   (state->errors.empty() ? failure : state->errors);
            status = UCS_ERR_INVALID_PARAM;
        }
    }
    state->resolve = nullptr;
    return status; /* impl, declared before the lock, ends the session */
}

#if UCX_IFUNC_JIT_RTDYLD
/* Fills absent_weak with the weak undefined names of @a object that
 * @a resolve does not find. */
ucs_status_t find_absent_weak(const std::string &object,
                              const JitResolver &resolve, std::string *why)
{
    std::vector<std::string> weak;
    {
        std::lock_guard<std::mutex> guard(llvm_lock);
        auto parsed = llvm::object::ObjectFile::createObjectFile(
                llvm::MemoryBufferRef(object, "ifunc.o"));
        if (!parsed) {
            *why = "the object does not parse: " +
                   llvm_text(parsed.takeError());
            return UCS_ERR_INVALID_PARAM;
        }
        for (const llvm::object::SymbolRef &symbol : (*parsed)->symbols()) {
            auto flags = symbol.getFlags();
            auto name  = symbol.getName();
            if (!flags || !name) {
                llvm::consumeError(flags.takeError());
                llvm::consumeError(name.takeError());
                continue;
            }
            if ((*flags & llvm::object::SymbolRef::SF_Undefined) &&
                (*flags & llvm::object::SymbolRef::SF_Weak)) {
                weak.push_back(name->str());
            }
        }
    }
    for (const std::string &name : weak) {
        uint64_t address = 0;
        if (resolve(name, &address) == UCS_ERR_NO_ELEM) {
            absent_weak.insert(name);
        }
    }
    return UCS_OK;
}
#endif

ucs_status_t compile(const void *bitcode, size_t size,
                     const std::string &triple, const std::string &entry,
                     const JitResolver &resolve, const JitLimits &limits,
                     std::unique_ptr<CompiledCode> *code, std::string *why)
{
    llvm::Triple wanted(triple);
    llvm::Triple host(llvm::sys::getProcessTriple());
    if (wanted.getArch() == llvm::Triple::UnknownArch ||
        wanted.getArch() != host.getArch()) {
        *why = "bitcode for '" + triple + "' does not run on this " +
               host.getArchName().str() + " machine";
        return UCS_ERR_UNSUPPORTED;
    }
    std::lock_guard<std::mutex> compiling(compile_lock);
    std::string                 object;
    ucs_status_t                status =
            compile_in_child(bitcode, size, entry, limits, &object, why);
    if (status != UCS_OK) {
        return status;
    }
#if UCX_IFUNC_JIT_RTDYLD
    /* Absent weak imports: compiled again with them null (absent_weak). */
    status = find_absent_weak(object, resolve, why);
    if ((status == UCS_OK) && !absent_weak.empty()) {
        object.clear();
        status = compile_in_child(bitcode, size, entry, limits, &object, why);
    }
    absent_weak.clear();
    if (status != UCS_OK) {
        return status;
    }
#endif
    return link_object(object, entry, resolve, limits, code, why);
}

/* The module's functions (jit_module.h): nothing C++ crosses them. */
ucs_status_t module_compile(const void *bitcode, size_t size,
                            const char *triple, const char *entry,
                            ucx_ifunc_jit_resolve_fn resolve, void *resolve_arg,
                            double timeout, size_t max_memory, void **code_p,
                            void **entry_p, size_t *memory_p, char *why,
                            size_t why_size)
{
    std::string  reason;
    ucs_status_t status;
    try {
        JitResolver resolver = [resolve, resolve_arg](const std::string &name,
                                                      uint64_t *address) {
            return resolve(resolve_arg, name.c_str(), address);
        };
        std::unique_ptr<CompiledCode> code;
        status = compile(bitcode, size, triple, entry, resolver,
                         JitLimits{timeout, (max_memory == kMemoryAuto)
                                                    ? kMemoryAutoBytes
                                                    : max_memory},
                         &code, &reason);
        if (status == UCS_OK) {
            *entry_p  = code->entry;
            *memory_p = code->memory;
            *code_p   = code.release(); /* the caller's, until release */
        }
    } catch (const std::bad_alloc &) {
        reason = "out of memory";
        status = UCS_ERR_NO_MEMORY;
    }
    snprintf(why, why_size, "%s", reason.c_str());
    return status;
}

void module_release(void *code)
{
    std::unique_ptr<CompiledCode> owned(static_cast<CompiledCode *>(code));
}

size_t module_memory_in_use()
{
    return memory_in_use.load(std::memory_order_relaxed);
}

const ucx_ifunc_jit_module_t the_module = {UCX_IFUNC_JIT_MODULE_ABI,
                                           module_compile, module_release,
                                           module_memory_in_use};

} // namespace

} // namespace ucx_ifunc

extern "C" __attribute__((visibility("default"))) const ucx_ifunc_jit_module_t *
ucx_ifunc_jit_module(void)
{
    return &ucx_ifunc::the_module;
}
