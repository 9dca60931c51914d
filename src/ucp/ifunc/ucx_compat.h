/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The UCX calls whose signature differs between the UCX releases we build
 * against (1.13 to 1.18), chosen with UCX's own version macros so that no
 * generated header is needed. configure compiles this header against the
 * UCX it found (config/ucx.m4), so an unsupported release fails there, with
 * a message, rather than halfway through the build.
 */
#ifndef UCP_IFUNC_UCX_COMPAT_H_
#define UCP_IFUNC_UCX_COMPAT_H_

#include <ucp/api/ucp.h>
#include <ucp/api/ucp_version.h>
#include <ucs/config/parser.h>

/* The oldest UCX whose API this code is written for. */
#define UCP_IFUNC_UCX_MIN_VERSION UCP_VERSION(1, 13)

#if UCP_API_VERSION < UCP_IFUNC_UCX_MIN_VERSION
#error "ucx-ifunc needs UCX 1.13 or newer"
#endif

namespace ucx_ifunc {
namespace compat {

/* Fills @a opts from the defaults and the environment for the table of
 * @a entry. UCX 1.15 made the parser take the whole table entry (it marks
 * the entry as loaded); before, it took the fields and the prefix. */
inline ucs_status_t config_fill(void                           *opts,
                                ucs_config_global_list_entry_t *entry,
                                const char                     *env_prefix)
{
#if UCP_API_VERSION >= UCP_VERSION(1, 15)
    return ucs_config_parser_fill_opts(opts, entry, env_prefix, 0);
#else
    return ucs_config_parser_fill_opts(opts, entry->table, env_prefix,
                                       entry->prefix, 0);
#endif
}

/* Whether ucp_worker_fence() keeps its promise (what was issued before it
 * completes before what is issued after it) in the UCX this process runs.
 * Before UCX 1.16 the newer protocol engine (UCX_PROTO_ENABLE=y, then
 * experimental) could send the puts on either side of a fence over
 * different lanes without ordering them: measured on UCX 1.13.1 over shared
 * memory, about half of the seals overtook their bodies. So: from UCX 1.16
 * on, yes; before, only while UCX's configuration leaves that engine off.
 * Checked at run time, once: the library may run with another UCX than the
 * one it was built against. */
bool worker_fence_orders_puts();

} // namespace compat
} // namespace ucx_ifunc

#endif
