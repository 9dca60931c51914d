/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/load/link.h"
#include "ucp/ifunc/base/tls.h"

#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/load/gdb_jit.h"
#include "ucp/ifunc/load/jit.h"
#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/load/resolve.h"
#include "ucp/ifunc/sandbox/sandbox.h"
#include "ucp/ifunc/sandbox/sandbox_verify.h"

#include <ucs/debug/log_def.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ucx_ifunc {
namespace {

/* Anonymous memory holding one linked image; unmapped with the owner. */
class Mapping {
public:
    explicit Mapping(size_t size)
        : size_(size),
          base_(static_cast<char *>(mmap(nullptr, size, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)))
    {
        if (base_ == MAP_FAILED) {
            base_ = nullptr;
        }
    }
    ~Mapping()
    {
        if (base_ != nullptr) {
            munmap(base_, size_);
        }
    }
    Mapping(const Mapping &)            = delete;
    Mapping &operator=(const Mapping &) = delete;

    char *base() const { return base_; }

    bool protect(uint64_t offset, uint64_t size, uint64_t align, int prot)
    {
        size = align_up(size, align);
        return (size == 0) || (mprotect(base_ + offset, size, prot) == 0);
    }

private:
    size_t size_;
    char  *base_;
};

} // namespace

struct LinkedCode {
    CodeId      code_id;
    uint64_t    index = 0; /* in its cache: CodeCache::lookup_index */
    std::string name;
    MainFn      entry;
    /* Bytes it takes: mappings, received copy, its debugger description;
     * a slot's payload area grows (CodeCache::grow_payload), under the
     * cache's lock. */
    mutable uint64_t memory          = 0;
    mutable uint64_t payload_counted = 0; /* of memory: the payload area */
    /* Peers told that this target holds it (PeerPins), under the cache's
     * lock: never evicted while any is. */
    mutable unsigned         pins = 0;
    std::unique_ptr<Mapping> mapping;
    /* Code compiled from a bitcode image instead of a mapping: unlinked
     * and unmapped with it. */
    std::unique_ptr<JitCode> jit;
    /* Sandboxed code: its slot instead of a mapping, and its entry's image
     * vaddr instead of entry. */
    std::unique_ptr<sandbox::Slot> slot;
    uint64_t                       sandbox_entry = 0;
    std::shared_ptr<Library> library; /* that vouched for it, if one did */
    ResolvedImports          imports; /* keeps their libraries loaded */
    /* Names the code in gdb; declared after the mapping, so released
     * before the code is unmapped. */
    std::unique_ptr<GdbJitRegistration> debugger;
    /* The code as received (name and image, the private copy it was linked
     * from), as a library without a file: what ucp_ifunc_code_get hands
     * out to send it on. */
    std::shared_ptr<Library> received;
};

