/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Code ids: what names a piece of shipped code in frames, caches and trust
 * decisions. A code id is the 128-bit BLAKE2b digest (libsodium) of the
 * ifunc's name and code image, so that no peer can make other code pass
 * for code a target trusts or has linked.
 */
#ifndef UCP_IFUNC_CODE_ID_H_
#define UCP_IFUNC_CODE_ID_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ucx_ifunc {

struct CodeId {
    uint64_t lo = 0, hi = 0; /* digest bytes 0-7 and 8-15, little-endian */

    bool operator==(const CodeId &other) const
    {
        return (lo == other.lo) && (hi == other.hi);
    }
    bool operator!=(const CodeId &other) const { return !(*this == other); }

    /* The digest in 32 hex digits, for log lines and perf maps. */
    std::string hex() const;
};

struct CodeIdHash {
    size_t operator()(const CodeId &id) const
    {
        return size_t(id.lo); /* already uniformly distributed */
    }
};

/* Makes libsodium ready; every user of it calls this first. */
void crypto_init();

/* The code id of @a size bytes at @a data (a frame's name and image). */
CodeId code_id_of(const void *data, size_t size);

} // namespace ucx_ifunc

#endif
