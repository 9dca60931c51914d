/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The smallest ifunc library. Build it with
 *     ucx-ifunc-cc -O2 -o hello.so hello.c
 * The payload is the source's greeting; main runs in the target process.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* How many payload bytes the source arguments need. */
size_t hello_payload_bound(void *source_args, size_t source_args_size)
{
    (void)source_args;
    return source_args_size + 1;
}

/* Fills the payload in place, on the source. */
int hello_payload_init(void *source_args, size_t source_args_size,
                       void *payload, size_t *payload_size)
{
    memcpy(payload, source_args, source_args_size);
    ((char *)payload)[source_args_size] = '\0';
    *payload_size                       = source_args_size + 1;
    return 0;
}

/* Runs on the target: target_args is the target's own state. */
void hello_main(void *payload, size_t payload_size, void *target_args)
{
    int *greeted = target_args;
    printf("hello_main: \"%.*s\" (running in process %d)\n", (int)payload_size,
           (const char *)payload, (int)getpid());
    fflush(stdout);
    *greeted = 1;
}