namespace {

/* Identifies a cache for the per-thread table below; never reused, unlike
 * the address of a released cache. */
std::atomic<uint64_t> cache_serials{0};

/* Where a cache's slot generations start: random, so that an index a
 * source learnt from another cache (a context released and made again on
 * the same worker, a process restarted) names nothing here rather than
 * the code that took the same slot (one chance in 2^32). Never 0. */
uint32_t random_generation()
{
    uint32_t value = 0;
    if (getrandom(&value, sizeof(value), GRND_NONBLOCK) != sizeof(value)) {
        value = uint32_t(next_nonce() * 0x9e3779b97f4a7c15ull >> 32);
    }
    return value ? value : 1;
}

/* The name bytes of a frame [kNameOffset, image offset): a valid name, its
 * NUL, zero padding. Returns it, or an empty string. */
std::string frame_name(const char *name_field, uint32_t name_length)
{
    std::string name(name_field, name_length);
    if (name.find('\0') != std::string::npos) {
        return {}; /* shorter than name_length says */
    }
    for (size_t i = name_length;
         i < frame_image_offset(name_length) - kNameOffset; ++i) {
        if (name_field[i] != '\0') {
            return {};
        }
    }
    return ifunc_name_valid(name.c_str()) ? name : std::string();
}

/* What a linked image's symbols may cost beyond the image: the perf map
 * names at most kPerfMapSymbols of them, each cut at kPerfMapName bytes
 * (the debugger gets the image's own string table, which bounds it). */
constexpr uint32_t kPerfMapSymbols = 4096;
constexpr int      kPerfMapName    = 256;

/* Appends the functions of a linked image (or its whole text, if it has no
 * symbol table) to /tmp/perf-PID.map, the file perf reads to name code it
 * has no symbols for: at most kPerfMapSymbols lines, whatever the image
 * lists. */
void write_perf_map(const char *start, size_t size, const char *image,
                    const ucp_ifunc_image_desc_t &d, const std::string &name,
                    const CodeId &code_id)
{
    static std::mutex           lock;
    std::lock_guard<std::mutex> guard(lock);
    std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
    FILE       *file = fopen(path.c_str(), "a");
    if (file == nullptr) {
        ucs_warn("ifunc '%s': cannot append to %s: %m", name.c_str(),
                 path.c_str());
        return;
    }
    uint32_t n_symbols = std::min(d.n_symbols, kPerfMapSymbols);
    for (uint32_t i = 0; i < n_symbols; ++i) {
        auto sym = image_symbol(image, d, i);
        fprintf(file, "%lx %llx ifunc:%s:%.*s\n",
                reinterpret_cast<unsigned long>(start + sym.vaddr),
                static_cast<unsigned long long>(sym.size), name.c_str(),
                kPerfMapName, image_string(image, d, sym.name_offset));
    }
    if (d.n_symbols == 0) {
        fprintf(file, "%lx %zx ifunc:%s:%s\n",
                reinterpret_cast<unsigned long>(start), size, name.c_str(),
                code_id.hex().c_str());
    }
    fclose(file);
}

/* Describes the linked text of an image to gdb as "ifunc:NAME:CODE_ID",
 * with the functions of its symbol table, named in the image's own string
 * table (gdb_jit_symfile(): no larger than the image's tables). */
std::unique_ptr<GdbJitRegistration>
register_with_debugger(const char *base, const char *image,
                       const ucp_ifunc_image_desc_t &d, const std::string &name,
                       const CodeId &code_id)
{
    const ucp_ifunc_image_seg_t &text = d.seg[UCP_IFUNC_SEG_TEXT];
    uint64_t    text_start = reinterpret_cast<uint64_t>(base) + text.vaddr;
    std::string object     = "ifunc:" + name + ":" + code_id.hex();
    if (d.n_symbols == 0) { /* an image without a symbol table */
        uint64_t entry = reinterpret_cast<uint64_t>(base) + d.entry_vaddr;
        return gdb_jit_register(
                object, text_start, text.mem_size,
                {{name + "_main", entry, text_start + text.mem_size - entry}});
    }
    std::vector<JitTableSymbol> symbols;
    symbols.reserve(d.n_symbols);
    for (uint32_t i = 0; i < d.n_symbols; ++i) {
        auto sym = image_symbol(image, d, i);
        symbols.push_back({sym.name_offset, text_start + sym.vaddr, sym.size});
    }
    return gdb_jit_register(object, text_start, text.mem_size,
                            image + d.strtab_offset, d.strtab_size, symbols);
}

/* The name and the image of a frame with header @a hdr, from
 * @a named_image (its name field onwards), checked: a valid name, an image
 * that passes image_check() and is exactly the size the header says.
 * Rejections are logged at @a level. */
ucs_status_t checked_image(const Registry &registry, const FrameHeader &hdr,
                           const std::vector<char> &named_image,
                           ucs_log_level_t level, std::string *name_p,
                           const char **image_p)
{
    std::string name = frame_name(named_image.data(), hdr.name_length);
    if (name.empty()) {
        ucs_log(level, "ifunc frame: invalid ifunc name; message dropped");
        return UCS_ERR_INVALID_PARAM;
    }
    const char *image = named_image.data() +
                        frame_image_offset(hdr.name_length) - kNameOffset;
    size_t       image_size;
    ucs_status_t status =
            image_check(image, hdr.image_size, name.c_str(),
                        registry.max_image_size(), level, &image_size);
    if (status != UCS_OK) {
        return status;
    }
    if (image_size != hdr.image_size) {
        /* Bytes after the image would change the code id without being
         * signed or compared: every such variant of one trusted image
         * would link as new code (docs/security.md). */
        ucs_log(level,
                "ifunc '%s': malformed frame: it carries %u bytes of code "
                "image, the image declares %zu; message dropped",
                name.c_str(), hdr.image_size, image_size);
        return UCS_ERR_INVALID_PARAM;
    }
    *name_p  = std::move(name);
    *image_p = image;
    return UCS_OK;
}

/* Maps the checked @a image (descriptor @a d) into new private memory for
 * @a code, relocates it against its resolved imports, sets its hidden GOT
 * pointer and protects its pages. */
ucs_status_t map_image(LinkedCode &code, const char *image,
                       const ucp_ifunc_image_desc_t &d)
{
    const std::vector<uint64_t> &imports = code.imports.addresses;
    /* The import table goes into the read-only page(s) after RELRO when it
     * fits there, else after the image: three mappings per image, not
     * four, counting against the process's limit on mappings. */
    const ucp_ifunc_image_seg_t &relro       = d.seg[UCP_IFUNC_SEG_RELRO];
    uint64_t                     page        = d.page_align;
    uint64_t                     table_bytes = uint64_t(d.n_imports) * 8;
    uint64_t                     relro_end   = relro.vaddr + relro.mem_size;
    bool                         in_relro =
            (relro.mem_size > 0) &&
            (align_up(relro_end, 8) + table_bytes <= align_up(relro_end, page));
    uint64_t table_vaddr = in_relro ? align_up(relro_end, 8) : d.map_size;
    uint64_t table_size =
            in_relro ? 0 : align_up(std::max<uint64_t>(table_bytes, 8), page);
    code.memory  = d.map_size + table_size;
    code.mapping = std::make_unique<Mapping>(code.memory);
    char *base   = code.mapping->base();
    if (base == nullptr) {
        ucs_error("ifunc '%s': cannot map %llu bytes for its code: %m",
                  code.name.c_str(),
                  static_cast<unsigned long long>(code.memory));
        return UCS_ERR_NO_MEMORY;
    }

    for (const ucp_ifunc_image_seg_t &s : d.seg) {
        std::memcpy(base + s.vaddr, image + s.file_offset, s.file_size);
    }
    for (uint32_t i = 0; i < d.n_relocs; ++i) {
        auto     rel   = image_reloc(image, d, i);
        uint64_t value = (rel.type == UCP_IFUNC_RELOC_RELATIVE)
                                 ? reinterpret_cast<uint64_t>(base)
                                 : imports[rel.import_index];
        value += uint64_t(rel.addend);
        std::memcpy(base + rel.vaddr, &value, sizeof(value));
    }
    char    *table     = base + table_vaddr;
    uint64_t table_ptr = reinterpret_cast<uint64_t>(table);
    if (!imports.empty()) {
        std::memcpy(table, imports.data(), imports.size() * 8);
    }
    std::memcpy(base + d.got_ptr_vaddr, &table_ptr, sizeof(table_ptr));

    const ucp_ifunc_image_seg_t *seg = d.seg;
    Mapping                     &m   = *code.mapping;
    if (!m.protect(seg[UCP_IFUNC_SEG_TEXT].vaddr,
                   seg[UCP_IFUNC_SEG_TEXT].mem_size, page,
                   PROT_READ | PROT_EXEC) ||
        !m.protect(seg[UCP_IFUNC_SEG_RELRO].vaddr,
                   seg[UCP_IFUNC_SEG_RELRO].mem_size, page, PROT_READ) ||
        !m.protect(d.map_size, table_size, page, PROT_READ)) {
        ucs_error("ifunc '%s': cannot protect its code pages: %m",
                  code.name.c_str());
        return UCS_ERR_IO_ERROR;
    }
    arch::sync_icache(base, seg[UCP_IFUNC_SEG_TEXT].mem_size);
    code.entry = reinterpret_cast<MainFn>(base + d.entry_vaddr);
    return UCS_OK;
}

/* Maps sandbox code (image flag UCP_IFUNC_IMAGE_FLAG_SANDBOX) into a slot
 * of its own, where the verifier checks the text as it will run, before it
 * is made executable. Its imports are the sandbox's granted functions,
 * never the process's symbols. */
ucs_status_t link_sandboxed(const Registry &registry, const std::string &name,
                            const char *image, const ucp_ifunc_image_desc_t &d,
                            const CodeId &code_id, ucs_log_level_t level,
                            LinkedCode &code)
{
    std::string why;
    if (!sandbox::sandbox_supported(&why)) {
        ucs_log(level,
                "ifunc '%s': code %s is built for the sandbox, which cannot "
                "run here: %s; nothing runs",
                name.c_str(), code_id.hex().c_str(), why.c_str());
        return UCS_ERR_UNSUPPORTED;
    }
    /* The payload area takes the largest message of the active message
     * service, a peer's or a channel's, within the slot's limit. */
    size_t payload_limit = std::min<size_t>(
            std::max<size_t>(registry.max_am_message(), size_t(1) << 20),
            sandbox::kPayloadEnd - sandbox::kPayloadOffset);
    sandbox::SlotImage slot_image;
    ucs_status_t       status = sandbox::slot_image_from(image, d, name,
                                                         payload_limit, &slot_image);
    if (status != UCS_OK) {
        return status;
    }
    /* Grants to one signer's code need a signature that verifies, whether
     * or not the trust policy asked for one. */
    PublicKey signer;
    if (TrustPolicy::signature_valid(name, image, d, &signer)) {
        slot_image.has_signer = true;
        std::copy(signer.begin(), signer.end(), slot_image.signer.begin());
    }
    status = sandbox::Slot::create(slot_image, &code.slot);
    if (status != UCS_OK) {
        return status;
    }
    sandbox::VerifyInput  input{code.slot->text(), code.slot->text_size(),
                               code.slot->text_vaddr(), code.slot->map_size(),
                               code.slot->n_imports()};
    sandbox::VerifyResult verdict = sandbox::verify_x86_64(input);
    if (!verdict.accepted) {
        ucs_log(level,
                "ifunc '%s': code %s rejected by the sandbox's verifier at "
                "text offset 0x%llx: %s; nothing runs",
                name.c_str(), code_id.hex().c_str(),
                static_cast<unsigned long long>(verdict.offset),
                verdict.reason.c_str());
        return UCS_ERR_REJECTED;
    }
    status = code.slot->seal();
    if (status != UCS_OK) {
        return status;
    }
    code.entry         = nullptr;
    code.sandbox_entry = d.entry_vaddr;
    /* Every byte the sandbox can make resident: image, gate, stack and the
     * payload area as mapped; the area grows only once counted. */
    code.memory += code.slot->mapped_bytes();
    code.payload_counted = code.slot->payload_room();
    ucs_debug("ifunc '%s': linked sandboxed code %s in the slot at 0x%lx",
              name.c_str(), code_id.hex().c_str(), code.slot->base());
    return UCS_OK;
}

/* Calls code generation may add to bitcode that its image cannot list
 * (the module did not declare them): the C library's memory functions,
 * the stack protector's, and the compiler's runtime helpers that a 64-bit
 * target calls for 128-bit integers and conversions. Resolved in the
 * global scope like an import; any other name the object needs and the
 * image does not list is refused. */
bool codegen_libcall(const std::string &name)
{
    static const char *const kLibcalls[] = {
            "memcpy",        "memmove",          "memset",
            "bzero",         "__stack_chk_fail", "__udivti3",
            "__divti3",      "__umodti3",        "__modti3",
            "__multi3",      "__muloti4",        "__ashlti3",
            "__ashrti3",     "__lshrti3",        "__floattidf",
            "__floatuntidf", "__floattisf",      "__floatuntisf",
            "__fixdfti",     "__fixunsdfti",     "__fixsfti",
            "__fixunssfti",  "__extendhfsf2",    "__truncsfhf2",
            "__truncdfhf2"};
    return std::any_of(std::begin(kLibcalls), std::end(kLibcalls),
                       [&](const char *libcall) { return name == libcall; });
}

/* Compiles the checked, trusted bitcode image @a image for this CPU into
 * @a code (load/jit.h): its imports resolved by the rules of a native
 * image's (resolve.h), and nothing else the code names but codegen's own
 * calls. Each failure is logged at @a level; a compile past the limits is
 * UCS_ERR_EXCEEDS_LIMIT with @a compile_limit_p set, remembered for the
 * code id like any rejection; the process-wide limit of resolve_imports
 * is not the code's and is not. */
ucs_status_t link_bitcode(const Registry &registry, const std::string &name,
                          const char *image, const ucp_ifunc_image_desc_t &d,
                          const CodeId &code_id, ucs_log_level_t level,
                          LinkedCode &code, bool *compile_limit_p)
{
    ucs_status_t status = resolve_imports(image, d, name, level, &code.imports);
    if (status != UCS_OK) {
        return status;
    }
    std::unordered_map<std::string, uint64_t> listed;
    for (uint32_t i = 0; i < d.n_imports; ++i) {
        listed[image_string(image, d, image_import(image, d, i).name_offset)] =
                code.imports.addresses[i];
    }
    std::string unlisted;
    JitResolver resolve = [&](const std::string &symbol, uint64_t *address) {
        auto found = listed.find(symbol);
        if (found != listed.end()) {
            *address = found->second;
            /* 0: a weak import that is not there */
            return (*address != 0) ? UCS_OK : UCS_ERR_NO_ELEM;
        }
        if (codegen_libcall(symbol)) {
            *address = reinterpret_cast<uint64_t>(
                    dlsym(RTLD_DEFAULT, symbol.c_str()));
            return (*address != 0) ? UCS_OK : UCS_ERR_NO_ELEM;
        }
        unlisted = symbol;
        return UCS_ERR_REJECTED;
    };
    JitLimits limits;
    limits.timeout                    = registry.jit_timeout();
    limits.max_memory                 = registry.jit_max_memory();
    const ucp_ifunc_image_seg_t &text = d.seg[UCP_IFUNC_SEG_TEXT];
    std::string                  why;
    status = jit_compile(image + text.file_offset, text.file_size,
                         image_bitcode_triple(image, d), name + "_main",
                         resolve, limits, &code.jit, &why);
    /* Only the child's own limits are the code's (jit.h). */
    *compile_limit_p = (status == UCS_ERR_EXCEEDS_LIMIT);
    if (status == UCS_ERR_REJECTED) {
        ucs_log(level,
                "ifunc '%s': bitcode %s refers to '%s', which its image does "
                "not list as an import; nothing runs",
                name.c_str(), code_id.hex().c_str(), unlisted.c_str());
        return status;
    }
    if (status != UCS_OK) {
        ucs_log(level,
                "ifunc '%s': bitcode %s (%s) not compiled: %s; nothing "
                "runs",
                name.c_str(), code_id.hex().c_str(),
                image_bitcode_triple(image, d), why.c_str());
        return status;
    }
    code.entry = reinterpret_cast<MainFn>(code.jit->entry());
    code.memory += code.jit->memory();
    ucs_debug("ifunc '%s': compiled bitcode %s for this CPU at %p (%zu "
              "bytes)",
              name.c_str(), code_id.hex().c_str(), code.jit->entry(),
              code.jit->memory());
    return UCS_OK;
}

/* What a target decides on a checked image before it loads or maps
 * anything of it for running: the trust policy, then, for sandbox code, its
 * slot and the verifier (link_sandboxed). @a code gets the library that
 * vouched and the slot; @a accepted_by the kind of trust that accepted. */
ucs_status_t admit(const Registry &registry, const TrustPolicy &trust,
                   const std::string &name, const char *image,
                   const ucp_ifunc_image_desc_t &d, const CodeId &code_id,
                   ucs_log_level_t level, LinkedCode &code,
                   unsigned *accepted_by)
{
    /* Trust first: nothing of the image is loaded or mapped before. */
    ucs_status_t status = trust.check(name, image, d, code_id, level,
                                      &code.library, accepted_by);
    if ((status != UCS_OK) || !(d.flags & UCP_IFUNC_IMAGE_FLAG_SANDBOX)) {
        return status;
    }
    return link_sandboxed(registry, name, image, d, code_id, level, code);
}

/* Links the code of the frame with header @a hdr from @a named_image, the
 * private copy of its name and image (the buffer stays writable by the
 * peer), whose digest the caller checked against the code id. Rejections
 * of the peer's code are logged at @a level (a warning, or debug for code
 * whose rejection was logged lately). */
ucs_status_t link_image(Registry &registry, const TrustPolicy &trust,
                        const FrameHeader &hdr, std::vector<char> named_image,
                        ucs_log_level_t              level,
                        std::unique_ptr<LinkedCode> *code_p,
                        bool                        *compile_limit_p)
{
    const CodeId code_id = header_code_id(hdr);
    std::string  name;
    const char  *image = nullptr;
    ucs_status_t status =
            checked_image(registry, hdr, named_image, level, &name, &image);
    if (status != UCS_OK) {
        return status;
    }
    auto d = image_desc(image);

    auto code     = std::make_unique<LinkedCode>();
    code->code_id = code_id;
    code->name    = name;
    status = admit(registry, trust, name, image, d, code_id, level, *code,
                   nullptr);
    if (status != UCS_OK) {
        return status;
    }
    char *base = nullptr;
    if (image_is_bitcode(d)) {
        status = link_bitcode(registry, name, image, d, code_id, level, *code,
                              compile_limit_p);
        if (status != UCS_OK) {
            /* The same bitcode under the same limits fails again; a
             * timeout the machine caused, or the OOM killer, may not. */
            return status;
        }
    } else if (d.flags & UCP_IFUNC_IMAGE_FLAG_SANDBOX) {
        base = reinterpret_cast<char *>(code->slot->base() +
                                        sandbox::kImageOffset);
    } else {
        status = resolve_imports(image, d, name, level, &code->imports);
        if (status != UCS_OK) {
            return status;
        }
        status = map_image(*code, image, d);
        if (status != UCS_OK) {
            return status;
        }
        base = code->mapping->base();
        ucs_debug("ifunc '%s': linked code %s at %p (%u imports, %u "
                  "relocations)",
                  name.c_str(), code_id.hex().c_str(),
                  static_cast<void *>(base), d.n_imports, d.n_relocs);
    }
    size_t text_size = d.seg[UCP_IFUNC_SEG_TEXT].mem_size;
    /* Compiled bitcode has no image layout to describe (yet). */
    if (registry.perf_map() && (base != nullptr)) {
        write_perf_map(base, text_size, image, d, name, code_id);
    }
    if (registry.gdb_jit() && (base != nullptr)) {
        code->debugger = register_with_debugger(base, image, d, name, code_id);
        code->memory += code->debugger->symfile().size();
    }
    /* The received copy stays as a library to send the code on with, and
     * counts toward the cache's memory limit. */
    code->received =
            std::make_shared<Library>(name, Library::kReceivedPath, nullptr);
    code->received->frame_prefix =
            frame_prefix(name.c_str(), image, hdr.image_size, &code_id);
    code->received->code_id = code_id;
    code->memory += code->received->frame_prefix.size();
    /* Sent on to a peer of another ISA, the code needs that ISA's image,
     * which a frame does not carry: the target's own library that vouched
     * for it (its image for this ISA is this code) has them, as one
     * ucx-ifunc-cc --target build. Under the other policies the received
     * code goes only to peers of this ISA. */
    if ((code->library != nullptr) &&
        ((code->library->code_id == code_id) ||
         (code->library->bitcode_code_id == code_id))) {
        code->received->foreign_images = code->library->foreign_images;
        for (const ForeignImage &foreign : code->received->foreign_images) {
            code->memory += foreign.frame_prefix.size();
        }
    }
    *code_p = std::move(code);
    return UCS_OK;
}

} // namespace

