/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "arch.h"

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

#elif defined(__aarch64__)

uint16_t elf_machine()
{
    return EM_AARCH64;
}

void store_fence()
{
    asm volatile("dmb ishst" ::: "memory");
}

void prefetch_for_write(const void *address)
{
    __builtin_prefetch(address, 1);
}

void sync_icache(void *start, size_t size)
{
    char *begin = static_cast<char *>(start);
    __builtin___clear_cache(begin, begin + size);
}

#else
#error "ucx-ifunc: unsupported CPU architecture"
#endif

} // namespace arch
} // namespace ucx_ifunc
