/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/format/code_id.h"

#include <sodium.h>

#include <cstring>

namespace ucx_ifunc {

void crypto_init()
{
    /* Picks libsodium's implementations; thread-safe, idempotent. */
    static const int ready = sodium_init();
    (void)ready;
}

CodeId code_id_of(const void *data, size_t size)
{
    crypto_init();
    unsigned char digest[16];
    crypto_generichash(digest, sizeof(digest),
                       static_cast<const unsigned char *>(data), size, nullptr,
                       0);
    CodeId id;
    std::memcpy(&id.lo, digest, 8);
    std::memcpy(&id.hi, digest + 8, 8);
    return id;
}

std::string CodeId::hex() const
{
    unsigned char digest[16];
    std::memcpy(digest, &lo, 8);
    std::memcpy(digest + 8, &hi, 8);
    char text[2 * sizeof(digest) + 1];
    sodium_bin2hex(text, sizeof(text), digest, sizeof(digest));
    return text;
}

} // namespace ucx_ifunc