ucs_status_t admit_image(Registry &registry, const TrustPolicy &trust,
                         const std::string &name, const char *image,
                         const CodeId &code_id, ucs_log_level_t level,
                         unsigned                 *accepted_by,
                         std::shared_ptr<Library> *library)
{
    LinkedCode   code;
    ucs_status_t status = admit(registry, trust, name, image, image_desc(image),
                                code_id, level, code, accepted_by);
    *library            = code.library;
    return status;
}

namespace {

/* Per-thread memory of recently run code: the common case, the same ifunc
 * again, costs no lock and no atomic write. Each slot names the cache (by
 * serial, never reused) and the cache's generation it is valid for, so a
 * thread that serves several contexts keeps its entries of each; evicting
 * code starts a new generation, and a thread drops an entry of an older one
 * when it next looks there. Slots hold references, so code remembered stays
 * mapped until then. */
struct RecentCode {
    struct Slot {
        std::shared_ptr<const LinkedCode> code;
        uint64_t                          cache_serial = UINT64_MAX;
        uint64_t                          generation   = 0;
    };
    static constexpr size_t kSize = 8;
    std::array<Slot, kSize> slots;

    ~RecentCode();

    /* @a key: a code id's low half, or a code index. */
    Slot &slot(uint64_t serial, uint64_t key)
    {
        return slots[(key ^ serial) % kSize];
    }
};
UCX_IFUNC_TLS RecentCode recent_code;

/* Whether this thread's table was used (it exists) or destroyed (thread
 * or process exit, before the contexts some static or thread-local object
 * still holds): trivially destructible, so valid in every destructor. */
enum class TableState : uint8_t { unused, live, destroyed };
UCX_IFUNC_TLS TableState recent_code_state = TableState::unused;

RecentCode::~RecentCode()
{
    recent_code_state = TableState::destroyed;
}

/* Code uses alive on this thread: a lookup inside running code (NAME_main
 * polling again) must not replace what the outer message runs. */
UCX_IFUNC_TLS unsigned active_uses = 0;

/* Lets go of this thread's entries of cache @a serial of another
 * generation than @a generation, but of @a keep (which a use of this
 * thread runs): they may be evicted, and a thread that kept them until it
 * looks at their own entries again would keep their memory (a slot's
 * payload area) mapped outside the limit for as long. Only where no use
 * of this thread runs other code from the table (active_uses 1). */
void drop_stale_recent(uint64_t serial, uint64_t generation,
                       const LinkedCode *keep)
{
    if ((active_uses != 1) || (recent_code_state != TableState::live)) {
        return;
    }
    for (RecentCode::Slot &entry : recent_code.slots) {
        if ((entry.cache_serial == serial) &&
            (entry.generation != generation) && (entry.code.get() != keep)) {
            entry = RecentCode::Slot();
        }
    }
}

} // namespace

