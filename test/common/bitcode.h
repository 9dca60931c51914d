/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Bitcode images for the tests, independent of the toolchain: C compiled
 * to LLVM bitcode by the clang configure found for the JIT
 * (UCX_IFUNC_TEST_CLANG), wrapped in an image as docs/design.md's
 * "Bitcode images" lays it out (version 4, UCP_IFUNC_IMAGE_FLAG_BITCODE).
 */
#ifndef UCX_IFUNC_TEST_BITCODE_H_
#define UCX_IFUNC_TEST_BITCODE_H_

#include "ucp/ifunc/format/image.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace test {

#if defined(__x86_64__)
constexpr const char *kBitcodeHostTriple     = "x86_64-unknown-linux-gnu";
constexpr const char *kBitcodeForeignTriple  = "aarch64-unknown-linux-gnu";
constexpr uint16_t    kBitcodeHostMachine    = 62;
constexpr uint16_t    kBitcodeForeignMachine = 183;
#elif defined(__aarch64__)
constexpr const char *kBitcodeHostTriple     = "aarch64-unknown-linux-gnu";
constexpr const char *kBitcodeForeignTriple  = "x86_64-unknown-linux-gnu";
constexpr uint16_t    kBitcodeHostMachine    = 183;
constexpr uint16_t    kBitcodeForeignMachine = 62;
#elif defined(__powerpc64__)
constexpr const char *kBitcodeHostTriple     = "powerpc64le-unknown-linux-gnu";
constexpr const char *kBitcodeForeignTriple  = "x86_64-unknown-linux-gnu";
constexpr uint16_t    kBitcodeHostMachine    = 21;
constexpr uint16_t    kBitcodeForeignMachine = 62;
#endif

/* Whether the tests can make bitcode (configure found LLVM and a clang). */
inline bool bitcode_clang_available()
{
#ifdef UCX_IFUNC_TEST_CLANG
    return UCX_IFUNC_TEST_CLANG[0] != '\0';
#else
    return false;
#endif
}

/* LLVM bitcode of C @a source (or LLVM IR if @a ir), compiled as the
 * toolchain would (-O2 -fPIC) for @a triple, with extra @a flags; empty if
 * the compiler failed. */
inline std::string bitcode_of(const std::string &source,
                              const std::string &triple,
                              const std::string &flags = "", bool ir = false)
{
#ifdef UCX_IFUNC_TEST_CLANG
    char dir[] = "/tmp/ifunc_bitcode_XXXXXX";
    if (mkdtemp(dir) == nullptr) {
        return {};
    }
    std::string in  = std::string(dir) + (ir ? "/in.ll" : "/in.c");
    std::string out = std::string(dir) + "/out.bc";
    std::ofstream(in) << source;
    std::string command = std::string(UCX_IFUNC_TEST_CLANG) +
                          " -c -emit-llvm -O2 -fPIC --target=" + triple + " " +
                          flags + " -o " + out + " " + in;
    std::string bytes;
    if (system(command.c_str()) == 0) {
        std::ifstream     file(out, std::ios::binary);
        std::stringstream content;
        content << file.rdbuf();
        bytes = content.str();
    }
    unlink(in.c_str());
    unlink(out.c_str());
    rmdir(dir);
    return bytes;
#else
    (void)source;
    (void)triple;
    (void)flags;
    (void)ir;
    return {};
#endif
}

struct BitcodeImport {
    std::string name;
    bool        weak = false;
};

/* A bitcode image of ifunc @a name: @a bitcode for @a triple (ELF machine
 * @a machine), with @a imports (sorted here) and @a needed sonames;
 * unsigned. */
inline std::vector<char>
bitcode_image(const std::string &name, const std::string &bitcode,
              const std::string              &triple  = kBitcodeHostTriple,
              uint16_t                        machine = kBitcodeHostMachine,
              std::vector<BitcodeImport>      imports = {},
              const std::vector<std::string> &needed  = {})
{
    std::sort(imports.begin(), imports.end(),
              [](const BitcodeImport &a, const BitcodeImport &b) {
                  return a.name < b.name;
              });
    std::string           strtab = triple + '\0';
    std::vector<uint32_t> import_names, needed_names;
    for (const BitcodeImport &imp : imports) {
        import_names.push_back(uint32_t(strtab.size()));
        strtab += imp.name + '\0';
    }
    for (const std::string &soname : needed) {
        needed_names.push_back(uint32_t(strtab.size()));
        strtab += soname + '\0';
    }
    uint32_t main_name = uint32_t(strtab.size());
    strtab += name + "_main" + '\0';

    auto   align = [](size_t v, size_t a) { return (v + a - 1) / a * a; };
    size_t imports_offset = sizeof(ucp_ifunc_image_desc_t);
    size_t symbols_offset =
            imports_offset + imports.size() * sizeof(ucp_ifunc_image_import_t);
    size_t needed_offset  = symbols_offset + sizeof(ucp_ifunc_image_symbol_t);
    size_t strtab_offset  = needed_offset + needed.size() * 4;
    size_t bitcode_offset = align(strtab_offset + strtab.size(), 16);
    size_t image_size     = align(bitcode_offset + bitcode.size(), 8);

    std::vector<char>      image(image_size, 0);
    ucp_ifunc_image_desc_t d  = {};
    d.magic                   = UCP_IFUNC_IMAGE_MAGIC;
    d.version                 = UCP_IFUNC_IMAGE_VERSION_BITCODE;
    d.machine                 = machine;
    d.desc_size               = sizeof(d);
    d.flags                   = UCP_IFUNC_IMAGE_FLAG_BITCODE;
    d.image_size              = image_size;
    d.seg[UCP_IFUNC_SEG_TEXT] = {0, bitcode.size(), bitcode_offset,
                                 bitcode.size()};
    d.imports_offset          = imports.empty() ? 0 : imports_offset;
    d.n_imports               = uint32_t(imports.size());
    d.strtab_offset           = strtab_offset;
    d.strtab_size             = strtab.size();
    d.needed_offset           = needed.empty() ? 0 : needed_offset;
    d.n_needed                = uint32_t(needed.size());
    d.symbols_offset          = symbols_offset;
    d.n_symbols               = 1;
    std::memcpy(image.data(), &d, sizeof(d));
    for (size_t i = 0; i < imports.size(); ++i) {
        ucp_ifunc_image_import_t imp = {
                import_names[i],
                imports[i].weak ? uint32_t(UCP_IFUNC_IMPORT_WEAK) : 0u};
        std::memcpy(&image[imports_offset + i * sizeof(imp)], &imp,
                    sizeof(imp));
    }
    ucp_ifunc_image_symbol_t sym = {main_name, 0, 0, 0};
    std::memcpy(&image[symbols_offset], &sym, sizeof(sym));
    for (size_t i = 0; i < needed.size(); ++i) {
        std::memcpy(&image[needed_offset + 4 * i], &needed_names[i], 4);
    }
    std::memcpy(&image[strtab_offset], strtab.data(), strtab.size());
    std::memcpy(&image[bitcode_offset], bitcode.data(), bitcode.size());
    return image;
}

} // namespace test

#endif
