/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/peer/peer_auth.h"

#include "ucp/ifunc/format/code_id.h"

#include <sodium.h>
#include <ucs/debug/log_def.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace ucx_ifunc {
namespace {

constexpr char kHostContext[] = "ucx-ifunc same host v1";
constexpr char kAuthContext[] = "ucx-ifunc peer key v1";

HostMac host_mac(const std::array<unsigned char, 32> &secret, uint64_t asker,
                 uint64_t prover)
{
    HostMac                  mac;
    crypto_generichash_state state;
    crypto_generichash_init(&state, secret.data(), secret.size(), mac.size());
    crypto_generichash_update(
            &state, reinterpret_cast<const unsigned char *>(kHostContext),
            sizeof(kHostContext));
    crypto_generichash_update(&state,
                              reinterpret_cast<const unsigned char *>(&asker),
                              sizeof(asker));
    crypto_generichash_update(&state,
                              reinterpret_cast<const unsigned char *>(&prover),
                              sizeof(prover));
    crypto_generichash_final(&state, mac.data(), mac.size());
    return mac;
}

/* What a signature covers: the challenger's nonce and key first, then the
 * signer's, so that an answer to one challenge answers no other. */
std::vector<unsigned char> transcript(const AuthNonce &challenger_nonce,
                                      const PublicKey &challenger_key,
                                      const AuthNonce &signer_nonce,
                                      const PublicKey &signer_key)
{
    std::vector<unsigned char> bytes(kAuthContext,
                                     kAuthContext + sizeof(kAuthContext));
    for (const auto *part : {&challenger_nonce, &signer_nonce}) {
        bytes.insert(bytes.end(), part->begin(), part->end());
    }
    for (const auto *part : {&challenger_key, &signer_key}) {
        bytes.insert(bytes.end(), part->begin(), part->end());
    }
    return bytes;
}

} // namespace

HostProof::HostProof()
{
    crypto_init();
    randombytes_buf(secret_.data(), secret_.size());
    fd_ = memfd_create("ucx-ifunc-host-proof", MFD_CLOEXEC);
    if ((fd_ < 0) || (write(fd_, secret_.data(), secret_.size()) !=
                      ssize_t(secret_.size()))) {
        ucs_diag("ifunc peer: no memory file for the same-host proof (%m); "
                 "peers on this host get no channel");
        if (fd_ >= 0) {
            close(fd_);
        }
        fd_ = -1;
        return;
    }
    name_ = std::to_string(getpid()) + ":" + std::to_string(fd_);
}

HostProof::~HostProof()
{
    if (fd_ >= 0) {
        close(fd_);
    }
    sodium_memzero(secret_.data(), secret_.size());
}

bool HostProof::check(uint64_t asker, uint64_t prover, const HostMac &mac) const
{
    if (fd_ < 0) {
        return false;
    }
    HostMac expected = host_mac(secret_, asker, prover);
    return sodium_memcmp(expected.data(), mac.data(), mac.size()) == 0;
}

bool HostProof::prove(const char *name, size_t name_size, uint64_t asker,
                      uint64_t prover, HostMac *mac)
{
    /* "PID:FD", digits only: nothing else of a peer's text reaches a path. */
    std::string text(name, strnlen(name, std::min(name_size, kNameMax)));
    size_t      colon = text.find(':');
    if ((colon == std::string::npos) || (colon == 0) ||
        (colon + 1 == text.size()) || (colon > 10) ||
        (text.size() - colon - 1 > 10) ||
        (text.find_first_not_of("0123456789:") != std::string::npos) ||
        (text.find(':', colon + 1) != std::string::npos)) {
        return false;
    }
    std::string path =
            "/proc/" + text.substr(0, colon) + "/fd/" + text.substr(colon + 1);
    /* Digits only: the path can name nothing but a descriptor of a
     * process, which the kernel lets us open only if we may read that
     * process's memory. */
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    std::array<unsigned char, 32> secret;
    bool ok = (pread(fd, secret.data(), secret.size(), 0) ==
               ssize_t(secret.size()));
    close(fd);
    if (ok) {
        *mac = host_mac(secret, asker, prover);
    }
    sodium_memzero(secret.data(), secret.size());
    return ok;
}

ucs_status_t PeerKeys::load(const Config              &config,
                            std::unique_ptr<PeerKeys> *keys_p)
{
    crypto_init();
    auto keys = std::make_unique<PeerKeys>();
    if (!config.identity_key.empty()) {
        if (!read_secret_key(config.identity_key, &keys->seed_,
                             "UCX_IFUNC_IDENTITY_KEY")) {
            return UCS_ERR_INVALID_PARAM;
        }
        crypto_sign_seed_keypair(keys->public_key_.data(),
                                 keys->secret_key_.data(), keys->seed_.data());
        keys->has_identity_ = true;
    }
    if (!config.peer_keys.empty()) {
        keys->accepted_ = read_keys(config.peer_keys, "UCX_IFUNC_PEER_KEYS");
        if (keys->accepted_.empty()) {
            ucs_error("UCX_IFUNC_PEER_KEYS=%s names no key that could be "
                      "read; no peer could connect",
                      config.peer_keys.c_str());
            return UCS_ERR_INVALID_PARAM;
        }
    }
    *keys_p = std::move(keys);
    return UCS_OK;
}

PeerKeys::~PeerKeys()
{
    sodium_memzero(seed_.data(), seed_.size());
    sodium_memzero(secret_key_.data(), secret_key_.size());
}

Signature PeerKeys::sign(const AuthNonce &theirs, const PublicKey &their_key,
                         const AuthNonce &ours) const
{
    Signature signature{};
    auto      bytes = transcript(theirs, their_key, ours, public_key_);
    crypto_sign_detached(signature.data(), nullptr, bytes.data(), bytes.size(),
                         secret_key_.data());
    return signature;
}

bool PeerKeys::verify(const AuthNonce &ours, const AuthNonce &theirs,
                      const PublicKey &their_key,
                      const Signature &signature) const
{
    bool listed = false;
    for (const PublicKey &key : accepted_) {
        listed |=
                (sodium_memcmp(key.data(), their_key.data(), key.size()) == 0);
    }
    if (!listed) {
        return false;
    }
    auto bytes = transcript(ours, public_key_, theirs, their_key);
    return crypto_sign_verify_detached(signature.data(), bytes.data(),
                                       bytes.size(), their_key.data()) == 0;
}

AuthNonce auth_nonce()
{
    crypto_init();
    AuthNonce nonce;
    randombytes_buf(nonce.data(), nonce.size());
    return nonce;
}

uint64_t random_u64()
{
    crypto_init();
    uint64_t value;
    randombytes_buf(&value, sizeof(value));
    return value;
}

} // namespace ucx_ifunc
