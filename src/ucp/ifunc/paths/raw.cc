/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "paths", raw puts: the paper's path, a message written into a
 * buffer of the target's that the caller names (ucp_ifunc_send_nbx), its
 * code in every message. The frame is stored where the buffer is mapped
 * here; else, where the caller gave the buffer's size, put with its seal
 * last (send.h); else written only after a get of the slot's first word
 * said it is empty and large enough (GuardedSend).
 */
#include "ucp/ifunc/paths/raw.h"

#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/base/config.h"
#include "ucp/ifunc/deliver/multi_isa.h"
#include "ucp/ifunc/deliver/send.h"
#include "ucp/ifunc/deliver/send_core.h"
#include "ucp/ifunc/format/frame.h"

#include <ucs/debug/log_def.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace ucx_ifunc {
namespace {

/* What word 0 of a slot says to a sender of a frame of @a size bytes on
 * the paper's raw path: the target leaves the slot's size (as polled last)
 * in word 0 of an empty slot, and word 0 of a frame while the slot is in
 * use; anything else is a slot it has not polled yet. */
enum class SlotState { fits, too_small, busy, unknown };

SlotState slot_state(uint64_t word0, size_t size)
{
    if (is_empty_slot_word(word0)) {
        return (size <= empty_slot_capacity(word0)) ? SlotState::fits
                                                    : SlotState::too_small;
    }
    return (uint32_t(word0) == kFrameMagic) ? SlotState::busy
                                            : SlotState::unknown;
}

/* Logs why a frame is refused where the sender reads the slot's word at
 * once; out of the way of the frames that go. */
[[gnu::cold, gnu::noinline]] ucs_status_t refuse(const char *function,
                                                 uint64_t word0, size_t size)
{
    if (slot_state(word0, size) == SlotState::too_small) {
        ucs_error("%s: frame of %zu bytes does not fit the target's %zu-byte "
                  "buffer; nothing was written",
                  function, size, empty_slot_capacity(word0));
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    ucs_error("%s: the target's buffer still holds a message it has not "
              "run; nothing was written (send to a free slot, or wait for "
              "the target to poll this one)",
              function);
    return UCS_ERR_NO_RESOURCE;
}

/* Where a sender reads the slot's word at once (it maps the target's
 * memory): refuses what does not fit or would overwrite a message the
 * target has not taken yet, before writing any of it; a slot not polled
 * yet is written, as the paper's rings write ahead of the target. Returns
 * UCS_OK to write. */
inline ucs_status_t refuse_at_once(const char *function, uint64_t word0,
                                   size_t size)
{
    SlotState state = slot_state(word0, size);
    return ((state == SlotState::fits) || (state == SlotState::unknown))
                   ? UCS_OK
                   : refuse(function, word0, size);
}

/* A frame on the paper's raw path, stored directly. */
ucs_status_t store_raw(const char *function, void *slot, const OutFrame &out)
{
    /* The line is fetched for writing, as the copy below will write it
     * anyway: reading it first must not cost a second transfer between the
     * cores. */
    arch::prefetch_for_write(slot);
    ucs_status_t status = refuse_at_once(
            function, slot_word(slot, 0)->load(std::memory_order_relaxed),
            out.size);
    if (status == UCS_OK) {
        store_direct(slot, out);
    }
    return status;
}

/* A frame for a slot whose size this process can neither see (the target's
 * memory is not mapped here: TCP) nor was told (no
 * UCP_IFUNC_SEND_FIELD_REMOTE_SIZE). Writing it blindly could write past
 * the target's buffer, and UCX writes what a put carries wherever it says
 * (a SIGSEGV in the target over TCP). So the slot's first word is read
 * first, with a get: the target's empty-slot word says how large the slot
 * is as polled now; a frame there, or no empty-slot word yet (the target
 * has not polled it), means "not ready", and the word is read again until
 * kSlotWaitNs have passed. Only then is the frame put, from a copy: the
 * caller's message may be freed once the endpoint is flushed, and these
 * puts start later, from a callback. */
struct GuardedSend {
    static constexpr uint64_t kSlotWaitNs = 10ull * 1000 * 1000 * 1000;

    const char       *function;
    ucp_ep_h          ep;
    ucp_rkey_h        rkey;
    uint64_t          remote_addr;
    std::vector<char> body; /* the frame up to its seal */
    uint64_t          seal;
    uint64_t          slot_word = 0; /* what the get read */
    uint64_t          deadline_ns;
};

uint64_t now_ns()
{
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count());
}

/* Starts the get of the slot's first word into send->slot_word: UCS_OK if
 * it completed at once, UCS_INPROGRESS if slot_word_get_done() takes the
 * send over, else the error. */
ucs_status_t read_slot_word(std::unique_ptr<GuardedSend> &send);

/* Puts the frame of @a send, the seal after a flush, from its copy. */
void put_guarded(std::unique_ptr<GuardedSend> send)
{
    GuardedSend &g            = *send;
    uint64_t     seal_address = g.remote_addr + g.body.size();
    ucs_status_t status =
            put(g.ep, g.body.data(), g.body.size(), g.remote_addr, g.rkey);
    if (!UCS_STATUS_IS_ERR(status)) {
        status = seal_after_flush(g.ep, g.seal, seal_address, g.rkey, nullptr,
                                  std::move(g.body));
    }
    if (UCS_STATUS_IS_ERR(status)) {
        ucs_error("%s: put of the frame failed: %s", g.function,
                  ucs_status_string(status));
    }
}

/* The slot's first word came by a get that did not complete at once
 * (TCP): write, refuse, or read it again while the slot is not ready. */
void slot_word_read(std::unique_ptr<GuardedSend> send, ucs_status_t status)
{
    for (;;) {
        GuardedSend &g = *send;
        if (status != UCS_OK) {
            ucs_error("%s: reading the size of the target's buffer failed: "
                      "%s; nothing was written",
                      g.function, ucs_status_string(status));
            return;
        }
        size_t size = g.body.size() + kSealSize;
        switch (slot_state(g.slot_word, size)) {
            case SlotState::fits:
                put_guarded(std::move(send));
                return;
            case SlotState::too_small:
                ucs_error("%s: frame of %zu bytes does not fit the target's "
                          "%zu-byte buffer; nothing was written",
                          g.function, size, empty_slot_capacity(g.slot_word));
                return;
            default:
                break;
        }
        if (now_ns() > g.deadline_ns) {
            ucs_error("%s: the target's buffer at 0x%llx was not ready for "
                      "%llu s: %s; nothing was written (poll a buffer before "
                      "handing out its rkey, or give ucp_ifunc_send_nbx its "
                      "size with UCP_IFUNC_SEND_FIELD_REMOTE_SIZE)",
                      g.function,
                      static_cast<unsigned long long>(g.remote_addr),
                      static_cast<unsigned long long>(GuardedSend::kSlotWaitNs /
                                                      1000000000ull),
                      (slot_state(g.slot_word, size) == SlotState::busy)
                              ? "it still holds a message the target has not "
                                "run"
                              : "the target has not polled it, so its size "
                                "is unknown");
            return;
        }
        status = read_slot_word(send);
        if (status == UCS_INPROGRESS) {
            return; /* slot_word_get_done() goes on */
        }
    }
}

void slot_word_get_done(void *request, ucs_status_t status, void *user_data)
{
    std::unique_ptr<GuardedSend> send(static_cast<GuardedSend *>(user_data));
    ucp_request_free(request);
    slot_word_read(std::move(send), status);
}

ucs_status_t read_slot_word(std::unique_ptr<GuardedSend> &send)
{
    ucp_request_param_t param;
    param.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send      = slot_word_get_done;
    param.user_data    = send.get();
    GuardedSend     &g = *send;
    ucs_status_ptr_t request =
            ucp_get_nbx(g.ep, &g.slot_word, sizeof(g.slot_word), g.remote_addr,
                        g.rkey, &param);
    if (UCS_PTR_IS_PTR(request)) {
        send.release(); /* slot_word_get_done() owns it now */
        return UCS_INPROGRESS;
    }
    return UCS_PTR_STATUS(request);
}

/* Sends @a out with a GuardedSend. A transport that reads the target's
 * memory at once (shared memory without direct stores) gets the answer of
 * a direct store, before the call returns. */
ucs_status_t guarded_send(const char *function, ucp_ep_h ep,
                          const OutFrame &out, uint64_t remote_addr,
                          ucp_rkey_h rkey)
{
    auto send         = std::make_unique<GuardedSend>();
    send->function    = function;
    send->ep          = ep;
    send->rkey        = rkey;
    send->remote_addr = remote_addr;
    send->body.resize(out.seal_offset);
    for (size_t i = 0; i < out.n_parts; ++i) {
        std::memcpy(send->body.data() + out.parts[i].offset, out.parts[i].data,
                    out.parts[i].size);
    }
    send->seal          = *out.seal;
    send->deadline_ns   = now_ns() + GuardedSend::kSlotWaitNs;
    ucs_status_t status = read_slot_word(send);
    if (status == UCS_OK) {
        status = refuse_at_once(function, send->slot_word, out.size);
        if (status != UCS_OK) {
            return status;
        }
        put_guarded(std::move(send));
    } else if (status != UCS_INPROGRESS) {
        ucs_error("%s: reading the size of the target's buffer failed: %s; "
                  "nothing was written",
                  function, ucs_status_string(status));
        return status;
    }
    return UCS_INPROGRESS;
}
template <typename T>
T param_value(const ucp_ifunc_send_params_t *params, uint64_t field,
              T ucp_ifunc_send_params_t::*member, T fallback)
{
    return ((params != nullptr) && (params->field_mask & field))
                   ? params->*member
                   : fallback;
}

/* A target's buffer as a path of the send core (send_core.h): the frame
 * with its code, stored where the buffer is mapped here, else put. */
class RawPath final : public SendPath {
public:
    RawPath(const char *function, ucp_ep_h ep, uint64_t remote_addr,
            ucp_rkey_h rkey, const ucp_ifunc_send_params_t *params)
        : function_(function), ep_(ep), remote_addr_(remote_addr), rkey_(rkey),
          params_(params)
    {
    }

