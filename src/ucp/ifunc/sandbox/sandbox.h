/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "sandbox": the runtime of sandboxed code on the target (x86-64
 * Linux; docs/security.md, "Sandboxed code"). A Slot is one code's 4 GiB
 * of address space with its gate page, image, stack and payload area; it
 * runs one message at a time on the calling thread, with %r14 and the %gs
 * base set to its base, and comes back with a status whatever the code
 * does: faults, a budget overrun (a watchdog thread) and refused host calls
 * end the message, not the process. The verifier (sandbox_verify.h) is
 * the caller's: a slot maps the text read-only until seal().
 */
#ifndef UCP_IFUNC_SANDBOX_H_
#define UCP_IFUNC_SANDBOX_H_

#include "ucp/ifunc/format/image.h"
#include "ucp/ifunc/format/sandbox_layout.h"

#include <ucp/api/ucp_ifunc_sandbox.h>
#include <ucs/type/status.h>

#include <signal.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ucx_ifunc {
namespace sandbox {

/* Rights of a region of a slot, as the sandbox sees them. */
enum SlotRights : unsigned {
    kSlotRead  = 1u << 0,
    kSlotWrite = 1u << 1,
    kSlotExec  = 1u << 2
};

/* One segment of the code to map: its bytes and the sandbox's rights. */
struct SlotSegment {
    uint64_t       vaddr;    /* from image vaddr 0; page aligned */
    uint64_t       mem_size; /* the rest beyond file_size is zeroes */
    const uint8_t *bytes;    /* file_size bytes */
    uint64_t       file_size;
    unsigned       rights; /* kSlotRead | kSlotWrite, or read + exec */
};

/* An 8-byte patch: RELATIVE (image base + addend) or the gate bundle of an
 * import (+ addend). */
struct SlotReloc {
    uint64_t vaddr;
    bool     import;
    uint32_t import_index;
    int64_t  addend;
};

/* What a slot maps: the parts of a code image (slot_image_from()) or, for
 * tests, hand-assembled code. */
struct SlotImage {
    std::string              name; /* the ifunc, for log lines */
    std::vector<SlotSegment> segments;
    std::vector<SlotReloc>   relocs;
    std::vector<std::string> imports; /* by index; granted names only */
    uint64_t                 map_size      = 0; /* image vaddrs [0, this) */
    uint64_t                 got_ptr_vaddr = 0; /* 0: none */
    size_t                   payload_limit = 0; /* largest payload */
    /* The key that signed the code, if any: grants may name it. */
    bool                    has_signer = false;
    std::array<uint8_t, 32> signer{};
};

/* The parts of @a image, checked by image_check() and described by
 * @a desc, for a slot; the pointers point into @a image. */
ucs_status_t slot_image_from(const char                   *image,
                             const ucp_ifunc_image_desc_t &desc,
                             const std::string &name, size_t payload_limit,
                             SlotImage *slot_image);

/* Whether this process can run sandboxed code (FSGSBASE); if not, why. */
bool sandbox_supported(std::string *why);

/* The time one message may run, in seconds; takes effect at the
 * watchdog's next look. UCX_IFUNC_SANDBOX_BUDGET when the first sandbox
 * runs, until this is called. */
void sandbox_set_budget(double seconds);

/* While one lives, the signals sandboxed code needs (its faults and the
 * watchdog's) are delivered on this thread whatever it blocks; after, the
 * thread blocks again what it blocked. Slot::run holds one per message: a
 * system call, two where the thread blocked any of them. A caller that
 * runs messages in a loop holds one around it to pay once per loop; what
 * runs between the messages must then not block these signals. Nested
 * ones do nothing. */
class SignalScope {
public:
    SignalScope();
    ~SignalScope();
    SignalScope(const SignalScope &)            = delete;
    SignalScope &operator=(const SignalScope &) = delete;

private:
    bool     outermost_ = false;
    bool     in_batch_  = false;
    sigset_t thread_mask_{};
};

/* Around a loop that may run sandboxed messages (a progress call, a
 * channel's poll): the first SignalScope inside it unblocks the sandbox's
 * signals, the others do nothing, and the batch blocks again what the
 * thread blocked when it ends. A loop that runs no sandboxed message pays
 * nothing; one that runs many pays one system call (two where the thread
 * blocked any of them). What runs in the loop between sandboxed messages
 * (native code, callbacks) must not block these signals. */
class SignalBatch {
public:
    SignalBatch();
    ~SignalBatch();
    SignalBatch(const SignalBatch &)            = delete;
    SignalBatch &operator=(const SignalBatch &) = delete;
};

/* The payload area a new slot maps: small messages never grow it. */
constexpr size_t kInitialPayloadRoom = 4096;

/* Why the last message on a slot ended early. */
struct SlotFault {
    int      signal;  /* 0 for a refused host call or the budget */
    uint64_t pc;      /* slot offset of the instruction, or 0 */
    uint64_t address; /* slot offset of the address it touched, or 0 */
};

class Slot {
    struct Token {}; /* only create() makes slots */

public:
    explicit Slot(Token) {}
    /* Reserves the slot and maps @a image into it: the text stays
     * read-only (not executable) until seal(). An import that is not
     * granted is UCS_ERR_NO_ELEM, logged once with its name. */
    static ucs_status_t create(const SlotImage       &image,
                               std::unique_ptr<Slot> *slot);
    ~Slot();
    Slot(const Slot &)            = delete;
    Slot &operator=(const Slot &) = delete;

