/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "gdb_jit.h"

#include "arch.h"

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

template <typename T>
void append(std::vector<char> *out, const T &value)
{
    const char *bytes = reinterpret_cast<const char *>(&value);
    out->insert(out->end(), bytes, bytes + sizeof(value));
}

void append_aligned(std::vector<char> *out, const std::string &bytes)
{
    out->insert(out->end(), bytes.begin(), bytes.end());
    out->resize((out->size() + 7) & ~size_t(7), '\0');
}

} // namespace

std::vector<char> gdb_jit_symfile(const std::string &object_name,
                                  uint16_t machine, uint64_t text_address,
                                  uint64_t                      text_size,
                                  const std::vector<JitSymbol> &symbols)
{
    /* Symbol 0 is null, 1 the file (local), the functions follow (global):
     * absolute addresses, as in an executable. */
    StringTable            strtab;
    std::vector<Elf64_Sym> syms(2);
    syms[1].st_name  = strtab.add(object_name);
    syms[1].st_info  = ELF64_ST_INFO(STB_LOCAL, STT_FILE);
    syms[1].st_shndx = SHN_ABS;
    for (const JitSymbol &s : symbols) {
        if (s.name.empty() || (s.address < text_address) ||
            (s.address - text_address >= text_size) ||
            (s.size > text_size - (s.address - text_address))) {
            ucs_debug("%s: symbol '%s' at 0x%llx is outside the code; not "
                      "given to the debugger",
                      object_name.c_str(), s.name.c_str(),
                      static_cast<unsigned long long>(s.address));
            continue;
        }
        Elf64_Sym sym{};
        sym.st_name  = strtab.add(s.name);
        sym.st_info  = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
        sym.st_shndx = kSecText;
        sym.st_value = s.address;
        sym.st_size  = s.size;
        syms.push_back(sym);
    }

    StringTable shstrtab;
    uint32_t    text_name     = shstrtab.add(".text");
    uint32_t    symtab_name   = shstrtab.add(".symtab");
    uint32_t    strtab_name   = shstrtab.add(".strtab");
    uint32_t    shstrtab_name = shstrtab.add(".shstrtab");

    /* Layout: ELF header, symbols, strings, section names, section
     * headers; every part 8-byte aligned. */
    std::vector<char> out(sizeof(Elf64_Ehdr));
    size_t            symtab_offset = out.size();
    for (const Elf64_Sym &sym : syms) {
        append(&out, sym);
    }
    size_t strtab_offset = out.size();
    append_aligned(&out, strtab.bytes());
    size_t shstrtab_offset = out.size();
    append_aligned(&out, shstrtab.bytes());
    size_t shdr_offset = out.size();

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
    shdr[kSecSymtab].sh_size      = syms.size() * sizeof(Elf64_Sym);
    shdr[kSecSymtab].sh_link      = kSecStrtab;
    shdr[kSecSymtab].sh_info      = 2; /* first global symbol */
    shdr[kSecSymtab].sh_addralign = 8;
    shdr[kSecSymtab].sh_entsize   = sizeof(Elf64_Sym);

    shdr[kSecStrtab].sh_name      = strtab_name;
    shdr[kSecStrtab].sh_type      = SHT_STRTAB;
    shdr[kSecStrtab].sh_offset    = strtab_offset;
    shdr[kSecStrtab].sh_size      = strtab.bytes().size();
    shdr[kSecStrtab].sh_addralign = 1;

    shdr[kSecShstrtab].sh_name      = shstrtab_name;
    shdr[kSecShstrtab].sh_type      = SHT_STRTAB;
    shdr[kSecShstrtab].sh_offset    = shstrtab_offset;
    shdr[kSecShstrtab].sh_size      = shstrtab.bytes().size();
    shdr[kSecShstrtab].sh_addralign = 1;
    for (const Elf64_Shdr &s : shdr) {
        append(&out, s);
    }

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

std::unique_ptr<GdbJitRegistration>
gdb_jit_register(const std::string &object_name, uint64_t text_address,
                 uint64_t text_size, const std::vector<JitSymbol> &symbols)
{
    auto registration = std::make_unique<GdbJitRegistration>(
            gdb_jit_symfile(object_name, arch::elf_machine(), text_address,
                            text_size, symbols));
    ucs_debug("%s: described to the debugger (%zu bytes, %zu symbols)",
              object_name.c_str(), registration->symfile().size(),
              symbols.size());
    return registration;
}

} // namespace ucx_ifunc
