/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "deliver", the send core that every path shares: the code of a
 * message is chosen once for its target (choose_code, code_once.h), what
 * goes is built once (a reference needs nothing built: its payload is the
 * caller's; a message carries its code), and one path writes it. Raw puts
 * (send.cc), channels (channel.cc), active messages (am.cc) and the default
 * path, which writes through a peer's channel or its active messages
 * (peer.cc), implement SendPath; each writes in its own framing and keeps
 * its own flow control, and none chooses the code again.
 */
#ifndef UCP_IFUNC_SEND_CORE_H_
#define UCP_IFUNC_SEND_CORE_H_

#include "ucp/ifunc/deliver/code_once.h"
#include "ucp/ifunc/deliver/multi_isa.h"
#include "ucp/ifunc/deliver/send.h"
#include "ucp/ifunc/format/frame.h"

#include <ucp/api/ucp_ifunc.h>
#include <ucs/sys/compiler_def.h>

#include <cstddef>
#include <cstdint>

namespace ucx_ifunc {

/* What a reference carries besides the code's index. */
struct Reference {
    const void *payload;
    size_t      length;    /* of the payload */
    uint64_t    nonce;     /* the message's; 0: a new one */
    uint16_t    hop_count; /* frame.h */
    uint16_t    report;    /* frame.h; 0: none asked */
};

/* One message as the core hands it to a path. */
struct Outgoing {
    const CodeChoice      *choice; /* made once, for the path's target */
    const ucp_ifunc_msg_t *msg;    /* built whole (its code in it), or
                                      nullptr: a reference to be made
                                      from @a ref, nothing built */
    Reference              ref;    /* with no msg: the caller's payload */
};

/* What a path does with what the core chose. Each call returns UCS_OK (or
 * UCS_INPROGRESS) once the path has the message, UCS_ERR_NO_RESOURCE when
 * it has no room now and wrote nothing, or an error. */
class SendPath {
public:
    /* A reference to the code the target holds (choice.code_index), with
     * the payload. */
    virtual ucs_status_t write_ref(const Outgoing &out) = 0;
    /* The message with its code (out.msg): the image of choice.machine, or
     * every ISA's while the target's ISA is unknown (0). */
    virtual ucs_status_t write_full(const Outgoing &out) = 0;

protected:
    ~SendPath() = default;
};

/* The Outgoing of @a msg, built whole, with the code @a choice chose. What
 * a reference to it carries is read only where one goes (reference_of()):
 * a message with its code needs none of it. */
inline Outgoing outgoing_of(const ucp_ifunc_msg_t &msg,
                            const CodeChoice      &choice)
{
    return Outgoing{&choice, &msg, {}};
}

/* What a reference for @a out carries: the caller's payload, or that of
 * the message built whole with its nonce, hop count and report id, from
 * the reference header the message keeps beside its frame (frame.h). */
inline Reference reference_of(const Outgoing &out)
{
    if (out.msg == nullptr) {
        return out.ref;
    }
    const ucp_ifunc_msg_t &msg  = *out.msg;
    const auto            *full = static_cast<const FrameHeader *>(msg.frame);
    const RefHeader       &ref  = msg_ref_template(msg);
    return Reference{static_cast<const char *>(msg.frame) +
                             full->payload_offset,
                     ref.payload_size, ref.nonce, ref.hop_count, ref.report};
}

/* The core's last step, the same for every path: a reference where the
 * target holds the code, else the message with it. A template over the
 * path's own type, which is final: the calls are direct, and inline
 * where the path's are. */
template <typename Path>
inline ucs_status_t write_chosen(Path &path, const Outgoing &out)
{
    return out.choice->by_ref ? path.write_ref(out) : path.write_full(out);
}

/* Sends @a msg, built whole, through @a path with the code @a choice
 * chose for the path's target; @a function names the public call in the
 * error logged when the library has no image for the target's ISA. */
template <typename Path>
inline ucs_status_t send_built(Path &path, const ucp_ifunc_msg_t &msg,
                               const CodeChoice &choice, const char *function)
{
    if (ucs_unlikely(choice.status != UCS_OK)) {
        log_no_image_for(function, msg, choice.machine);
        return choice.status;
    }
    return write_chosen(path, outgoing_of(msg, choice));
}

} // namespace ucx_ifunc

#endif
