/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "register": finding NAME.so in UCX_IFUNC_LIB_DIR, loading it, and
 * looking up its payload functions and its code image. The source registers
 * explicitly; the target registers on the first message of a name.
 */
#ifndef UCP_IFUNC_REGISTRY_H_
#define UCP_IFUNC_REGISTRY_H_

#include "frame.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ucx_ifunc {

using PayloadBoundFn = size_t (*)(void *source_args, size_t source_args_size);
using PayloadInitFn  = int (*)(void *source_args, size_t source_args_size,
                              void *payload, size_t *payload_size);
using MainFn = void (*)(void *payload, size_t payload_size, void *target_args);

/* A loaded ifunc library. Shared by every handle and by every linked code
 * image that resolved imports through it; unloaded with the last owner. */
class Library {
public:
    Library(std::string name, std::string path, void *dl_handle);
    ~Library();
    Library(const Library &)            = delete;
    Library &operator=(const Library &) = delete;

    const std::string &name() const { return name_; }
    const std::string &path() const { return path_; }

    /* Looks @a symbol up in this library and its dependencies. */
    void *symbol(const char *symbol) const;

    PayloadBoundFn payload_bound = nullptr;
    PayloadInitFn  payload_init  = nullptr;
    /* Every frame of this ifunc starts with these bytes: the header
     * template (with the code id), the name and the code image. */
    std::vector<char> frame_prefix;

private:
    std::string name_;
    std::string path_;
    void       *dl_handle_;
};

/* Returns library @a name, loading it if no one holds it. @a name must be
 * valid (ifunc_name_valid). Logs one line and returns an error status if the
 * library cannot be loaded or is not an ifunc library. Thread-safe. */
ucs_status_t library_get(const char *name, std::shared_ptr<Library> *lib_p);

} // namespace ucx_ifunc

/* What ucp_ifunc_h points to. */
struct ucp_ifunc {
    std::shared_ptr<ucx_ifunc::Library> library;
};

#endif
