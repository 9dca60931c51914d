/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/peer/peer_net.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <set>
#include <sstream>

namespace ucx_ifunc {
namespace {

/* UCX's shared-memory transports and the aliases that name several. */
const std::set<std::string> kShmTransports = {"posix", "sysv", "cma", "knem",
                                              "xpmem"};

std::set<std::string> expand(const std::string &name)
{
    if ((name == "sm") || (name == "shm") || (name == "all")) {
        return kShmTransports;
    }
    if (name == "mm") {
        return {"posix", "sysv", "xpmem"};
    }
    if (kShmTransports.count(name) != 0) {
        return {name};
    }
    return {};
}

/* A context without RMA must not advertise puts on TCP: a UCP peer with
 * RMA would then write into it with UCT TCP put requests, which the
 * receiving transport carries out at any address without a key (UCX 1.22
 * sends them, 1.13 and 1.18 did not; known-issues.md, finding 1). Without
 * the capability such a peer falls back to software puts, which this
 * context drops. Up to UCX 1.16 a transport's key is named without its
 * table's prefix; from 1.17 with it, and other spellings are refused (1.22)
 * or warned about (1.13), so the one this UCX takes is chosen at run time. */
ucs_status_t refuse_tcp_puts(ucp_config_t *config)
{
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    const bool   prefixed = (major > 1) || (minor >= 17);
    const char  *name     = prefixed ? "TCP_PUT_ENABLE" : "PUT_ENABLE";
    ucs_status_t status   = ucp_config_modify(config, name, "n");
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_worker_create: UCX %u.%u refused %s=n (%s); "
                  "without it a network peer could write into this process "
                  "with TCP puts",
                  major, minor, name, ucs_status_string(status));
    }
    return status;
}

} // namespace

OwnedWorker::~OwnedWorker()
{
    if (worker_ != nullptr) {
        ucp_worker_destroy(worker_);
    }
    if (context_ != nullptr) {
        ucp_cleanup(context_);
    }
}

ucs_status_t OwnedWorker::create(const char *what, uint64_t features,
                                 const std::string            &tls,
                                 ucs_thread_mode_t             thread_mode,
                                 std::unique_ptr<OwnedWorker> *owned_p)
{
    auto          owned = std::make_unique<OwnedWorker>();
    ucp_config_t *config;
    ucs_status_t  status = ucp_config_read(nullptr, nullptr, &config);
    if (status == UCS_OK) {
        if (!tls.empty()) {
            status = ucp_config_modify(config, "TLS", tls.c_str());
        }
        if ((status == UCS_OK) && !(features & UCP_FEATURE_RMA)) {
            status = refuse_tcp_puts(config);
        }
        ucp_params_t params = {};
        params.field_mask =
                UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
        params.features          = features;
        params.mt_workers_shared = 0;
        if (status == UCS_OK) {
            status = ucp_init(&params, config, &owned->context_);
        }
        ucp_config_release(config);
    }
    if (status != UCS_OK) {
        owned->context_ = nullptr;
        ucs_error("ucp_ifunc_worker_create: the %s UCP context (UCX_TLS %s) "
                  "could not be made: %s",
                  what, tls.empty() ? "as set" : tls.c_str(),
                  ucs_status_string(status));
        return status;
    }
    ucp_worker_params_t wparams = {};
    wparams.field_mask          = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode         = thread_mode;
    status = ucp_worker_create(owned->context_, &wparams, &owned->worker_);
    if (status != UCS_OK) {
        owned->worker_ = nullptr;
        ucs_error("ucp_ifunc_worker_create: the %s UCP worker could not be "
                  "made: %s",
                  what, ucs_status_string(status));
        return status;
    }
    ucp_address_t *address;
    size_t         address_size;
    status = ucp_worker_get_address(owned->worker_, &address, &address_size);
    if (status != UCS_OK) {
        ucs_error("ucp_ifunc_worker_create: ucp_worker_get_address of the "
                  "%s worker failed: %s",
                  what, ucs_status_string(status));
        return status;
    }
    const char *bytes = reinterpret_cast<const char *>(address);
    owned->address_.assign(bytes, bytes + address_size);
    ucp_worker_release_address(owned->worker_, address);
    *owned_p = std::move(owned);
    return UCS_OK;
}

std::string shm_transports(const std::string &tls)
{
    std::string list    = tls.empty() ? std::string("all") : tls;
    bool        negated = (list[0] == '^');
    if (negated) {
        list.erase(0, 1);
    }
    std::set<std::string> named;
    std::stringstream     names(list);
    std::string           name;
    while (std::getline(names, name, ',')) {
        for (const std::string &shm : expand(name)) {
            named.insert(shm);
        }
    }
    std::set<std::string> chosen;
    if (negated) {
        std::set_difference(kShmTransports.begin(), kShmTransports.end(),
                            named.begin(), named.end(),
                            std::inserter(chosen, chosen.end()));
    } else {
        chosen = named;
    }
    if (chosen.empty()) {
        return "";
    }
    /* Aliases where they say the same, so that UCX does not warn about a
     * transport this host lacks (knem, xpmem). */
    if (chosen == kShmTransports) {
        return "sm,self";
    }
    std::string result;
    for (const std::string &shm : chosen) {
        result += shm + ",";
    }
    return result + "self";
}

std::string net_transports(const std::string &tls)
{
    if (tls.empty() || (tls == "all") || (tls == "^")) {
        return "";
    }
    bool                     negated = (tls[0] == '^');
    std::vector<std::string> names;
    std::stringstream        list(negated ? tls.substr(1) : tls);
    std::string              name;
    bool                     has_tcp = false;
    while (std::getline(list, name, ',')) {
        if ((name == "tcp") || (name == "all")) {
            has_tcp = true;
        } else {
            names.push_back(name);
        }
    }
    if (has_tcp != negated) {
        return tls; /* tcp is let in already */
    }
    if (!negated) {
        return tls + ",tcp";
    }
    /* "^...,tcp,...": the same list without tcp */
    std::string result = "^";
    for (const std::string &kept : names) {
        result += kept + ",";
    }
    result.pop_back();
    return result.empty() ? std::string("") : result;
}

} // namespace ucx_ifunc
