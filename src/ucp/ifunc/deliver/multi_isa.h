/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Messages of libraries built for several ISAs. ucp_ifunc_msg_create
 * writes, after the message's reference header (frame.h), an IsaTable: for
 * every other ISA the library carries, the header, name and image of that
 * ISA's full frame, and its reference header, both sealed. The payload is
 * not copied: a frame for another ISA is sent as its prefix followed by the
 * payload of the message's own frame. Everything lives in the message, as
 * for the message's own ISA, so a send reads and builds nothing else.
 */
#ifndef UCP_IFUNC_MULTI_ISA_H_
#define UCP_IFUNC_MULTI_ISA_H_

#include "ucp/ifunc/format/isa.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/load/registry.h"

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>

namespace ucx_ifunc {

/* The AM header of a reference (am.cc) is one word: the target's index of
 * the code (CodeCache::lookup_index: its slot in bits 0-23, the slot's
 * generation in bits 32-63), with in bits 24-31 how many bytes of the AM
 * data come before the payload. */
constexpr unsigned kAmLeadShift = 24;
constexpr uint64_t kAmLeadMask  = uint64_t(0xff) << kAmLeadShift;

/* The lead a reference's AM data may have: 8 bytes of the message before
 * its payload, which put the payload 16-byte aligned in UCX's eager
 * receive buffers, where data starts aligned after UCP's 8-byte header. */
constexpr uint64_t kAmRefLead = 8;

/* One other ISA's frames of a message. */
struct ForeignFrame {
    uint64_t machine;
    uint64_t prefix_offset; /* from the message's start: header, name,
                                image and zeros up to the payload offset */
    uint64_t prefix_size;   /* = that header's payload_offset */
    uint64_t frame_size;    /* of the full frame, seal included */
    CodeId   code;          /* of this ISA's image */
    /* Zeros up to the full frame's seal, then the seal: the last
     * tail_size bytes of tail are the frame's end. */
    uint8_t      tail[16];
    uint64_t     tail_size;
    ucp_dt_iov_t iov[3]; /* prefix, payload, tail: the frame as AM data */
};

/* Follows the reference header and seal of every message. */
struct IsaTable {
    uint64_t     am_lead; /* bytes before the payload a reference's AM
                             data may carry: kAmRefLead, or 0 */
    uint64_t     n_foreign;
    ForeignFrame foreign[kMaxMachines - 1];
    /* The message's own full frame, then each foreign one: what goes as
     * AM data to a target whose ISA is not known yet (am.cc). */
    ucp_dt_iov_t all_frames[1 + 3 * (kMaxMachines - 1)];
    size_t       all_frames_count;
    size_t       all_frames_size;
};

constexpr size_t msg_isa_table_offset(size_t frame_size)
{
    return msg_ref_offset(frame_size) + kMsgRefSize;
}

/* Bytes a message of @a lib needs after its IsaTable for the prefixes of
 * the other ISAs' frames. */
size_t foreign_prefixes_size(const Library &lib);

/* Writes the IsaTable (and the prefixes after it) of the sealed message
 * @a msg, which has room for them. */
void write_isa_table(const Library &lib, const ucp_ifunc_msg_t &msg);

inline const IsaTable &msg_isa_table(const ucp_ifunc_msg_t &msg)
{
    return *reinterpret_cast<const IsaTable *>(
            static_cast<const char *>(msg.frame) +
            msg_isa_table_offset(msg.frame_size));
}

/* Sets the report id (frame.h) of @a msg in each ISA's frame it carries:
 * its own (frame_set_report()) and every other's, sealed again, so that a
 * target of any ISA can report it. */
void msg_set_report(const ucp_ifunc_msg_t &msg, uint16_t report);

/* The frames of @a msg for @a machine; nullptr if the library was not
 * built for it (or it is this process's ISA: the message's own frame). */
const ForeignFrame *foreign_frame(const ucp_ifunc_msg_t &msg, uint16_t machine);

OutFrame foreign_full_frame(const ucp_ifunc_msg_t &msg, const ForeignFrame &f);

/* The code id of a message's image for an ISA (0: this process's), for
 * choose_code() (code_once.h); false if the library has none for it. */
struct MsgCodes {
    const ucp_ifunc_msg_t &msg;
    bool                   operator()(uint16_t machine, CodeId *code) const;
};

/* The same for a library (the default path sends from one). */
struct LibraryCodes {
    const Library &lib;
    bool           operator()(uint16_t machine, CodeId *code) const;
};

/* Logs that @a msg has no code for @a machine and says how to build it. */
void log_no_image_for(const char *function, const ucp_ifunc_msg_t &msg,
                      uint16_t machine);

} // namespace ucx_ifunc

#endif
