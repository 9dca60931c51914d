/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/load/trust.h"

#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/sandbox/sandbox.h"

#include <sodium.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ucx_ifunc {
namespace {

constexpr char kPublicKeyTag[] = "ucx-ifunc-ed25519-public";
constexpr char kSecretKeyTag[] = "ucx-ifunc-ed25519-secret";

static_assert(crypto_sign_PUBLICKEYBYTES == sizeof(PublicKey), "key size");
static_assert(crypto_sign_BYTES ==
                      sizeof(ucp_ifunc_image_signature_t::signature),
              "signature size");

std::string short_hex(const unsigned char *bytes, size_t size)
{
    std::vector<char> text(2 * size + 1);
    sodium_bin2hex(text.data(), text.size(), bytes, size);
    return text.data();
}

} // namespace

std::vector<PublicKey> read_keys(const std::string &list, const char *variable)
{
    std::vector<PublicKey> keys;
    std::stringstream      paths(list);
    std::string            path;
    while (std::getline(paths, path, ':')) {
        PublicKey key;
        if (!path.empty() && read_public_key(path, &key, variable)) {
            keys.push_back(key);
        }
    }
    return keys;
}

bool read_public_key(const std::string &path, PublicKey *key,
                     const char *variable)
{
    std::ifstream file(path);
    std::string   tag, hex, rest;
    if (!file) {
        ucs_error("%s: cannot read %s: %m; its key is not trusted", variable,
                  path.c_str());
        return false;
    }
    file >> tag >> hex >> rest;
    size_t length = 0;
    if ((tag != kPublicKeyTag) || !rest.empty() ||
        (sodium_hex2bin(key->data(), key->size(), hex.c_str(), hex.size(),
                        nullptr, &length, nullptr) != 0) ||
        (length != key->size())) {
        ucs_error("%s: %s is not a public key file (one line '%s <64 hex "
                  "digits>', as ucx-ifunc-keygen writes PREFIX.pub); its key "
                  "is not trusted",
                  variable, path.c_str(), kPublicKeyTag);
        return false;
    }
    return true;
}

bool read_secret_key(const std::string &path, KeySeed *seed,
                     const char *variable)
{
    struct stat info;
    if (stat(path.c_str(), &info) != 0) {
        ucs_error("%s: cannot read %s: %m", variable, path.c_str());
        return false;
    }
    if (info.st_mode & (S_IRWXG | S_IRWXO)) {
        ucs_error("%s: %s may be read by others (mode %03o); a secret key "
                  "must be the owner's alone (chmod 600 it)",
                  variable, path.c_str(), unsigned(info.st_mode & 0777));
        return false;
    }
    std::ifstream file(path);
    std::string   tag, hex, rest;
    file >> tag >> hex >> rest;
    size_t length = 0;
    bool   valid  = (tag == kSecretKeyTag) && rest.empty() &&
                 (sodium_hex2bin(seed->data(), seed->size(), hex.c_str(),
                                 hex.size(), nullptr, &length, nullptr) == 0) &&
                 (length == seed->size());
    sodium_memzero(&hex[0], hex.size());
    if (!valid) {
        ucs_error("%s: %s is not a secret key file (one line '%s <64 hex "
                  "digits>', as ucx-ifunc-keygen writes PREFIX.key)",
                  variable, path.c_str(), kSecretKeyTag);
        return false;
    }
    return true;
}

TrustPolicy::TrustPolicy(Registry &registry)
    : registry_(registry), kinds_(registry.trust_kinds()),
      keys_(read_keys(registry.trusted_keys(), "UCX_IFUNC_TRUSTED_KEYS"))
{
    crypto_init();
    if (kinds_ & kTrustAny) {
        ucs_warn("UCX_IFUNC_TRUST=%s: this process runs any code a peer "
                 "writes to its ifunc buffers; use it only where every peer "
                 "is trusted (docs/security.md)",
                 trust_kinds_text(kinds_).c_str());
    }
    std::string why;
    if ((kinds_ & kTrustSandboxed) && !sandbox::sandbox_supported(&why)) {
        ucs_warn("UCX_IFUNC_TRUST=%s: sandboxed code cannot run in this "
                 "process: %s",
                 trust_kinds_text(kinds_).c_str(), why.c_str());
    }
    if (!(kinds_ & kTrustAny) && (kinds_ & kTrustSigned) && keys_.empty() &&
        !registry.trusted_keys().empty()) {
        ucs_warn("UCX_IFUNC_TRUSTED_KEYS names no usable key: no signed code "
                 "will run");
    }
}

