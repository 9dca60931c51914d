/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The fuzz harnesses' log handler: every line is formatted (so that the
 * sanitizers see a bad format or argument) and then dropped, as a fuzzed
 * peer makes the target warn at every input.
 */
#ifndef UCX_IFUNC_TEST_FUZZ_DROP_LOG_H_
#define UCX_IFUNC_TEST_FUZZ_DROP_LOG_H_

#include <ucs/debug/log_def.h>

#include <cstdarg>
#include <cstdio>

namespace ucx_ifunc {
namespace fuzz {

inline ucs_log_func_rc_t drop_log_line(const char *, unsigned, const char *,
                                       ucs_log_level_t,
                                       const ucs_log_component_config_t *,
                                       const char *format, va_list ap)
{
    char    line[512];
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(line, sizeof(line), format, copy);
    va_end(copy);
    return UCS_LOG_FUNC_RC_STOP;
}

} // namespace fuzz
} // namespace ucx_ifunc

#endif
