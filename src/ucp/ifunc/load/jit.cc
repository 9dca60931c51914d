/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The step "jit" as the rest of the runtime sees it: the JIT module
 * (jit_module.h), loaded once, on the first compile.
 */
#include "ucp/ifunc/load/jit.h"

#include "ucp/ifunc/load/jit_module.h"

#include <ucs/debug/log_def.h>

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace ucx_ifunc {

struct JitCode::Impl {
    const ucx_ifunc_jit_module_t *module;
    void                         *code;

    ~Impl()
    {
        if (code != nullptr) {
            module->release(code);
        }
    }
};

JitCode::JitCode(std::unique_ptr<Impl> impl, void *entry, size_t memory)
    : impl_(std::move(impl)), entry_(entry), memory_(memory)
{
}

JitCode::~JitCode() = default;

namespace {

/* The module once loaded, for jit_memory_in_use(), which loads nothing. */
std::atomic<const ucx_ifunc_jit_module_t *> loaded{nullptr};

#if HAVE_LLVM
std::string real(const char *path)
{
    char resolved[PATH_MAX];
    return (realpath(path, resolved) != nullptr) ? resolved : "";
}

/* Whether @a path is @a dir or below it. */
bool under(const std::string &path, const std::string &dir)
{
    return !dir.empty() && (path.rfind(dir + "/", 0) == 0);
}

/* The module of this copy of the runtime: the one of the build tree only
 * when this code runs from that build tree (tests, uninstalled programs),
 * never merely because the tree is still there: an installed library
 * would load what a later build left there. Otherwise the installed one
 * when it runs from $(libdir), else the one beside it (an install moved
 * elsewhere, $(libdir)/ucx-ifunc/ as installed). */
std::string module_path()
{
    Dl_info info;
    if ((dladdr(reinterpret_cast<void *>(&module_path), &info) == 0) ||
        (info.dli_fname == nullptr)) {
        return UCX_IFUNC_JIT_MODULE_INSTALLED;
    }
    std::string self = real(info.dli_fname);
    std::string build_module(UCX_IFUNC_JIT_MODULE_BUILD);
    /* .../BUILDDIR/.libs/libucp_ifunc_jit.so: the build tree */
    std::string build_dir =
            real(build_module.substr(0, build_module.rfind("/.libs/")).c_str());
    if (under(self, build_dir)) {
        return build_module;
    }
    if (under(self, real(UCX_IFUNC_LIBDIR))) {
        return UCX_IFUNC_JIT_MODULE_INSTALLED;
    }
    std::string beside =
            self.substr(0, self.rfind('/')) + "/ucx-ifunc/libucp_ifunc_jit.so";
    if (!self.empty() && (access(beside.c_str(), R_OK) == 0)) {
        return beside;
    }
    return UCX_IFUNC_JIT_MODULE_INSTALLED;
}
#endif

/* The module, loaded on first use (and kept: LLVM cannot be unloaded);
 * nullptr, with the reason in @a why, if it cannot be. */
const ucx_ifunc_jit_module_t *module(std::string *why)
{
#if HAVE_LLVM
    struct LoadedModule {
        const ucx_ifunc_jit_module_t *module = nullptr;
        std::string                   failure;

        LoadedModule()
        {
            std::string path   = module_path();
            void       *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (handle == nullptr) {
                const char *error = dlerror();
                failure           = "cannot load its JIT module: " +
                          std::string(error ? error : path.c_str());
                return;
            }
            using Get = const ucx_ifunc_jit_module_t *(*)();
            auto get  = reinterpret_cast<Get>(
                    dlsym(handle, UCX_IFUNC_JIT_MODULE_SYMBOL));
            const ucx_ifunc_jit_module_t *found =
                    (get != nullptr) ? get() : nullptr;
            if ((found == nullptr) ||
                (found->abi != UCX_IFUNC_JIT_MODULE_ABI)) {
                failure = path + " is not this release's JIT module";
                dlclose(handle);
                return;
            }
            module = found;
            loaded.store(found, std::memory_order_release);
        }
    };
    /* Loaded once, by the first caller; the others wait for it. A
     * function-local static rather than std::call_once, whose
     * thread-locals are libstdc++'s (see sandbox.cc's set_up_thread). */
    static const LoadedModule once;
    *why = once.failure;
    return once.module;
#else
    *why = "this target was built without LLVM (configure --with-llvm): it "
           "runs no bitcode images";
    return nullptr;
#endif
}

ucs_status_t call_resolver(void *arg, const char *name, uint64_t *address)
{
    try {
        return (*static_cast<const JitResolver *>(arg))(name, address);
    } catch (...) {
        return UCS_ERR_NO_MEMORY;
    }
}

} // namespace

bool jit_available()
{
    std::string why;
    return module(&why) != nullptr;
}

ucs_status_t jit_compile(const void *bitcode, size_t size,
                         const std::string &triple, const std::string &entry,
                         const JitResolver &resolve, const JitLimits &limits,
                         std::unique_ptr<JitCode> *code, std::string *why)
{
    const ucx_ifunc_jit_module_t *jit = module(why);
    if (jit == nullptr) {
        if (why->rfind("this target", 0) != 0) {
            *why = "this target " + *why;
        }
        return UCS_ERR_UNSUPPORTED;
    }
    auto impl                = std::make_unique<JitCode::Impl>();
    impl->module             = jit;
    impl->code               = nullptr;
    char         reason[512] = "";
    void        *entry_p     = nullptr;
    size_t       memory      = 0;
    ucs_status_t status =
            jit->compile(bitcode, size, triple.c_str(), entry.c_str(),
                         call_resolver, const_cast<JitResolver *>(&resolve),
                         limits.timeout, limits.max_memory, &impl->code,
                         &entry_p, &memory, reason, sizeof(reason));
    if (status != UCS_OK) {
        *why = reason;
        return status;
    }
    *code = std::make_unique<JitCode>(std::move(impl), entry_p, memory);
    return UCS_OK;
}

size_t jit_memory_in_use()
{
    const ucx_ifunc_jit_module_t *jit = loaded.load(std::memory_order_acquire);
    return (jit != nullptr) ? jit->memory_in_use() : 0;
}

} // namespace ucx_ifunc
