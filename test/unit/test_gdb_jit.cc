/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The description of linked code for gdb: the ELF file it reads, and the
 * list of GDB's JIT interface that registrations join and leave. That gdb
 * itself names the functions is test/integration/test_gdb.cc.
 */
#include "ucp/ifunc/load/gdb_jit.h"

#include <gtest/gtest.h>

#include <elf.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace test {
namespace {

using ucx_ifunc::JitSymbol;

/* The parts of a symbol file the tests look at. */
struct ParsedSymfile {
    Elf64_Ehdr                        ehdr;
    std::vector<Elf64_Shdr>           shdr;
    std::map<std::string, Elf64_Shdr> sections;
    std::map<std::string, Elf64_Sym>  symbols;
};

template <typename T>
T read_at(const std::vector<char> &file, size_t offset)
{
    T value;
    EXPECT_LE(offset + sizeof(T), file.size());
    std::memcpy(&value, file.data() + offset, sizeof(T));
    return value;
}

ParsedSymfile parse(const std::vector<char> &file)
{
    ParsedSymfile p;
    p.ehdr = read_at<Elf64_Ehdr>(file, 0);
    for (size_t i = 0; i < p.ehdr.e_shnum; ++i) {
        p.shdr.push_back(read_at<Elf64_Shdr>(
                file, p.ehdr.e_shoff + i * sizeof(Elf64_Shdr)));
    }
    const char *shstr = file.data() + p.shdr.at(p.ehdr.e_shstrndx).sh_offset;
    for (const Elf64_Shdr &s : p.shdr) {
        p.sections[shstr + s.sh_name] = s;
    }
    const Elf64_Shdr &symtab = p.sections.at(".symtab");
    const char       *str = file.data() + p.shdr.at(symtab.sh_link).sh_offset;
    for (size_t i = 0; i < symtab.sh_size / sizeof(Elf64_Sym); ++i) {
        auto sym                     = read_at<Elf64_Sym>(file,
                                      symtab.sh_offset + i * sizeof(Elf64_Sym));
        p.symbols[str + sym.st_name] = sym;
    }
    return p;
}

TEST(GdbJit, SymfileDescribesTheText)
{
    const uint64_t         text = 0x7f0000001000, size = 0x300;
    std::vector<JitSymbol> symbols = {{"echo_main", text + 0x100, 0x200},
                                      {"echo_helper", text, 0x100},
                                      {"outside", text + size, 0x10},
                                      {"too_long", text + 0x2f0, 0x20}};
    std::vector<char>      file    = ucx_ifunc::gdb_jit_symfile(
                    "ifunc:echo:0123456789abcdef", EM_X86_64, text, size, symbols);
    ParsedSymfile p = parse(file);

    EXPECT_EQ(0, std::memcmp(p.ehdr.e_ident, ELFMAG, SELFMAG));
    EXPECT_EQ(ELFCLASS64, p.ehdr.e_ident[EI_CLASS]);
    EXPECT_EQ(ET_EXEC, p.ehdr.e_type);
    EXPECT_EQ(EM_X86_64, p.ehdr.e_machine);
    EXPECT_EQ(SHN_UNDEF, p.shdr.at(0).sh_type);

    const Elf64_Shdr &t = p.sections.at(".text");
    EXPECT_EQ(SHT_NOBITS, t.sh_type);
    EXPECT_EQ(uint64_t(SHF_ALLOC | SHF_EXECINSTR), t.sh_flags);
    EXPECT_EQ(text, t.sh_addr);
    EXPECT_EQ(size, t.sh_size);

    ASSERT_EQ(1u, p.symbols.count("echo_main"));
    const Elf64_Sym &main = p.symbols.at("echo_main");
    EXPECT_EQ(STT_FUNC, ELF64_ST_TYPE(main.st_info));
    EXPECT_EQ(STB_GLOBAL, ELF64_ST_BIND(main.st_info));
    EXPECT_EQ(text + 0x100, main.st_value);
    EXPECT_EQ(0x200u, main.st_size);
    EXPECT_EQ(SHT_NOBITS, p.shdr.at(main.st_shndx).sh_type);
    EXPECT_EQ(text, p.symbols.at("echo_helper").st_value);
    EXPECT_EQ(
            STT_FILE,
            ELF64_ST_TYPE(p.symbols.at("ifunc:echo:0123456789abcdef").st_info));
    /* Symbols that do not lie within the text are left out. */
    EXPECT_EQ(0u, p.symbols.count("outside"));
    EXPECT_EQ(0u, p.symbols.count("too_long"));
}

TEST(GdbJit, RegistrationsJoinAndLeaveTheList)
{
    const jit_descriptor &d = __jit_debug_descriptor;
    EXPECT_EQ(1u, d.version);
    jit_code_entry *before = d.first_entry;

    auto a = ucx_ifunc::gdb_jit_register("a", 0x1000, 0x100,
                                         {{"a_main", 0x1000, 0x100}});
    auto b = ucx_ifunc::gdb_jit_register("b", 0x2000, 0x100,
                                         {{"b_main", 0x2000, 0x100}});
    auto c = ucx_ifunc::gdb_jit_register("c", 0x3000, 0x100, {});
    EXPECT_EQ(0u, d.action_flag); /* JIT_NOACTION between calls */

    /* Newest first; each entry points at its registration's file. */
    jit_code_entry *e = d.first_entry;
    ASSERT_NE(nullptr, e);
    EXPECT_EQ(c->symfile().data(), e->symfile_addr);
    EXPECT_EQ(c->symfile().size(), e->symfile_size);
    EXPECT_EQ(nullptr, e->prev_entry);
    EXPECT_EQ(b->symfile().data(), e->next_entry->symfile_addr);
    EXPECT_EQ(a->symfile().data(), e->next_entry->next_entry->symfile_addr);
    EXPECT_EQ(before, e->next_entry->next_entry->next_entry);

    b.reset(); /* the middle one */
    e = d.first_entry;
    EXPECT_EQ(c->symfile().data(), e->symfile_addr);
    EXPECT_EQ(a->symfile().data(), e->next_entry->symfile_addr);
    EXPECT_EQ(e, e->next_entry->prev_entry);

    c.reset(); /* the first one */
    e = d.first_entry;
    EXPECT_EQ(a->symfile().data(), e->symfile_addr);
    EXPECT_EQ(nullptr, e->prev_entry);

    a.reset();
    EXPECT_EQ(before, d.first_entry);
    EXPECT_EQ(0u, d.action_flag);
}

} // namespace
} // namespace test
