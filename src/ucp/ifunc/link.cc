/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "link.h"

#include "arch.h"
#include "gdb_jit.h"
#include "image_check.h"

#include <ucs/debug/log_def.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
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
    uint64_t                 code_id;
    std::string              name;
    MainFn                   entry;
    std::unique_ptr<Mapping> mapping;
    std::shared_ptr<Library> library; /* keeps resolved imports loaded */
    /* Names the code in gdb; declared after the mapping, so released
     * before the code is unmapped. */
    std::unique_ptr<GdbJitRegistration> debugger;
};

namespace {

/* Identifies a cache for the per-thread table below; never reused, unlike
 * the address of a released cache. */
std::atomic<uint64_t> cache_serials{0};

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

ucs_status_t resolve_imports(const ucp_ifunc_image_desc_t &d, const char *image,
                             const char *name, const Library *lib,
                             ucs_log_level_t        level,
                             std::vector<uint64_t> *addresses)
{
    for (uint32_t i = 0; i < d.n_imports; ++i) {
        auto        imp    = image_import(image, d, i);
        const char *symbol = image + d.strtab_offset + imp.name_offset;
        /* The order the dynamic linker uses for the library's own code:
         * the global scope (this program first), then the library's. */
        void *address = dlsym(RTLD_DEFAULT, symbol);
        if (address == nullptr) {
            address = lib->symbol(symbol);
        }
        if ((address == nullptr) && !(imp.flags & UCP_IFUNC_IMPORT_WEAK)) {
            ucs_log(level,
                    "ifunc '%s': symbol '%s' not found in this process or "
                    "in %s and its dependencies; message dropped",
                    name, symbol, lib->path().c_str());
            return UCS_ERR_NO_ELEM;
        }
        addresses->push_back(reinterpret_cast<uint64_t>(address));
    }
    return UCS_OK;
}

/* Appends the text of a linked image to /tmp/perf-PID.map, the file perf
 * reads to name code it has no symbols for. */
void write_perf_map(const char *start, size_t size, const std::string &name,
                    uint64_t code_id)
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
    fprintf(file, "%lx %zx ifunc:%s:%016llx\n",
            reinterpret_cast<unsigned long>(start), size, name.c_str(),
            static_cast<unsigned long long>(code_id));
    fclose(file);
}

/* Describes the linked text of an image to gdb as "ifunc:NAME:CODE_ID",
 * with its functions. For now the one symbol NAME_main, from the entry to
 * the end of the text. */
std::unique_ptr<GdbJitRegistration>
register_with_debugger(const char *base, const ucp_ifunc_image_desc_t &d,
                       const std::string &name, uint64_t code_id)
{
    const ucp_ifunc_image_seg_t &text = d.seg[UCP_IFUNC_SEG_TEXT];
    uint64_t text_start = reinterpret_cast<uint64_t>(base) + text.vaddr;
    uint64_t entry      = reinterpret_cast<uint64_t>(base) + d.entry_vaddr;
    std::vector<JitSymbol> symbols{
            {name + "_main", entry, text_start + text.mem_size - entry}};
    char id[17];
    snprintf(id, sizeof(id), "%016llx",
             static_cast<unsigned long long>(code_id));
    return gdb_jit_register("ifunc:" + name + ":" + id, text_start,
                            text.mem_size, symbols);
}

/* Rejections of the peer's code are logged at @a level (a warning, or
 * debug for code whose rejection was logged already). */
