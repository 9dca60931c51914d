/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "run": running one complete, validated message, whichever path
 * delivered it (a polled buffer, a channel slot, an active message): find
 * or link its code, then call NAME_main on its payload.
 */
#ifndef UCP_IFUNC_RUN_H_
#define UCP_IFUNC_RUN_H_

#include "context.h"
#include "frame.h"

namespace ucx_ifunc {

/* Runs the full frame whose sealed, validated header is @a hdr; @a frame
 * holds its bytes (name and code image) from its start. @a payload:
 * hdr.payload_size bytes, 16-byte aligned. With @a pins, the caller means
 * to tell that peer that this target holds the code: the code is then
 * pinned for it (not evicted), and *@a announced is its index here (what
 * the peer's references name) if it was, else unchanged. */
ucs_status_t run_message(ContextState &state, const FrameHeader &hdr,
                         const char *frame, void *payload, void *target_args,
                         PeerPins *pins      = nullptr,
                         uint64_t *announced = nullptr);

/* Runs the reference frame whose sealed, validated header is @a hdr, with
 * code the target already holds; UCS_ERR_NO_ELEM (one warning, nothing
 * runs) if it holds no code under that index. */
ucs_status_t run_reference(ContextState &state, const RefHeader &hdr,
                           void *payload, void *target_args);

/* The same for a reference that arrived whole, with no header to check (an
 * active message): the code this target indexes @a code_index (its
 * CodeUse::code_index()), @a payload_size bytes at @a payload
 * (16-byte aligned); @a source keys the warnings about it. */
ucs_status_t run_reference(ContextState &state, uint64_t code_index,
                           uint32_t source, void *payload, size_t payload_size,
                           void *target_args);

} // namespace ucx_ifunc

#endif
