/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "jit": turning the LLVM bitcode of a bitcode image into code that
 * runs in this process, compiled for this machine's CPU at -O2 with LLVM's
 * ORC (issue 32). The bitcode is parsed, optimised and compiled to an
 * object in a child process (fork) under limits of time and memory, so that
 * bitcode crafted to take minutes or gigabytes to compile, or to crash
 * LLVM, costs the target at most the limits; the object is linked here,
 * each undefined name resolved only by the caller's resolver. Without LLVM
 * (configure --without-llvm) every compile is refused.
 */
#ifndef UCP_IFUNC_JIT_H_
#define UCP_IFUNC_JIT_H_

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ucx_ifunc {

/* Whether this library was built with LLVM, i.e. compiles bitcode. */
bool jit_available();

/* What one compile may take. */
struct JitLimits {
    double timeout    = 1;         /* seconds of the compile (wall and CPU) */
    size_t max_memory = 512 << 20; /* bytes of address space the compile
                                      may add, and of the object it makes */
};

/* Resolves one name the compiled code refers to: UCS_OK with its address
 * in @a address, UCS_ERR_NO_ELEM when there is none (a weak reference is
 * then null, a strong one fails the link), any other status to refuse the
 * name (the compile fails with it). Codegen's own calls (memcpy, memset,
 * ...) come here too. */
using JitResolver =
        std::function<ucs_status_t(const std::string &name, uint64_t *address)>;

/* Code compiled from one bitcode module and linked into this process;
 * unlinked, its memory freed, when destroyed. */
class JitCode {
public:
    struct Impl; /* jit.cc: LLVM's objects */

    JitCode(std::unique_ptr<Impl> impl, void *entry, size_t memory);
    ~JitCode();
    JitCode(const JitCode &)            = delete;
    JitCode &operator=(const JitCode &) = delete;

    /* The address of the entry function. */
    void *entry() const { return entry_; }

    /* Bytes of memory the linked code holds (its segments, page-rounded,
     * as the JIT's memory manager maps them). */
    size_t memory() const { return memory_; }

private:
    std::unique_ptr<Impl> impl_;
    void                 *entry_  = nullptr;
    size_t                memory_ = 0;
};

/* Compiles the @a size bytes of LLVM bitcode at @a bitcode, whose module
 * is for target triple @a triple, for this CPU, links it resolving every
 * undefined name through @a resolve, and finds the function @a entry.
 * UCS_ERR_UNSUPPORTED without LLVM or when the triple's architecture is not
 * this machine's; UCS_ERR_EXCEEDS_LIMIT when the compile exceeds
 * @a limits by the code's doing (the child ran out of its CPU time, or had
 * at least half the timeout on a CPU, or hit the memory limit), a property
 * of the code; UCS_ERR_TIMED_OUT when the child missed the deadline with
 * less CPU (this process or the machine held it up), UCS_ERR_NO_RESOURCE
 * when something else killed it (the OOM killer), UCS_ERR_IO_ERROR when
 * the system refused a pipe or fork: none of these the code's, so worth a
 * later try; UCS_ERR_INVALID_PARAM for bitcode that does not parse,
 * verify or compile, or that has no such entry or uses thread-local
 * storage; a refusal of @a resolve with its status. Compiles are
 * serialized; thread-safe. Failures are logged by the caller, with
 * @a why set to what failed. */
ucs_status_t jit_compile(const void *bitcode, size_t size,
                         const std::string &triple, const std::string &entry,
                         const JitResolver &resolve, const JitLimits &limits,
                         std::unique_ptr<JitCode> *code, std::string *why);

/* Bytes the linked code of all live JitCode objects holds, in this
 * process. */
size_t jit_memory_in_use();

} // namespace ucx_ifunc

#endif
