/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "run": running one complete, validated message, whichever path
 * delivered it (a polled buffer, a channel slot, an active message): find
 * or link its code, then call NAME_main on its payload. Each message is
 * counted here (counters.h): as run by its path, or as dropped, by the
 * reason its code could not be found or linked.
 */
#ifndef UCP_IFUNC_RUN_H_
#define UCP_IFUNC_RUN_H_

#include "ucp/ifunc/load/context.h"
#include "ucp/ifunc/format/frame.h"

namespace ucx_ifunc {

/* Runs the full frame whose sealed, validated header is @a hdr, delivered
 * by @a path, a message of @a bytes (counted here as received, whether it
 * runs or not; 0 where the caller counted them on arrival); @a frame holds
 * its bytes (name and code image) from its start. @a payload:
 * hdr.payload_size bytes, 16-byte aligned. With @a pins, the caller means
 * to tell that peer that this target holds the code: the code is then
 * pinned for it (not evicted), and *@a announced is its index here (what
 * the peer's references name) if it was, else unchanged. */
ucs_status_t run_message(ContextState &state, RunPath path, uint64_t bytes,
                         const FrameHeader &hdr, const char *frame,
                         void *payload, void *target_args,
                         PeerPins *pins      = nullptr,
                         uint64_t *announced = nullptr);

/* Runs the reference frame whose sealed, validated header is @a hdr, with
 * code the target already holds; UCS_ERR_NO_ELEM (one warning, nothing
 * runs) if it holds no code under that index. Its hdr.frame_size bytes
 * count as received. Reported as run_message(). */
ucs_status_t run_reference(ContextState &state, RunPath path,
                           const RefHeader &hdr, void *payload,
                           void *target_args);

/* The same for a reference that arrived whole, with no header to check (an
 * active message; @a bytes as run_message() counts them): the code this
 * target indexes @a code_index (its CodeUse::code_index()),
 * @a payload_size bytes at @a payload (16-byte aligned); @a source keys
 * the warnings about it; @a hop_count as frame.h says; @a report its
 * report id, 0 for none. */
ucs_status_t run_reference(ContextState &state, RunPath path, uint64_t bytes,
                           uint64_t code_index, uint32_t source, void *payload,
                           size_t payload_size, void *target_args,
                           uint16_t hop_count = 0, uint16_t report = 0);

/* Why a message whose frame check (frame_validate(), ref_validate())
 * failed with @a status is dropped: a frame larger than the buffer or
 * message it is in is too large, any other malformed. */
Reject frame_reject(ucs_status_t status);

/* The status a delivery report gives for a message dropped for @a reason
 * (the table of ucp_ifunc_report_cb_t in ucp_ifunc.h). */
ucs_status_t report_status(Reject reason);

/* Reports the message of report id @a report (0: none asked) as dropped
 * for @a reason. */
inline void report_drop(uint16_t report, Reject reason)
{
    if (report != 0) {
        report_delivery(report, report_status(reason));
    }
}

} // namespace ucx_ifunc

#endif