ucs_status_t link_image(Registry &registry, const FrameHeader &hdr,
                        const void *frame, ucs_log_level_t level,
                        std::unique_ptr<LinkedCode> *code_p)
{
    /* Work on a private copy of name and image: the buffer stays writable
     * by the peer. The code id is their hash. */
    size_t            image_offset = frame_image_offset(hdr.name_length);
    const char       *bytes        = static_cast<const char *>(frame);
    std::vector<char> named_image(bytes + kNameOffset,
                                  bytes + image_offset + hdr.image_size);
    if (hash64(named_image.data(), named_image.size()) != hdr.code_id) {
        ucs_log(level, "ifunc frame: code image does not match its code id; "
                       "message dropped");
        return UCS_ERR_INVALID_PARAM;
    }
    std::string name = frame_name(named_image.data(), hdr.name_length);
    if (name.empty()) {
        ucs_log(level, "ifunc frame: invalid ifunc name; message dropped");
        return UCS_ERR_INVALID_PARAM;
    }

    const char  *image = named_image.data() + image_offset - kNameOffset;
    size_t       image_size;
    ucs_status_t status =
            image_check(image, hdr.image_size, name.c_str(),
                        registry.max_image_size(), level, &image_size);
    if (status != UCS_OK) {
        return status;
    }
    auto d = image_desc(image);

    auto code     = std::make_unique<LinkedCode>();
    code->code_id = hdr.code_id;
    code->name    = name;

    std::vector<uint64_t> imports;
    if (d.n_imports > 0) {
        /* Imports resolve in the scope of the target's own NAME.so. */
        status = registry.get(
                name.c_str(),
                (level == UCS_LOG_LEVEL_WARN) ? UCS_LOG_LEVEL_ERROR : level,
                &code->library);
        if (status != UCS_OK) {
            return status;
        }
        status = resolve_imports(d, image, name.c_str(), code->library.get(),
                                 level, &imports);
        if (status != UCS_OK) {
            return status;
        }
    }

    uint64_t page = d.page_align;
    uint64_t table_size =
            align_up(std::max<uint64_t>(d.n_imports, 1) * 8, page);
    code->mapping = std::make_unique<Mapping>(d.map_size + table_size);
    char *base    = code->mapping->base();
    if (base == nullptr) {
        ucs_error("ifunc '%s': cannot map %llu bytes for its code: %m",
                  name.c_str(),
                  static_cast<unsigned long long>(d.map_size + table_size));
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
    char    *table     = base + d.map_size;
    uint64_t table_ptr = reinterpret_cast<uint64_t>(table);
    if (!imports.empty()) {
        std::memcpy(table, imports.data(), imports.size() * 8);
    }
    std::memcpy(base + d.got_ptr_vaddr, &table_ptr, sizeof(table_ptr));

    const ucp_ifunc_image_seg_t *seg = d.seg;
    Mapping                     &m   = *code->mapping;
    if (!m.protect(seg[UCP_IFUNC_SEG_TEXT].vaddr,
                   seg[UCP_IFUNC_SEG_TEXT].mem_size, page,
                   PROT_READ | PROT_EXEC) ||
        !m.protect(seg[UCP_IFUNC_SEG_RELRO].vaddr,
                   seg[UCP_IFUNC_SEG_RELRO].mem_size, page, PROT_READ) ||
        !m.protect(d.map_size, table_size, page, PROT_READ)) {
        ucs_error("ifunc '%s': cannot protect its code pages: %m",
                  name.c_str());
        return UCS_ERR_IO_ERROR;
    }
    arch::sync_icache(base, seg[UCP_IFUNC_SEG_TEXT].mem_size);

    code->entry = reinterpret_cast<MainFn>(base + d.entry_vaddr);
    if (registry.perf_map()) {
        write_perf_map(base, seg[UCP_IFUNC_SEG_TEXT].mem_size, name,
                       hdr.code_id);
    }
    if (registry.gdb_jit()) {
        code->debugger = register_with_debugger(base, d, name, hdr.code_id);
    }
    ucs_debug("ifunc '%s': linked code id 0x%016llx at %p (%u imports, "
              "%u relocations)",
              name.c_str(), static_cast<unsigned long long>(hdr.code_id),
              static_cast<void *>(base), d.n_imports, d.n_relocs);
    *code_p = std::move(code);
    return UCS_OK;
}

/* Per-thread memory of recently run code: the common case, the same ifunc
 * again, costs no lock. Valid for the cache with the serial it names. */
struct RecentCode {
    static constexpr size_t               kSize        = 8;
    uint64_t                              cache_serial = UINT64_MAX;
    std::array<const LinkedCode *, kSize> slots{};

    const LinkedCode *&slot(uint64_t serial, uint64_t code_id)
    {
        if (cache_serial != serial) {
            cache_serial = serial;
            slots.fill(nullptr);
        }
        return slots[code_id % kSize];
    }
};
__attribute__((tls_model("initial-exec"))) thread_local RecentCode recent_code;

} // namespace

