/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/deliver/run.h"

#include "ucp/ifunc/load/link.h"
#include "ucp/ifunc/sandbox/sandbox.h"

namespace ucx_ifunc {
namespace {

/* Why the code of a full frame could not be found or linked, by the status
 * CodeCache::lookup() returned (link.cc, trust.cc, image_check.cc). */
Reject link_reject(ucs_status_t status)
{
    switch (status) {
        case UCS_ERR_REJECTED:
            return Reject::untrusted;
        case UCS_ERR_INVALID_PARAM:
            return Reject::bad_code; /* malformed, or not its code id */
        case UCS_ERR_UNSUPPORTED:
            return Reject::wrong_isa;
        case UCS_ERR_NO_ELEM:
            return Reject::missing_import;
        case UCS_ERR_EXCEEDS_LIMIT:
            return Reject::too_large;
        default:
            return Reject::other;
    }
}

/* Runs the code of @a code on a message: sandboxed code in its slot, other
 * code by a call. A sandboxed message that faults, makes a refused host
 * call or runs over its budget ends there: counted here, warned about by
 * the slot once per code. */
ucs_status_t run_code(ContextState &state, const CodeUse &code, void *payload,
                      size_t size, void *target_args, Reject *reason)
{
    sandbox::Slot *slot = code.slot();
    if (slot == nullptr) {
        code.entry()(payload, size, target_args);
        return UCS_OK;
    }
    /* A payload larger than any before: its area grows once, counted in
     * the code's memory; the messages after it cost no more. */
    ucs_status_t status = (size > slot->payload_room())
                                  ? state.code.grow_payload(code, size)
                                  : UCS_OK;
    if (status == UCS_OK) {
        status = slot->run(code.sandbox_entry(), payload, size, target_args);
    }
    switch (status) {
        case UCS_OK:
            return status;
        case UCS_ERR_REJECTED:
            *reason = Reject::sandbox_fault;
            break;
        case UCS_ERR_TIMED_OUT:
            *reason = Reject::sandbox_budget;
            break;
        case UCS_ERR_EXCEEDS_LIMIT:
            *reason = Reject::too_large;
            break;
        default:
            *reason = Reject::other;
            break;
    }
    state.counters.count_reject(*reason);
    return status;
}

/* Runs @a code and, where its source asked (@a report), reports how it
 * ended. */
ucs_status_t run_reported(ContextState &state, const RunningMessage &running,
                          void *payload, size_t size, void *target_args,
                          uint16_t report)
{
    Reject       reason = Reject::other;
    ucs_status_t status =
            run_code(state, *running.code, payload, size, target_args, &reason);
    if (report != 0) {
        report_delivery_from(running.source, report,
                             (status == UCS_OK) ? UCS_OK
                                                : report_status(reason));
    }
    return status;
}

} // namespace

ucs_status_t report_status(Reject reason)
{
    switch (reason) {
        case Reject::untrusted:
            return UCS_ERR_REJECTED;
        case Reject::bad_frame:
        case Reject::bad_code:
            return UCS_ERR_INVALID_PARAM;
        case Reject::bad_version:
        case Reject::wrong_isa:
            return UCS_ERR_UNSUPPORTED;
        case Reject::missing_import:
            return UCS_ERR_NOT_IMPLEMENTED;
        case Reject::too_large:
            return UCS_ERR_EXCEEDS_LIMIT;
        case Reject::unknown_code:
            return UCS_ERR_NO_ELEM;
        case Reject::busy:
            return UCS_ERR_NO_RESOURCE;
        case Reject::lost:
            return UCS_ERR_MESSAGE_TRUNCATED;
        case Reject::sandbox_fault:
            return UCS_ERR_IO_ERROR;
        case Reject::sandbox_budget:
            return UCS_ERR_TIMED_OUT;
        default:
            return UCS_ERR_NO_MEMORY; /* a local failure of the target */
    }
}

Reject frame_reject(ucs_status_t status)
{
    return (status == UCS_ERR_EXCEEDS_LIMIT) ? Reject::too_large
                                             : Reject::bad_frame;
}

ucs_status_t run_message(ContextState &state, RunPath path, uint64_t bytes,
                         const FrameHeader &hdr, const char *frame,
                         void *payload, void *target_args, PeerPins *pins,
                         uint64_t *announced)
{
    CodeUse      code;
    ucs_status_t status = state.code.lookup(hdr, frame, &code);
    if (status != UCS_OK) {
        state.counters.count_bytes(bytes);
        state.counters.count_reject(link_reject(status));
        report_drop(hdr.report, link_reject(status));
        return status;
    }
    if ((pins != nullptr) && pins->pin(code)) {
        *announced = code.code_index(); /* what references name */
    }
    state.counters.count_run(path, bytes);
    RunningMessage running(state, code);
    running.hop_count = hdr.hop_count;
    return run_reported(state, running, payload, hdr.payload_size, target_args,
                        hdr.report);
}

ucs_status_t run_reference(ContextState &state, RunPath path,
                           const RefHeader &hdr, void *payload,
                           void *target_args)
{
    return run_reference(state, path, hdr.frame_size, hdr.code_index,
                         nonce_source_id(hdr.nonce), payload, hdr.payload_size,
                         target_args, hdr.hop_count, hdr.report);
}

ucs_status_t run_reference(ContextState &state, RunPath path, uint64_t bytes,
                           uint64_t code_index, uint32_t source, void *payload,
                           size_t payload_size, void *target_args,
                           uint16_t hop_count, uint16_t report)
{
    CodeUse      code;
    ucs_status_t status = state.code.lookup_index(code_index, source, &code);
    if (status != UCS_OK) {
        state.counters.count_bytes(bytes);
        state.counters.count_reject(Reject::unknown_code);
        report_drop(report, Reject::unknown_code);
        return status;
    }
    state.counters.count_run(path, bytes);
    RunningMessage running(state, code);
    running.hop_count = hop_count;
    return run_reported(state, running, payload, payload_size, target_args,
                        report);
}

} // namespace ucx_ifunc
