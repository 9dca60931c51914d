/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "link": turning the code image of a message into code that runs in
 * this process. The image is copied into private memory, relocated, its
 * imports resolved by name, the hidden GOT pointer set, and the pages made
 * read-only / executable (never both writable and executable). Linked code is
 * cached by code id (a hash of name and image) so later messages with the
 * same code skip all of this.
 */
#ifndef UCP_IFUNC_LINK_H_
#define UCP_IFUNC_LINK_H_

#include "frame.h"
#include "registry.h"

#include <cstddef>

namespace ucx_ifunc {

/* Checks an image descriptor and its tables; @a available bytes are
 * readable at @a image. On success returns the image's size. Otherwise logs
 * one line naming @a ifunc_name and returns the error status. */
ucs_status_t image_check(const void *image, size_t available,
                         const char *ifunc_name, size_t *image_size_p);

/* Returns the entry point for the message with sealed, validated header
 * @a hdr at the start of @a frame, linking its code on first use.
 * Thread-safe. */
ucs_status_t code_lookup(const FrameHeader &hdr, const void *frame,
                         MainFn *entry_p);

} // namespace ucx_ifunc

#endif
