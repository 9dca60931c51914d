/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "link.h"
#include "tls.h"

#include "arch.h"
#include "gdb_jit.h"
#include "image_check.h"
#include "resolve.h"

#include <ucs/debug/log_def.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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
    CodeId      code_id;
    std::string name;
    MainFn      entry;
    uint64_t    memory = 0; /* bytes mapped */
    /* A path told a source that this target holds it: never evicted. */
    mutable std::atomic<bool> pinned{false};
    std::unique_ptr<Mapping>  mapping;
    std::shared_ptr<Library>  library; /* that vouched for it, if one did */
    ResolvedImports           imports; /* keeps their libraries loaded */
    /* Names the code in gdb; declared after the mapping, so released
     * before the code is unmapped. */
    std::unique_ptr<GdbJitRegistration> debugger;
    /* Name and image as received (the private copy the code was linked
     * from), and the library made of them once someone sends the code on. */
    std::vector<char>                named_image;
    mutable std::mutex               received_lock;
    mutable std::shared_ptr<Library> received;

    std::shared_ptr<Library> as_received() const
    {
        std::lock_guard<std::mutex> guard(received_lock);
        if (received == nullptr) {
            size_t image_offset = frame_image_offset(name.size());
            auto   lib =
                    std::make_shared<Library>(name, "(received code)", nullptr);
            lib->frame_prefix = frame_prefix(
                    name.c_str(),
                    named_image.data() + image_offset - kNameOffset,
                    named_image.size() + kNameOffset - image_offset);
            lib->code_id = code_id;
            received     = std::move(lib);
        }
        return received;
    }
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

/* Appends the functions of a linked image (or its whole text, if it has no
 * symbol table) to /tmp/perf-PID.map, the file perf reads to name code it
 * has no symbols for. */
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
    for (uint32_t i = 0; i < d.n_symbols; ++i) {
        auto sym = image_symbol(image, d, i);
        fprintf(file, "%lx %llx ifunc:%s:%s\n",
                reinterpret_cast<unsigned long>(start + sym.vaddr),
                static_cast<unsigned long long>(sym.size), name.c_str(),
                image_string(image, d, sym.name_offset));
    }
    if (d.n_symbols == 0) {
        fprintf(file, "%lx %zx ifunc:%s:%s\n",
                reinterpret_cast<unsigned long>(start), size, name.c_str(),
                code_id.hex().c_str());
    }
    fclose(file);
}

/* Describes the linked text of an image to gdb as "ifunc:NAME:CODE_ID",
 * with the functions of its symbol table. */
std::unique_ptr<GdbJitRegistration>
register_with_debugger(const char *base, const char *image,
                       const ucp_ifunc_image_desc_t &d, const std::string &name,
                       const CodeId &code_id)
{
    const ucp_ifunc_image_seg_t &text = d.seg[UCP_IFUNC_SEG_TEXT];
    uint64_t text_start = reinterpret_cast<uint64_t>(base) + text.vaddr;
    std::vector<JitSymbol> symbols;
    for (uint32_t i = 0; i < d.n_symbols; ++i) {
        auto sym = image_symbol(image, d, i);
        symbols.push_back({image_string(image, d, sym.name_offset),
                           text_start + sym.vaddr, sym.size});
    }
    if (symbols.empty()) { /* an image without a symbol table */
        uint64_t entry = reinterpret_cast<uint64_t>(base) + d.entry_vaddr;
        symbols.push_back(
                {name + "_main", entry, text_start + text.mem_size - entry});
    }
    return gdb_jit_register("ifunc:" + name + ":" + code_id.hex(), text_start,
                            text.mem_size, symbols);
}

/* Rejections of the peer's code are logged at @a level (a warning, or
 * debug for code whose rejection was logged already). */
/* A frame whose code id is not its name's and image's digest is rejected
 * with *@a forged set and nothing logged: its id is the peer's choice, so
 * the caller logs it per source, not per id. */