    /* The raw path never chooses a reference (send_frame()). */
    ucs_status_t write_ref(const Outgoing &) override
    {
        return UCS_ERR_UNSUPPORTED;
    }

    ucs_status_t write_full(const Outgoing &out) override
    {
        const ucp_ifunc_msg_t &msg     = *out.msg;
        uint16_t               machine = out.choice->machine;
        const ForeignFrame    *foreign = (machine != arch::elf_machine())
                                                 ? foreign_frame(msg, machine)
                                                 : nullptr;
        OutFrame               frame   = (foreign != nullptr)
                                                 ? foreign_full_frame(msg, *foreign)
                                                 : full_frame(msg);
        bool                   size_known =
                (params_ != nullptr) &&
                (params_->field_mask & UCP_IFUNC_SEND_FIELD_REMOTE_SIZE);
        size_t remote_size =
                param_value(params_, UCP_IFUNC_SEND_FIELD_REMOTE_SIZE,
                            &ucp_ifunc_send_params_t::remote_size, SIZE_MAX);
        if (frame.size > remote_size) {
            ucs_error("%s: frame of %zu bytes does not fit the target's "
                      "%zu-byte buffer; nothing was written",
                      function_, frame.size, remote_size);
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        void *slot;
        if (config_shm_direct() &&
            (ucp_rkey_ptr(rkey_, remote_addr_, &slot) == UCS_OK)) {
            return store_raw(function_, slot, frame);
        }
        if (!size_known) {
            return guarded_send(function_, ep_, frame, remote_addr_, rkey_);
        }
        ucp_worker_h worker = param_value(params_, UCP_IFUNC_SEND_FIELD_WORKER,
                                          &ucp_ifunc_send_params_t::worker,
                                          static_cast<ucp_worker_h>(nullptr));
        return put_frame(ep_, worker, frame, remote_addr_, rkey_, nullptr);
    }

private:
    const char                    *function_;
    ucp_ep_h                       ep_;
    uint64_t                       remote_addr_;
    ucp_rkey_h                     rkey_;
    const ucp_ifunc_send_params_t *params_;
};

ucs_status_t send_frame(const char *function, ucp_ep_h ep,
                        const ucp_ifunc_msg_t &msg, uint64_t remote_addr,
                        ucp_rkey_h rkey, const ucp_ifunc_send_params_t *params)
{
    if ((ep == nullptr) || (rkey == nullptr) || (remote_addr % 8)) {
        ucs_error("%s: need an endpoint, an rkey and an 8-byte aligned "
                  "remote address (got ep %p rkey %p address 0x%llx)",
                  function, static_cast<void *>(ep), static_cast<void *>(rkey),
                  static_cast<unsigned long long>(remote_addr));
        return UCS_ERR_INVALID_PARAM;
    }
    if (!msg_sealed(msg)) {
        ucs_error("%s: not a message from ucp_ifunc_msg_create, or it was "
                  "modified after creation",
                  function);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params != nullptr) &&
        (params->field_mask & ~uint64_t(UCP_IFUNC_SEND_FIELD_WORKER |
                                        UCP_IFUNC_SEND_FIELD_REMOTE_SIZE |
                                        UCP_IFUNC_SEND_FIELD_MACHINE))) {
        ucs_error("%s: unknown bits 0x%llx in field_mask", function,
                  static_cast<unsigned long long>(params->field_mask));
        return UCS_ERR_INVALID_PARAM;
    }

