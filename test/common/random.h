/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The deterministic random payloads of the stress runs (test/peer and
 * test/netns): a seed gives the same sequence on every run, so a failure
 * can be replayed.
 */
#ifndef UCX_IFUNC_TEST_RANDOM_H_
#define UCX_IFUNC_TEST_RANDOM_H_

#include <cstdint>
#include <cstring>
#include <vector>

namespace test {

/* xorshift64*: the next number of the sequence in @a state (never 0). */
inline uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state * 0x2545f4914f6cdd1dull;
}

/* Fills @a bytes (at least @a max_size bytes, rounded up to 8) with a
 * random number of random bytes from @a min_size to @a max_size; returns
 * that number. */
inline size_t random_bytes(std::vector<uint8_t> *bytes, uint64_t *state,
                           size_t min_size, size_t max_size)
{
    size_t size = min_size + next_random(state) % (max_size - min_size + 1);
    for (size_t i = 0; i < size; i += 8) {
        uint64_t word = next_random(state);
        std::memcpy(&(*bytes)[i], &word, 8);
    }
    return size;
}

} // namespace test

#endif
