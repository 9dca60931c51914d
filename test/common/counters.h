/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Reading a context's runtime counters (ucp_ifunc_context_query) in the
 * unit and integration tests.
 */
#ifndef UCX_IFUNC_TEST_COUNTERS_H_
#define UCX_IFUNC_TEST_COUNTERS_H_

#include <ucp/api/ucp_ifunc.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace test {

constexpr uint64_t kAllCounterFields = UCP_IFUNC_CONTEXT_ATTR_FIELD_RUN |
                                       UCP_IFUNC_CONTEXT_ATTR_FIELD_BYTES |
                                       UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED |
                                       UCP_IFUNC_CONTEXT_ATTR_FIELD_CODES;

/* The counters of @a context that @a fields asks for; the others keep a
 * filler (0xee bytes), so a test can see that they were left alone. */
inline ucp_ifunc_context_attr_t
query_counters(ucp_context_h context, uint64_t fields = kAllCounterFields)
{
    ucp_ifunc_context_attr_t attr;
    std::memset(&attr, 0xee, sizeof(attr));
    attr.field_mask = fields;
    EXPECT_EQ(UCS_OK, ucp_ifunc_context_query(context, &attr));
    return attr;
}

/* Messages dropped, whatever the reason. */
inline uint64_t rejected_total(const ucp_ifunc_context_attr_t &a)
{
    return a.rejected_untrusted + a.rejected_bad_frame +
           a.rejected_bad_version + a.rejected_bad_code + a.rejected_wrong_isa +
           a.rejected_missing_import + a.rejected_too_large +
           a.rejected_unknown_code + a.rejected_busy + a.rejected_lost +
           a.rejected_other;
}

} // namespace test

#endif
