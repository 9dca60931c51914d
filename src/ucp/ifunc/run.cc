/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "run.h"

#include "link.h"

namespace ucx_ifunc {

ucs_status_t run_message(ContextState &state, const FrameHeader &hdr,
                         const char *frame, void *payload, void *target_args,
                         PeerPins *pins, uint64_t *announced)
{
    CodeUse      code;
    ucs_status_t status = state.code.lookup(hdr, frame, &code);
    if (status != UCS_OK) {
        return status;
    }
    if ((pins != nullptr) && pins->pin(code)) {
        *announced = code.code_index(); /* what references name */
    }
    RunningMessage running(state, code);
    code.entry()(payload, hdr.payload_size, target_args);
    return UCS_OK;
}

ucs_status_t run_reference(ContextState &state, const RefHeader &hdr,
                           void *payload, void *target_args)
{
    return run_reference(state, hdr.code_index, nonce_source_id(hdr.nonce),
                         payload, hdr.payload_size, target_args);
}

ucs_status_t run_reference(ContextState &state, uint64_t code_index,
                           uint32_t source, void *payload, size_t payload_size,
                           void *target_args)
{
    CodeUse      code;
    ucs_status_t status = state.code.lookup_index(code_index, source, &code);
    if (status != UCS_OK) {
        return status;
    }
    RunningMessage running(state, code);
    code.entry()(payload, payload_size, target_args);
    return UCS_OK;
}

} // namespace ucx_ifunc
