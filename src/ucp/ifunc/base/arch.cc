/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/base/arch.h"

#include <elf.h>

namespace ucx_ifunc {
namespace arch {

#if defined(__x86_64__)

uint16_t elf_machine()
{
    return EM_X86_64;
}

void store_fence()
{
    /* x86 keeps ordinary stores in order; sfence also orders the weakly
     * ordered non-temporal stores that memcpy uses for large copies. */
    __builtin_ia32_sfence();
}

void prefetch_for_write(const void *address)
{
    /* Not __builtin_prefetch: without -mprfchw gcc emits a read prefetch.
     * CPUs without PRFCHW execute this encoding as a no-op. */
    asm volatile("prefetchw %0" ::"m"(*static_cast<const char *>(address)));
}

void sync_icache(void *, size_t)
{
    /* x86 keeps instruction fetch coherent with stores; the mprotect() that
     * makes the code executable is serialising enough. */
}

void instruction_barrier()
{
    /* Code lands in a fresh mapping: the munmap() of any code there before
     * shot down the other cores' TLB entries by interrupt, and returning
     * from the interrupt serialised their instruction stream. */
}

#elif defined(__aarch64__)

uint16_t elf_machine()
{
    return EM_AARCH64;
}

void store_fence()
{
    /* Stores to stores is all the seal needs; the inner shareable domain
     * holds every core the target's poller may run on. Plain and
     * non-temporal (STNP) stores alike are ordered by it. The seal is then
     * written with a store-release (STLR), which would order them by
     * itself: the barrier keeps this function's promise for any store
     * after it. */
    asm volatile("dmb ishst" ::: "memory");
}

void prefetch_for_write(const void *address)
{
    __builtin_prefetch(address, 1);
}

void sync_icache(void *start, size_t size)
{
    /* Cleans the data cache to the point of unification and invalidates
     * the instruction cache over the range, both broadcast to the inner
     * shareable domain, then ISB on this core (libgcc skips the steps that
     * CTR_EL0's IDC/DIC bits say the CPU does not need). Runs after the
     * pages became read-only: a clean is permission-checked as a read. */
    char *begin = static_cast<char *>(start);
    __builtin___clear_cache(begin, begin + size);
}

void instruction_barrier()
{
    /* sync_icache() reached every core's caches, not their pipelines:
     * another core may hold instructions prefetched from this address
     * (code evicted since), and TLB maintenance is broadcast without
     * interrupting it. Only a context synchronisation event on the core
     * that runs the code discards them. */
    asm volatile("isb" ::: "memory");
}

#elif defined(__powerpc64__) && (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)

/* ppc64el runs bitcode only (no native image kind for it): what the frame
 * path and the JIT's code need is ordering and cache coherence. */

uint16_t elf_machine()
{
    return EM_PPC64;
}

void store_fence()
{
    /* lwsync orders stores to cacheable memory against later stores, which
     * is all the seal needs; Power has no non-temporal stores to order. */
    asm volatile("lwsync" ::: "memory");
}

void prefetch_for_write(const void *address)
{
    __builtin_prefetch(address, 1);
}

void sync_icache(void *start, size_t size)
{
    /* dcbst/sync/icbi/isync over the range (gcc expands it inline). */
    char *begin = static_cast<char *>(start);
    __builtin___clear_cache(begin, begin + size);
}

void instruction_barrier()
{
    /* As on aarch64: other cores may hold prefetched instructions that only
     * a context synchronising instruction on the running core discards. */
    asm volatile("isync" ::: "memory");
}

#else
#error "ucx-ifunc: unsupported CPU architecture"
#endif

} // namespace arch
} // namespace ucx_ifunc
