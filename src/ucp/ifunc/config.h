/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * UCX_IFUNC_* configuration, parsed by UCX's own configuration parser so
 * that UCX knows the variables (no "unused env variable" warning) and
 * reports misspelt ones. The README's configuration table lists them.
 */
#ifndef UCP_IFUNC_CONFIG_H_
#define UCP_IFUNC_CONFIG_H_

#include <cstddef>
#include <string>

namespace ucx_ifunc {

struct Config {
    std::string lib_dir;                /* UCX_IFUNC_LIB_DIR */
    size_t      max_image_size = 0;     /* UCX_IFUNC_MAX_IMAGE_SIZE */
    bool        shm_direct     = true;  /* UCX_IFUNC_SHM_DIRECT */
    bool        perf_map       = false; /* UCX_IFUNC_PERF_MAP */
    bool        gdb_jit        = true;  /* UCX_IFUNC_GDB_JIT */
};

/* Parses the environment now. Each UCP context keeps the values it read
 * (context.h); a context reads them again whenever it loads a library, so a
 * program may set the variables before it registers, as it may before
 * ucp_init(). */
Config config_read();

/* UCX_IFUNC_SHM_DIRECT as of the last config_read() in any context. It is
 * process-wide because the send call gets only an endpoint, and UCP offers
 * no way from an endpoint to its context. */
bool config_shm_direct();

} // namespace ucx_ifunc

#endif
