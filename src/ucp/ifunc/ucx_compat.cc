/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucx_compat.h"

#include <ucs/debug/log_def.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ucx_ifunc {
namespace compat {
namespace {

/* Whether UCX's configuration, as the environment sets it, enables the
 * newer protocol engine. Read the way UCX reads it for ucp_init(). */
bool new_protocols_enabled()
{
    ucp_config_t *config;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) {
        return true; /* unknown: assume the worse case */
    }
    char  *text   = nullptr;
    size_t length = 0;
    FILE  *stream = open_memstream(&text, &length);
    if (stream != nullptr) {
        ucp_config_print(config, stream, nullptr, UCS_CONFIG_PRINT_CONFIG);
        fclose(stream);
    }
    ucp_config_release(config);
    bool enabled = (text == nullptr) ||
                   (std::strstr(text, "UCX_PROTO_ENABLE=y") != nullptr);
    std::free(text);
    return enabled;
}

} // namespace

bool worker_fence_orders_puts()
{
    static const bool reliable = []() {
        unsigned major = 0, minor = 0, release = 0;
        ucp_get_version(&major, &minor, &release);
        bool fixed = (major > 1) || ((major == 1) && (minor >= 16));
        bool ok    = fixed || !new_protocols_enabled();
        ucs_debug("ifunc send: UCX %u.%u.%u, seals on put paths ordered by "
                  "%s",
                  major, minor, release,
                  ok ? "ucp_worker_fence where the worker is known"
                     : "an endpoint flush (the fence of this UCX does not "
                       "order the new protocols' puts)");
        return ok;
    }();
    return reliable;
}

} // namespace compat
} // namespace ucx_ifunc
