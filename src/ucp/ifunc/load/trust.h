/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "trust": whether a target runs a code image a peer sent, under its
 * UCX_IFUNC_TRUST policy (config.h): byte-identical to its own NAME.so's
 * image, signed by a key it lists, or anything. Decided once per code
 * image, before any library is loaded for it or any byte of it is mapped;
 * docs/security.md explains the threat model.
 */
#ifndef UCP_IFUNC_TRUST_H_
#define UCP_IFUNC_TRUST_H_

#include "ucp/ifunc/format/code_id.h"
#include "ucp/ifunc/format/image.h"
#include "ucp/ifunc/load/registry.h"

#include <ucs/debug/log_def.h>
#include <ucs/type/status.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace ucx_ifunc {

using PublicKey = std::array<unsigned char, 32>;

/* Reads an ucx-ifunc-keygen public key file, listed in @a variable. Logs
 * one error and returns false if it cannot be read or is not one. */
bool read_public_key(const std::string &path, PublicKey *key,
                     const char *variable);

/* The seed of an Ed25519 key pair. */
using KeySeed = std::array<unsigned char, 32>;

/* Reads an ucx-ifunc-keygen secret key file (the seed), named by
 * @a variable, which only its owner may read. Logs one error and returns
 * false otherwise. */
bool read_secret_key(const std::string &path, KeySeed *seed,
                     const char *variable);

/* The keys of the files in @a list (paths separated by ':'), as
 * read_public_key() reads each. */
std::vector<PublicKey> read_keys(const std::string &list, const char *variable);

/* The trust policy of one UCP context. Thread-safe (immutable). */
class TrustPolicy {
public:
    /* Takes the policy and keys as @a registry read them; warns once if
     * the policy accepts any code. */
    explicit TrustPolicy(Registry &registry);

    /* Whether the image of ifunc @a name (checked by image_check()), whose
     * code id is @a code_id, may run here. A rejection is logged at
     * @a level with every reason and returns UCS_ERR_REJECTED. The library
     * that vouched for the code, if any, is returned in @a library_p: keep
     * it while the code is linked. The kind of trust that accepted it
     * (kTrust*, config.h) in @a accepted_by, if given. */
    ucs_status_t check(const std::string &name, const char *image,
                       const ucp_ifunc_image_desc_t &desc,
                       const CodeId &code_id, ucs_log_level_t level,
                       std::shared_ptr<Library> *library_p,
                       unsigned                 *accepted_by = nullptr) const;

    /* Whether the image carries a signature that verifies, whoever made
     * it; its key in @a signer. Grants to code of one signer rely on it. */
    static bool signature_valid(const std::string &name, const char *image,
                                const ucp_ifunc_image_desc_t &desc,
                                PublicKey                    *signer);

private:
    bool signature_trusted(const std::string &name, const char *image,
                           const ucp_ifunc_image_desc_t &desc,
                           std::string                  *why) const;

    Registry              &registry_;
    unsigned               kinds_;
    std::vector<PublicKey> keys_;
};

} // namespace ucx_ifunc

#endif
