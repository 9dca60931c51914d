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

/* Runs the message whose sealed, validated header is @a hdr. @a frame holds
 * the frame's bytes from its start: with the code image for a full frame,
 * at least the name for a reference. @a payload: hdr.payload_size bytes,
 * 16-byte aligned. */
ucs_status_t run_message(ContextState &state, const FrameHeader &hdr,
                         const char *frame, void *payload, void *target_args);

} // namespace ucx_ifunc

#endif
