/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Names for linked code in a debugger: each code image is described to GDB
 * through its JIT interface (a list of in-memory symbol files that GDB reads
 * when a breakpoint it keeps on __jit_debug_register_code is hit), so that
 * a backtrace through shipped code shows function names, not bare
 * addresses. The description is a small ELF file with an address-only .text
 * section and a symbol table. It costs one allocation when code is linked
 * and nothing per message; without a debugger the call is a plain function
 * call that returns.
 */
#ifndef UCP_IFUNC_GDB_JIT_H_
#define UCP_IFUNC_GDB_JIT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

extern "C" {

/* The interface GDB looks up by name in every loaded object. The names and
 * the layout are fixed by GDB (version 1). Exported from libucp_ifunc.so so
 * that a stripped library still offers them. */
struct jit_code_entry {
    jit_code_entry *next_entry;
    jit_code_entry *prev_entry;
    const char     *symfile_addr;
    uint64_t        symfile_size;
};

struct jit_descriptor {
    uint32_t        version;
    uint32_t        action_flag; /* JIT_NOACTION, JIT_REGISTER_FN, ... */
    jit_code_entry *relevant_entry;
    jit_code_entry *first_entry;
};

extern jit_descriptor __jit_debug_descriptor;
void                  __jit_debug_register_code() noexcept;
}

namespace ucx_ifunc {

/* A function of linked code: its name and absolute address range. */
struct JitSymbol {
    std::string name;
    uint64_t    address;
    uint64_t    size;
};

/* One code image known to the debugger: listed while the object lives.
 * Thread-safe (one lock for all registrations). */
class GdbJitRegistration {
public:
    /* Use gdb_jit_register(). */
    explicit GdbJitRegistration(std::vector<char> symfile);
    ~GdbJitRegistration();
    GdbJitRegistration(const GdbJitRegistration &)            = delete;
    GdbJitRegistration &operator=(const GdbJitRegistration &) = delete;

    /* The in-memory ELF file the debugger reads. */
    const std::vector<char> &symfile() const { return symfile_; }

private:
    std::vector<char> symfile_;
    jit_code_entry    entry_{};
};

/* A function of linked code named by the offset of its name in a string
 * table given with it. */
struct JitTableSymbol {
    uint32_t name_offset;
    uint64_t address;
    uint64_t size;
};

/* The ELF file that describes code at [text_address, text_address +
 * text_size) with @a symbols (those outside the range are left out), for
 * an ELF machine @a machine (EM_*). @a object_name is recorded as the file
 * symbol. */
std::vector<char> gdb_jit_symfile(const std::string &object_name,
                                  uint16_t machine, uint64_t text_address,
                                  uint64_t                      text_size,
                                  const std::vector<JitSymbol> &symbols);

/* The same with names from @a strtab (@a strtab_size bytes; a symbol whose
 * name is not a NUL-terminated string in it is left out). The table is
 * copied once, whatever the symbols name: the file is the table, 24 bytes
 * per symbol and a few hundred more, so a received image's description is
 * never larger than the image's own tables (docs/security.md). */
std::vector<char> gdb_jit_symfile(const std::string &object_name,
                                  uint16_t machine, uint64_t text_address,
                                  uint64_t text_size, const char *strtab,
                                  size_t strtab_size,
                                  const std::vector<JitTableSymbol> &symbols);

/* Describes the code to the debugger for this process (arch::elf_machine)
 * until the returned object is released. */
std::unique_ptr<GdbJitRegistration>
gdb_jit_register(const std::string &object_name, uint64_t text_address,
                 uint64_t text_size, const std::vector<JitSymbol> &symbols);

/* The same for symbols named in a string table (gdb_jit_symfile()). */
std::unique_ptr<GdbJitRegistration>
gdb_jit_register(const std::string &object_name, uint64_t text_address,
                 uint64_t text_size, const char *strtab, size_t strtab_size,
                 const std::vector<JitTableSymbol> &symbols);

} // namespace ucx_ifunc

#endif
