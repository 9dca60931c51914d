/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "registry.h"

#include "api_guard.h"
#include "config.h"
#include "image.h"
#include "link.h"

#include <ucs/debug/log_def.h>

#include <dlfcn.h>
#include <link.h>

#include <mutex>
#include <unordered_map>

namespace ucx_ifunc {
namespace {

std::mutex                                              registry_lock;
std::unordered_map<std::string, std::weak_ptr<Library>> loaded_libraries;

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

template <typename Fn>
bool bind_symbol(const Library &lib, const std::string &symbol, Fn *fn_p)
{
    *fn_p = reinterpret_cast<Fn>(lib.symbol(symbol.c_str()));
    if (*fn_p == nullptr) {
        ucs_error("ifunc '%s': %s does not define %s; is it an ifunc library "
                  "built with ucx-ifunc-cc?",
                  lib.name().c_str(), lib.path().c_str(), symbol.c_str());
        return false;
    }
    return true;
}

ucs_status_t library_load(const std::string        &name,
                          std::shared_ptr<Library> *lib_p)
{
    Config config = config_read();
    if (config.lib_dir.empty()) {
        ucs_error("ifunc '%s': UCX_IFUNC_LIB_DIR is not set; set it to the "
                  "directory that holds %s.so",
                  name.c_str(), name.c_str());
        return UCS_ERR_NO_ELEM;
    }

    std::string path = config.lib_dir + "/" + name + ".so";
    dlerror();
    void *dl_handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (dl_handle == nullptr) {
        const char *reason = dlerror();
        ucs_error("ifunc '%s': cannot load %s: %s", name.c_str(), path.c_str(),
                  reason ? reason : "unknown error");
        return UCS_ERR_NO_ELEM;
    }

    auto        lib = std::make_shared<Library>(name, path, dl_handle);
    const void *image;
    MainFn      main_fn;
    if (!bind_symbol(*lib, name + "_payload_bound", &lib->payload_bound) ||
        !bind_symbol(*lib, name + "_payload_init", &lib->payload_init) ||
        !bind_symbol(*lib, name + "_main", &main_fn) ||
        !bind_symbol(*lib, UCP_IFUNC_IMAGE_SYMBOL + name, &image)) {
        return UCS_ERR_NO_ELEM;
    }

    size_t       image_size;
    ucs_status_t status =
            image_check(image, symbol_size(image), name.c_str(), &image_size);
    if (status != UCS_OK) {
        return status;
    }

    if (image_size > UINT32_MAX / 2) {
        ucs_error("ifunc '%s': the code image of %s is %zu bytes; frames "
                  "carry at most 2 GiB of code",
                  name.c_str(), path.c_str(), image_size);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    lib->frame_prefix = frame_prefix(name.c_str(), image, image_size);
    ucs_debug("ifunc '%s': loaded %s, image %zu bytes, code id 0x%016llx",
              name.c_str(), path.c_str(), image_size,
              static_cast<unsigned long long>(
                      reinterpret_cast<const FrameHeader *>(
                              lib->frame_prefix.data())
                              ->code_id));
    *lib_p = std::move(lib);
    return UCS_OK;
}

} // namespace

Library::Library(std::string name, std::string path, void *dl_handle)
    : name_(std::move(name)), path_(std::move(path)), dl_handle_(dl_handle)
{
}

Library::~Library()
{
    dlclose(dl_handle_);
}

void *Library::symbol(const char *symbol) const
{
    return dlsym(dl_handle_, symbol);
}

ucs_status_t library_get(const char *name, std::shared_ptr<Library> *lib_p)
{
    std::lock_guard<std::mutex> guard(registry_lock);
    std::weak_ptr<Library>     &slot = loaded_libraries[name];
    std::shared_ptr<Library>    lib  = slot.lock();
    if (!lib) {
        ucs_status_t status = library_load(name, &lib);
        if (status != UCS_OK) {
            loaded_libraries.erase(name);
            return status;
        }
        slot = lib;
    }
    *lib_p = std::move(lib);
    return UCS_OK;
}

} // namespace ucx_ifunc

using namespace ucx_ifunc;

ucs_status_t ucp_register_ifunc(ucp_context_h context, const char *ifunc_name,
                                ucp_ifunc_h *ifunc_p)
{
    return api_call(__func__, [&]() {
        if ((context == nullptr) || (ifunc_p == nullptr)) {
            ucs_error("ucp_register_ifunc: context and ifunc_p must not be "
                      "NULL");
            return UCS_ERR_INVALID_PARAM;
        }
        if (!ifunc_name_valid(ifunc_name)) {
            ucs_error("ucp_register_ifunc: invalid ifunc name '%.80s': use a "
                      "C identifier of 1 to %d characters",
                      ifunc_name ? ifunc_name : "(null)", UCP_IFUNC_NAME_MAX);
            return UCS_ERR_INVALID_PARAM;
        }

        auto         ifunc  = std::make_unique<ucp_ifunc>();
        ucs_status_t status = library_get(ifunc_name, &ifunc->library);
        if (status != UCS_OK) {
            return status;
        }
        *ifunc_p = ifunc.release(); /* owned by the caller until deregistered */
        return UCS_OK;
    });
}

void ucp_deregister_ifunc(ucp_context_h, ucp_ifunc_h ifunc_h)
{
    std::unique_ptr<ucp_ifunc> release(ifunc_h);
}