bool TrustPolicy::signature_valid(const std::string &name, const char *image,
                                  const ucp_ifunc_image_desc_t &desc,
                                  PublicKey                    *signer)
{
    if (desc.signature_offset == 0) {
        return false;
    }
    auto sig =
            read_at<ucp_ifunc_image_signature_t>(image, desc.signature_offset);
    /* What was signed: the domain with its NUL, the name with its NUL, the
     * image up to the signature. */
    std::vector<unsigned char> message;
    const char                 domain[] = UCP_IFUNC_IMAGE_SIGNATURE_DOMAIN;
    message.insert(message.end(), domain, domain + sizeof(domain));
    message.insert(message.end(), name.c_str(), name.c_str() + name.size() + 1);
    message.insert(message.end(), image, image + desc.signature_offset);
    if (crypto_sign_verify_detached(sig.signature, message.data(),
                                    message.size(), sig.public_key) != 0) {
        return false;
    }
    std::memcpy(signer->data(), sig.public_key, signer->size());
    return true;
}

bool TrustPolicy::signature_trusted(const std::string &name, const char *image,
                                    const ucp_ifunc_image_desc_t &desc,
                                    std::string                  *why) const
{
    if (desc.signature_offset == 0) {
        *why += "; not signed";
        return false;
    }
    auto sig =
            read_at<ucp_ifunc_image_signature_t>(image, desc.signature_offset);
    bool listed =
            std::any_of(keys_.begin(), keys_.end(), [&](const PublicKey &key) {
                return std::memcmp(key.data(), sig.public_key, key.size()) == 0;
            });
    if (!listed) {
        *why += "; signed by key " +
                short_hex(sig.public_key, sizeof(sig.public_key)) +
                ", which UCX_IFUNC_TRUSTED_KEYS does not list";
        return false;
    }
    PublicKey signer;
    if (!signature_valid(name, image, desc, &signer)) {
        *why += "; its signature does not verify (the image was changed "
                "after it was signed)";
        return false;
    }
    return true;
}

ucs_status_t TrustPolicy::check(const std::string &name, const char *image,
                                const ucp_ifunc_image_desc_t &desc,
                                const CodeId &code_id, ucs_log_level_t level,
                                std::shared_ptr<Library> *library_p,
                                unsigned                 *accepted_by) const
{
    unsigned by;
    if (accepted_by == nullptr) {
        accepted_by = &by;
    }
    if (kinds_ & kTrustAny) {
        *accepted_by = kTrustAny;
        return UCS_OK;
    }
    std::string why;
    if ((kinds_ & kTrustSigned) && signature_trusted(name, image, desc, &why)) {
        *accepted_by = kTrustSigned;
        return UCS_OK;
    }
    if (kinds_ & kTrustLibrary) {
        std::string mismatch;
        if (registry_.vouch(name, code_id, library_p, &mismatch) == UCS_OK) {
            *accepted_by = kTrustLibrary;
            return UCS_OK;
        }
        why += "; " + mismatch;
    }
    /* Sandbox code runs confined whatever vouched for it; under
     * 'sandboxed' it needs nothing else here: the verifier decides when it
     * is mapped (link.cc). */
    bool sandbox_code = (desc.flags & UCP_IFUNC_IMAGE_FLAG_SANDBOX) != 0;
    if ((kinds_ & kTrustSandboxed) && sandbox_code) {
        *accepted_by = kTrustSandboxed;
        return UCS_OK;
    }
    if ((kinds_ & kTrustSandboxed) && image_is_bitcode(desc)) {
        /* The verifier checks machine code that ucx-ifunc-cc --sandbox
         * shaped for it; what the JIT makes of bitcode is not that. */
        why += "; LLVM bitcode, which never runs under 'sandboxed': the "
               "sandbox's verifier checks machine code built for it "
               "(ucx-ifunc-cc --sandbox), and the JIT makes none";
    } else if (kinds_ & kTrustSandboxed) {
        why += "; not built for the sandbox (ucx-ifunc-cc --sandbox)";
    } else if (sandbox_code) {
        why += "; built for the sandbox, which UCX_IFUNC_TRUST does not list "
               "('sandboxed')";
    }
    ucs_log(level,
            "ifunc '%s': code %s rejected under UCX_IFUNC_TRUST=%s%s; "
            "nothing runs (sign it with a key the target trusts, or give "
            "the target the same NAME.so)",
            name.c_str(), code_id.hex().c_str(),
            trust_kinds_text(kinds_).c_str(),
            why.empty() ? "" : (":" + why.substr(1)).c_str());
    return UCS_ERR_REJECTED;
}

} // namespace ucx_ifunc
