/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/load/gdb_jit.h"

#include "ucp/ifunc/base/arch.h"

#include <ucs/debug/log_def.h>

#include <elf.h>

#include <cstring>
#include <mutex>

namespace {

enum : uint32_t {
    JIT_NOACTION      = 0,
    JIT_REGISTER_FN   = 1,
    JIT_UNREGISTER_FN = 2,
};

/* Guards this library's descriptor and its list. */
std::mutex jit_lock;

} // namespace

extern "C" {

/* GDB reads version 1 of the descriptor at startup or attach, and again at
 * each stop on __jit_debug_register_code. */
__attribute__((visibility("default")))
jit_descriptor __jit_debug_descriptor = {1, JIT_NOACTION, nullptr, nullptr};

/* GDB keeps a breakpoint here: never inlined, never folded away. Empty,
 * so it cannot throw. */
__attribute__((visibility("default"), noinline, used)) void
__jit_debug_register_code() noexcept
{
    asm volatile("" ::: "memory");
}

/* The same two, under names only this library sees: another library of
 * the process (LLVM's JIT) may export the names first, and GDB reads each
 * library's descriptor apart, so ours must change ours. */
extern jit_descriptor ucx_ifunc_jit_descriptor
        __attribute__((alias("__jit_debug_descriptor"), visibility("hidden")));
void ucx_ifunc_jit_register_code() noexcept
        __attribute__((alias("__jit_debug_register_code"),
                       visibility("hidden")));
}

namespace ucx_ifunc {
namespace {

/* Section indexes of the file gdb_jit_symfile() writes. */
enum : uint16_t {
    kSecNull,
    kSecText,
    kSecSymtab,
    kSecStrtab,
    kSecShstrtab,
    kSecCount
};

/* A string table under construction: offset 0 is the empty name. */
class StringTable {
public:
    StringTable() : bytes_(1, '\0') {}

    uint32_t add(const std::string &s)
    {
        uint32_t offset = static_cast<uint32_t>(bytes_.size());
        bytes_.insert(bytes_.end(), s.begin(), s.end());
        bytes_.push_back('\0');
        return offset;
    }

