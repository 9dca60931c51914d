/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What differs between CPU architectures: which machine code we accept,
 * memory ordering between the body and the seal of a frame, and making
 * freshly written code visible to instruction fetch.
 */
#ifndef UCP_IFUNC_ARCH_H_
#define UCP_IFUNC_ARCH_H_

#include <cstddef>
#include <cstdint>

namespace ucx_ifunc {
namespace arch {

/* ELF e_machine of the code this process can run. */
uint16_t elf_machine();

/* Orders all earlier stores, non-temporal ones included, before later
 * stores: the body of a frame before its seal. */
void store_fence();

/* Fetches the cache line of @a address for writing: a read of the line
 * followed by a write then costs one transfer between cores, not two. */
void prefetch_for_write(const void *address);

/* Makes code written to [start, start + size) safe to execute: on the
 * calling thread, and, after instruction_barrier(), on any other. */
void sync_icache(void *start, size_t size);

/* Discards instructions the calling thread may have fetched before: it is
 * about to run code another thread wrote and synced, maybe at the address
 * of code evicted since. */
void instruction_barrier();

} // namespace arch
} // namespace ucx_ifunc

#endif