bool RejectedCodes::find(const CodeId &code_id, Verdict *verdict)
{
    std::lock_guard<std::mutex> guard(lock_);
    const Verdict              &kept = verdicts_[code_id.lo % kMax];
    if ((kept.status == UCS_OK) || (kept.code_id != code_id)) {
        return false;
    }
    *verdict = kept;
    return true;
}

void RejectedCodes::add(Verdict verdict)
{
    std::lock_guard<std::mutex> guard(lock_);
    verdicts_[verdict.code_id.lo % kMax] = std::move(verdict);
}

std::shared_ptr<Library> CodeUse::as_received() const
{
    return code_->received;
}

uint64_t CodeUse::code_index() const
{
    return code_->index;
}

CodeUse::CodeUse()
{
    ++active_uses;
}

CodeUse::~CodeUse()
{
    --active_uses;
}

CodeCache::CodeCache(Registry &registry, PeerLog &peer_log)
    : registry_(registry), peer_log_(peer_log), trust_(registry),
      serial_(cache_serials.fetch_add(1)),
      first_generation_(random_generation()),
      max_codes_(registry.max_linked_codes()),
      max_memory_(registry.max_linked_memory())
{
}

CodeCache::~CodeCache()
{
    /* What this thread remembers of this cache goes with it, so that the
     * code is unmapped now; other threads let go at their next lookup (or
     * when they end). */
    if (recent_code_state == TableState::live) {
        for (RecentCode::Slot &slot : recent_code.slots) {
            if (slot.cache_serial == serial_) {
                slot = RecentCode::Slot();
            }
        }
    }
}

