/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The instruction sets a library may carry code for. ucx-ifunc-cc --target
 * T1,T2... embeds one image per ISA in NAME.so; the source sends each
 * target the image of the ISA that target runs (multi_isa.h).
 */
#ifndef UCP_IFUNC_ISA_H_
#define UCP_IFUNC_ISA_H_

#include <cstdint>
#include <string>

namespace ucx_ifunc {

/* ELF machines of the ISAs ucx-ifunc-cc builds images for: native and
 * bitcode for x86-64 and aarch64, bitcode only for ppc64el. */
constexpr uint16_t kShippableMachines[] = {62 /* EM_X86_64 */,
                                           183 /* EM_AARCH64 */,
                                           21 /* EM_PPC64, little-endian */};

/* At most this many ISAs in one library. */
constexpr unsigned kMaxMachines =
        sizeof(kShippableMachines) / sizeof(kShippableMachines[0]);

/* "x86-64", "aarch64", "ppc64el", or "ELF machine N". */
std::string machine_name(uint16_t machine);

/* The GNU triplet ucx-ifunc-cc --target or --bitcode names the ISA by, or
 * "" if none. */
const char *machine_triplet(uint16_t machine);

/* Whether the native image linker (load/link.cc) links machine code of
 * @a machine: x86-64 and aarch64; other ISAs run bitcode only. */
bool native_images_link(uint16_t machine);

/* The symbol of NAME.so that holds its image for @a machine:
 * UCP_IFUNC_IMAGE_SYMBOL NAME ".em" machine (a dot, so no ifunc name can
 * collide with it). */
std::string image_symbol_for(const std::string &ifunc_name, uint16_t machine);

/* The symbol of NAME.so that holds its bitcode image for @a machine:
 * UCP_IFUNC_BITCODE_SYMBOL NAME ".em" machine. */
std::string bitcode_symbol_for(const std::string &ifunc_name, uint16_t machine);

} // namespace ucx_ifunc

#endif
