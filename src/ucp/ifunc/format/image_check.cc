/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/format/image_check.h"

#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/format/isa.h"
#include "ucp/ifunc/format/sandbox_layout.h"

#include <unistd.h>

#include <initializer_list>

namespace ucx_ifunc {
namespace {

/* Every import is a symbol lookup at link time, under the cache's lock:
 * tens of thousands stall other pollers for tens of milliseconds. */
constexpr uint32_t kMaxImports       = 4096;
constexpr uint32_t kMaxNeeded        = 64;
constexpr uint32_t kMaxSymbols       = 1u << 16;
constexpr uint32_t kMaxRelocs        = 1u << 24;
constexpr uint64_t kMaxPageSize      = 1u << 20;
constexpr char     kWrongMachine[]   = "code for another CPU architecture";
constexpr char     kTooManyImports[] = "too many imports";
constexpr char     kBitcodeOnly[] =
        "machine code for a CPU architecture that runs bitcode only";
constexpr char kTooLarge[] =
        "needs more memory than UCX_IFUNC_MAX_IMAGE_SIZE allows";
constexpr char     kTooManyGateImports[] = "too many imports for the sandbox";
constexpr uint16_t kSandboxMachine = 62; /* EM_X86_64: x86-64 only so far */

/* [offset, offset + length) lies inside [0, limit), without overflow. */
bool within(uint64_t offset, uint64_t length, uint64_t limit)
{
    return (offset <= limit) && (length <= limit - offset);
}

bool reloc_target_ok(const ucp_ifunc_image_desc_t &desc, uint64_t vaddr)
{
    for (int seg : {UCP_IFUNC_SEG_RELRO, UCP_IFUNC_SEG_DATA}) {
        const ucp_ifunc_image_seg_t &s = desc.seg[seg];
        if ((vaddr >= s.vaddr) && within(vaddr - s.vaddr, 8, s.mem_size)) {
            return true;
        }
    }
    return false;
}

/* What a sandbox image must be beyond any image (docs/design.md, "Sandbox
 * images"): the layout the slot maps it by, and the text the verifier
 * decodes whole. */
const char *sandbox_layout_problem(const ucp_ifunc_image_desc_t &d)
{
    namespace sbx                     = sandbox;
    const ucp_ifunc_image_seg_t &text = d.seg[UCP_IFUNC_SEG_TEXT];
    if (d.machine != kSandboxMachine) {
        return "sandbox image for a CPU architecture without a sandbox";
    }
    if ((text.mem_size == 0) || (text.file_size != text.mem_size) ||
        (text.mem_size % sbx::kBundleSize)) {
        return "sandbox code is not whole bundles";
    }
    if (d.entry_vaddr % sbx::kBundleSize) {
        return "sandbox entry point is not a bundle start";
    }
    /* Imports are called through the gate page, never a table. */
    if (d.got_ptr_vaddr != 0) {
        return "sandbox image with a GOT pointer";
    }
    /* The slot maps image vaddr 0 at kImageOffset, below the stack. */
    if ((sbx::kImageOffset % d.page_align) ||
        (d.map_size > sbx::kImageEnd - sbx::kImageOffset)) {
        return "sandbox image does not fit its slot";
    }
    return nullptr;
}

/* The flags each version carries, exactly. */
uint32_t flags_of_version(uint16_t version)
{
    switch (version) {
        case UCP_IFUNC_IMAGE_VERSION_SANDBOX:
            return UCP_IFUNC_IMAGE_FLAG_SANDBOX;
        case UCP_IFUNC_IMAGE_VERSION_BITCODE:
            return UCP_IFUNC_IMAGE_FLAG_BITCODE;
        default:
            return 0;
    }
}

/* What a bitcode image must be (docs/design.md, "Bitcode images"): the
 * bitcode in TEXT, nothing mapped, nothing to relocate. */
const char *bitcode_layout_problem(const void                   *image,
                                   const ucp_ifunc_image_desc_t &d,
                                   size_t                        max_map_size)
{
    const ucp_ifunc_image_seg_t &text = d.seg[UCP_IFUNC_SEG_TEXT];
    if ((d.page_align != 0) || (d.map_size != 0) || (d.entry_vaddr != 0) ||
        (d.got_ptr_vaddr != 0) || (d.n_relocs != 0) || (d.relocs_offset != 0)) {
        return "bitcode image with fields of machine code";
    }
    for (int seg : {UCP_IFUNC_SEG_RELRO, UCP_IFUNC_SEG_DATA}) {
        const ucp_ifunc_image_seg_t &s = d.seg[seg];
        if (s.vaddr || s.mem_size || s.file_offset || s.file_size) {
            return "bitcode image with data segments";
        }
    }
    if ((text.vaddr != 0) || (text.file_size == 0) ||
        (text.file_size != text.mem_size) || (text.file_offset % 16) ||
        (text.file_offset < sizeof(d)) ||
        !within(text.file_offset, text.file_size, d.image_size)) {
        return "bad bitcode segment";
    }
    /* The bitcode is what the target compiles: it counts against the same
     * limit as the address space a native image asks for. */
    if (text.file_size > max_map_size) {
        return kTooLarge;
    }
    const unsigned char *bytes =
            static_cast<const unsigned char *>(image) + text.file_offset;
    static const unsigned char kRaw[]     = {'B', 'C', 0xc0, 0xde};
    static const unsigned char kWrapper[] = {0xde, 0xc0, 0x17, 0x0b};
    if ((text.file_size < 4) ||
        (std::memcmp(bytes, kRaw, 4) && std::memcmp(bytes, kWrapper, 4))) {
        return "bitcode segment without the bitcode magic";
    }
    return nullptr;
}

/* Returns nullptr if the image is acceptable, otherwise what is wrong. */
/* The descriptor's own fields and the segments it lays out. */
const char *layout_problem(uint16_t machine, const void *image,
                           size_t available, size_t max_map_size,
                           ucp_ifunc_image_desc_t *desc_p)
{
    if (available < sizeof(ucp_ifunc_image_desc_t)) {
        return "shorter than its descriptor";
    }
    auto &d = *desc_p = image_desc(image);
    if (d.magic != UCP_IFUNC_IMAGE_MAGIC) {
        return "bad magic";
    }
    if ((d.version != UCP_IFUNC_IMAGE_VERSION) &&
        (d.version != UCP_IFUNC_IMAGE_VERSION_SANDBOX) &&
        (d.version != UCP_IFUNC_IMAGE_VERSION_BITCODE)) {
        return "unsupported image version (rebuild the library with this "
               "release's ucx-ifunc-cc)";
    }
    /* Each version has exactly one set of flags: a native image can never
     * claim the sandbox, nor a sandbox image run natively by mistake, nor
     * bitcode pass for machine code or the reverse. */
    if (d.flags != flags_of_version(d.version)) {
        return "bad flags for the image version";
    }
    if (d.machine != machine) {
        return kWrongMachine;
    }
    if (d.desc_size != sizeof(d)) {
        return "bad descriptor size";
    }
    if ((d.image_size < sizeof(d)) || (d.image_size > available) ||
        (d.image_size % 8)) {
        return "bad image size";
    }

    if (image_is_bitcode(d)) {
        return bitcode_layout_problem(image, d, max_map_size);
    }
    /* Relocating and calling machine code is ISA-specific: ppc64el gets
     * bitcode, never machine code. */
    if (!native_images_link(d.machine)) {
        return kBitcodeOnly;
    }

    uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
    if ((d.page_align & (d.page_align - 1)) || (d.page_align < page) ||
        (d.page_align > kMaxPageSize)) {
        return "segment alignment is not a supported page size";
    }
    if ((d.map_size == 0) || (d.map_size % d.page_align)) {
        return "bad map size";
    }
    if (d.map_size > max_map_size) {
        return kTooLarge;
    }

    uint64_t end = 0;
    for (const ucp_ifunc_image_seg_t &s : d.seg) {
        if ((s.vaddr % d.page_align) || (s.vaddr < end) ||
            (s.file_size > s.mem_size) ||
            !within(s.vaddr, s.mem_size, d.map_size) ||
            !within(s.file_offset, s.file_size, d.image_size) ||
            (s.file_size && (s.file_offset < sizeof(d)))) {
            return "bad segment";
        }
        end = s.vaddr + s.mem_size;
    }
    const ucp_ifunc_image_seg_t &text  = d.seg[UCP_IFUNC_SEG_TEXT];
    const ucp_ifunc_image_seg_t &relro = d.seg[UCP_IFUNC_SEG_RELRO];
    if ((text.vaddr != 0) || (d.entry_vaddr >= text.mem_size)) {
        return "entry point outside the code";
    }
    if (image_is_sandboxed(d)) {
        return sandbox_layout_problem(d);
    }
    if ((d.got_ptr_vaddr % 8) || (d.got_ptr_vaddr < relro.vaddr) ||
        !within(d.got_ptr_vaddr - relro.vaddr, 8, relro.mem_size)) {
        return "GOT pointer outside the read-only data";
    }
    return nullptr;
}

/* Where the descriptor puts its tables: inside the image, aligned. */
const char *tables_problem(const ucp_ifunc_image_desc_t &d)
{
    if (d.n_imports > kMaxImports) {
        return kTooManyImports;
    }
    if (image_is_sandboxed(d) && (d.n_imports > sandbox::kMaxGateImports)) {
        return kTooManyGateImports;
    }
    if ((d.imports_offset % 8) ||
        !within(d.imports_offset,
                uint64_t(d.n_imports) * sizeof(ucp_ifunc_image_import_t),
                d.image_size)) {
        return "bad import table";
    }
    if ((d.n_relocs > kMaxRelocs) || (d.relocs_offset % 8) ||
        !within(d.relocs_offset,
                uint64_t(d.n_relocs) * sizeof(ucp_ifunc_image_reloc_t),
                d.image_size)) {
        return "bad relocation table";
    }
    if (!within(d.strtab_offset, d.strtab_size, d.image_size)) {
        return "bad string table";
    }

    if ((d.n_needed > kMaxNeeded) || (d.needed_offset % 4) ||
        !within(d.needed_offset, uint64_t(d.n_needed) * 4, d.image_size)) {
        return "bad table of needed libraries";
    }
    if ((d.n_symbols > kMaxSymbols) || (d.symbols_offset % 8) ||
        !within(d.symbols_offset,
                uint64_t(d.n_symbols) * sizeof(ucp_ifunc_image_symbol_t),
                d.image_size)) {
        return "bad symbol table";
    }
    if ((d.signature_offset != 0) &&
        ((d.image_size < sizeof(d) + sizeof(ucp_ifunc_image_signature_t)) ||
         (d.signature_offset !=
          d.image_size - sizeof(ucp_ifunc_image_signature_t)))) {
        return "signature is not the image's last bytes";
    }
    return nullptr;
}

/* The tables' entries: names in the string table, symbols in the code,
 * relocations of a known type at places they may patch. */
const char *entries_problem(const void *image, const ucp_ifunc_image_desc_t &d)
{
    const char *strtab  = static_cast<const char *>(image) + d.strtab_offset;
    auto        name_ok = [&](uint32_t offset) {
        return (offset < d.strtab_size) && (strtab[offset] != '\0') &&
               std::memchr(strtab + offset, '\0', d.strtab_size - offset);
    };
    for (uint32_t i = 0; i < d.n_imports; ++i) {
        auto imp = image_import(image, d, i);
        if (!name_ok(imp.name_offset) ||
            (imp.flags & ~uint32_t(UCP_IFUNC_IMPORT_WEAK))) {
            return "bad import";
        }
    }
    for (uint32_t i = 0; i < d.n_needed; ++i) {
        uint32_t offset = image_needed(image, d, i);
        /* A soname, looked up through the normal search path: never a
         * path, which would let the image choose any file. */
        if (!name_ok(offset) || std::strchr(strtab + offset, '/')) {
            return "bad needed library (a soname without '/')";
        }
    }
    for (uint32_t i = 0; i < d.n_symbols; ++i) {
        auto sym = image_symbol(image, d, i);
        if (!name_ok(sym.name_offset) || (sym.reserved != 0) ||
            !within(sym.vaddr, sym.size, d.seg[UCP_IFUNC_SEG_TEXT].mem_size)) {
            return "bad symbol";
        }
    }
    for (uint32_t i = 0; i < d.n_relocs; ++i) {
        auto rel = image_reloc(image, d, i);
        /* Sandbox images point at imports' gate bundles (RELATIVE):
         * host addresses never enter the slot. */
        bool type_ok =
                (rel.type == UCP_IFUNC_RELOC_RELATIVE) ||
                ((rel.type == UCP_IFUNC_RELOC_IMPORT) &&
                 (rel.import_index < d.n_imports) && !image_is_sandboxed(d));
        if (!type_ok || (rel.vaddr % 8) || !reloc_target_ok(d, rel.vaddr)) {
            return "bad relocation";
        }
    }
    return nullptr;
}

/* The ELF machine of an LLVM triple's architecture, 0 if none we know. */
uint16_t triple_machine(const char *triple)
{
    static const struct {
        const char *arch;
        uint16_t    machine;
    } kArchs[]       = {{"x86_64", 62},
                        {"aarch64", 183},
                        {"powerpc64le", 21},
                        {"riscv64", 243}};
    const char *dash = std::strchr(triple, '-');
    size_t      n    = dash ? size_t(dash - triple) : std::strlen(triple);
    for (const auto &arch : kArchs) {
        if ((std::strlen(arch.arch) == n) &&
            (std::strncmp(triple, arch.arch, n) == 0)) {
            return arch.machine;
        }
    }
    return 0;
}

/* A bitcode image's entries beyond any image's: a triple of its machine
 * first in the string table, and NAME_main its one symbol. */
const char *bitcode_entries_problem(const void                   *image,
                                    const ucp_ifunc_image_desc_t &d,
                                    const char                   *ifunc_name)
{
    const char *strtab = static_cast<const char *>(image) + d.strtab_offset;
    const void *end    = (d.strtab_size > 0)
                                 ? std::memchr(strtab, '\0', d.strtab_size)
                                 : nullptr;
    if ((end == nullptr) || (strtab[0] == '\0')) {
        return "bitcode image without a target triple";
    }
    for (const char *c = strtab; *c != '\0'; ++c) {
        if ((*c <= ' ') || (*c > '~')) {
            return "bitcode image with a malformed target triple";
        }
    }
    if (triple_machine(strtab) != d.machine) {
        return "bitcode triple of another architecture than the image's";
    }
    if (d.n_symbols != 1) {
        return "bitcode image without exactly one symbol, NAME_main";
    }
    auto sym = image_symbol(image, d, 0);
    if ((sym.vaddr != 0) || (sym.size != 0) ||
        (std::strncmp(strtab + sym.name_offset, ifunc_name,
                      std::strlen(ifunc_name)) != 0) ||
        (std::strcmp(strtab + sym.name_offset + std::strlen(ifunc_name),
                     "_main") != 0)) {
        return "bitcode image whose symbol is not NAME_main";
    }
    return nullptr;
}

const char *image_problem(uint16_t machine, const void *image, size_t available,
                          size_t max_map_size, const char *ifunc_name,
                          ucp_ifunc_image_desc_t *desc_p)
{
    const char *problem =
            layout_problem(machine, image, available, max_map_size, desc_p);
    if (problem == nullptr) {
        problem = tables_problem(*desc_p);
    }
    if (problem == nullptr) {
        problem = entries_problem(image, *desc_p);
    }
    if ((problem == nullptr) && image_is_bitcode(*desc_p)) {
        problem = bitcode_entries_problem(image, *desc_p, ifunc_name);
    }
    return problem;
}

} // namespace

ucs_status_t image_check(const void *image, size_t available,
                         const char *ifunc_name, size_t max_map_size,
                         ucs_log_level_t log_level, size_t *image_size_p)
{
    return image_check_for(arch::elf_machine(), image, available, ifunc_name,
                           max_map_size, log_level, image_size_p);
}

ucs_status_t image_check_for(uint16_t machine, const void *image,
                             size_t available, const char *ifunc_name,
                             size_t max_map_size, ucs_log_level_t log_level,
                             size_t *image_size_p)
{
    ucp_ifunc_image_desc_t desc;
    const char *problem = image_problem(machine, image, available, max_map_size,
                                        ifunc_name, &desc);
    if (problem == nullptr) {
        *image_size_p = desc.image_size;
        return UCS_OK;
    }
    if (problem == kWrongMachine) {
        ucs_log(log_level,
                "ifunc '%s': code is for %s, not %s; build the library with "
                "ucx-ifunc-cc --target listing %s, so that sources send "
                "each target its own ISA's code",
                ifunc_name, machine_name(desc.machine).c_str(),
                machine_name(machine).c_str(), machine_triplet(machine));
        return UCS_ERR_UNSUPPORTED;
    }
    if (problem == kBitcodeOnly) {
        ucs_log(log_level,
                "ifunc '%s': machine code for %s, which runs bitcode only; "
                "build the library with ucx-ifunc-cc --bitcode",
                ifunc_name, machine_name(desc.machine).c_str());
        return UCS_ERR_UNSUPPORTED;
    }
    if (problem == kTooManyImports) {
        ucs_log(log_level,
                "ifunc '%s': code image imports %u symbols, more than the %u "
                "a target links",
                ifunc_name, desc.n_imports, kMaxImports);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (problem == kTooManyGateImports) {
        ucs_log(log_level,
                "ifunc '%s': sandboxed code image imports %u functions, more "
                "than the %u of a sandbox's gate page",
                ifunc_name, desc.n_imports, sandbox::kMaxGateImports);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (problem == kTooLarge) {
        ucs_log(log_level,
                "ifunc '%s': code image needs %llu bytes of memory, more "
                "than UCX_IFUNC_MAX_IMAGE_SIZE (%zu) allows here; raise it to "
                "accept it",
                ifunc_name, static_cast<unsigned long long>(desc.map_size),
                max_map_size);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    ucs_log(log_level, "ifunc '%s': malformed code image: %s", ifunc_name,
            problem);
    return UCS_ERR_INVALID_PARAM;
}

} // namespace ucx_ifunc
