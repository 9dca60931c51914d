/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "elf_images.h"

#include "ucp/ifunc/format/image.h"

#include <elf.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace ucx_ifunc_info {
namespace {

/* A T at @a offset of @a file, bounds checked. */
template <typename T>
T read_at(const std::vector<char> &file, uint64_t offset, const char *what)
{
    if ((offset > file.size()) || (file.size() - offset < sizeof(T))) {
        throw std::runtime_error(std::string("truncated ELF file (") + what +
                                 ")");
    }
    T value;
    std::memcpy(&value, file.data() + offset, sizeof(value));
    return value;
}

/* The NUL-terminated string at @a offset of the string table @a strtab. */
std::string string_at(const std::vector<char> &file, const Elf64_Shdr &strtab,
                      uint64_t offset)
{
    if ((offset >= strtab.sh_size) || (strtab.sh_offset > file.size()) ||
        (strtab.sh_size > file.size() - strtab.sh_offset)) {
        return "";
    }
    const char *start = file.data() + strtab.sh_offset + offset;
    size_t      room  = strtab.sh_size - offset;
    return std::string(start, strnlen(start, room));
}

/* The machine of a ".em<N>" suffix, 0 without one, -1 if malformed. */
int machine_of_suffix(const std::string &suffix)
{
    if (suffix.empty()) {
        return 0;
    }
    if ((suffix.rfind(".em", 0) != 0) || (suffix.size() == 3) ||
        (suffix.size() > 8) ||
        (suffix.find_first_not_of("0123456789", 3) != std::string::npos)) {
        return -1;
    }
    unsigned long machine = std::stoul(suffix.substr(3));
    return (machine > 0xffff) ? -1 : int(machine);
}

} // namespace

std::vector<EmbeddedImage> read_embedded_images(const std::string &path)
{
    std::ifstream stream(path, std::ios::binary);
    if (!stream) {
        throw std::runtime_error("cannot read it: " +
                                 std::string(strerror(errno)));
    }
    std::vector<char> file((std::istreambuf_iterator<char>(stream)),
                           std::istreambuf_iterator<char>());
    auto              ehdr = read_at<Elf64_Ehdr>(file, 0, "header");
    if ((std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0) ||
        (ehdr.e_ident[EI_CLASS] != ELFCLASS64) ||
        (ehdr.e_ident[EI_DATA] != ELFDATA2LSB)) {
        throw std::runtime_error("not a 64-bit little-endian ELF file");
    }
    if (ehdr.e_shentsize != sizeof(Elf64_Shdr)) {
        throw std::runtime_error("unexpected ELF section header size");
    }
    std::vector<Elf64_Shdr> sections;
    for (unsigned i = 0; i < ehdr.e_shnum; ++i) {
        sections.push_back(read_at<Elf64_Shdr>(
                file, ehdr.e_shoff + uint64_t(i) * sizeof(Elf64_Shdr),
                "section headers"));
    }

    const std::string          native_prefix  = UCP_IFUNC_IMAGE_SYMBOL;
    const std::string          bitcode_prefix = UCP_IFUNC_BITCODE_SYMBOL;
    std::vector<EmbeddedImage> images;
    for (uint32_t type : {uint32_t(SHT_SYMTAB), uint32_t(SHT_DYNSYM)}) {
        for (const Elf64_Shdr &table : sections) {
            if ((table.sh_type != type) || (table.sh_link >= sections.size()) ||
                (table.sh_entsize != sizeof(Elf64_Sym))) {
                continue;
            }
            const Elf64_Shdr &strtab = sections[table.sh_link];
            for (uint64_t at = 0; at + sizeof(Elf64_Sym) <= table.sh_size;
                 at += sizeof(Elf64_Sym)) {
                auto        sym = read_at<Elf64_Sym>(file, table.sh_offset + at,
                                              "symbol table");
                std::string symbol  = string_at(file, strtab, sym.st_name);
                bool        bitcode = (symbol.rfind(bitcode_prefix, 0) == 0);
                const std::string &prefix =
                        bitcode ? bitcode_prefix : native_prefix;
                if ((symbol.rfind(prefix, 0) != 0) ||
                    (sym.st_shndx == SHN_UNDEF) ||
                    (sym.st_shndx >= sections.size())) {
                    continue;
                }
                std::string rest   = symbol.substr(prefix.size());
                size_t      dot    = rest.find('.');
                std::string name   = rest.substr(0, dot);
                int         suffix = machine_of_suffix(
                                (dot == std::string::npos) ? "" : rest.substr(dot));
                const Elf64_Shdr &section = sections[sym.st_shndx];
                uint64_t          offset  = sym.st_value - section.sh_addr;
                if (name.empty() || (suffix < 0) || (bitcode && !suffix) ||
                    (sym.st_value < section.sh_addr) ||
                    (section.sh_type == SHT_NOBITS) ||
                    (offset > section.sh_size) ||
                    (sym.st_size > section.sh_size - offset) ||
                    (section.sh_offset > file.size()) ||
                    (section.sh_size > file.size() - section.sh_offset)) {
                    continue;
                }
                bool seen = false;
                for (const EmbeddedImage &image : images) {
                    seen = seen || (image.symbol == symbol);
                }
                if (seen) {
                    continue;
                }
                const char *start = file.data() + section.sh_offset + offset;
                images.push_back({symbol, name, uint16_t(suffix),
                                  std::vector<char>(start, start + sym.st_size),
                                  bitcode});
            }
        }
        if (!images.empty()) {
            break;
        }
    }
    return images;
}

} // namespace ucx_ifunc_info