    uint16_t machine =
            param_value(params, UCP_IFUNC_SEND_FIELD_MACHINE,
                        &ucp_ifunc_send_params_t::machine, arch::elf_machine());
    /* The raw path knows nothing of what the target holds: the code always
     * goes, for the ISA the caller names. */
    CodeChoice choice = {UCS_OK, machine, CodeId{0, 0}, false, 0};
    if ((machine != arch::elf_machine()) &&
        (foreign_frame(msg, machine) == nullptr)) {
        choice.status = UCS_ERR_UNSUPPORTED;
    }
    RawPath path(function, ep, remote_addr, rkey, params);
    return send_built(path, msg, choice, function);
}

} // namespace

ucs_status_t send_nbix(ucp_ep_h ep, ucp_ifunc_msg_t msg, uint64_t remote_addr,
                       ucp_rkey_h rkey)
{
    return send_frame("ucp_ifunc_send_nbix", ep, msg, remote_addr, rkey,
                      nullptr);
}

ucs_status_t send_nbx(ucp_ep_h ep, ucp_ifunc_msg_t msg, uint64_t remote_addr,
                      ucp_rkey_h rkey, const ucp_ifunc_send_params_t *params)
{
    return send_frame("ucp_ifunc_send_nbx", ep, msg, remote_addr, rkey, params);
}

} // namespace ucx_ifunc
