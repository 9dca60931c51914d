/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Code once, for every path that sends it (channel.cc, am.cc, and the
 * default path in peer.cc, which sends on either): what a source knows of
 * one target (TargetCodes: its ISA, which code it holds and the target's
 * index of each, the short name a reference carries) and the one decision
 * each send makes from it (choose_code: which ISA's image, and a full
 * frame or a reference by that index). The paths only carry out what it chose.
 */
#ifndef UCP_IFUNC_CODE_ONCE_H_
#define UCP_IFUNC_CODE_ONCE_H_

#include "ucp/ifunc/format/code_id.h"
#include "ucp/ifunc/load/link.h"

#include <ucs/type/status.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ucx_ifunc {

/* What the target said it holds: the low 64 bits of the ids of the codes
 * it linked, each at that value % kSize, with the target's index of that
 * code (what a reference names). A later id at the same place only makes
 * the source send that code again (slower, never wrong). The target pins
 * at most as many codes per source as the table has places (PeerPins), so
 * what the table says is held stays linked under that index.
 *
 * A place is written (learn) by the thread that hears from the target and
 * read by senders: id 0 first, then the index, then the id (release), and
 * read id, index, id (acquire): a reader that sees an index written after
 * the id it read sees that id change too, and takes nothing. */
class HeldCodes {
public:
    static constexpr size_t kSize = PeerPins::kMaxPerPeer;

    /* The target's index of the code whose id's low half is @a code_id_lo;
     * 0 if it did not say it holds it. */
    uint64_t index_of(uint64_t code_id_lo) const
    {
        return read(ids_, indices_, code_id_lo);
    }

    /* The target holds @a code_id_lo as @a code_index. A thread that then
     * sees it held also sees what was written before (the target's ISA). */
    void learn(uint64_t code_id_lo, uint64_t code_index)
    {
        size_t p = code_id_lo % kSize;
        if ((ids_[p].load(std::memory_order_relaxed) == code_id_lo) &&
            (indices_[p].load(std::memory_order_relaxed) == code_index)) {
            return;
        }
        ids_[p].store(0, std::memory_order_relaxed);
        indices_[p].store(code_index, std::memory_order_release);
        ids_[p].store(code_id_lo, std::memory_order_release);
    }

    /* Takes in the tables the target wrote (a channel's held[] and
     * index[], read by a get, which may see them half written): an entry
     * counts only at its own place, and only if the previous read saw the
     * same (@a before_ids, @a before_indices): an entry read whole twice
     * is one the target wrote. */
    void learn_tables(const uint64_t *ids, const uint64_t *indices,
                      const uint64_t *before_ids,
                      const uint64_t *before_indices)
    {
        for (size_t i = 0; i < kSize; ++i) {
            if ((ids[i] != 0) && (ids[i] % kSize == i) && (indices[i] != 0) &&
                (ids[i] == before_ids[i]) &&
                (indices[i] == before_indices[i])) {
                learn(ids[i], indices[i]);
            }
        }
    }

    /* The same read of tables in the layout of ids_ and indices_ that the
     * target writes into memory mapped here (a channel's control block). */
    static uint64_t read(const std::atomic<uint64_t> *ids,
                         const std::atomic<uint64_t> *indices,
                         uint64_t                     code_id_lo)
    {
        size_t p = code_id_lo % kSize;
        if (ids[p].load(std::memory_order_acquire) != code_id_lo) {
            return 0;
        }
        uint64_t index = indices[p].load(std::memory_order_acquire);
        return (ids[p].load(std::memory_order_relaxed) == code_id_lo) ? index
                                                                      : 0;
    }

private:
    std::array<std::atomic<uint64_t>, kSize> ids_{};
    std::array<std::atomic<uint64_t>, kSize> indices_{};

    static uint64_t read(const std::array<std::atomic<uint64_t>, kSize> &ids,
                         const std::array<std::atomic<uint64_t>, kSize> &idx,
                         uint64_t code_id_lo)
    {
        return read(ids.data(), idx.data(), code_id_lo);
    }
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

    /* The target's index of the code, 0 if it did not say it holds it. */
    uint64_t index_of(uint64_t code_id_lo)
    {
        uint64_t index = held_.index_of(code_id_lo);
        if (index != 0) {
            return index;
        }
        const Announced *announced = announced_.load(std::memory_order_acquire);
        if (announced != nullptr) {
            index = HeldCodes::read(announced->ids, announced->indices,
                                    code_id_lo);
            if (index != 0) {
                held_.learn(code_id_lo, index);
            }
        }
        return index;
    }

    void learn(uint64_t code_id_lo, uint64_t code_index)
    {
        held_.learn(code_id_lo, code_index);
    }

    void learn_tables(const uint64_t *ids, const uint64_t *indices,
                      const uint64_t *before_ids,
                      const uint64_t *before_indices)
    {
        held_.learn_tables(ids, indices, before_ids, before_indices);
    }

    /* Tables in the HeldCodes layout that the target writes into memory
     * mapped here (a channel's held[] and index[]): read when the source's
     * own table misses; nullptr before that memory goes. */
    struct Announced {
        const std::atomic<uint64_t> *ids;
        const std::atomic<uint64_t> *indices;
    };
    void read_announcements(const Announced *tables)
    {
        announced_.store(tables, std::memory_order_release);
    }

private:
    std::atomic<uint16_t>          machine_{0};
    HeldCodes                      held_;
    std::atomic<const Announced *> announced_{nullptr};
};

/* What one send to a target carries. */
struct CodeChoice {
    ucs_status_t status;     /* UCS_ERR_UNSUPPORTED: no image for its ISA */
    uint16_t     machine;    /* the target's ISA; 0 while unknown: then the
                                frames of every ISA the library has go */
    CodeId       code;       /* of the image chosen (this process's while
                                the target's ISA is unknown) */
    bool         by_ref;     /* the target holds it: a reference */
    uint64_t     code_index; /* what the reference names: the target's
                                index of the code */
};

/* The one decision of every code-once send. @a code_for(machine, &id)
 * gives the code id of the library's image for @a machine (0: this
 * process's ISA) and says whether there is one; @a with_code: the caller
 * asked for the code in this message (UCP_IFUNC_SEND_FLAG_WITH_CODE). */
template <typename CodeFor>
CodeChoice choose_code(TargetCodes &target, bool with_code,
                       const CodeFor &code_for)
{
    CodeChoice choice = {UCS_OK, target.machine(), CodeId{0, 0}, false, 0};
    if (!code_for(choice.machine, &choice.code)) {
        choice.status = UCS_ERR_UNSUPPORTED;
        return choice;
    }
    if (!with_code) {
        choice.code_index = target.index_of(choice.code.lo);
        choice.by_ref     = (choice.code_index != 0);
    }
    return choice;
}

} // namespace ucx_ifunc

#endif
