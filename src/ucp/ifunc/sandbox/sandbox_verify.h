/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The target's verifier of sandboxed machine code: it decides, from the
 * bytes a peer sent and nothing else, whether the code keeps the rules of
 * docs/security.md ("Sandboxed code", S1-S7). It trusts no toolchain.
 */
#ifndef UCP_IFUNC_SANDBOX_VERIFY_H_
#define UCP_IFUNC_SANDBOX_VERIFY_H_

#include "ucp/ifunc/format/image.h"

#include <stddef.h>
#include <stdint.h>
#include <string>

namespace ucx_ifunc {
namespace sandbox {

/* The code to check and where it will lie. Image vaddr 0 is mapped at slot
 * offset kImageOffset (sandbox_layout.h). */
struct VerifyInput {
    const uint8_t *text;           /* the text segment's bytes */
    size_t         text_size;      /* a multiple of kBundleSize */
    uint64_t       text_vaddr;     /* the text's image vaddr */
    uint64_t       image_map_size; /* the image spans vaddrs [0, this) */
    uint32_t       n_imports;      /* gate bundles 1..n_imports exist */
};

struct VerifyResult {
    bool        accepted;
    uint64_t    offset; /* of the refused instruction, from the text */
    std::string reason; /* the rule, the instruction and why; empty if
                           accepted */
};

/* Checks x86-64 code against rules S1-S7. */
VerifyResult verify_x86_64(const VerifyInput &input);

/* The same check without the fast path for common instructions: every
 * instruction through the full decoder. Decides exactly as verify_x86_64
 * (the fuzzer compares them); slower. */
VerifyResult verify_x86_64_full(const VerifyInput &input);

/* Checks the text of @a image, a sandbox image (version 3) that
 * image_check() accepted, where it will lie in a slot. */
VerifyResult verify_image(const void *image, const ucp_ifunc_image_desc_t &d);

} // namespace sandbox
} // namespace ucx_ifunc

#endif
