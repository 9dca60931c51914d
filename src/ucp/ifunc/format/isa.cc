/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/format/isa.h"

#include "ucp/ifunc/format/image.h"

#include <elf.h>

namespace ucx_ifunc {

static_assert((kShippableMachines[0] == EM_X86_64) &&
                      (kShippableMachines[1] == EM_AARCH64) &&
                      (kShippableMachines[2] == EM_PPC64),
              "ELF machine numbers");

std::string machine_name(uint16_t machine)
{
    switch (machine) {
        case EM_X86_64:
            return "x86-64";
        case EM_AARCH64:
            return "aarch64";
        case EM_PPC64:
            return "ppc64el";
        default:
            return "ELF machine " + std::to_string(machine);
    }
}

const char *machine_triplet(uint16_t machine)
{
    switch (machine) {
        case EM_X86_64:
            return "x86_64-linux-gnu";
        case EM_AARCH64:
            return "aarch64-linux-gnu";
        case EM_PPC64:
            return "powerpc64le-linux-gnu";
        default:
            return "";
    }
}

bool native_images_link(uint16_t machine)
{
    return (machine == EM_X86_64) || (machine == EM_AARCH64);
}

std::string image_symbol_for(const std::string &ifunc_name, uint16_t machine)
{
    return UCP_IFUNC_IMAGE_SYMBOL + ifunc_name + ".em" +
           std::to_string(machine);
}

std::string bitcode_symbol_for(const std::string &ifunc_name, uint16_t machine)
{
    return UCP_IFUNC_BITCODE_SYMBOL + ifunc_name + ".em" +
           std::to_string(machine);
}

} // namespace ucx_ifunc
