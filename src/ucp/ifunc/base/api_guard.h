/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The public functions are C: no C++ exception may cross them. Every public
 * function's body runs inside one of the guards below, the one for what the
 * function returns (contrib/check-api-guard.py checks that each does):
 *
 *   ucs_status_t      api_call       allocation failure: UCS_ERR_NO_MEMORY,
 *                                    another exception: UCS_ERR_IO_ERROR
 *   ucs_status_ptr_t  api_call_ptr   the same, as UCS_STATUS_PTR(status)
 *   void              api_call_void  nothing to return: it only logs
 *   const char *      api_call_str   NULL
 *
 * Each logs one line that names the function: "out of memory", or the
 * exception's text.
 */
#ifndef UCP_IFUNC_API_GUARD_H_
#define UCP_IFUNC_API_GUARD_H_

#include <ucs/debug/log_def.h>
#include <ucs/type/status.h>

#include <exception>
#include <new>
#include <utility>

namespace ucx_ifunc {

/* What a public function returns when its body threw, one type per kind of
 * result: tags rather than the result types themselves, since a status
 * pointer and other pointers are alike to the compiler. */
namespace api_result {

struct Status {
    using type = ucs_status_t;
    static type failed(ucs_status_t status) { return status; }
};

struct StatusPtr {
    using type = ucs_status_ptr_t;
    static type failed(ucs_status_t status) { return UCS_STATUS_PTR(status); }
};

struct None {
    using type = void;
    static void failed(ucs_status_t) {}
};

struct String {
    using type = const char *;
    static type failed(ucs_status_t) { return nullptr; }
};

struct Count {
    using type = unsigned;
    static type failed(ucs_status_t) { return 0; }
};

} // namespace api_result

/* Runs @a body, the body of public function @a function, and turns what it
 * throws into a log line and Result's failure value. */
template <typename Result, typename Body>
typename Result::type api_call_as(const char *function, Body &&body) noexcept
{
    try {
        return std::forward<Body>(body)();
    } catch (const std::bad_alloc &) {
        ucs_error("%s: out of memory", function);
        return Result::failed(UCS_ERR_NO_MEMORY);
    } catch (const std::exception &e) {
        ucs_error("%s: internal error: %s", function, e.what());
        return Result::failed(UCS_ERR_IO_ERROR);
    }
}

template <typename Body>
ucs_status_t api_call(const char *function, Body &&body) noexcept
{
    return api_call_as<api_result::Status>(function, std::forward<Body>(body));
}

template <typename Body>
ucs_status_ptr_t api_call_ptr(const char *function, Body &&body) noexcept
{
    return api_call_as<api_result::StatusPtr>(function,
                                              std::forward<Body>(body));
}

template <typename Body>
void api_call_void(const char *function, Body &&body) noexcept
{
    api_call_as<api_result::None>(function, std::forward<Body>(body));
}

template <typename Body>
const char *api_call_str(const char *function, Body &&body) noexcept
{
    return api_call_as<api_result::String>(function, std::forward<Body>(body));
}

template <typename Body>
unsigned api_call_count(const char *function, Body &&body) noexcept
{
    return api_call_as<api_result::Count>(function, std::forward<Body>(body));
}

} // namespace ucx_ifunc

#endif
