/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/load/resolve.h"

#include "ucp/ifunc/format/image_check.h"

#include <dlfcn.h>

#include <mutex>
#include <unordered_map>

namespace ucx_ifunc {

class NeededLibrary {
public:
    explicit NeededLibrary(void *handle) : handle_(handle) {}
    ~NeededLibrary() { dlclose(handle_); }
    NeededLibrary(const NeededLibrary &)            = delete;
    NeededLibrary &operator=(const NeededLibrary &) = delete;

    void *symbol(const char *name) const { return dlsym(handle_, name); }

private:
    void *handle_;
};

namespace {

/* Libraries loaded for imports, by soname, process-wide: every context and
 * image that needs libz.so.1 shares one load. */
std::mutex                                                    needed_lock;
std::unordered_map<std::string, std::weak_ptr<NeededLibrary>> needed_loaded;

/* Distinct libraries loaded for imports at once, process-wide: each runs
 * its constructors and takes mappings. Code that is evicted releases its
 * own. */
constexpr size_t kMaxNeededLoaded = 256;

ucs_status_t load_needed(const char *soname, const std::string &ifunc,
                         ucs_log_level_t                 level,
                         std::shared_ptr<NeededLibrary> *library_p)
{
    std::lock_guard<std::mutex> guard(needed_lock);
    auto                        found = needed_loaded.find(soname);
    if ((found != needed_loaded.end()) &&
        ((*library_p = found->second.lock()) != nullptr)) {
        return UCS_OK;
    }
    for (auto it = needed_loaded.begin(); it != needed_loaded.end();) {
        it = it->second.expired() ? needed_loaded.erase(it) : std::next(it);
    }
    if (needed_loaded.size() >= kMaxNeededLoaded) {
        ucs_log(level,
                "ifunc '%s': cannot load %s: %zu libraries are loaded for "
                "shipped code already, the most a process loads; message "
                "dropped",
                ifunc.c_str(), soname, needed_loaded.size());
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        ucs_log(level,
                "ifunc '%s': cannot load %s, a library it was linked with: "
                "%s; message dropped (install it on the target, or add its "
                "directory to LD_LIBRARY_PATH)",
                ifunc.c_str(), soname, dlerror());
        return UCS_ERR_NO_ELEM;
    }
    *library_p            = std::make_shared<NeededLibrary>(handle);
    needed_loaded[soname] = *library_p;
    return UCS_OK;
}

} // namespace

ucs_status_t resolve_imports(const char                   *image,
                             const ucp_ifunc_image_desc_t &desc,
                             const std::string &name, ucs_log_level_t level,
                             ResolvedImports *resolved)
{
    std::string sonames;
    for (uint32_t i = 0; (i < desc.n_needed) && (desc.n_imports > 0); ++i) {
        const char *soname =
                image_string(image, desc, image_needed(image, desc, i));
        std::shared_ptr<NeededLibrary> library;
        ucs_status_t status = load_needed(soname, name, level, &library);
        if (status != UCS_OK) {
            return status;
        }
        resolved->libraries.push_back(std::move(library));
        sonames += std::string(sonames.empty() ? "" : ", ") + soname;
    }

    for (uint32_t i = 0; i < desc.n_imports; ++i) {
        auto        imp    = image_import(image, desc, i);
        const char *symbol = image_string(image, desc, imp.name_offset);
        /* The order the dynamic linker uses for a library's own code: the
         * global scope (this program first), then its dependencies. */
        void *address = dlsym(RTLD_DEFAULT, symbol);
        for (size_t lib = 0;
             (address == nullptr) && (lib < resolved->libraries.size());
             ++lib) {
            address = resolved->libraries[lib]->symbol(symbol);
        }
        if ((address == nullptr) && !(imp.flags & UCP_IFUNC_IMPORT_WEAK)) {
            ucs_log(level,
                    "ifunc '%s': symbol '%s' is neither in this process's "
                    "global scope nor in %s; message dropped (a symbol of "
                    "the target program needs the program linked with "
                    "-rdynamic; a library's, the ifunc built with -lLIB)",
                    name.c_str(), symbol,
                    sonames.empty() ? "a library the ifunc was linked with"
                                    : sonames.c_str());
            return UCS_ERR_NO_ELEM;
        }
        resolved->addresses.push_back(reinterpret_cast<uint64_t>(address));
    }
    return UCS_OK;
}

} // namespace ucx_ifunc