    uintptr_t base() const { return base_; }
    /* The text as mapped, for the verifier; a multiple of kBundleSize. */
    const uint8_t *text() const;
    uint64_t       text_vaddr() const { return text_vaddr_; }
    uint64_t       text_size() const { return text_size_; }
    uint32_t       n_imports() const { return n_imports_; }
    uint64_t       map_size() const { return map_size_; }
    /* Where the payload is copied, and the most it may ever take. */
    uint8_t *payload_area() const;
    size_t   payload_limit() const { return payload_limit_; }
    /* The bytes of the payload area mapped now: run() takes payloads of
     * at most this many. A slot starts with kInitialPayloadRoom and grows
     * only through grow_payload(), so the owner counts every byte. */
    size_t payload_room() const
    {
        return payload_room_.load(std::memory_order_relaxed);
    }
    /* Maps the payload area up to @a room bytes (rounded up to pages), if
     * it is smaller: UCS_ERR_EXCEEDS_LIMIT beyond payload_limit()'s pages.
     * Waits for a message that runs. It never shrinks: the slot's end
     * frees it. */
    ucs_status_t grow_payload(size_t room);
    /* Bytes of memory the sandbox can make resident in the slot: the
     * image, its import table, the gate page, the stack and the payload
     * area as mapped now (granted memory is the host's, not counted). */
    uint64_t mapped_bytes() const { return fixed_bytes_ + payload_room(); }

    /* Makes the (verified) text executable. */
    ucs_status_t seal();

    /* Runs the code at image vaddr @a entry_vaddr on a copy of the
     * payload: UCS_OK, UCS_ERR_REJECTED (a fault or a refused host call),
     * UCS_ERR_TIMED_OUT (the budget), UCS_ERR_BUSY (this thread is in a
     * sandbox already), UCS_ERR_EXCEEDS_LIMIT (payload larger than
     * payload_room()),
     * UCS_ERR_UNSUPPORTED (no FSGSBASE), UCS_ERR_REJECTED also when not
     * sealed. Another thread's message on the slot is waited for. */
    ucs_status_t run(uint64_t entry_vaddr, const void *payload, size_t size,
                     void *target_args);

    /* Why the last message ended early. */
    SlotFault last_fault() const { return last_fault_; }

