/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The code images an ifunc library carries, read from its ELF file without
 * loading it (no constructor of it runs): the symbols
 * __ucp_ifunc_image_NAME and, in a library built for several ISAs,
 * __ucp_ifunc_image_NAME.em<ELF machine> (src/ucp/ifunc/format/isa.h), looked up
 * in .symtab, else .dynsym, as the toolchain's elf_query.py does; and the
 * bitcode images (__ucp_ifunc_bitcode_NAME.em<ELF machine>, --bitcode).
 */
#ifndef UCX_IFUNC_TOOLS_INFO_ELF_IMAGES_H_
#define UCX_IFUNC_TOOLS_INFO_ELF_IMAGES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ucx_ifunc_info {

struct EmbeddedImage {
    std::string       symbol;  /* its symbol */
    std::string       name;    /* the ifunc's name */
    uint16_t          machine; /* from a ".em<N>" symbol; 0 for the plain one */
    std::vector<char> bytes;   /* the symbol's bytes */
    bool              bitcode = false; /* __ucp_ifunc_bitcode_NAME.em<N> */
};

/* The images of the ELF file @a path, bitcode ones included, in symbol
 * table order. Throws
 * std::runtime_error, saying why, if it cannot be read or is not a 64-bit
 * little-endian ELF file; returns none if it holds no image. */
std::vector<EmbeddedImage> read_embedded_images(const std::string &path);

} // namespace ucx_ifunc_info

#endif