ucs_status_t link_image(Registry &registry, const TrustPolicy &trust,
                        const FrameHeader &hdr, const void *frame,
                        ucs_log_level_t level, bool *forged,
                        std::unique_ptr<LinkedCode> *code_p)
{
    /* Work on a private copy of name and image: the buffer stays writable
     * by the peer. The code id is their digest. */
    size_t            image_offset = frame_image_offset(hdr.name_length);
    const char       *bytes        = static_cast<const char *>(frame);
    std::vector<char> named_image(bytes + kNameOffset,
                                  bytes + image_offset + hdr.image_size);
    const CodeId      code_id = header_code_id(hdr);
    if (code_id_of(named_image.data(), named_image.size()) != code_id) {
        *forged = true;
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
    code->code_id = code_id;
    code->name    = name;
    /* Trust first: nothing of the image is loaded or mapped before. */
    status = trust.check(name, image, d, code_id, level, &code->library);
    if (status != UCS_OK) {
        return status;
    }
    status = resolve_imports(image, d, name, level, &code->imports);
    if (status != UCS_OK) {
        return status;
    }
    const std::vector<uint64_t> &imports = code->imports.addresses;

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
    code->memory  = d.map_size + table_size;
    code->mapping = std::make_unique<Mapping>(code->memory);
    char *base    = code->mapping->base();
    if (base == nullptr) {
        ucs_error("ifunc '%s': cannot map %llu bytes for its code: %m",
                  name.c_str(), static_cast<unsigned long long>(code->memory));
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
        write_perf_map(base, seg[UCP_IFUNC_SEG_TEXT].mem_size, image, d, name,
                       code_id);
    }
    if (registry.gdb_jit()) {
        code->debugger = register_with_debugger(base, image, d, name, code_id);
    }
    ucs_debug("ifunc '%s': linked code %s at %p (%u imports, %u "
              "relocations)",
              name.c_str(), code_id.hex().c_str(), static_cast<void *>(base),
              d.n_imports, d.n_relocs);
    code->named_image = std::move(named_image);
    *code_p           = std::move(code);
    return UCS_OK;
}

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

    Slot &slot(uint64_t serial, const CodeId &code_id)
    {
        return slots[(code_id.lo ^ serial) % kSize];
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

} // namespace

bool OnceSet::first(uint64_t key)
{
    std::lock_guard<std::mutex> guard(lock_);
    return (seen_.size() < kMax) && seen_.insert(key).second;
}

std::shared_ptr<Library> CodeUse::as_received() const
{
    return code_->as_received();
}

CodeUse::CodeUse()
{
    ++active_uses;
}

CodeUse::~CodeUse()
{
    --active_uses;
}

CodeCache::CodeCache(Registry &registry)
    : registry_(registry), trust_(registry),
      serial_(cache_serials.fetch_add(1)),
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

bool CodeCache::make_room(uint64_t memory)
{
    /* First whether evicting all that may go would be enough: if not,
     * evict nothing. */
    size_t   pinned_codes  = 0;
    uint64_t pinned_memory = 0;
    for (const auto &entry : codes_) {
        if (entry.second->pinned.load(std::memory_order_relaxed)) {
            ++pinned_codes;
            pinned_memory += entry.second->memory;
        }
    }
    if ((pinned_codes >= max_codes_) ||
        (memory > max_memory_ - std::min(pinned_memory, max_memory_))) {
        return false;
    }
    while ((codes_.size() >= max_codes_) ||
           (linked_memory_ + memory > max_memory_)) {
        /* Oldest first, never code a path told a source it holds: that
         * source sends references to it. */
        auto victim = std::find_if(link_order_.begin(), link_order_.end(),
                                   [&](const CodeId &id) {
                                       return !codes_.at(id)->pinned.load(
                                               std::memory_order_relaxed);
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
        codes_.erase(it);
        link_order_.erase(victim);
        /* Threads drop what they remember of it at their next lookup;
         * whoever runs it meanwhile holds a reference. */
        generation_.fetch_add(1, std::memory_order_release);
        ++evictions_;
    }
    return true;
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
    std::unique_ptr<LinkedCode> code;
    /* One log line per code id: a peer that sends the same bad code again
     * and again does not flood the log. Checked again every time all the
     * same: the library it needs may have appeared. */
    bool            logged = logged_rejections_.contains(code_id);
    ucs_log_level_t level  = logged ? UCS_LOG_LEVEL_DEBUG : UCS_LOG_LEVEL_WARN;
    bool            forged = false;
    ucs_status_t    status =
            link_image(registry_, trust_, hdr, frame, level, &forged, &code);
    if (forged) {
        uint32_t source = nonce_source_id(hdr.nonce);
        /* ucs_log evaluates its level more than once */
        ucs_log_level_t forged_level = forged_ids_.first(source)
                                               ? UCS_LOG_LEVEL_WARN
                                               : UCS_LOG_LEVEL_DEBUG;
        ucs_log(forged_level,
                "ifunc frame from source 0x%08x: code image does not match "
                "its code id; message dropped (logged once per source)",
                source);
        return status;
    }
    if ((status == UCS_OK) && !make_room(code->memory)) {
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
        if (!logged) {
            logged_rejections_.add(code_id);
        }
        return status;
    }
    linked_memory_ += code->memory;
    link_order_.push_back(code_id);
    *code_p = std::move(code);
    codes_.emplace(code_id, *code_p);
    return UCS_OK;
}

std::shared_ptr<Library> CodeCache::as_received(const std::string &name)
{
    std::shared_lock<std::shared_mutex> guard(lock_);
    for (auto it = link_order_.rbegin(); it != link_order_.rend(); ++it) {
        const LinkedCode &code = *codes_.at(*it);
        if (code.name == name) {
            return code.as_received();
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
    return Stats{codes_.size(), linked_memory_, evictions_};
}

ucs_status_t CodeCache::use(const CodeId &code_id, uint32_t source,
                            const FrameHeader *hdr, const void *frame,
                            CodeUse *use)
{
    const uint64_t gen = generation_.load(std::memory_order_acquire);
    /* Nested in running code (@a use counts itself), or the table is gone:
     * take a reference of our own. */
    bool use_table =
            (active_uses == 1) && (recent_code_state != TableState::destroyed);
    RecentCode::Slot *slot = nullptr;
    if (use_table) {
        recent_code_state = TableState::live;
        slot              = &recent_code.slot(serial_, code_id);
        if ((slot->cache_serial == serial_) && (slot->generation == gen) &&
            (slot->code != nullptr) && (slot->code->code_id == code_id)) {
            /* The slot keeps it alive: only this thread changes it, and
             * not before this use ends. */
            use->code_  = slot->code.get();
            use->entry_ = slot->code->entry;
            return UCS_OK;
        }
    }
    std::shared_ptr<const LinkedCode> code = find(code_id);
    if (code == nullptr) {
        if (hdr == nullptr) {
            /* The source sends a reference only once this target said it
             * holds the code (docs/design.md): this one is stale or forged.
             * Run nothing in its place. */
            ucs_log_level_t level = forged_ids_.first(source)
                                            ? UCS_LOG_LEVEL_WARN
                                            : UCS_LOG_LEVEL_DEBUG;
            ucs_log(level,
                    "ifunc message from source 0x%08x names code %s, which "
                    "this target does not hold; message dropped (the source "
                    "must send the code first; logged once per source)",
                    source, code_id.hex().c_str());
            return UCS_ERR_NO_ELEM;
        }
        ucs_status_t status = link(*hdr, frame, &code);
        if (status != UCS_OK) {
            return status;
        }
    }
    /* The table above hands out only code this thread got here before;
     * this code may be new to it, linked on another thread. */
    arch::instruction_barrier();
    use->code_  = code.get();
    use->entry_ = code->entry;
    if (slot != nullptr) {
        slot->cache_serial = serial_;
        slot->generation   = gen;
        slot->code         = std::move(code);
    } else {
        use->held_ = std::move(code);
    }
    return UCS_OK;
}

ucs_status_t CodeCache::lookup(const FrameHeader &hdr, const void *frame,
                               CodeUse *code_use)
{
    return use(header_code_id(hdr), nonce_source_id(hdr.nonce), &hdr, frame,
               code_use);
}

ucs_status_t CodeCache::lookup_ref(const CodeId &code_id, uint32_t source,
                                   CodeUse *code_use)
{
    return use(code_id, source, nullptr, nullptr, code_use);
}

bool CodeCache::announce(const CodeUse &code_use)
{
    const LinkedCode *code = code_use.code_;
    if (code->pinned.load(std::memory_order_relaxed)) {
        return true; /* every message after the first */
    }
    /* Under the lock that eviction takes: pinned code stays. Code evicted
     * while it ran is not announced, so no source relies on it. */
    std::shared_lock<std::shared_mutex> guard(lock_);
    auto                                it = codes_.find(code->code_id);
    if ((it == codes_.end()) || (it->second.get() != code)) {
        return false;
    }
    code->pinned.store(true, std::memory_order_relaxed);
    return true;
}

} // namespace ucx_ifunc