CodeCache::CodeCache(Registry &registry)
    : registry_(registry), serial_(cache_serials.fetch_add(1))
{
}

CodeCache::~CodeCache() = default;

const LinkedCode *CodeCache::find(uint64_t code_id)
{
    std::shared_lock<std::shared_mutex> guard(lock_);
    auto                                it = codes_.find(code_id);
    return (it != codes_.end()) ? it->second.get() : nullptr;
}

ucs_status_t CodeCache::link(const FrameHeader &hdr, const void *frame,
                             const LinkedCode **code_p)
{
    std::unique_lock<std::shared_mutex> guard(lock_);
    auto                                it = codes_.find(hdr.code_id);
    if (it != codes_.end()) {
        *code_p = it->second.get(); /* another thread linked it */
        return UCS_OK;
    }
    std::unique_ptr<LinkedCode> code;
    /* One log line per code id: a peer that sends the same bad code again
     * and again does not flood the log. Checked again every time all the
     * same: the library it needs may have appeared. */
    bool         logged = logged_rejections_.contains(hdr.code_id);
    ucs_status_t status = link_image(
            registry_, hdr, frame,
            logged ? UCS_LOG_LEVEL_DEBUG : UCS_LOG_LEVEL_WARN, &code);
    if ((status != UCS_OK) && !logged) {
        logged_rejections_.add(hdr.code_id);
    }
    if (status == UCS_OK) {
        *code_p = code.get();
        codes_.emplace(hdr.code_id, std::move(code));
    }
    return status;
}

bool CodeCache::empty()
{
    std::shared_lock<std::shared_mutex> guard(lock_);
    return codes_.empty();
}

ucs_status_t CodeCache::lookup(const FrameHeader &hdr, const void *frame,
                               MainFn *entry_p)
{
    const LinkedCode *&recent = recent_code.slot(serial_, hdr.code_id);
    if ((recent == nullptr) || (recent->code_id != hdr.code_id)) {
        const LinkedCode *code = find(hdr.code_id);
        if (code == nullptr) {
            ucs_status_t status = link(hdr, frame, &code);
            if (status != UCS_OK) {
                return status;
            }
        }
        recent = code;
    }
    *entry_p = recent->entry;
    return UCS_OK;
}

ucs_status_t CodeCache::lookup_ref(uint64_t code_id, MainFn *entry_p)
{
    const LinkedCode *&recent = recent_code.slot(serial_, code_id);
    if ((recent == nullptr) || (recent->code_id != code_id)) {
        const LinkedCode *code = find(code_id);
        if (code == nullptr) {
            /* The source sends a reference only once this target said it
             * holds the code (docs/design.md): this one is stale or forged.
             * Run nothing in its place. */
            ucs_log(logged_rejections_.contains(code_id) ? UCS_LOG_LEVEL_DEBUG
                                                         : UCS_LOG_LEVEL_WARN,
                    "ifunc message names code 0x%016llx, which this target "
                    "does not hold; message dropped (the source must send "
                    "the code first)",
                    static_cast<unsigned long long>(code_id));
            logged_rejections_.add(code_id);
            return UCS_ERR_NO_ELEM;
        }
        recent = code;
    }
    *entry_p = recent->entry;
    return UCS_OK;
}

} // namespace ucx_ifunc
