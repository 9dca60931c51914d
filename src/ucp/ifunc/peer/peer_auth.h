/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "peers", what a peer proves during set-up (docs/security.md, "Peers
 * at the network edge"):
 *  - that it runs on this host, before a channel (shared memory) is made
 *    for it: it reads 32 random bytes from a memory file of ours through
 *    /proc/PID/fd/FD, which only a process of this host that may read our
 *    memory can (the check UCX's posix transport makes too), and answers
 *    with a keyed hash of both sides' tokens under them;
 *  - with UCX_IFUNC_PEER_KEYS, who it is: it signs both sides' fresh
 *    nonces and keys with the secret key of UCX_IFUNC_IDENTITY_KEY, and the
 *    other side accepts only keys its list names.
 */
#ifndef UCP_IFUNC_PEER_AUTH_H_
#define UCP_IFUNC_PEER_AUTH_H_

#include "ucp/ifunc/base/config.h"
#include "ucp/ifunc/load/trust.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ucx_ifunc {

using HostMac   = std::array<unsigned char, 32>;
using AuthNonce = std::array<unsigned char, 32>;
using Signature = std::array<unsigned char, 64>;

/* The secret a same-host peer proves it can read. */
class HostProof {
public:
    static constexpr size_t kNameMax = 32; /* "PID:FD" */

    HostProof();
    HostProof(const HostProof &)            = delete;
    HostProof &operator=(const HostProof &) = delete;
    ~HostProof();

    /* "PID:FD", or "" where no memory file could be made. */
    const std::string &name() const { return name_; }

    /* Whether @a mac proves the secret for the tokens of the side that
     * asks (@a asker) and of the side that proves (@a prover). */
    bool check(uint64_t asker, uint64_t prover, const HostMac &mac) const;

    /* The proof of the secret @a name (as sent: up to kNameMax bytes, not
     * trusted) names; false where it cannot be read here. */
    static bool prove(const char *name, size_t name_size, uint64_t asker,
                      uint64_t prover, HostMac *mac);

private:
    int                           fd_ = -1;
    std::string                   name_;
    std::array<unsigned char, 32> secret_{};
};

/* A worker's identity key and the peer keys it accepts. */
class PeerKeys {
public:
    /* From UCX_IFUNC_IDENTITY_KEY and UCX_IFUNC_PEER_KEYS of @a config;
     * an error (logged) where a file named there cannot be read. */
    static ucs_status_t load(const Config              &config,
                             std::unique_ptr<PeerKeys> *keys_p);

    /* Peers must prove a key of the list. */
    bool required() const { return !accepted_.empty(); }
    /* This worker can prove a key. */
    bool             has_identity() const { return has_identity_; }
    const PublicKey &public_key() const { return public_key_; }

    /* Our answer to a peer's challenge @a theirs (its nonce and key),
     * with our own nonce @a ours. */
    Signature sign(const AuthNonce &theirs, const PublicKey &their_key,
                   const AuthNonce &ours) const;

    /* Whether @a signature by @a their_key answers our challenge @a ours
     * (with their nonce @a theirs), and the list names @a their_key. */
    bool verify(const AuthNonce &ours, const AuthNonce &theirs,
                const PublicKey &their_key, const Signature &signature) const;

    ~PeerKeys();

private:
    bool                          has_identity_ = false;
    KeySeed                       seed_{};
    PublicKey                     public_key_{};
    std::array<unsigned char, 64> secret_key_{};
    std::vector<PublicKey>        accepted_;
};

/* A fresh nonce. */
AuthNonce auth_nonce();

/* A random 64-bit value no peer can guess (tokens). */
uint64_t random_u64();

} // namespace ucx_ifunc

#endif
