/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What ucx_ifunc_perftest and ifunc_cost share about the ifunc API: owners
 * of its handles, and the size of a message once its code has been sent.
 */
#ifndef UCX_IFUNC_PERFTEST_IFUNC_HANDLES_H_
#define UCX_IFUNC_PERFTEST_IFUNC_HANDLES_H_

#include <ucp/api/ucp_ifunc.h>

#include <cstring>
#include <memory>
#include <type_traits>

namespace perftest {

/* unique_ptr deleters for the handles of the ifunc API. */
template <typename Handle, void (*release)(Handle)>
struct Releaser {
    void operator()(Handle handle) const { release(handle); }
};

template <typename Handle, void (*release)(Handle)>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>,
                              Releaser<Handle, release>>;

/* The size of the frame that names its code instead of carrying it, as the
 * code-once paths send it after the first: a 56-byte header and the payload
 * (docs/design.md; payload_size is at byte 40 of the full frame's header). */
inline size_t reference_frame_size(const ucp_ifunc_msg_t &msg)
{
    uint64_t payload_size;
    std::memcpy(&payload_size, static_cast<const char *>(msg.frame) + 40,
                sizeof(payload_size));
    return (56 + payload_size + 7) / 8 * 8;
}

} // namespace perftest

#endif
