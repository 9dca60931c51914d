/*
 * A minimal stand-in for the target side, in C, for ISAs the tests cannot
 * run Python on (aarch64 under qemu-user). Same behaviour as run_image.py:
 *
 *     run_image [--native] [--target-args N] LIB.so PAYLOAD_TEXT RUNS
 *               [PRELOAD.so ...]
 *
 * Loads the PRELOAD libraries globally (they play the target program's own
 * exported symbols), dlopens LIB.so (NAME.so), builds a payload with its
 * payload functions, then links the image embedded for this ISA the way the
 * runtime does and calls NAME_main RUNS times. With --native it calls
 * LIB.so's own NAME_main instead. With --target-args, NAME_main gets a
 * zeroed N-byte buffer as target_args, printed in hex after the runs (for
 * test/ifuncs/constructs.c, which records its checks there). The tests compile it with the ISA's cross
 * compiler and -I src/ucp/ifunc, so it reads the runtime's own image.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "image.h"

#if defined(__aarch64__)
#define THIS_MACHINE EM_AARCH64
#elif defined(__x86_64__)
#define THIS_MACHINE EM_X86_64
#endif

typedef size_t (*bound_fn)(void *, size_t);
typedef int (*init_fn)(void *, size_t, void *, size_t *);
typedef void (*main_fn)(void *, size_t, void *);

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "run_image: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    exit(1);
}

static void *lookup(void *lib, const char *prefix, const char *name,
                    const char *suffix)
{
    char symbol[256];
    snprintf(symbol, sizeof(symbol), "%s%s%s", prefix, name, suffix);
    return dlsym(lib, symbol);
}

static uint64_t align_up(uint64_t value, uint64_t align)
{
    return (value + align - 1) / align * align;
}

/* Maps and links the image like src/ucp/ifunc/load/link.cc; returns its entry. */
static main_fn link_image(const uint8_t *image, void *lib)
{
    ucp_ifunc_image_desc_t d;
    memcpy(&d, image, sizeof(d));
    if (d.magic != UCP_IFUNC_IMAGE_MAGIC ||
        d.version != UCP_IFUNC_IMAGE_VERSION) {
        die("not an image", NULL);
    }
    if (d.machine != THIS_MACHINE) {
        die("the image is for another ISA", NULL);
    }
    uint8_t *base = mmap(NULL, d.map_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        die("mmap failed", NULL);
    }
    for (int i = 0; i < UCP_IFUNC_SEG_COUNT; i++) {
        memcpy(base + d.seg[i].vaddr, image + d.seg[i].file_offset,
               d.seg[i].file_size);
    }
    const ucp_ifunc_image_import_t *imports =
            (const void *)(image + d.imports_offset);
    const char *strtab = (const char *)image + d.strtab_offset;
    uint64_t   *table  = calloc(d.n_imports + 1, sizeof(uint64_t));
    for (uint32_t i = 0; i < d.n_imports; i++) {
        const char *name = strtab + imports[i].name_offset;
        void       *addr = dlsym(RTLD_DEFAULT, name);
        if (addr == NULL) {
            addr = dlsym(lib, name);
        }
        if (addr == NULL && !(imports[i].flags & UCP_IFUNC_IMPORT_WEAK)) {
            die("unresolved import", name);
        }
        table[i] = (uint64_t)addr;
    }
    uint64_t table_ptr = (uint64_t)table;
    memcpy(base + d.got_ptr_vaddr, &table_ptr, 8);
    for (uint32_t i = 0; i < d.n_relocs; i++) {
        ucp_ifunc_image_reloc_t rel;
        memcpy(&rel, image + d.relocs_offset + i * sizeof(rel), sizeof(rel));
        uint64_t value = (rel.type == UCP_IFUNC_RELOC_RELATIVE)
                                 ? (uint64_t)base
                                 : table[rel.import_index];
        value += (uint64_t)rel.addend;
        memcpy(base + rel.vaddr, &value, 8);
    }
    const int prot[] = {PROT_READ | PROT_EXEC, PROT_READ,
                        PROT_READ | PROT_WRITE};
    for (int i = 0; i < UCP_IFUNC_SEG_COUNT; i++) {
        uint64_t size = align_up(d.seg[i].mem_size, d.page_align);
        if (size && mprotect(base + d.seg[i].vaddr, size, prot[i]) != 0) {
            die("mprotect failed", NULL);
        }
    }
    __builtin___clear_cache((char *)base,
                            (char *)base + d.seg[UCP_IFUNC_SEG_TEXT].mem_size);
    return (main_fn)(base + d.entry_vaddr);
}

int main(int argc, char **argv)
{
    int native = argc > 1 && strcmp(argv[1], "--native") == 0;
    argv += native;
    argc -= native;
    size_t target_args_size = 0;
    if (argc > 2 && strcmp(argv[1], "--target-args") == 0) {
        target_args_size = strtoul(argv[2], NULL, 0);
        argv += 2;
        argc -= 2;
    }
    unsigned char *target_args =
            target_args_size ? calloc(1, target_args_size) : NULL;
    if (argc < 4) {
        die("usage: run_image [--native] LIB.so TEXT RUNS [PRELOAD.so ...]",
            NULL);
    }
    for (int i = 4; i < argc; i++) {
        if (dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL) == NULL) {
            die("cannot load", dlerror());
        }
    }
    char *lib_path = realpath(argv[1], NULL);
    void *lib      = lib_path ? dlopen(lib_path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (lib == NULL) {
        die("cannot load", lib_path ? dlerror() : argv[1]);
    }
    char *name = strdup(basename(lib_path));
    char *dot  = strstr(name, ".so");
    if (dot != NULL) {
        *dot = '\0';
    }
    bound_fn bound = (bound_fn)lookup(lib, "", name, "_payload_bound");
    init_fn  init  = (init_fn)lookup(lib, "", name, "_payload_init");
    if (bound == NULL || init == NULL) {
        die("no payload functions", name);
    }
    const char *text         = argv[2];
    size_t      size         = strlen(text);
    size_t      capacity     = bound((void *)text, size);
    void       *payload      = malloc(capacity ? capacity : 1);
    size_t      payload_size = capacity;
    if (init((void *)text, size, payload, &payload_size) != 0) {
        die("payload_init failed", NULL);
    }

    main_fn entry;
    if (native) {
        entry = (main_fn)lookup(lib, "", name, "_main");
    } else {
        /* this ISA's image of a --target library, else the plain one */
        char suffix[16];
        snprintf(suffix, sizeof(suffix), ".em%d", THIS_MACHINE);
        const uint8_t *image =
                lookup(lib, UCP_IFUNC_IMAGE_SYMBOL, name, suffix);
        if (image == NULL) {
            image = lookup(lib, UCP_IFUNC_IMAGE_SYMBOL, name, "");
        }
        if (image == NULL) {
            die("no image in", lib_path);
        }
        entry = link_image(image, lib);
    }
    if (entry == NULL) {
        die("no entry", name);
    }
    for (int runs = atoi(argv[3]); runs > 0; runs--) {
        entry(payload, payload_size, target_args);
    }
    fflush(NULL);
    if (target_args != NULL) {
        printf("target_args ");
        for (size_t i = 0; i < target_args_size; i++) {
            printf("%02x", target_args[i]);
        }
        printf("\n");
    }
    return 0;
}
