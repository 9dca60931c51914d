/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Out-of-band setup of the hello example: the target listens on a TCP port
 * and tells the source its UCX worker address, where its buffer is, and the
 * buffer's remote key. Any channel would do; UCX examples use a socket too.
 */
#ifndef HELLO_COMMON_H_
#define HELLO_COMMON_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define HELLO_DEFAULT_PORT 13338

/* The ELF machine of this process's code, which the target tells the
 * source: the paper's raw path cannot ask, and a library built for several
 * ISAs (ucx-ifunc-cc --target) must send the target's. */
#if defined(__x86_64__)
#define HELLO_ELF_MACHINE 62 /* EM_X86_64 */
#elif defined(__aarch64__)
#define HELLO_ELF_MACHINE 183 /* EM_AARCH64 */
#else
#error "hello: unsupported CPU architecture"
#endif

static inline int write_all(int fd, const void *data, uint64_t size)
{
    for (uint64_t done = 0; done < size;) {
        ssize_t n = write(fd, (const char *)data + done, size - done);
        if (n <= 0) {
            return -1;
        }
        done += (uint64_t)n;
    }
    return 0;
}

static inline int read_all(int fd, void *data, uint64_t size)
{
    for (uint64_t done = 0; done < size;) {
        ssize_t n = read(fd, (char *)data + done, size - done);
        if (n <= 0) {
            return -1;
        }
        done += (uint64_t)n;
    }
    return 0;
}

/* A blob is its 8-byte length, then its bytes. 0 on success. */
static inline int blob_send(int fd, const void *data, uint64_t size)
{
    return (write_all(fd, &size, sizeof(size)) == 0) ? write_all(fd, data, size)
                                                     : -1;
}

/* Returns a malloc'ed blob (free it), or NULL. */
static inline void *blob_recv(int fd, uint64_t *size_p)
{
    uint64_t size;
    void    *data;
    if ((read_all(fd, &size, sizeof(size)) != 0) || (size > (1u << 20)) ||
        ((data = malloc(size ? size : 1)) == NULL)) {
        return NULL;
    }
    if (read_all(fd, data, size) != 0) {
        free(data);
        return NULL;
    }
    *size_p = size;
    return data;
}

#endif
