/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Validation of a code image (image.h) before anyone maps or runs it: the
 * source checks the image of the library it loads, the target the image a
 * peer sent. Every offset, size and table entry is checked against the
 * bytes that are there, with arithmetic that cannot wrap; after
 * image_check() succeeds the accessors below stay inside the image.
 */
#ifndef UCP_IFUNC_IMAGE_CHECK_H_
#define UCP_IFUNC_IMAGE_CHECK_H_

#include "ucp/ifunc/format/image.h"

#include <ucs/debug/log_def.h>
#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ucx_ifunc {

/* Checks an image descriptor and its tables; @a available bytes are
 * readable at @a image, and the image may ask for at most @a max_map_size
 * bytes of address space. On success returns the image's size. Otherwise
 * logs one line naming @a ifunc_name at @a log_level (an error for a local
 * library, a warning for a peer's message) and returns the error status. */
ucs_status_t image_check(const void *image, size_t available,
                         const char *ifunc_name, size_t max_map_size,
                         ucs_log_level_t log_level, size_t *image_size_p);

/* image_check() of an image for @a machine, which need not be this
 * process's: a source checks the images it sends to targets of other ISAs
 * (the page size checked is this process's). */
ucs_status_t image_check_for(uint16_t machine, const void *image,
                             size_t available, const char *ifunc_name,
                             size_t max_map_size, ucs_log_level_t log_level,
                             size_t *image_size_p);

/* Whether the image was built for the sandbox (ucx-ifunc-cc --sandbox):
 * its code runs only confined, never linked natively, even when trusted
 * (docs/security.md, "Sandboxed code"). Valid after image_check(). */
inline bool image_is_sandboxed(const ucp_ifunc_image_desc_t &d)
{
    return d.version == UCP_IFUNC_IMAGE_VERSION_SANDBOX;
}

/* Whether the image holds LLVM bitcode for the target to compile
 * (version 4, UCP_IFUNC_IMAGE_FLAG_BITCODE). Valid after image_check(). */
inline bool image_is_bitcode(const ucp_ifunc_image_desc_t &d)
{
    return d.version == UCP_IFUNC_IMAGE_VERSION_BITCODE;
}

/* An unaligned read of a T at @a offset bytes into @a base. */
template <typename T>
T read_at(const void *base, uint64_t offset)
{
    T value;
    std::memcpy(&value, static_cast<const char *>(base) + offset,
                sizeof(value));
    return value;
}

inline ucp_ifunc_image_desc_t image_desc(const void *image)
{
    return read_at<ucp_ifunc_image_desc_t>(image, 0);
}

inline ucp_ifunc_image_import_t
image_import(const void *image, const ucp_ifunc_image_desc_t &d, uint32_t i)
{
    return read_at<ucp_ifunc_image_import_t>(
            image, d.imports_offset + i * sizeof(ucp_ifunc_image_import_t));
}

inline ucp_ifunc_image_reloc_t
image_reloc(const void *image, const ucp_ifunc_image_desc_t &d, uint32_t i)
{
    return read_at<ucp_ifunc_image_reloc_t>(
            image, d.relocs_offset + i * sizeof(ucp_ifunc_image_reloc_t));
}

/* String-table offset of the soname of needed library @a i. */
inline uint32_t image_needed(const void *image, const ucp_ifunc_image_desc_t &d,
                             uint32_t i)
{
    return read_at<uint32_t>(image, d.needed_offset + i * sizeof(uint32_t));
}

inline ucp_ifunc_image_symbol_t
image_symbol(const void *image, const ucp_ifunc_image_desc_t &d, uint32_t i)
{
    return read_at<ucp_ifunc_image_symbol_t>(
            image, d.symbols_offset + i * sizeof(ucp_ifunc_image_symbol_t));
}

/* The NUL-terminated string at @a offset of a checked image's table. */
inline const char *image_string(const void                   *image,
                                const ucp_ifunc_image_desc_t &d,
                                uint32_t                      offset)
{
    return static_cast<const char *>(image) + d.strtab_offset + offset;
}

/* A checked bitcode image's LLVM target triple (its string table's first
 * string). */
inline const char *image_bitcode_triple(const void                   *image,
                                        const ucp_ifunc_image_desc_t &d)
{
    return image_string(image, d, 0);
}

} // namespace ucx_ifunc

#endif
