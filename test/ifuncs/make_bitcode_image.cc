/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Stands in for ucx-ifunc-cc --bitcode until the toolchain makes bitcode
 * images (issue 32): compiles one C source of ifunc NAME to LLVM bitcode
 * for this machine (the clang of the JIT's LLVM), wraps it in a bitcode
 * image (test/common/bitcode.h) and writes C that defines it as NAME.so
 * would hold it: the symbol __ucp_ifunc_bitcode_NAME.em<machine>, in the
 * images' section. Link the object of that C into a library.
 * Usage: make_bitcode_image NAME SOURCE.c OUT.c [--import SYM]... [CFLAG]...
 */
#include "test/common/bitcode.h"

#include <cstdio>
#include <fstream>
#include <sstream>

int main(int argc, char **argv)
{
    if (argc < 4) {
        std::fprintf(stderr,
                     "usage: %s NAME SOURCE.c OUT.c [--import SYM]... "
                     "[CFLAG]...\n",
                     argv[0]);
        return 2;
    }
    std::string                      name = argv[1];
    std::vector<test::BitcodeImport> imports;
    std::string                      flags;
    for (int i = 4; i < argc; ++i) {
        if ((std::string(argv[i]) == "--import") && (i + 1 < argc)) {
            imports.push_back({argv[++i]});
        } else {
            flags += std::string(" ") + argv[i];
        }
    }
    std::ifstream     in(argv[2]);
    std::stringstream source;
    source << in.rdbuf();
    std::string bitcode =
            test::bitcode_of(source.str(), test::kBitcodeHostTriple, flags);
    if (bitcode.empty()) {
        std::fprintf(stderr, "%s: cannot compile %s to bitcode\n", argv[0],
                     argv[2]);
        return 1;
    }
    std::vector<char> image =
            test::bitcode_image(name, bitcode, test::kBitcodeHostTriple,
                                test::kBitcodeHostMachine, imports);
    std::string symbol = std::string(UCP_IFUNC_BITCODE_SYMBOL) + name + ".em" +
                         std::to_string(test::kBitcodeHostMachine);
    FILE *out = std::fopen(argv[3], "w");
    if (out == nullptr) {
        std::perror(argv[3]);
        return 1;
    }
    std::fprintf(out,
                 "/* Made by make_bitcode_image from %s. */\n"
                 "__attribute__((section(\".rodata.ucp_ifunc_image\"), "
                 "aligned(64), used))\n"
                 "const unsigned char bitcode_image[%zu] __asm__(\"%s\") = {",
                 argv[2], image.size(), symbol.c_str());
    for (size_t i = 0; i < image.size(); ++i) {
        std::fprintf(out, "%s%u,", (i % 16) ? "" : "\n",
                     static_cast<unsigned char>(image[i]));
    }
    std::fprintf(out, "\n};\n");
    return (std::fclose(out) == 0) ? 0 : 1;
}