std::shared_ptr<const LinkedCode> CodeCache::find(const CodeId &code_id)
{
    std::shared_lock<std::shared_mutex> guard(lock_);
    auto                                it = codes_.find(code_id);
    return (it != codes_.end()) ? it->second : nullptr;
}

/* An index: the slot in bits 0-23, its generation (never 0) in 32-63;
 * bits 24-31 are 0 (an AM reference carries its lead there, multi_isa.h).
 * 0 is no index. */
constexpr uint64_t kIndexSlotMask = 0xffffffu;

bool code_index_well_formed(uint64_t code_index)
{
    return ((code_index >> 32) != 0) &&
           ((code_index & ~kIndexSlotMask & 0xffffffffu) == 0);
}

std::shared_ptr<const LinkedCode> CodeCache::find_index(uint64_t code_index)
{
    std::shared_lock<std::shared_mutex> guard(lock_);
    uint64_t                            slot = code_index & kIndexSlotMask;
    if ((slot >= index_slots_.size()) ||
        (code_index & ~kIndexSlotMask & 0xffffffffu) ||
        (index_slots_[slot].generation != (code_index >> 32))) {
        return nullptr;
    }
    return index_slots_[slot].code;
}

/* Under the lock, writing. */
uint64_t CodeCache::take_index()
{
    uint32_t slot;
    if (!free_index_slots_.empty()) {
        slot = free_index_slots_.back();
        free_index_slots_.pop_back();
    } else if (index_slots_.size() <= kIndexSlotMask) {
        slot = uint32_t(index_slots_.size());
        index_slots_.push_back(IndexSlot{nullptr, first_generation_});
    } else {
        return 0; /* linked, never named by a reference: sent in full */
    }
    return (uint64_t(index_slots_[slot].generation) << 32) | slot;
}

