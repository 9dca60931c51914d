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

/* Whether ucp_worker_fence() is, in this process's UCX configuration, a
 * cheap fence that orders puts: the classic protocol engine
 * (UCX_PROTO_ENABLE=n: UCX 1.13 to 1.15's default) with one RMA lane and no
 * forced strong mode. Elsewhere it is either not enough or a blocking
 * flush: up to UCX 1.15 the newer engine could send the puts on either side
 * of a fence over different lanes without ordering them (measured on UCX
 * 1.13.1 over shared memory: about half of the seals overtook their bodies);
 * from UCX 1.16 on, with that engine or several lanes, the fence flushes
 * the whole worker and waits, progressing it, inside the call. The
 * variables are read once per process, as ucp_init() reads them; a context
 * configured otherwise through ucp_config_modify() is not seen. */
bool worker_fence_orders_puts();

} // namespace compat
} // namespace ucx_ifunc

#endif