    const std::string &bytes() const { return bytes_; }

private:
    std::string bytes_;
};

} // namespace

std::vector<char> gdb_jit_symfile(const std::string &object_name,
                                  uint16_t machine, uint64_t text_address,
                                  uint64_t                      text_size,
                                  const std::vector<JitSymbol> &symbols)
{
    StringTable                 strtab;
    std::vector<JitTableSymbol> named;
    named.reserve(symbols.size());
    for (const JitSymbol &s : symbols) {
        named.push_back({strtab.add(s.name), s.address, s.size});
    }
    return gdb_jit_symfile(object_name, machine, text_address, text_size,
                           strtab.bytes().data(), strtab.bytes().size(), named);
}

std::vector<char> gdb_jit_symfile(const std::string &object_name,
                                  uint16_t machine, uint64_t text_address,
                                  uint64_t text_size, const char *strtab,
                                  size_t strtab_size,
                                  const std::vector<JitTableSymbol> &symbols)
{
    if (strtab_size > UINT32_MAX - object_name.size() - 2) {
        strtab_size = 0; /* names an st_name cannot reach: none */
    }
    auto usable = [&](const JitTableSymbol &s) {
        const char *name  = strtab + s.name_offset;
        bool        named = (s.name_offset < strtab_size) && (*name != '\0') &&
                     std::memchr(name, '\0', strtab_size - s.name_offset);
        bool inside = (s.address >= text_address) &&
                      (s.address - text_address < text_size) &&
                      (s.size <= text_size - (s.address - text_address));
        if (!named || !inside) {
            ucs_debug("%s: a symbol at 0x%llx is outside the code or has no "
                      "name; not given to the debugger",
                      object_name.c_str(),
                      static_cast<unsigned long long>(s.address));
        }
        return named && inside;
    };
    size_t n_symbols = 0;
    for (const JitTableSymbol &s : symbols) {
        n_symbols += usable(s) ? 1 : 0;
    }

    /* The strings: the empty name, the table as given (a symbol's name at
     * 1 + its offset), the object's name. */
    const uint32_t table_base  = 1;
    const uint32_t object_base = uint32_t(table_base + strtab_size);
    const size_t   strtab_all  = object_base + object_name.size() + 1;

    StringTable shstrtab;
    uint32_t    text_name     = shstrtab.add(".text");
    uint32_t    symtab_name   = shstrtab.add(".symtab");
    uint32_t    strtab_name   = shstrtab.add(".strtab");
    uint32_t    shstrtab_name = shstrtab.add(".shstrtab");

    /* Layout: ELF header, symbols, strings, section names, section
     * headers; every part 8-byte aligned. Sized first, written in place:
     * the file is the only copy made. */
    auto         align8        = [](size_t n) { return (n + 7) & ~size_t(7); };
    const size_t symtab_offset = sizeof(Elf64_Ehdr);
    const size_t symtab_size   = (2 + n_symbols) * sizeof(Elf64_Sym);
    const size_t strtab_offset = symtab_offset + symtab_size;
    const size_t shstrtab_offset = strtab_offset + align8(strtab_all);
    const size_t shdr_offset =
            shstrtab_offset + align8(shstrtab.bytes().size());
    std::vector<char> out(shdr_offset + kSecCount * sizeof(Elf64_Shdr), '\0');

    /* Symbol 0 is null, 1 the file (local), the functions follow (global):
     * absolute addresses, as in an executable. */
    char     *sym_at = out.data() + symtab_offset + sizeof(Elf64_Sym);
    Elf64_Sym file{};
    file.st_name  = object_base;
    file.st_info  = ELF64_ST_INFO(STB_LOCAL, STT_FILE);
    file.st_shndx = SHN_ABS;
    std::memcpy(sym_at, &file, sizeof(file));
    for (const JitTableSymbol &s : symbols) {
        if (!usable(s)) {
            continue;
        }
        Elf64_Sym sym{};
        sym.st_name  = table_base + s.name_offset;
        sym.st_info  = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
        sym.st_shndx = kSecText;
        sym.st_value = s.address;
        sym.st_size  = s.size;
        sym_at += sizeof(Elf64_Sym);
        std::memcpy(sym_at, &sym, sizeof(sym));
    }
    if (strtab_size != 0) {
        std::memcpy(out.data() + strtab_offset + table_base, strtab,
                    strtab_size);
    }
    std::memcpy(out.data() + strtab_offset + object_base, object_name.c_str(),
                object_name.size() + 1);
    std::memcpy(out.data() + shstrtab_offset, shstrtab.bytes().data(),
                shstrtab.bytes().size());

    Elf64_Shdr shdr[kSecCount] = {};
    /* No bytes in the file: the debugger reads the code from memory. */
    shdr[kSecText].sh_name      = text_name;
    shdr[kSecText].sh_type      = SHT_NOBITS;
    shdr[kSecText].sh_flags     = SHF_ALLOC | SHF_EXECINSTR;
    shdr[kSecText].sh_addr      = text_address;
    shdr[kSecText].sh_size      = text_size;
    shdr[kSecText].sh_addralign = 16;

    shdr[kSecSymtab].sh_name      = symtab_name;
    shdr[kSecSymtab].sh_type      = SHT_SYMTAB;
    shdr[kSecSymtab].sh_offset    = symtab_offset;
    shdr[kSecSymtab].sh_size      = symtab_size;
    shdr[kSecSymtab].sh_link      = kSecStrtab;
    shdr[kSecSymtab].sh_info      = 2; /* first global symbol */
    shdr[kSecSymtab].sh_addralign = 8;
    shdr[kSecSymtab].sh_entsize   = sizeof(Elf64_Sym);

    shdr[kSecStrtab].sh_name      = strtab_name;
    shdr[kSecStrtab].sh_type      = SHT_STRTAB;
    shdr[kSecStrtab].sh_offset    = strtab_offset;
    shdr[kSecStrtab].sh_size      = strtab_all;
    shdr[kSecStrtab].sh_addralign = 1;

    shdr[kSecShstrtab].sh_name      = shstrtab_name;
    shdr[kSecShstrtab].sh_type      = SHT_STRTAB;
    shdr[kSecShstrtab].sh_offset    = shstrtab_offset;
    shdr[kSecShstrtab].sh_size      = shstrtab.bytes().size();
    shdr[kSecShstrtab].sh_addralign = 1;
    std::memcpy(out.data() + shdr_offset, shdr, sizeof(shdr));

    Elf64_Ehdr ehdr{};
    std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
    ehdr.e_ident[EI_CLASS]   = ELFCLASS64;
    ehdr.e_ident[EI_DATA]    = ELFDATA2LSB;
    ehdr.e_ident[EI_VERSION] = EV_CURRENT;
    ehdr.e_ident[EI_OSABI]   = ELFOSABI_SYSV;
    ehdr.e_type              = ET_EXEC;
    ehdr.e_machine           = machine;
    ehdr.e_version           = EV_CURRENT;
    ehdr.e_shoff             = shdr_offset;
    ehdr.e_ehsize            = sizeof(Elf64_Ehdr);
    ehdr.e_shentsize         = sizeof(Elf64_Shdr);
    ehdr.e_shnum             = kSecCount;
    ehdr.e_shstrndx          = kSecShstrtab;
    std::memcpy(out.data(), &ehdr, sizeof(ehdr));
    return out;
}

GdbJitRegistration::GdbJitRegistration(std::vector<char> symfile)
    : symfile_(std::move(symfile))
{
    entry_.symfile_addr = symfile_.data();
    entry_.symfile_size = symfile_.size();

    std::lock_guard<std::mutex> guard(jit_lock);
    entry_.next_entry = ucx_ifunc_jit_descriptor.first_entry;
    if (entry_.next_entry != nullptr) {
        entry_.next_entry->prev_entry = &entry_;
    }
    ucx_ifunc_jit_descriptor.first_entry    = &entry_;
    ucx_ifunc_jit_descriptor.relevant_entry = &entry_;
    ucx_ifunc_jit_descriptor.action_flag    = JIT_REGISTER_FN;
    ucx_ifunc_jit_register_code();
    ucx_ifunc_jit_descriptor.action_flag = JIT_NOACTION;
}

GdbJitRegistration::~GdbJitRegistration()
{
    std::lock_guard<std::mutex> guard(jit_lock);
    if (entry_.prev_entry != nullptr) {
        entry_.prev_entry->next_entry = entry_.next_entry;
    } else {
        ucx_ifunc_jit_descriptor.first_entry = entry_.next_entry;
    }
    if (entry_.next_entry != nullptr) {
        entry_.next_entry->prev_entry = entry_.prev_entry;
    }
    ucx_ifunc_jit_descriptor.relevant_entry = &entry_;
    ucx_ifunc_jit_descriptor.action_flag    = JIT_UNREGISTER_FN;
    ucx_ifunc_jit_register_code();
    ucx_ifunc_jit_descriptor.action_flag    = JIT_NOACTION;
    ucx_ifunc_jit_descriptor.relevant_entry = nullptr;
}

namespace {

std::unique_ptr<GdbJitRegistration> registered(const std::string &object_name,
                                               std::vector<char>  symfile,
                                               size_t             n_symbols)
{
    auto registration =
            std::make_unique<GdbJitRegistration>(std::move(symfile));
    ucs_debug("%s: described to the debugger (%zu bytes, %zu symbols)",
              object_name.c_str(), registration->symfile().size(), n_symbols);
    return registration;
}

} // namespace

std::unique_ptr<GdbJitRegistration>
gdb_jit_register(const std::string &object_name, uint64_t text_address,
                 uint64_t text_size, const std::vector<JitSymbol> &symbols)
{
    return registered(object_name,
                      gdb_jit_symfile(object_name, arch::elf_machine(),
                                      text_address, text_size, symbols),
                      symbols.size());
}

std::unique_ptr<GdbJitRegistration>
gdb_jit_register(const std::string &object_name, uint64_t text_address,
                 uint64_t text_size, const char *strtab, size_t strtab_size,
                 const std::vector<JitTableSymbol> &symbols)
{
    return registered(object_name,
                      gdb_jit_symfile(object_name, arch::elf_machine(),
                                      text_address, text_size, strtab,
                                      strtab_size, symbols),
                      symbols.size());
}

} // namespace ucx_ifunc
