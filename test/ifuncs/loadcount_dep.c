/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The dependency of loadcount.so: at every load its constructor appends
 * one byte to the file $IFUNC_TEST_LOAD_LOG names, so a test counts loads.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void loadcount_dep_loaded(void)
{
    const char *log = getenv("IFUNC_TEST_LOAD_LOG");
    int         fd;
    if (log == NULL) {
        return;
    }
    fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd >= 0) {
        if (write(fd, "l", 1) != 1) {
            /* the test then counts one load less and says so */
        }
        close(fd);
    }
}

int loadcount_dep_value(void)
{
    return 7;
}
