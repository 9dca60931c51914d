/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * UCX_IFUNC_* configuration, parsed by UCX's own configuration parser so
 * that UCX knows the variables (no "unused env variable" warning) and
 * reports misspelt ones. docs/configuration.md lists them.
 */
#ifndef UCP_IFUNC_CONFIG_H_
#define UCP_IFUNC_CONFIG_H_

#include <cstddef>
#include <string>

namespace ucx_ifunc {

struct Config {
    std::string lib_dir;        /* UCX_IFUNC_LIB_DIR */
    size_t      max_image_size; /* UCX_IFUNC_MAX_IMAGE_SIZE */
    bool        shm_direct;     /* UCX_IFUNC_SHM_DIRECT */
};

/* Parses the environment now. Registration calls it, so a program may set
 * the variables before it registers, as it may before ucp_init(). */
Config config_read();

/* The values of the last config_read(), for hot paths. */
bool   config_shm_direct();
size_t config_max_image_size();

} // namespace ucx_ifunc

#endif
