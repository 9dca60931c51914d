/* A stand-in for a target that compiles bitcode images, used by the tests
 * (test_bitcode.py): linked with the image's module compiled by llc-14,
 * with -DENTRY=NAME_main,
 *
 *     run_bitcode LIB.so NAME PAYLOAD_TEXT RUNS
 *
 * builds a payload with LIB.so's payload functions (either convention), as
 * the source would, then calls NAME_main RUNS times. (lli-14 cannot stand
 * in: its JIT fails on an unresolved weak import instead of reading it as
 * 0.) */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ENTRY(void *payload, size_t payload_size, void *target_args);

static void *symbol(void *lib, const char *name, const char *suffix)
{
    char full[160];
    snprintf(full, sizeof(full), "%s%s", name, suffix);
    return dlsym(lib, full);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: LIB.so NAME PAYLOAD_TEXT RUNS\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (lib == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    char  *text                     = argv[3];
    size_t len                      = strlen(text);
    size_t (*bound)(void *, size_t) = symbol(lib, argv[2], "_payload_bound");
    size_t (*max)(void *, size_t) =
            symbol(lib, argv[2], "_payload_get_max_size");
    void  *init    = symbol(lib, argv[2], "_payload_init");
    size_t size    = bound ? bound(text, len) : max(text, len);
    void  *payload = calloc(1, size + 1);
    int    status;
    if (bound) {
        status = ((int (*)(void *, size_t, void *, size_t *))init)(
                text, len, payload, &size);
    } else {
        status = ((int (*)(void *, size_t, void *, size_t))init)(payload, size,
                                                                 text, len);
    }
    if (status != 0) {
        fprintf(stderr, "payload_init failed\n");
        return 1;
    }
    for (int run = 0; run < atoi(argv[4]); ++run) {
        ENTRY(payload, size, NULL);
        fflush(stdout);
    }
    return 0;
}
