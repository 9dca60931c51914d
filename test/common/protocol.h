/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What the test (the target) asks its source peer to do, over the OOB
 * channel. One request, one reply; during a stress run the target also
 * streams credit messages (8 bytes: frames consumed so far).
 */
#ifndef UCX_IFUNC_TEST_PROTOCOL_H_
#define UCX_IFUNC_TEST_PROTOCOL_H_

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace test {

enum class Op : uint32_t {
    register_ifunc,   /* name → value: handle index */
    deregister_ifunc, /* handle */
    send,             /* handle, offset, slot_size (0: unknown), reserved = the
                  target's ELF machine (0: the peer's), data = source args
                  → value: frame size */
    get_frame,        /* handle, data = source args → data: the frame */
    put_raw,          /* offset, data = bytes to put */
    stress,           /* handle, count, seed, slots, slot_size */
    /* The delivery paths with code sent once; flags: a PathFlags path. */
    path_open,   /* channel: data = the channel's blob; am: seed = AM id,
                    offset = the listener's port with kPathListener */
    path_send,   /* handle, count copies of one message, data = source args
                   → value: sends that found no free slot first */
    path_stress, /* handle, count, seed: random payloads, as stress */
    path_query,  /* → value: sent with code, elapsed_ns: sent by ref */
    path_close,
    path_machine, /* → value: the target's ISA as the path knows it */
    /* Forged messages on the open path (an attacker's): count variants of
     * one message of handle (data = source args), each with its code (a
     * VariantFlags kind | PathFlags); seed numbers them. → value: sent */
    path_send_variants,
    /* Active messages of the peer's own making to AM id seed: data = the
     * AM header, count = bytes of zero data each, slots = how many, all
     * in flight at once; flags: AmRawFlags. → status of the first that
     * failed, value: how many completed with UCS_OK */
    am_raw,
    worker_address, /* → data: the peer's worker address */
    quit
};

/* Request::flags of the path_* requests. */
enum PathFlags : uint32_t {
    kPathChannel  = 0,
    kPathAm       = 1,
    kPathMask     = 1,
    kPathWithCode = 2, /* UCP_IFUNC_SEND_FLAG_WITH_CODE */
    kPathPipeline = 4, /* AM: post every send before waiting for any */
    /* path_open, AM: on an endpoint of its own to the target's UCP listener
     * on 127.0.0.1, port in offset, with UCP_ERR_HANDLING_MODE_PEER */
    kPathListener = 8,
    /* path_send with kPathPipeline: a first reply (UCS_INPROGRESS) once
     * every send is posted, before the final one */
    kPathReportPosted = 16
};

/* Request::flags of path_send_variants, beside the PathFlags. */
enum VariantFlags : uint32_t {
    kVariantTrailing = 0, /* 8 bytes after the image: no signature covers
                              them, so a signed image stays signed */
    kVariantRenamed  = 16 /* another name of the same length: new code
                              that runs under UCX_IFUNC_TRUST=any */
};

/* Request::flags of am_raw. */
enum AmRawFlags : uint32_t {
    kAmRawRndv  = 1, /* UCP_AM_SEND_FLAG_RNDV, else UCP_AM_SEND_FLAG_EAGER */
    kAmRawReply = 2, /* UCP_AM_SEND_FLAG_REPLY */
    /* data = the AM header (offset bytes), then the AM data (count is not
     * read) */
    kAmRawData = 4
};

/* Request::flags of a send. */
enum SendFlags : uint32_t {
    /* Leave it to the library to refuse a frame past the target's buffer
     * (the peer checks nothing itself). */
    kSendUnchecked = 1
};

/* Request::flags of a stress run. */
enum StressFlags : uint32_t {
    /* Send with ucp_ifunc_send_nbx, naming the worker and the slot size,
     * instead of ucp_ifunc_send_nbix. */
    kStressSendNbx = 1
};

struct Request {
    Op       op;
    uint32_t handle;
    uint32_t flags;
    uint32_t reserved;
    uint64_t offset;
    uint64_t count;
    uint64_t seed;
    uint64_t slots;
    uint64_t slot_size;
    char     name[64];
};

struct Reply {
    int32_t  status; /* ucs_status_t */
    uint32_t reserved;
    uint64_t value;
    uint64_t elapsed_ns;
};

/* Setup, target → source: where to write, and the target's ISA (the two
 * may differ: test/cross/run.sh). Same layout on every LP64 ISA. */
struct TargetInfo {
    uint64_t buffer_address;
    uint64_t buffer_size;
    uint16_t machine; /* ELF machine */
    uint16_t padding[3];
};

/* The ELF machine of this program's code. */
inline uint16_t own_elf_machine()
{
#if defined(__x86_64__)
    return EM_X86_64;
#elif defined(__aarch64__)
    return EM_AARCH64;
#elif defined(__powerpc64__)
    return EM_PPC64;
#endif
}

template <typename Header>
std::vector<char> pack(const Header &header, const void *data = nullptr,
                       size_t size = 0)
{
    std::vector<char> message(sizeof(header) + size);
    std::memcpy(message.data(), &header, sizeof(header));
    if (size > 0) {
        std::memcpy(message.data() + sizeof(header), data, size);
    }
    return message;
}

template <typename Header>
Header unpack(const std::vector<char> &message,
              std::vector<char>       *data = nullptr)
{
    Header header{};
    if (message.size() >= sizeof(header)) {
        std::memcpy(&header, message.data(), sizeof(header));
        if (data != nullptr) {
            data->assign(message.begin() + sizeof(header), message.end());
        }
    }
    return header;
}

} // namespace test

#endif
