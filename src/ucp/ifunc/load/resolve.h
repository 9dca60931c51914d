/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "resolve": the addresses of a code image's imports on the target,
 * without the ifunc's library. Each import is looked up in the process's
 * global scope (the program, which exports its symbols with -rdynamic, and
 * the libraries it loaded), then in the libraries the image says the
 * ifunc was linked with, loaded by soname through the normal search path.
 * Only trusted images get here (trust.h): loading a library runs its
 * constructors.
 */
#ifndef UCP_IFUNC_RESOLVE_H_
#define UCP_IFUNC_RESOLVE_H_

#include "ucp/ifunc/format/image.h"

#include <ucs/debug/log_def.h>
#include <ucs/type/status.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ucx_ifunc {

/* A library loaded for imports; shared by every linked image that needs it
 * and unloaded with the last. */
class NeededLibrary;

struct ResolvedImports {
    std::vector<uint64_t>                       addresses; /* by import */
    std::vector<std::shared_ptr<NeededLibrary>> libraries; /* keep loaded */
};

/* Resolves the imports of the checked image @a image of ifunc @a name.
 * A missing library or symbol is logged at @a level (one line naming it
 * and what fixes it) and returns UCS_ERR_NO_ELEM. */
ucs_status_t resolve_imports(const char                   *image,
                             const ucp_ifunc_image_desc_t &desc,
                             const std::string &name, ucs_log_level_t level,
                             ResolvedImports *resolved);

} // namespace ucx_ifunc

#endif
