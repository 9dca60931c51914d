/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Code once, for every path that sends it (channel.cc, am.cc, and the
 * default path in peer.cc, which sends on either): what a source knows of
 * one target (TargetCodes: its ISA and which code it holds) and the one
 * decision each send makes from it (choose_code: which ISA's image, and a
 * full frame or a reference). The paths only carry out what it chose.
 */
#ifndef UCP_IFUNC_CODE_ONCE_H_
#define UCP_IFUNC_CODE_ONCE_H_

#include "code_id.h"
#include "link.h"

#include <ucs/type/status.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ucx_ifunc {

/* The low 64 bits of the code ids the target said it linked, each at that
 * value % kSize. A reference names the whole id, which the target checks,
 * so the low half is enough to decide; a later id at the same place only
 * makes the source send that code again (slower, never wrong). The target
 * pins at most as many codes per source as the table has places
 * (PeerPins), so what the table says is held stays linked. */
class HeldCodes {
public:
    static constexpr size_t kSize = PeerPins::kMaxPerPeer;

    bool holds(uint64_t code_id_lo) const
    {
        return place(code_id_lo).load(std::memory_order_acquire) == code_id_lo;
    }

    /* A thread that then sees it held also sees what was written before
     * (the target's ISA). */
    void learn(uint64_t code_id_lo)
    {
        place(code_id_lo).store(code_id_lo, std::memory_order_release);
    }

    /* Takes in a table the target wrote (a channel's held[], read by a
     * get): an entry counts only at its own place, anything else is not
     * one it wrote. */
    void learn_table(const uint64_t *seen)
    {
        for (size_t i = 0; i < kSize; ++i) {
            if ((seen[i] != 0) && (seen[i] % kSize == i)) {
                held_[i].store(seen[i], std::memory_order_relaxed);
            }
        }
    }

private:
    std::atomic<uint64_t> &place(uint64_t code_id_lo)
    {
        return held_[code_id_lo % kSize];
    }
    const std::atomic<uint64_t> &place(uint64_t code_id_lo) const
    {
        return held_[code_id_lo % kSize];
    }

    std::array<std::atomic<uint64_t>, kSize> held_{};
};

/* What a source knows of one target context, whichever path told it: a
 * peer's channel and active messages reach the same context, whose pins
 * keep the code, so they share one. */
class TargetCodes {
public:
    /* The target's ISA as an ELF machine number; 0 until known. */
    uint16_t machine() const
    {
        return machine_.load(std::memory_order_acquire);
    }

    /* Before learn(): a send that sees code held sees the ISA too. */
    void set_machine(uint16_t machine)
    {
        machine_.store(machine, std::memory_order_release);
    }

    bool holds(uint64_t code_id_lo)
    {
        if (held_.holds(code_id_lo)) {
            return true;
        }
        const std::atomic<uint64_t> *announced =
                announced_.load(std::memory_order_acquire);
        if ((announced != nullptr) &&
            (announced[code_id_lo % HeldCodes::kSize].load(
                     std::memory_order_acquire) == code_id_lo)) {
            held_.learn(code_id_lo);
            return true;
        }
        return false;
    }

    void learn(uint64_t code_id_lo) { held_.learn(code_id_lo); }

    void learn_table(const uint64_t *seen) { held_.learn_table(seen); }

    /* A table in the HeldCodes layout that the target writes into memory
     * mapped here (a channel's held[]): read when the source's own table
     * misses; nullptr before that memory goes. */
    void read_announcements(const std::atomic<uint64_t> *table)
    {
        announced_.store(table, std::memory_order_release);
    }

private:
    std::atomic<uint16_t>                      machine_{0};
    HeldCodes                                  held_;
    std::atomic<const std::atomic<uint64_t> *> announced_{nullptr};
};

/* What one send to a target carries. */
struct CodeChoice {
    ucs_status_t status;  /* UCS_ERR_UNSUPPORTED: no image for its ISA */
    uint16_t     machine; /* the target's ISA; 0 while unknown: then the
                             frames of every ISA the library has go */
    CodeId       code;    /* of the image chosen (this process's while the
                             target's ISA is unknown) */
    bool         by_ref;  /* the target holds it: a reference */
};

/* The one decision of every code-once send. @a code_for(machine, &id)
 * gives the code id of the library's image for @a machine (0: this
 * process's ISA) and says whether there is one; @a with_code: the caller
 * asked for the code in this message (UCP_IFUNC_SEND_FLAG_WITH_CODE). */
template <typename CodeFor>
CodeChoice choose_code(TargetCodes &target, bool with_code,
                       const CodeFor &code_for)
{
    CodeChoice choice = {UCS_OK, target.machine(), CodeId{0, 0}, false};
    if (!code_for(choice.machine, &choice.code)) {
        choice.status = UCS_ERR_UNSUPPORTED;
        return choice;
    }
    choice.by_ref = !with_code && target.holds(choice.code.lo);
    return choice;
}

} // namespace ucx_ifunc

#endif
