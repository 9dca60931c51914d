/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * What a source knows its target holds, the one table both code-once
 * paths (channel.cc, am.cc) keep per target: the low 64 bits of the code
 * ids the target said it linked, each at that value % kSize. A reference
 * names the whole id, which the target checks, so the low half is enough
 * to decide; a later id at the same place only makes the source send that
 * code again (slower, never wrong). The target pins at most as many codes
 * per source as the table has places (PeerPins), so what the table says is
 * held stays linked.
 */
#ifndef UCP_IFUNC_HELD_CODES_H_
#define UCP_IFUNC_HELD_CODES_H_

#include "link.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ucx_ifunc {

class HeldCodes {
public:
    static constexpr size_t kSize = PeerPins::kMaxPerPeer;

    /* Whether the target said it holds code whose id's low half is
     * @a code_id_lo. */
    bool holds(uint64_t code_id_lo) const
    {
        return place(code_id_lo).load(std::memory_order_acquire) == code_id_lo;
    }

    /* The target said it holds @a code_id_lo. A thread that then sees it
     * held also sees what was written before (the target's ISA). */
    void learn(uint64_t code_id_lo)
    {
        place(code_id_lo).store(code_id_lo, std::memory_order_release);
    }

    /* Takes in a table the target wrote (a channel's held[]): an entry
     * counts only at its own place, anything else is not one it wrote. */
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

} // namespace ucx_ifunc

#endif
