/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/load/registry.h"

#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/format/isa.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace ucx_ifunc {
namespace {

/* Frames carry at most 2 GiB of code (their image size is 32 bits, and
 * half of it keeps every sum below it from wrapping): one rule for every
 * image a library or a caller gives, native or bitcode, of any ISA. */
ucs_status_t check_frame_image_size(const std::string &name, const char *what,
                                    size_t image_size, ucs_log_level_t level)
{
    if (image_size <= UINT32_MAX / 2) {
        return UCS_OK;
    }
    ucs_log(level,
            "ifunc '%s': %s is %zu bytes; frames carry at most 2 GiB of code",
            name.c_str(), what, image_size);
    return UCS_ERR_EXCEEDS_LIMIT;
}

/* Size of the object at @a address per the dynamic symbol table, or 0. */
size_t symbol_size(const void *address)
{
    Dl_info info;
    void   *sym = nullptr;
    if (!dladdr1(address, &info, &sym, RTLD_DL_SYMENT) || (sym == nullptr)) {
        return 0;
    }
    return static_cast<const ElfW(Sym) *>(sym)->st_size;
}

/* The file's identity: a rebuilt or replaced file has another. */
bool file_identity(const std::string &path, FileIdentity *id)
{
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        return false;
    }
    *id = {uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size),
           uint64_t(st.st_mtim.tv_sec) * 1000000000ull +
                   uint64_t(st.st_mtim.tv_nsec)};
    return true;
}

/* The canonical path of @a path, or "" if it has none. */
std::string real_path(const std::string &path)
{
    char resolved[PATH_MAX];
    return (realpath(path.c_str(), resolved) != nullptr) ? resolved : "";
}

/* Files that were not ifunc libraries, by path, as they were then: a fact
 * about the file, so kept for the process, not per context. */
class RejectedFiles {
public:
    static constexpr size_t kMax = 1024;

    bool contains(const std::string &path, const FileIdentity &id)
    {
        std::lock_guard<std::mutex> guard(lock_);
        auto                        it = files_.find(path);
        return (it != files_.end()) && (it->second == id);
    }

    void add(const std::string &path, const FileIdentity &id)
    {
        std::lock_guard<std::mutex> guard(lock_);
        if (files_.size() < kMax) {
            files_[path] = id;
        }
    }

private:
    std::mutex                                    lock_;
    std::unordered_map<std::string, FileIdentity> files_;
};

RejectedFiles &rejected_files()
{
    static RejectedFiles files;
    return files;
}

bool world_writable(const std::string &path)
{
    struct stat st;
    return (stat(path.c_str(), &st) == 0) && (st.st_mode & S_IWOTH);
}

template <typename Fn>
bool bind_symbol(const Library &lib, const std::string &symbol,
                 ucs_log_level_t log_level, Fn *fn_p)
{
    *fn_p = reinterpret_cast<Fn>(lib.symbol(symbol.c_str()));
    if (*fn_p == nullptr) {
        ucs_log(log_level,
                "ifunc '%s': %s does not define %s; is it an ifunc library "
                "built with ucx-ifunc-cc?",
                lib.name().c_str(), lib.path().c_str(), symbol.c_str());
        return false;
    }
    return true;
}

/* Binds the bound function and NAME_payload_init of @a lib, in the
 * convention of the bound function it defines. UCS_ERR_NO_ELEM if it is no
 * ifunc library; UCS_ERR_INVALID_PARAM if it defines both bound functions,
 * since its payload_init's argument order would then be a guess. */
