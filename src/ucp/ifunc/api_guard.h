/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The public functions are C: no C++ exception may cross them. Allocation
 * failures become UCS_ERR_NO_MEMORY with one log line.
 */
#ifndef UCP_IFUNC_API_GUARD_H_
#define UCP_IFUNC_API_GUARD_H_

#include <ucs/debug/log_def.h>
#include <ucs/type/status.h>

#include <exception>
#include <new>

namespace ucx_ifunc {

template <typename Body>
ucs_status_t api_call(const char *function, Body &&body) noexcept
{
    try {
        return body();
    } catch (const std::bad_alloc &) {
        ucs_error("%s: out of memory", function);
        return UCS_ERR_NO_MEMORY;
    } catch (const std::exception &e) {
        ucs_error("%s: internal error: %s", function, e.what());
        return UCS_ERR_IO_ERROR;
    }
}

} // namespace ucx_ifunc

#endif
