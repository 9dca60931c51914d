/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/deliver/multi_isa.h"

#include "ucp/ifunc/base/arch.h"

#include <ucs/debug/log_def.h>

#include <cstring>

namespace ucx_ifunc {

namespace {

size_t prefix_size_of(const ForeignImage &image)
{
    return align_up(image.frame_prefix.size(), kPayloadAlign);
}

const FrameHeader &own_header(const ucp_ifunc_msg_t &msg)
{
    return *static_cast<const FrameHeader *>(msg.frame);
}

} // namespace

size_t foreign_prefixes_size(const Library &lib)
{
    size_t size = 0;
    for (const ForeignImage &image : lib.foreign_images) {
        size += align_up(prefix_size_of(image), 64);
    }
    return size;
}

void write_isa_table(const Library &lib, const ucp_ifunc_msg_t &msg)
{
    char              *bytes        = static_cast<char *>(msg.frame);
    const FrameHeader &own          = own_header(msg);
    size_t             table_offset = msg_isa_table_offset(msg.frame_size);
    auto *table = reinterpret_cast<IsaTable *>(bytes + table_offset);
    /* Only what a send reads is written: this runs for every message. */
    table->n_foreign = 0;
    table->am_lead   = kAmRefLead;

    char *own_payload       = bytes + own.payload_offset;
    table->all_frames[0]    = {msg.frame, msg.frame_size};
    table->all_frames_count = 1;
    table->all_frames_size  = msg.frame_size;

    size_t prefix_offset = table_offset + align_up(sizeof(IsaTable), 64);
    for (const ForeignImage &image : lib.foreign_images) {
        ForeignFrame &f      = table->foreign[table->n_foreign++];
        size_t        ps     = prefix_size_of(image);
        char         *prefix = bytes + prefix_offset;
        std::memcpy(prefix, image.frame_prefix.data(),
                    image.frame_prefix.size());
        std::memset(prefix + image.frame_prefix.size(), 0,
                    ps - image.frame_prefix.size());

        /* The same message: nonce and payload; its own code and layout. */
        auto *hdr           = reinterpret_cast<FrameHeader *>(prefix);
        hdr->frame_size     = align_up(ps + own.payload_size, 8) + kSealSize;
        hdr->nonce          = own.nonce;
        hdr->payload_offset = uint32_t(ps);
        hdr->payload_size   = own.payload_size;
        hdr->seal           = frame_seal(*hdr);

        f.machine       = image.machine;
        f.prefix_offset = prefix_offset;
        f.prefix_size   = ps;
        f.frame_size    = hdr->frame_size;
        f.code          = header_code_id(*hdr);
        f.tail_size     = hdr->frame_size - ps - own.payload_size;
        std::memset(f.tail, 0, sizeof(f.tail));
        std::memcpy(f.tail + sizeof(f.tail) - kSealSize, &hdr->seal, kSealSize);

        f.iov[0] = {prefix, ps};
        f.iov[1] = {own_payload, own.payload_size};
        f.iov[2] = {f.tail + sizeof(f.tail) - f.tail_size, f.tail_size};
        for (const ucp_dt_iov_t &iov : f.iov) {
            table->all_frames[table->all_frames_count++] = iov;
        }
        table->all_frames_size += f.frame_size;
        prefix_offset += align_up(ps, 64);
    }
}

void msg_set_report(const ucp_ifunc_msg_t &msg, uint16_t report)
{
    char *bytes = static_cast<char *>(msg.frame);
    frame_set_report(bytes, msg.frame_size, report);
    auto *table = reinterpret_cast<IsaTable *>(
            bytes + msg_isa_table_offset(msg.frame_size));
    for (uint64_t i = 0; i < table->n_foreign; ++i) {
        ForeignFrame &f = table->foreign[i];
        auto *hdr   = reinterpret_cast<FrameHeader *>(bytes + f.prefix_offset);
        hdr->report = report;
        hdr->seal   = frame_seal(*hdr);
        std::memcpy(f.tail + sizeof(f.tail) - kSealSize, &hdr->seal, kSealSize);
    }
}

const ForeignFrame *foreign_frame(const ucp_ifunc_msg_t &msg, uint16_t machine)
{
    const IsaTable &table = msg_isa_table(msg);
    for (size_t i = 0; i < table.n_foreign; ++i) {
        if (table.foreign[i].machine == machine) {
            return &table.foreign[i];
        }
    }
    return nullptr;
}

bool MsgCodes::operator()(uint16_t machine, CodeId *code) const
{
    if ((machine == 0) || (machine == arch::elf_machine())) {
        const FrameHeader &own = own_header(msg);
        *code                  = CodeId{own.code_id_lo, own.code_id_hi};
        return true;
    }
    const ForeignFrame *foreign = foreign_frame(msg, machine);
    if (foreign == nullptr) {
        return false;
    }
    *code = foreign->code;
    return true;
}

bool LibraryCodes::operator()(uint16_t machine, CodeId *code) const
{
    if ((machine == 0) || (machine == arch::elf_machine())) {
        *code = lib.code_id;
        return true;
    }
    for (const ForeignImage &image : lib.foreign_images) {
        if (image.machine == machine) {
            *code = image.code_id;
            return true;
        }
    }
    return false;
}

OutFrame foreign_full_frame(const ucp_ifunc_msg_t &msg, const ForeignFrame &f)
{
    const char        *bytes = static_cast<const char *>(msg.frame);
    const FrameHeader &own   = own_header(msg);
    OutFrame           out   = {};
    out.parts[0]             = {bytes + f.prefix_offset, f.prefix_size, 0};
    out.parts[1]             = {bytes + own.payload_offset, own.payload_size,
                                f.prefix_size};
    out.n_parts              = 2;
    out.seal = reinterpret_cast<const uint64_t *>(f.tail + sizeof(f.tail) -
                                                  kSealSize);
    out.seal_offset = f.frame_size - kSealSize;
    out.size        = f.frame_size;
    return out;
}

void log_no_image_for(const char *function, const ucp_ifunc_msg_t &msg,
                      uint16_t machine)
{
    const char *name = static_cast<const char *>(msg.frame) + kNameOffset;
    ucs_error("%s: ifunc '%s' has no code for the target's ISA (%s); nothing "
              "was sent (build it with ucx-ifunc-cc --target %s,%s)",
              function, name, machine_name(machine).c_str(),
              machine_triplet(arch::elf_machine()), machine_triplet(machine));
}

} // namespace ucx_ifunc
