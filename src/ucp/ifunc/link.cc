/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "link.h"

#include "arch.h"
#include "config.h"
#include "image.h"

#include <ucs/debug/log_def.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ucx_ifunc {
namespace {

constexpr uint32_t kMaxImports     = 1u << 16;
constexpr uint32_t kMaxRelocs      = 1u << 24;
constexpr uint64_t kMaxPageSize    = 1u << 20;
constexpr char     kWrongMachine[] = "code for another CPU architecture";

/* [offset, offset + length) lies inside [0, limit), without overflow. */
bool within(uint64_t offset, uint64_t length, uint64_t limit)
{
    return (offset <= limit) && (length <= limit - offset);
}

template <typename T>
T read_at(const void *base, uint64_t offset)
{
    T value;
    std::memcpy(&value, static_cast<const char *>(base) + offset,
                sizeof(value));
    return value;
}

ucp_ifunc_image_import_t import_at(const void                   *image,
                                   const ucp_ifunc_image_desc_t &d, uint32_t i)
{
    return read_at<ucp_ifunc_image_import_t>(
            image, d.imports_offset + i * sizeof(ucp_ifunc_image_import_t));
}

ucp_ifunc_image_reloc_t reloc_at(const void                   *image,
                                 const ucp_ifunc_image_desc_t &d, uint32_t i)
{
    return read_at<ucp_ifunc_image_reloc_t>(
            image, d.relocs_offset + i * sizeof(ucp_ifunc_image_reloc_t));
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

/* Returns nullptr if the image is acceptable, otherwise what is wrong. */
const char *image_problem(const void *image, size_t available,
                          ucp_ifunc_image_desc_t *desc_p)
{
    if (available < sizeof(ucp_ifunc_image_desc_t)) {
        return "shorter than its descriptor";
    }
    auto &d = *desc_p = read_at<ucp_ifunc_image_desc_t>(image, 0);
    if (d.magic != UCP_IFUNC_IMAGE_MAGIC) {
        return "bad magic";
    }
    if (d.version != UCP_IFUNC_IMAGE_VERSION) {
        return "unsupported image version (rebuild the library with this "
               "release's ucx-ifunc-cc)";
    }
    if (d.machine != arch::elf_machine()) {
        return kWrongMachine;
    }
    if (d.desc_size != sizeof(d)) {
        return "bad descriptor size";
    }
    if ((d.image_size < sizeof(d)) || (d.image_size > available) ||
        (d.image_size % 8)) {
        return "bad image size";
    }

    uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
    if ((d.page_align & (d.page_align - 1)) || (d.page_align < page) ||
        (d.page_align > kMaxPageSize)) {
        return "segment alignment is not a supported page size";
    }
    if ((d.map_size == 0) || (d.map_size % d.page_align)) {
        return "bad map size";
    }
    if (d.map_size > config_max_image_size()) {
        return "needs more memory than UCX_IFUNC_MAX_IMAGE_SIZE allows";
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
    if ((d.got_ptr_vaddr % 8) || (d.got_ptr_vaddr < relro.vaddr) ||
        !within(d.got_ptr_vaddr - relro.vaddr, 8, relro.mem_size)) {
        return "GOT pointer outside the read-only data";
    }

    if ((d.n_imports > kMaxImports) || (d.imports_offset % 8) ||
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

    const char *strtab = static_cast<const char *>(image) + d.strtab_offset;
    for (uint32_t i = 0; i < d.n_imports; ++i) {
        auto imp = import_at(image, d, i);
        if ((imp.name_offset >= d.strtab_size) ||
            (strtab[imp.name_offset] == '\0') ||
            !std::memchr(strtab + imp.name_offset, '\0',
                         d.strtab_size - imp.name_offset) ||
            (imp.flags & ~uint32_t(UCP_IFUNC_IMPORT_WEAK))) {
            return "bad import";
        }
    }
    for (uint32_t i = 0; i < d.n_relocs; ++i) {
        auto rel     = reloc_at(image, d, i);
        bool type_ok = (rel.type == UCP_IFUNC_RELOC_RELATIVE) ||
                       ((rel.type == UCP_IFUNC_RELOC_IMPORT) &&
                        (rel.import_index < d.n_imports));
        if (!type_ok || (rel.vaddr % 8) || !reloc_target_ok(d, rel.vaddr)) {
            return "bad relocation";
        }
    }
    return nullptr;
}

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

struct LinkedCode {
    uint64_t                 code_id;
    std::string              name;
    MainFn                   entry;
    std::unique_ptr<Mapping> mapping;
    std::shared_ptr<Library> library; /* keeps resolved imports loaded */
};

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
                             std::vector<uint64_t> *addresses)
{
    for (uint32_t i = 0; i < d.n_imports; ++i) {
        auto        imp    = import_at(image, d, i);
        const char *symbol = image + d.strtab_offset + imp.name_offset;
        /* The order the dynamic linker uses for the library's own code:
         * the global scope (this program first), then the library's. */
        void *address = dlsym(RTLD_DEFAULT, symbol);
        if (address == nullptr) {
            address = lib->symbol(symbol);
        }
        if ((address == nullptr) && !(imp.flags & UCP_IFUNC_IMPORT_WEAK)) {
            ucs_error("ifunc '%s': symbol '%s' not found in this process or "
                      "in %s and its dependencies; message dropped",
                      name, symbol, lib->path().c_str());
            return UCS_ERR_NO_ELEM;
        }
        addresses->push_back(reinterpret_cast<uint64_t>(address));
    }
    return UCS_OK;
}

ucs_status_t link_image(const FrameHeader &hdr, const void *frame,
                        std::unique_ptr<LinkedCode> *code_p)
{
    /* Work on a private copy of name and image: the buffer stays writable
     * by the peer. The code id is their hash. */
    size_t            image_offset = frame_image_offset(hdr.name_length);
    const char       *bytes        = static_cast<const char *>(frame);
    std::vector<char> named_image(bytes + kNameOffset,
                                  bytes + image_offset + hdr.image_size);
    if (hash64(named_image.data(), named_image.size()) != hdr.code_id) {
        ucs_error("ifunc frame: code image does not match its code id; "
                  "message dropped");
        return UCS_ERR_INVALID_PARAM;
    }
    std::string name = frame_name(named_image.data(), hdr.name_length);
    if (name.empty()) {
        ucs_error("ifunc frame: invalid ifunc name; message dropped");
        return UCS_ERR_INVALID_PARAM;
    }

    const char  *image = named_image.data() + image_offset - kNameOffset;
    size_t       image_size;
    ucs_status_t status =
            image_check(image, hdr.image_size, name.c_str(), &image_size);
    if (status != UCS_OK) {
        return status;
    }
    auto d = read_at<ucp_ifunc_image_desc_t>(image, 0);

    auto code     = std::make_unique<LinkedCode>();
    code->code_id = hdr.code_id;
    code->name    = name;

    std::vector<uint64_t> imports;
    if (d.n_imports > 0) {
        /* Imports resolve in the scope of the target's own NAME.so. */
        status = library_get(name.c_str(), &code->library);
        if (status != UCS_OK) {
            return status;
        }
        status = resolve_imports(d, image, name.c_str(), code->library.get(),
                                 &imports);
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
        auto     rel   = reloc_at(image, d, i);
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
    ucs_debug("ifunc '%s': linked code id 0x%016llx at %p (%u imports, "
              "%u relocations)",
              name.c_str(), static_cast<unsigned long long>(hdr.code_id),
              static_cast<void *>(base), d.n_imports, d.n_relocs);
    *code_p = std::move(code);
    return UCS_OK;
}

/* All code linked in this process, by code id. Entries are never removed,
 * so pointers to them stay valid and threads may cache them unlocked. */
class CodeCache {
public:
    const LinkedCode *find(uint64_t code_id)
    {
        std::shared_lock<std::shared_mutex> guard(lock_);
        auto                                it = codes_.find(code_id);
        return (it != codes_.end()) ? it->second.get() : nullptr;
    }

    ucs_status_t link(const FrameHeader &hdr, const void *frame,
                      const LinkedCode **code_p)
    {
        std::unique_lock<std::shared_mutex> guard(lock_);
        auto                                it = codes_.find(hdr.code_id);
        if (it != codes_.end()) {
            *code_p = it->second.get(); /* another thread linked it */
            return UCS_OK;
        }
        std::unique_ptr<LinkedCode> code;
        ucs_status_t                status = link_image(hdr, frame, &code);
        if (status == UCS_OK) {
            *code_p = code.get();
            codes_.emplace(hdr.code_id, std::move(code));
        }
        return status;
    }

private:
    std::shared_mutex                                         lock_;
    std::unordered_map<uint64_t, std::unique_ptr<LinkedCode>> codes_;
};

CodeCache &code_cache()
{
    static CodeCache cache;
    return cache;
}

/* Per-thread memory of recently run code: the common case, the same ifunc
 * again, costs no lock. */
struct RecentCode {
    static constexpr size_t               kSize = 8;
    std::array<const LinkedCode *, kSize> slots{};

    const LinkedCode *&slot(uint64_t code_id) { return slots[code_id % kSize]; }
};
thread_local RecentCode recent_code;

} // namespace

ucs_status_t image_check(const void *image, size_t available,
                         const char *ifunc_name, size_t *image_size_p)
{
    ucp_ifunc_image_desc_t desc;
    const char            *problem = image_problem(image, available, &desc);
    if (problem == nullptr) {
        *image_size_p = desc.image_size;
        return UCS_OK;
    }
    if (problem == kWrongMachine) {
        ucs_error("ifunc '%s': code is for ELF machine %u, this process "
                  "runs machine %u",
                  ifunc_name, desc.machine, arch::elf_machine());
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_error("ifunc '%s': malformed code image: %s", ifunc_name, problem);
    return UCS_ERR_INVALID_PARAM;
}

ucs_status_t code_lookup(const FrameHeader &hdr, const void *frame,
                         MainFn *entry_p)
{
    const LinkedCode *&recent = recent_code.slot(hdr.code_id);
    if ((recent == nullptr) || (recent->code_id != hdr.code_id)) {
        const LinkedCode *code = code_cache().find(hdr.code_id);
        if (code == nullptr) {
            ucs_status_t status = code_cache().link(hdr, frame, &code);
            if (status != UCS_OK) {
                return status;
            }
        }
        recent = code;
    }
    *entry_p = recent->entry;
    return UCS_OK;
}

} // namespace ucx_ifunc