ucs_status_t bind_payload_functions(Library *lib, ucs_log_level_t log_level)
{
    const std::string &name = lib->name();
    std::string paper  = name + payload_bound_suffix(PayloadConvention::paper);
    std::string slides = name + payload_bound_suffix(PayloadConvention::slides);
    auto        paper_bound =
            reinterpret_cast<PayloadBoundFn>(lib->symbol(paper.c_str()));
    auto slides_bound =
            reinterpret_cast<PayloadBoundFn>(lib->symbol(slides.c_str()));
    if ((paper_bound != nullptr) && (slides_bound != nullptr)) {
        ucs_log(log_level,
                "ifunc '%s': %s defines both %s (the paper's convention) and "
                "%s (the workshop slides'), which order the arguments of "
                "%s_payload_init differently; keep the one whose order it "
                "uses",
                name.c_str(), lib->path().c_str(), paper.c_str(),
                slides.c_str(), name.c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    if ((paper_bound == nullptr) && (slides_bound == nullptr)) {
        ucs_log(log_level,
                "ifunc '%s': %s defines neither %s (the paper's convention) "
                "nor %s (the workshop slides'); is it an ifunc library built "
                "with ucx-ifunc-cc?",
                name.c_str(), lib->path().c_str(), paper.c_str(),
                slides.c_str());
        return UCS_ERR_NO_ELEM;
    }

    std::string init = name + "_payload_init";
    bool        bound;
    if (paper_bound != nullptr) {
        lib->convention    = PayloadConvention::paper;
        lib->payload_bound = paper_bound;
        bound = bind_symbol(*lib, init, log_level, &lib->paper_payload_init);
    } else {
        lib->convention    = PayloadConvention::slides;
        lib->payload_bound = slides_bound;
        bound = bind_symbol(*lib, init, log_level, &lib->slides_payload_init);
    }
    return bound ? UCS_OK : UCS_ERR_NO_ELEM;
}

} // namespace

const char *payload_bound_suffix(PayloadConvention convention)
{
    return (convention == PayloadConvention::paper) ? "_payload_get_max_size"
                                                    : "_payload_bound";
}

namespace {
std::atomic<uint64_t> library_serials{0};
} // namespace

Library::Library(std::string name, std::string path, void *dl_handle)
    : serial(++library_serials), name_(std::move(name)), path_(std::move(path)),
      dl_handle_(dl_handle)
{
}

Library::~Library()
{
    if (dl_handle_ != nullptr) {
        dlclose(dl_handle_);
    }
}

void *Library::symbol(const char *symbol) const
{
    return (dl_handle_ != nullptr) ? dlsym(dl_handle_, symbol) : nullptr;
}

Registry::Registry()
    : config_(config_read()), trust_kinds_(config_.trust),
      trusted_keys_(config_.trusted_keys),
      max_linked_codes_(std::max<size_t>(config_.max_linked_codes, 1)),
      max_linked_memory_(config_.max_linked_memory),
      max_am_message_(config_.max_am_message),
      max_am_rndv_memory_(config_.max_am_rndv_memory),
      am_receive_timeout_(config_.am_receive_timeout),
      jit_timeout_(config_.jit_timeout), jit_max_memory_(config_.jit_max_memory)
{
    max_image_size_.store(config_.max_image_size, std::memory_order_relaxed);
    perf_map_.store(config_.perf_map, std::memory_order_relaxed);
    gdb_jit_.store(config_.gdb_jit, std::memory_order_relaxed);
    print_counters_.store(config_.print_counters, std::memory_order_relaxed);
}

void Registry::reread_config()
{
    config_ = config_read();
    max_image_size_.store(config_.max_image_size, std::memory_order_relaxed);
    perf_map_.store(config_.perf_map, std::memory_order_relaxed);
    gdb_jit_.store(config_.gdb_jit, std::memory_order_relaxed);
    print_counters_.store(config_.print_counters, std::memory_order_relaxed);
}

ucs_status_t Registry::load(const std::string &name, ucs_log_level_t log_level,
                            std::shared_ptr<Library> *lib_p)
{
    reread_config();
    if (config_.lib_dir.empty()) {
        ucs_log(log_level,
                "ifunc '%s': UCX_IFUNC_LIB_DIR is not set; set it to the "
                "directory that holds %s.so",
                name.c_str(), name.c_str());
        return UCS_ERR_NO_ELEM;
    }

    std::string path = config_.lib_dir + "/" + name + ".so";
    std::string dir  = real_path(config_.lib_dir);
    std::string real = real_path(path);
    if (!dir.empty() && !real.empty() && (real.rfind(dir + "/", 0) != 0)) {
        ucs_log(log_level,
                "ifunc '%s': %s leads to %s, outside UCX_IFUNC_LIB_DIR; not "
                "loaded (put the library itself in %s)",
                name.c_str(), path.c_str(), real.c_str(),
                config_.lib_dir.c_str());
        return UCS_ERR_NO_ELEM;
    }
    if (world_writable(config_.lib_dir) && warned_dirs_.insert(dir).second) {
        ucs_warn("UCX_IFUNC_LIB_DIR %s is writable by every user: anyone on "
                 "this host can change the code this process runs (chmod "
                 "o-w it)",
                 config_.lib_dir.c_str());
    }
    if (world_writable(path)) {
        ucs_warn("ifunc '%s': %s is writable by every user: anyone on this "
                 "host can change the code this process runs (chmod o-w it)",
                 name.c_str(), path.c_str());
    }

    /* A file that was no ifunc library is not loaded again (its
     * constructors would run again) until it changes. */
    FileIdentity identity{};
    bool         known = file_identity(path, &identity);
    if (known && rejected_files().contains(path, identity)) {
        ucs_debug("ifunc '%s': %s is not an ifunc library; not loaded again "
                  "until it changes",
                  name.c_str(), path.c_str());
        return UCS_ERR_NO_ELEM;
    }

    dlerror();
    void *dl_handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (dl_handle == nullptr) {
        const char *reason = dlerror();
        ucs_log(log_level, "ifunc '%s': cannot load %s: %s", name.c_str(),
                path.c_str(), reason ? reason : "unknown error");
        return UCS_ERR_NO_ELEM;
    }

    auto         lib    = std::make_shared<Library>(name, path, dl_handle);
    ucs_status_t status = bind_payload_functions(lib.get(), log_level);
    lib->file           = identity;
    if (status == UCS_ERR_INVALID_PARAM) {
        /* Both conventions at once: not loaded again until it changes. */
        if (known) {
            rejected_files().add(path, identity);
        }
        return status;
    }
    void *main_fn;
    if ((status != UCS_OK) ||
        !bind_symbol(*lib, name + "_main", log_level, &main_fn)) {
        if (known) {
            rejected_files().add(path, identity);
        }
        return UCS_ERR_NO_ELEM;
    }
    /* Its images are symbols of the file. */
    Library    *file_lib = lib.get();
    ImageLookup in_file  = [file_lib](const std::string &symbol) {
        const void *image = file_lib->symbol(symbol.c_str());
        return ImageBytes{image, (image != nullptr) ? symbol_size(image) : 0};
    };
    status = take_images(lib.get(), in_file, log_level);
    if (status == UCS_ERR_NO_ELEM) {
        /* No code for this ISA: say which symbol it lacks. */
        const void *image;
        bind_symbol(*lib, UCP_IFUNC_IMAGE_SYMBOL + name, log_level, &image);
        if (known) {
            rejected_files().add(path, identity);
        }
        return UCS_ERR_NO_ELEM;
    }
    if (status != UCS_OK) {
        return status;
    }
    *lib_p = std::move(lib);
    return UCS_OK;
}

ucs_status_t Registry::take_images(Library *lib, const ImageLookup &lookup,
                                   ucs_log_level_t log_level) const
{
    const std::string &name = lib->name();
    /* Its code for this ISA: the native image, or bitcode (a library built
     * with --bitcode-only has no native image at all). */
    const uint16_t host   = arch::elf_machine();
    ImageBytes     native = lookup(UCP_IFUNC_IMAGE_SYMBOL + name);
    ForeignImage   bitcode{};
    ucs_status_t   status =
            shippable_bitcode(*lib, lookup, host, log_level, &bitcode);
    if (status != UCS_OK) {
        return status;
    }
    if ((native.image == nullptr) && bitcode.frame_prefix.empty()) {
        return UCS_ERR_NO_ELEM; /* the caller says what is missing */
    }
    if (!bitcode.frame_prefix.empty()) {
        lib->bitcode_code_id = bitcode.code_id;
    }
    if ((native.image != nullptr) &&
        (bitcode.frame_prefix.empty() || !config_.prefer_bitcode)) {
        size_t image_size;
        status = image_check(native.image, native.available, name.c_str(),
                             config_.max_image_size, log_level, &image_size);
        if (status != UCS_OK) {
            return status;
        }
        status = check_frame_image_size(
                name, ("the code image of " + lib->path()).c_str(), image_size,
                log_level);
        if (status != UCS_OK) {
            return status;
        }
        lib->frame_prefix =
                frame_prefix(name.c_str(), native.image, image_size);
        lib->code_id = header_code_id(*reinterpret_cast<const FrameHeader *>(
                lib->frame_prefix.data()));
    } else {
        lib->frame_prefix = std::move(bitcode.frame_prefix);
        lib->code_id      = bitcode.code_id;
    }
    ucs_debug("ifunc '%s': loaded %s, %s image, code id %s", name.c_str(),
              lib->path().c_str(),
              (lib->code_id == lib->bitcode_code_id) ? "bitcode" : "native",
              lib->code_id.hex().c_str());
    return load_foreign_images(lib, lookup, log_level);
}

ucs_status_t Registry::from_images(const std::string &name, const void *images,
                                   size_t                    images_size,
                                   ucs_log_level_t           log_level,
                                   std::shared_ptr<Library> *lib_p)
{
    const char *cname = name.c_str();
    if (images_size == 0) {
        ucs_log(log_level, "ifunc '%s': no images (images_size is 0)", cname);
        return UCS_ERR_INVALID_PARAM;
    }
    /* At most a native and a bitcode image per ISA, each under the frames'
     * 2 GiB: checked before the copy, which must not wrap or try to take
     * what no set of images can be. */
    constexpr size_t kMaxImagesSize =
            size_t(2) * kMaxMachines * (size_t(UINT32_MAX) / 2);
    if (images_size > kMaxImagesSize) {
        ucs_log(log_level,
                "ifunc '%s': %zu bytes of images, more than a native and a "
                "bitcode image of at most 2 GiB for each of %u ISAs",
                cname, images_size, kMaxMachines);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    /* A private copy, 8-byte aligned: the caller may change or free its
     * buffer, and every check below reads what the library keeps. */
    std::vector<uint64_t> copy((images_size + 7) / 8);
    std::memcpy(copy.data(), images, images_size);
    const char *bytes = reinterpret_cast<const char *>(copy.data());

    std::lock_guard<std::mutex> guard(lock_);
    reread_config();
    /* Each image under the symbol NAME.so would hold it by. */
    std::unordered_map<std::string, ImageBytes> by_symbol;
    const uint16_t                              host = arch::elf_machine();
    for (size_t offset = 0; offset < images_size;) {
        const void *image = bytes + offset;
        size_t      left  = images_size - offset;
        if ((left < sizeof(ucp_ifunc_image_desc_t)) ||
            (image_desc(image).magic != UCP_IFUNC_IMAGE_MAGIC)) {
            ucs_log(log_level,
                    "ifunc '%s': no code image at offset %zu of the %zu "
                    "bytes of images (%s); give complete images back to "
                    "back, each of its descriptor's image_size",
                    cname, offset, images_size,
                    (left < sizeof(ucp_ifunc_image_desc_t)) ? "truncated"
                                                            : "no image magic");
            return UCS_ERR_INVALID_PARAM;
        }
        const uint16_t machine = image_desc(image).machine;
        if (std::find(std::begin(kShippableMachines),
                      std::end(kShippableMachines),
                      machine) == std::end(kShippableMachines)) {
            ucs_log(log_level,
                    "ifunc '%s': the image at offset %zu is for %s, an ISA "
                    "ucx-ifunc ships no code for",
                    cname, offset, machine_name(machine).c_str());
            return UCS_ERR_INVALID_PARAM;
        }
        size_t       image_size;
        ucs_status_t status =
                image_check_for(machine, image, left, cname,
                                config_.max_image_size, log_level, &image_size);
        if (status != UCS_OK) {
            return (status == UCS_ERR_EXCEEDS_LIMIT) ? status
                                                     : UCS_ERR_INVALID_PARAM;
        }
        const bool  bitcode = image_is_bitcode(image_desc(image));
        std::string symbol  = bitcode ? bitcode_symbol_for(name, machine)
                              : (machine == host)
                                      ? UCP_IFUNC_IMAGE_SYMBOL + name
                                      : image_symbol_for(name, machine);
        if (!by_symbol.emplace(symbol, ImageBytes{image, image_size}).second) {
            ucs_log(log_level,
                    "ifunc '%s': a second %s image for %s at offset %zu; "
                    "give at most one of each kind per ISA",
                    cname, bitcode ? "bitcode" : "native",
                    machine_name(machine).c_str(), offset);
            return UCS_ERR_INVALID_PARAM;
        }
        offset += image_size; /* a multiple of 8, checked */
    }

    auto lib = std::make_shared<Library>(name, "(images in memory)", nullptr);
    lib->from_memory      = true;
    ImageLookup in_memory = [&by_symbol](const std::string &symbol) {
        auto it = by_symbol.find(symbol);
        return (it != by_symbol.end()) ? it->second : ImageBytes{};
    };
    ucs_status_t status = take_images(lib.get(), in_memory, log_level);
    if (status == UCS_ERR_NO_ELEM) {
        ucs_log(log_level,
                "ifunc '%s': no image is for this process's ISA (%s); add "
                "its native or bitcode image (ucx-ifunc-cc --target or "
                "--bitcode for %s)",
                cname, machine_name(host).c_str(), machine_triplet(host));
        return UCS_ERR_INVALID_PARAM;
    }
    if (status != UCS_OK) {
        return (status == UCS_ERR_EXCEEDS_LIMIT) ? status
                                                 : UCS_ERR_INVALID_PARAM;
    }
    *lib_p = std::move(lib);
    return UCS_OK;
}

ucs_status_t Registry::shippable_bitcode(const Library     &lib,
                                         const ImageLookup &lookup,
                                         uint16_t           machine,
                                         ucs_log_level_t    log_level,
                                         ForeignImage      *image_p) const
{
    std::string symbol = bitcode_symbol_for(lib.name(), machine);
    ImageBytes  bytes  = lookup(symbol);
    const void *image  = bytes.image;
    if (image == nullptr) {
        return UCS_OK; /* none for that ISA */
    }
    size_t       image_size;
    ucs_status_t status =
            image_check_for(machine, image, bytes.available, lib.name().c_str(),
                            config_.max_image_size, log_level, &image_size);
    if (status != UCS_OK) {
        return status;
    }
    if (!image_is_bitcode(image_desc(image))) {
        ucs_log(log_level, "ifunc '%s': %s of %s is no bitcode image",
                lib.name().c_str(), symbol.c_str(), lib.path().c_str());
        return UCS_ERR_INVALID_PARAM;
    }
    status = check_frame_image_size(
            lib.name(),
            ("the bitcode image " + symbol + " of " + lib.path()).c_str(),
            image_size, log_level);
    if (status != UCS_OK) {
        return status;
    }
    image_p->machine      = machine;
    image_p->frame_prefix = frame_prefix(lib.name().c_str(), image, image_size);
    image_p->code_id = header_code_id(*reinterpret_cast<const FrameHeader *>(
            image_p->frame_prefix.data()));
    return UCS_OK;
}

ucs_status_t Registry::load_foreign_images(Library           *lib,
                                           const ImageLookup &lookup,
                                           ucs_log_level_t    log_level) const
{
    for (uint16_t machine : kShippableMachines) {
        if (machine == arch::elf_machine()) {
            continue;
        }
        ForeignImage bitcode{};
        ucs_status_t status =
                shippable_bitcode(*lib, lookup, machine, log_level, &bitcode);
        if (status != UCS_OK) {
            return status;
        }
        ImageBytes  bytes = lookup(image_symbol_for(lib->name(), machine));
        const void *image = bytes.image;
        /* The native image for that ISA, unless bitcode is preferred or
         * the only code there is for it. */
        if ((image == nullptr) ||
            (!bitcode.frame_prefix.empty() && config_.prefer_bitcode)) {
            if (!bitcode.frame_prefix.empty()) {
                ucs_debug("ifunc '%s': %s bitcode image, code id %s",
                          lib->name().c_str(), machine_name(machine).c_str(),
                          bitcode.code_id.hex().c_str());
                lib->foreign_images.push_back(std::move(bitcode));
            }
            continue;
        }
        size_t image_size;
        status = image_check_for(machine, image, bytes.available,
                                 lib->name().c_str(), config_.max_image_size,
                                 log_level, &image_size);
        if (status == UCS_OK) {
            status = check_frame_image_size(lib->name(),
                                            ("the " + machine_name(machine) +
                                             " image of " + lib->path())
                                                    .c_str(),
                                            image_size, log_level);
        }
        if (status != UCS_OK) {
            return status;
        }
        ForeignImage foreign{
                machine,
                frame_prefix(lib->name().c_str(), image, image_size),
                {}};
        foreign.code_id = header_code_id(*reinterpret_cast<const FrameHeader *>(
                foreign.frame_prefix.data()));
        ucs_debug("ifunc '%s': %s image %zu bytes, code id %s",
                  lib->name().c_str(), machine_name(machine).c_str(),
                  image_size, foreign.code_id.hex().c_str());
        lib->foreign_images.push_back(std::move(foreign));
    }
    return UCS_OK;
}

bool Registry::library_identity(const std::string &name, FileIdentity *identity)
{
    /* The variable as it is now: a program may point it elsewhere between
     * messages, as it may between loads. */
    std::string lib_dir = config_lib_dir();
    return !lib_dir.empty() &&
           file_identity(lib_dir + "/" + name + ".so", identity);
}

ucs_status_t Registry::vouch(const std::string &name, const CodeId &code_id,
                             std::shared_ptr<Library> *lib_p, std::string *why)
{
    FileIdentity file{};
    bool         exists = library_identity(name, &file);
    {
        std::lock_guard<std::mutex> guard(lock_);
        auto                        known = known_images_.find(name);
        if (exists && (known != known_images_.end()) &&
            (known->second.file == file) &&
            (known->second.code_id != code_id) &&
            (known->second.bitcode_code_id != code_id)) {
            *why = "it differs from the image of " + config_.lib_dir + "/" +
                   name + ".so (another build?)";
            return UCS_ERR_REJECTED; /* known without loading it again */
        }
    }
    std::shared_ptr<Library> library;
    if (get(name.c_str(), UCS_LOG_LEVEL_DEBUG, &library) != UCS_OK) {
        *why = "no loadable " + name +
               ".so in UCX_IFUNC_LIB_DIR to compare it with";
        return UCS_ERR_NO_ELEM;
    }
    {
        std::lock_guard<std::mutex> guard(lock_);
        if (known_images_.size() >= kMaxKnownImages) {
            known_images_.clear(); /* names are a peer's choice */
        }
        known_images_[name] = KnownImage{library->file, library->code_id,
                                         library->bitcode_code_id};
    }
    /* Either of its images for this ISA, native or bitcode: a source may
     * send either (UCX_IFUNC_PREFER_BITCODE). */
    if ((library->code_id != code_id) &&
        (library->bitcode_code_id != code_id)) {
        *why = "it differs from the image of " + library->path() +
               " (another build?)";
        return UCS_ERR_REJECTED;
    }
    *lib_p = std::move(library);
    return UCS_OK;
}

ucs_status_t Registry::get(const char *name, ucs_log_level_t log_level,
                           std::shared_ptr<Library> *lib_p)
{
    std::lock_guard<std::mutex> guard(lock_);
    std::weak_ptr<Library>     &slot = libraries_[name];
    std::shared_ptr<Library>    lib  = slot.lock();
    if (!lib) {
        ucs_status_t status = load(name, log_level, &lib);
        if (status != UCS_OK) {
            libraries_.erase(name);
            return status;
        }
        slot = lib;
    }
    *lib_p = std::move(lib);
    return UCS_OK;
}

} // namespace ucx_ifunc