    /* Maps @a length bytes of the grant window at slot offset @a offset
     * with @a rights, or takes them away with rights 0 (the grants API,
     * which calls these). Waits for a message that runs. */
    ucs_status_t map_granted(uint64_t offset, uint64_t length, unsigned rights);
    const std::string &name() const { return name_; }
    /* Whether the code was signed by @a key. */
    bool signed_by(const std::array<uint8_t, 32> &key) const
    {
        return has_signer_ && (signer_ == key);
    }

    /* Whether [@a address, + @a length) lies in one region the sandbox
     * may access with @a rights; the host address of it in @a host. A
     * pointer counts modulo 4 GiB, as the sandbox's own accesses do. */
    bool check_range(uint64_t address, uint64_t length, unsigned rights,
                     uint64_t *host) const;

    /* What a layer above keeps for the code in this slot (the handle of
     * its own code that it got through a host call): touched only by the
     * thread that runs the slot's message, which holds the slot. */
    std::shared_ptr<void> &host_data() { return host_data_; }

    /* A token bucket that a layer above meters host calls of the code in
     * this slot with (its sends): touched only by the thread that runs
     * the slot's message. */
    struct CallBudget {
        double   tokens  = 0;
        uint64_t last_ns = 0; /* 0: never used, full */
    };
    CallBudget &send_budget() { return send_budget_; }

private:
    struct Region {
        uint64_t begin; /* slot offsets */
        uint64_t end;
        unsigned rights;
    };

    ucs_status_t map_image(const SlotImage &image);
    ucs_status_t map_region(uint64_t offset, uint64_t length, unsigned rights);
    void         write_gate(const SlotImage &image);
    void         drop_regions(uint64_t begin, uint64_t end);

    uintptr_t               reservation_   = 0; /* of kReserve bytes */
    uintptr_t               base_          = 0;
    uint64_t                text_vaddr_    = 0;
    uint64_t                text_size_     = 0;
    uint64_t                text_map_      = 0; /* text's pages */
    uint32_t                n_imports_     = 0;
    uint64_t                map_size_      = 0;
    size_t                  payload_limit_ = 0;
    std::atomic<size_t>     payload_room_{0};
    uint64_t                fixed_bytes_ = 0; /* mapped_bytes() less payload */
    bool                    sealed_      = false;
    bool                    attached_    = false; /* to the grants */
    std::string             name_;
    bool                    has_signer_ = false;
    std::array<uint8_t, 32> signer_{};
    std::vector<Region>     regions_;
    std::mutex              run_lock_;
    SlotFault               last_fault_{};
    std::atomic<bool>       warned_{false};
    std::shared_ptr<void>   host_data_;
    CallBudget              send_budget_;
};

/* Names of the host functions a sandbox may import, in no order. */
std::vector<std::string> granted_functions();

/* A host function's checking wrapper: called on the host's stack with the
 * sandbox's six integer argument registers as they are, its result goes
 * back in %rax. It must check every argument before it uses it: a pointer
 * with running_slot()->check_range(), a handle against what it handed
 * out; a bad one returns an error status and touches nothing. */
using HostCall = uint64_t (*)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                              uint64_t);

/* Lets sandboxes import @a name, calling @a wrapper: how a layer above
 * grants its own functions (at load, before any slot is made; a slot's
 * imports are resolved when it is made). */
void grant_host_function(const char *name, HostCall wrapper);

/* The slot whose host call runs on this thread, or nullptr outside one. */
Slot *running_slot();

} // namespace sandbox
/* What the exported sandbox calls do (api/sandbox_api.cc catches what
 * they throw): ucp_ifunc_NAME is NAME here, with the same arguments and
 * results. */
ucs_status_t sandbox_mem_alloc(size_t                                length,
                               const ucp_ifunc_sandbox_mem_params_t *params,
                               void                                **address_p);
ucs_status_t sandbox_mem_free(void *address);
ucs_status_t sandbox_grant(void *address, size_t length, unsigned rights,
                           const char                             *ifunc_name,
                           const ucp_ifunc_sandbox_grant_params_t *params);

} // namespace ucx_ifunc

#endif
