/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Test helpers for frames the library would not make itself: a frame of a
 * future format version that keeps the envelope every version keeps
 * (src/ucp/ifunc/format/frame.h), and a counter of the lines UCX logs.
 */
#ifndef UCX_IFUNC_TEST_FRAMES_H_
#define UCX_IFUNC_TEST_FRAMES_H_

#include "ucp/ifunc/format/frame.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace test {

constexpr unsigned kFutureVersion =
        std::max(ucx_ifunc::kFrameVersion, ucx_ifunc::kRefFrameVersion) + 1;
constexpr size_t kFutureHeaderSize = 128;

/* Seals the header of a future frame after it was edited; the frame's last
 * word gets the seal too. */
inline void seal_future(std::vector<uint64_t> &frame)
{
    size_t   seal_index = kFutureHeaderSize / 8 - 1;
    uint64_t seal       = ucx_ifunc::hash64(frame.data(), seal_index * 8);
    frame[seal_index]   = seal ? seal : 1;
    frame.back()        = frame[seal_index];
}

/* A frame of version kFutureVersion: a 128-byte header of which only the
 * envelope's words mean anything here, @a body_size bytes of 0x5a after it,
 * and the seal at the end of both. */
inline std::vector<uint64_t> future_frame(uint64_t nonce, size_t body_size)
{
    size_t frame_size = kFutureHeaderSize + ucx_ifunc::align_up(body_size, 8) +
                        ucx_ifunc::kSealSize;
    std::vector<uint64_t> frame(frame_size / 8, 0x5a5a5a5a5a5a5a5aull);
    frame[0] = ucx_ifunc::kFrameMagic | (uint64_t(kFutureVersion) << 32) |
               (uint64_t(kFutureHeaderSize) << 48);
    frame[1] = frame_size;
    frame[3] = nonce;
    seal_future(frame);
    return frame;
}

/* Counts, while it lives, the lines logged at @a level (warnings unless
 * told) whose text contains @a text. */
class WarningCounter {
public:
    explicit WarningCounter(std::string     text,
                            ucs_log_level_t level = UCS_LOG_LEVEL_WARN)
    {
        text_  = std::move(text);
        level_ = level;
        count_ = 0;
        ucs_log_push_handler(handler);
    }
    ~WarningCounter() { ucs_log_pop_handler(); }
    WarningCounter(const WarningCounter &)            = delete;
    WarningCounter &operator=(const WarningCounter &) = delete;

    int count() const { return count_; }

private:
    static ucs_log_func_rc_t handler(const char *, unsigned, const char *,
                                     ucs_log_level_t level,
                                     const ucs_log_component_config_t *,
                                     const char *format, va_list ap)
    {
        if (level == level_) {
            char    line[1024];
            va_list copy;
            va_copy(copy, ap);
            vsnprintf(line, sizeof(line), format, copy);
            va_end(copy);
            if (std::string(line).find(text_) != std::string::npos) {
                ++count_;
            }
        }
        return UCS_LOG_FUNC_RC_CONTINUE;
    }

    static inline std::string     text_;
    static inline ucs_log_level_t level_ = UCS_LOG_LEVEL_WARN;
    static inline int             count_ = 0;
};

} // namespace test

#endif
