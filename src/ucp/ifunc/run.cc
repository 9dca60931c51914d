/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "run.h"

#include "link.h"

namespace ucx_ifunc {

ucs_status_t run_message(ContextState &state, const FrameHeader &hdr,
                         const char *frame, void *payload, void *target_args,
                         PeerPins *pins, bool *announced)
{
    CodeUse      code;
    ucs_status_t status = state.code.lookup(hdr, frame, &code);
    if (status != UCS_OK) {
        return status;
    }
    if (pins != nullptr) {
        *announced = pins->pin(code);
    }
    RunningMessage running(state, code);
    code.entry()(payload, hdr.payload_size, target_args);
    return UCS_OK;
}

ucs_status_t run_reference(ContextState &state, const RefHeader &hdr,
                           void *payload, void *target_args)
{
    return run_reference(state, header_code_id(hdr), nonce_source_id(hdr.nonce),
                         payload, hdr.payload_size, target_args);
}

ucs_status_t run_reference(ContextState &state, const CodeId &code_id,
                           uint32_t source, void *payload, size_t payload_size,
                           void *target_args)
{
    CodeUse      code;
    ucs_status_t status = state.code.lookup_ref(code_id, source, &code);
    if (status != UCS_OK) {
        return status;
    }
    RunningMessage running(state, code);
    code.entry()(payload, payload_size, target_args);
    return UCS_OK;
}

} // namespace ucx_ifunc
