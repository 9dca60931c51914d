/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The layout of a sandbox's slot and the constants of the machine-code
 * rules (docs/security.md, "Sandboxed code"): the verifier checks code
 * against them, the runtime maps memory by them, and the toolchain
 * (tools/ucx_ifunc/sandbox.py) writes code for them. Change all three
 * together.
 */
#ifndef UCP_IFUNC_SANDBOX_LAYOUT_H_
#define UCP_IFUNC_SANDBOX_LAYOUT_H_

#include <stdint.h>

namespace ucx_ifunc {
namespace sandbox {

/* A slot: 4 GiB aligned to 4 GiB; code in it names B + (x mod 2^32). */
constexpr uint64_t kSlotSize = uint64_t(1) << 32;
/* Guards at both ends of the slot. */
constexpr uint64_t kSlotGuard = 0x10000;

/* Instructions are grouped in bundles; indirect branches land on their
 * starts (rule S1, S7). */
constexpr uint64_t kBundleSize = 32;
constexpr uint32_t kBundleMask = 0xffffffe0u; /* andl $kBundleMask, %r11d */

/* The gate page, written by the host, 4 KiB before the image: bundle 0
 * leaves the sandbox, bundle 1 + i calls import i (rule S6). */
constexpr uint64_t kGateOffset     = 0x1f000;
constexpr uint64_t kGateSize       = 0x1000;
constexpr uint32_t kMaxGateImports = kGateSize / kBundleSize - 1;
/* Image vaddr 0 lies here. */
constexpr uint64_t kImageOffset = 0x20000;
/* Images end below the stack window. */
constexpr uint64_t kImageEnd = 0x40000000;

/* The stack window: %rsp = B + kStackWindow + (x & kStackMask) (rule S5).
 * Its low half is guard, its high half the stack. */
constexpr uint64_t kStackWindow     = 0x40000000;
constexpr uint32_t kStackMask       = 0x1fffff;
constexpr uint64_t kStackWindowSize = uint64_t(kStackMask) + 1;
constexpr uint64_t kStackBase       = kStackWindow + kStackWindowSize / 2;
constexpr uint64_t kStackTop        = kStackWindow + kStackWindowSize;

/* %rsp-based memory operands: displacements in this range (rule S3). */
constexpr int32_t kRspDispMin = -32768;
constexpr int32_t kRspDispMax = 32767;

/* The payload area: the payload is copied here before the code runs. */
constexpr uint64_t kPayloadOffset = 0x60000000;
constexpr uint64_t kPayloadEnd    = 0x80000000;

/* Granted memory lies at its host address modulo 4 GiB, in this range. */
constexpr uint64_t kGrantOffset = 0x80000000;
constexpr uint64_t kGrantEnd    = kSlotSize - kSlotGuard;

static_assert(kImageOffset - kGateOffset == kGateSize, "gate page");
static_assert(kStackBase - kStackWindow >= kSlotGuard, "stack guard");

} // namespace sandbox
} // namespace ucx_ifunc

#endif
