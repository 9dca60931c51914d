/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The version query. configure passes the package version in
 * UCX_IFUNC_VERSION_{MAJOR,MINOR,RELEASE}; the header's API version must be
 * the same major.minor.
 */
#include "ucp/ifunc/base/api_guard.h"

#include <ucp/api/ucp_ifunc.h>

#ifndef UCX_IFUNC_VERSION_RELEASE
#error "configure defines UCX_IFUNC_VERSION_MAJOR, _MINOR and _RELEASE"
#endif

static_assert((UCX_IFUNC_VERSION_MAJOR == UCP_IFUNC_API_MAJOR) &&
                      (UCX_IFUNC_VERSION_MINOR == UCP_IFUNC_API_MINOR),
              "the package version (configure.ac) and the API version "
              "(ucp_ifunc.h) disagree");

#define UCX_IFUNC_STRINGIFY_(_x) #_x
#define UCX_IFUNC_STRINGIFY(_x) UCX_IFUNC_STRINGIFY_(_x)

void ucp_ifunc_get_version(unsigned *major_version, unsigned *minor_version,
                           unsigned *release_number)
{
    ucx_ifunc::api_call_void(__func__, [&]() {
        *major_version  = UCP_IFUNC_API_MAJOR;
        *minor_version  = UCP_IFUNC_API_MINOR;
        *release_number = UCX_IFUNC_VERSION_RELEASE;
    });
}

const char *ucp_ifunc_get_version_string(void)
{
    return ucx_ifunc::api_call_str(__func__, []() {
        return UCX_IFUNC_STRINGIFY(UCX_IFUNC_VERSION_MAJOR) "." UCX_IFUNC_STRINGIFY(
                UCX_IFUNC_VERSION_MINOR) "." UCX_IFUNC_STRINGIFY(UCX_IFUNC_VERSION_RELEASE);
    });
}