/* Under the lock, writing: the slot's next code gets a new generation. */
void CodeCache::release_index(uint64_t code_index)
{
    if (code_index == 0) {
        return;
    }
    IndexSlot &slot = index_slots_[code_index & kIndexSlotMask];
    slot.code.reset();
    if (++slot.generation == 0) {
        slot.generation = 1;
    }
    free_index_slots_.push_back(uint32_t(code_index & kIndexSlotMask));
}

/* Under the lock, writing: makes room for @a memory more bytes, of new
 * code (@a growing nullptr) or of the payload area of @a growing, which is
 * not evicted for it. */
bool CodeCache::make_room(uint64_t memory, const LinkedCode *growing)
{
    const bool new_code = growing == nullptr;
    /* First whether evicting all that may go would be enough: if not,
     * evict nothing. */
    uint64_t kept = pinned_memory_ +
                    ((growing && (growing->pins == 0)) ? growing->memory : 0);
    if ((new_code && (pinned_codes_ >= max_codes_)) ||
        (memory > max_memory_ - std::min(kept, max_memory_))) {
        return false;
    }
    while ((new_code && (codes_.size() >= max_codes_)) ||
           (linked_memory_ + memory > max_memory_)) {
        /* Oldest first, never code a peer was told this target holds: it
         * sends references to it. */
        auto victim = std::find_if(
                link_order_.begin(), link_order_.end(), [&](const CodeId &id) {
                    const auto &code = codes_.at(id);
                    return (code->pins == 0) && (code.get() != growing);
                });
        if (victim == link_order_.end()) {
            return false;
        }
        auto it = codes_.find(*victim);
        ucs_debug("ifunc '%s': code %s evicted to make room (%zu linked, "
                  "%llu bytes)",
                  it->second->name.c_str(), it->first.hex().c_str(),
                  codes_.size(),
                  static_cast<unsigned long long>(linked_memory_));
        linked_memory_ -= it->second->memory;
        release_index(it->second->index);
        codes_.erase(it);
        link_order_.erase(victim);
        /* Threads drop what they remember of it at their next lookup;
         * whoever runs it meanwhile holds a reference. */
        generation_.fetch_add(1, std::memory_order_release);
        ++evictions_;
    }
    return true;
}

