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

void store_fence_after_copy(size_t copied)
{
    /* x86 never reorders ordinary stores, those of string instructions
     * included, with later stores; only non-temporal ones need sfence.
     * glibc's memcpy uses them only above its non-temporal threshold,
     * which cannot be set below 16 KiB (0x4040 bytes). */
    if (copied >= 0x4000) {
        __builtin_ia32_sfence();
    } else {
        asm volatile("" ::: "memory");
    }
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

void store_fence_after_copy(size_t)
{
    store_fence();
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
