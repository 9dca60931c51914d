/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What a test reads of its own process: how many mappings it has (each
 * linked code image takes three) and how much memory it holds.
 */
#ifndef UCX_IFUNC_TEST_PROCESS_H_
#define UCX_IFUNC_TEST_PROCESS_H_

#include <malloc.h>
#if defined(__SANITIZE_ADDRESS__)
/* The sanitizer runtime's count of heap bytes in use (declared here: GCC 12
 * ships no allocator_interface.h). */
extern "C" size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include <cstddef>
#include <fstream>
#include <string>

namespace test {

/* Lines of /proc/self/maps: the mappings of this process. */
inline size_t mapping_count()
{
    std::ifstream maps("/proc/self/maps");
    std::string   line;
    size_t        count = 0;
    while (std::getline(maps, line)) {
        ++count;
    }
    return count;
}

/* A line of /proc/self/status in KiB ("VmRSS", "VmHWM"); -1 if missing. */
inline long status_kib(const std::string &field)
{
    std::ifstream status("/proc/self/status");
    std::string   line;
    while (std::getline(status, line)) {
        if (line.compare(0, field.size() + 1, field + ":") == 0) {
            return std::stol(line.substr(field.size() + 1));
        }
    }
    return -1;
}

/* VmRSS of this process, in KiB. */
inline long rss_kib()
{
    return status_kib("VmRSS");
}

/* Bytes the heap has handed out and not taken back (malloc's arenas and
 * its mapped blocks): what allocations hold now, whether or not their
 * pages are resident yet. Under AddressSanitizer, whose allocator
 * mallinfo2 does not see, the sanitizer's own count. */
inline size_t heap_in_use()
{
#if defined(__SANITIZE_ADDRESS__)
    return __sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
#endif
}

} // namespace test

#endif