ucs_status_t CodeCache::grow_payload(const CodeUse &use, size_t size)
{
    sandbox::Slot *slot = use.slot();
    if (size > slot->payload_limit()) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    constexpr uint64_t page  = 4096;
    uint64_t           room  = slot->payload_room();
    uint64_t           exact = align_up(uint64_t(size), page);
    /* Twice what it has, where that fits: a few growths reach any size. */
    uint64_t doubled = std::max<uint64_t>(
            exact, std::min<uint64_t>(2 * room,
                                      align_up(slot->payload_limit(), page)));
    {
        std::unique_lock<std::shared_mutex> guard(lock_);
        const LinkedCode                   *code = use.code_;
        auto                                it   = codes_.find(code->code_id);
        if ((it == codes_.end()) || (it->second.get() != code)) {
            return UCS_ERR_EXCEEDS_LIMIT; /* evicted: its memory is not
                                             counted any more */
        }
        /* What the code counts for its area: its mapping, or what another
         * thread counted and is about to map. */
        uint64_t counted = code->payload_counted;
        uint64_t target  = 0;
        for (uint64_t want : {doubled, exact}) {
            if (want <= counted) {
                target = counted;
                break;
            }
            uint64_t more = want - counted;
            if (((code->pins == 0) ||
                 (pinned_memory_ + more <= max_memory_ / 2)) &&
                make_room(more, code)) {
                code->memory += more;
                code->payload_counted = want;
                linked_memory_ += more;
                pinned_memory_ += (code->pins != 0) ? more : 0;
                target = want;
                break;
            }
        }
        if (target == 0) {
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        room = target;
    }
    /* What room was made for goes now, not at this thread's next lookup. */
    drop_stale_recent(serial_, generation_.load(std::memory_order_acquire),
                      use.code_);
    /* Mapped outside the cache's lock: the slot's lock waits for a message
     * that runs, which may itself take the cache's lock in a host call. */
    return slot->grow_payload(room);
}

namespace {

/* The name a sealed, validated frame header claims (not yet checked). */
std::string claimed_name(const FrameHeader &hdr, const void *frame)
{
    const char *field = static_cast<const char *>(frame) + kNameOffset;
    return std::string(field, strnlen(field, hdr.name_length));
}

/* Whether a rejection with @a status holds for good: the code's own fault,
 * not this process's memory or limits at the time. */
bool rejection_is_final(ucs_status_t status)
{
    return (status == UCS_ERR_INVALID_PARAM) ||
           (status == UCS_ERR_UNSUPPORTED) || (status == UCS_ERR_REJECTED) ||
           (status == UCS_ERR_NO_ELEM);
}

} // namespace

bool CodeCache::rejected_before(const FrameHeader &hdr, const void *frame,
                                ucs_status_t *status)
{
    RejectedCodes::Verdict verdict;
    if (!rejected_.find(header_code_id(hdr), &verdict) ||
        (verdict.name != claimed_name(hdr, frame))) {
        return false;
    }
    /* Only a new NAME.so can change the verdict (the policy and keys are
     * the context's for good). */
    FileIdentity library{};
    bool has_library = registry_.library_identity(verdict.name, &library);
    if ((has_library != verdict.had_library) ||
        (has_library && !(library == verdict.library))) {
        return false;
    }
    ucx_ifunc_peer_warn(peer_log_, PeerProblem::rejected_code,
                        verdict.code_id.lo,
                        "ifunc '%s': code %s was rejected before (%s); "
                        "message dropped",
                        verdict.name.c_str(), verdict.code_id.hex().c_str(),
                        ucs_status_string(verdict.status));
    *status = verdict.status;
    return true;
}

void CodeCache::remember_rejection(const FrameHeader &hdr, const void *frame,
                                   ucs_status_t status, bool final)
{
    if (!final && !rejection_is_final(status)) {
        return;
    }
    RejectedCodes::Verdict verdict;
    verdict.code_id = header_code_id(hdr);
    verdict.name    = claimed_name(hdr, frame);
    verdict.had_library =
            registry_.library_identity(verdict.name, &verdict.library);
    verdict.status = status;
    rejected_.add(std::move(verdict));
}

ucs_status_t CodeCache::link(const FrameHeader &hdr, const void *frame,
                             std::shared_ptr<const LinkedCode> *code_p)
{
    const CodeId                        code_id = header_code_id(hdr);
    std::unique_lock<std::shared_mutex> guard(lock_);
    auto                                it = codes_.find(code_id);
    if (it != codes_.end()) {
        *code_p = it->second; /* another thread linked it */
        return UCS_OK;
    }
    ucs_status_t status;
    if (rejected_before(hdr, frame, &status)) {
        return status;
    }
    /* A private copy of name and image: the buffer stays writable by the
     * peer. Their digest is the code id; a frame whose id is not is the
     * peer's invention, not a property of any code: nothing to remember,
     * and the warning is per source. */
    size_t            image_offset = frame_image_offset(hdr.name_length);
    const char       *bytes        = static_cast<const char *>(frame);
    std::vector<char> named_image(bytes + kNameOffset,
                                  bytes + image_offset + hdr.image_size);
    if (code_id_of(named_image.data(), named_image.size()) != code_id) {
        uint32_t source = nonce_source_id(hdr.nonce);
        ucx_ifunc_peer_warn(peer_log_, PeerProblem::forged_code, source,
                            "ifunc frame from source 0x%08x: code image "
                            "does not match its code id; message dropped",
                            source);
        return UCS_ERR_INVALID_PARAM;
    }
    /* Rejections are the peer's doing: logged within PeerLog's limits,
     * keyed by code id, so that each rejected image is reported; counted
     * there only once one was logged (most code links). */
    std::unique_ptr<LinkedCode> code;
    ucs_log_level_t             level =
            peer_log_.peek(PeerProblem::rejected_code, code_id.lo);
    bool compile_limit = false;
    status = link_image(registry_, trust_, hdr, std::move(named_image), level,
                        &code, &compile_limit);
    if ((status == UCS_OK) && !make_room(code->memory, nullptr)) {
        ucs_log(level,
                "ifunc '%s': code %s (%llu bytes) not linked: with the "
                "code this context keeps for sources that were told it "
                "holds it, it would exceed UCX_IFUNC_MAX_LINKED_CODES "
                "(%zu) or UCX_IFUNC_MAX_LINKED_MEMORY (%llu bytes); "
                "message dropped",
                code->name.c_str(), code_id.hex().c_str(),
                static_cast<unsigned long long>(code->memory), max_codes_,
                static_cast<unsigned long long>(max_memory_));
        status = UCS_ERR_EXCEEDS_LIMIT;
    }
    if (status != UCS_OK) {
        std::string note;
        peer_log_.level(PeerProblem::rejected_code, code_id.lo, &note);
        remember_rejection(hdr, frame, status, compile_limit);
        return status;
    }
    linked_memory_ += code->memory;
    ++linked_;
    link_order_.push_back(code_id);
    code->index = take_index();
    *code_p     = std::move(code);
    codes_.emplace(code_id, *code_p);
    if ((*code_p)->index != 0) {
        index_slots_[(*code_p)->index & kIndexSlotMask].code = *code_p;
    }
    return UCS_OK;
}

std::shared_ptr<Library> CodeCache::as_received(const std::string &name)
{
    std::shared_lock<std::shared_mutex> guard(lock_);
    for (auto it = link_order_.rbegin(); it != link_order_.rend(); ++it) {
        const LinkedCode &code = *codes_.at(*it);
        if (code.name == name) {
            return code.received;
        }
    }
    return nullptr;
}

bool CodeCache::empty()
{
    std::shared_lock<std::shared_mutex> guard(lock_);
    return codes_.empty();
}

CodeCache::Stats CodeCache::stats()
{
    std::shared_lock<std::shared_mutex> guard(lock_);
    return Stats{codes_.size(), linked_memory_, evictions_,
                 pinned_codes_, pinned_memory_, linked_};
}

ucs_status_t CodeCache::lookup(const FrameHeader &hdr, const void *frame,
                               CodeUse *use)
{
    const CodeId   code_id = header_code_id(hdr);
    const uint64_t gen     = generation_.load(std::memory_order_acquire);
    void          *slot    = recent_slot(code_id.lo);
    if (take_recent(slot, gen, use, [&](const LinkedCode &code) {
            return code.code_id == code_id;
        })) {
        return UCS_OK;
    }
    std::shared_ptr<const LinkedCode> code = find(code_id);
    if (code == nullptr) {
        ucs_status_t status = link(hdr, frame, &code);
        if (status != UCS_OK) {
            return status;
        }
    }
    hand_out(std::move(code), slot, gen, use);
    return UCS_OK;
}

/* This thread's slot of the table of recent code for @a key (a code id's
 * low half, or a code index), as a RecentCode::Slot; nullptr where this
 * use may not keep one: nested in running code (the outer use holds the
 * slot), or the table is gone (thread exit). */
void *CodeCache::recent_slot(uint64_t key)
{
    if ((active_uses != 1) || (recent_code_state == TableState::destroyed)) {
        return nullptr;
    }
    recent_code_state = TableState::live;
    return &recent_code.slot(serial_, key);
}

/* Hands @a use the code in @a recent_slot if it is this cache's, of
 * @a generation, and @a matches it: no lock, no atomic write. */
template <typename Matches>
bool CodeCache::take_recent(void *recent_slot, uint64_t generation,
                            CodeUse *use, const Matches &matches)
{
    auto *slot = static_cast<RecentCode::Slot *>(recent_slot);
    if ((slot == nullptr) || (slot->cache_serial != serial_) ||
        (slot->generation != generation) || (slot->code == nullptr) ||
        !matches(*slot->code)) {
        return false;
    }
    /* The slot keeps it alive: only this thread changes it, and not
     * before this use ends. */
    use->code_          = slot->code.get();
    use->entry_         = slot->code->entry;
    use->slot_          = slot->code->slot.get();
    use->sandbox_entry_ = slot->code->sandbox_entry;
    return true;
}

/* Hands @a code, found or linked, to @a use, remembering it in this
 * thread's @a recent_slot (a RecentCode::Slot) if there is one. */
void CodeCache::hand_out(std::shared_ptr<const LinkedCode> code,
                         void *recent_slot, uint64_t generation, CodeUse *use)
{
    /* The table of recent code hands out only code this thread got here
     * before; this code may be new to it, linked on another thread. */
    arch::instruction_barrier();
    use->code_          = code.get();
    use->entry_         = code->entry;
    use->slot_          = code->slot.get();
    use->sandbox_entry_ = code->sandbox_entry;
    auto *slot          = static_cast<RecentCode::Slot *>(recent_slot);
    if (slot != nullptr) {
        drop_stale_recent(serial_, generation_.load(std::memory_order_acquire),
                          code.get());
        slot->cache_serial = serial_;
        slot->generation   = generation;
        slot->code         = std::move(code);
    } else {
        use->held_ = std::move(code);
    }
}

ucs_status_t CodeCache::lookup_index(uint64_t code_index, uint32_t source,
                                     CodeUse *use)
{
    const uint64_t gen  = generation_.load(std::memory_order_acquire);
    void          *slot = (code_index != 0) ? recent_slot(code_index) : nullptr;
    if (take_recent(slot, gen, use, [&](const LinkedCode &code) {
            return code.index == code_index; /* 0 names no code */
        })) {
        return UCS_OK;
    }
    std::shared_ptr<const LinkedCode> code = find_index(code_index);
    if (code == nullptr) {
        /* Sent only once this target said it holds the code under that
         * index (docs/design.md): stale or forged. Run nothing. */
        ucx_ifunc_peer_warn(peer_log_, PeerProblem::unknown_code, source,
                            "ifunc message from source 0x%08x names code "
                            "index 0x%llx, which this target does not hold; "
                            "message dropped (the source must send the code "
                            "first)",
                            source,
                            static_cast<unsigned long long>(code_index));
        return UCS_ERR_NO_ELEM;
    }
    hand_out(std::move(code), slot, gen, use);
    return UCS_OK;
}

bool CodeCache::pin(const LinkedCode *code)
{
    /* Under the lock that eviction takes: pinned code stays. Code evicted
     * while it ran is not announced, so no peer relies on it. */
    std::unique_lock<std::shared_mutex> guard(lock_);
    auto                                it = codes_.find(code->code_id);
    if ((it == codes_.end()) || (it->second.get() != code)) {
        return false;
    }
    const LinkedCode &linked = *it->second;
    if (linked.pins == 0) {
        /* Half of each limit at most: the rest stays for code linked
         * without being announced. */
        if ((pinned_codes_ + 1 > std::max<size_t>(max_codes_ / 2, 1)) ||
            (pinned_memory_ + linked.memory > max_memory_ / 2)) {
            return false;
        }
        ++pinned_codes_;
        pinned_memory_ += linked.memory;
    }
    ++linked.pins;
    return true;
}

void CodeCache::unpin(const LinkedCode *code)
{
    std::unique_lock<std::shared_mutex> guard(lock_);
    if (--code->pins == 0) {
        --pinned_codes_;
        pinned_memory_ -= code->memory;
    }
}

bool PeerPins::pin(const CodeUse &use)
{
    const LinkedCode *code = use.code_;
    /* Pinned code stays until this object goes: the pointer cannot name
     * other code meanwhile. */
    if (last_.load(std::memory_order_relaxed) == code) {
        return true;
    }
    std::lock_guard<std::mutex> guard(lock_);
    if (std::find(codes_.begin(), codes_.end(), code) == codes_.end()) {
        if ((codes_.size() >= kMaxPerPeer) || !cache_.pin(code)) {
            return false; /* runs all the same; its source keeps sending */
        }
        codes_.push_back(code);
    }
    last_.store(code, std::memory_order_relaxed);
    return true;
}

PeerPins::~PeerPins()
{
    for (const LinkedCode *code : codes_) {
        cache_.unpin(code);
    }
}

} // namespace ucx_ifunc
