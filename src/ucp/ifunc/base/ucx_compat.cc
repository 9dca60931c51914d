/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/base/ucx_compat.h"

#include <ucs/debug/log_def.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ucx_ifunc {
namespace compat {
namespace {

/* The value of UCX variable @a name (without "UCX_") in UCX's configuration
 * as the environment and config files set it, read the way ucp_init() reads
 * it; "" when this UCX has no such variable; "?" when it cannot be read. */
std::string ucx_config_value(const char *name)
{
    ucp_config_t *config;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) {
        return "?";
    }
    char  *text   = nullptr;
    size_t length = 0;
    FILE  *stream = open_memstream(&text, &length);
    if (stream != nullptr) {
        ucp_config_print(config, stream, nullptr, UCS_CONFIG_PRINT_CONFIG);
        fclose(stream);
    }
    ucp_config_release(config);
    if (text == nullptr) {
        return "?";
    }

    /* One "UCX_NAME=value" per line. */
    std::string key   = std::string("\nUCX_") + name + "=";
    std::string all   = "\n" + std::string(text, length);
    size_t      start = all.find(key);
    std::free(text);
    if (start == std::string::npos) {
        return "";
    }
    start += key.size();
    return all.substr(start, all.find('\n', start) - start);
}

} // namespace

bool worker_fence_orders_puts()
{
    static const bool weak_and_ordered = []() {
        std::string proto = ucx_config_value("PROTO_ENABLE");
        /* UCX_MAX_RMA_LANES is an alias of this one (UCX 1.14 on). */
        std::string lanes = ucx_config_value("MAX_RMA_RAILS");
        std::string mode  = ucx_config_value("FENCE_MODE");
        bool        ok = (proto == "n") && (lanes.empty() || (lanes == "1")) &&
                  (mode != "strong");
        ucs_debug("ifunc send: UCX_PROTO_ENABLE=%s UCX_MAX_RMA_RAILS=%s "
                  "UCX_FENCE_MODE=%s: seals on put paths ordered by %s",
                  proto.c_str(), lanes.empty() ? "(none)" : lanes.c_str(),
                  mode.empty() ? "(none)" : mode.c_str(),
                  ok ? "ucp_worker_fence where the worker is known"
                     : "an endpoint flush");
        return ok;
    }();
    return weak_and_ordered;
}

} // namespace compat
} // namespace ucx_ifunc
