/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Layout of the shippable code image that ucx-ifunc-cc embeds in NAME.so
 * under the symbol __ucp_ifunc_image_NAME. The runtime copies the image into
 * every frame verbatim; the target links it. tools/ucx_ifunc/image_format.py
 * writes exactly this layout: change both together and bump the version.
 *
 * All integers are little-endian. Offsets ("offset") count from the start of
 * the image (the descriptor); virtual addresses ("vaddr") count from the base
 * where the target maps the image.
 *
 * A signed image ends with a ucp_ifunc_image_signature_t: an Ed25519
 * signature over UCP_IFUNC_IMAGE_SIGNATURE_DOMAIN (with its NUL), the ifunc
 * name, a NUL, and the image bytes before the signature block.
 */
#ifndef UCP_IFUNC_IMAGE_H_
#define UCP_IFUNC_IMAGE_H_

#include <stdint.h>

#define UCP_IFUNC_IMAGE_MAGIC 0x474d4946u /* "FIMG" read as little-endian */
#define UCP_IFUNC_IMAGE_VERSION 2
/* Images built for the sandbox (ucx-ifunc-cc --sandbox) carry version 3 and
 * the flag below, so that a target of release 0.2, which reads version 2
 * only, refuses them instead of running them natively. */
#define UCP_IFUNC_IMAGE_VERSION_SANDBOX 3
/* LLVM bitcode that the target compiles for itself (ucx-ifunc-cc --bitcode)
 * carries version 4 and UCP_IFUNC_IMAGE_FLAG_BITCODE alone, so that a target
 * that reads versions 2 and 3 only refuses it. The descriptor is the same;
 * what differs:
 * - machine: the ELF machine of the module's ISA (EM_PPC64 for powerpc64le);
 * - seg[TEXT]: vaddr 0, file_size = mem_size = the bitcode's size, at a
 *   16-aligned file_offset; the bytes start with the bitcode magic ('B',
 *   'C', 0xc0, 0xde) or its wrapper's (0x0b17c0de); seg[RELRO] and
 *   seg[DATA]: all fields 0;
 * - page_align, map_size, entry_vaddr, got_ptr_vaddr and n_relocs: 0;
 * - the string table's first string (offset 0) is the module's target
 *   triple ("x86_64-unknown-linux-gnu");
 * - one symbol record, NAME_main (vaddr 0, size 0);
 * - imports: what the module declares and does not define once everything
 *   but NAME_main is internal, sorted by name, UCP_IFUNC_IMPORT_WEAK for
 *   extern_weak ones; needed and the signature as for machine code.
 * NAME.so holds it under UCP_IFUNC_BITCODE_SYMBOL NAME ".em<machine>". */
#define UCP_IFUNC_IMAGE_VERSION_BITCODE 4
#define UCP_IFUNC_IMAGE_SYMBOL "__ucp_ifunc_image_" /* + ifunc name */
#define UCP_IFUNC_BITCODE_SYMBOL                                               \
    "__ucp_ifunc_bitcode_" /* + ifunc name + ".em<machine>" */

#define UCP_IFUNC_IMAGE_SIGNATURE_DOMAIN "ucx-ifunc image signature 1"

/* Segments, in address order. Their vaddrs are multiples of page_align so the
 * target can give each its own protection. */
enum {
    UCP_IFUNC_SEG_TEXT  = 0, /* code: read + execute */
    UCP_IFUNC_SEG_RELRO = 1, /* constants, pointer tables, the GOT pointer:
                                written while linking, then read-only */
    UCP_IFUNC_SEG_DATA  = 2, /* .data and .bss: read + write */
    UCP_IFUNC_SEG_COUNT = 3
};

/* Descriptor flags. */
enum {
    /* The code follows the sandbox's rules (docs/security.md, "Sandboxed
     * code") and runs only confined; version 3 only. */
    UCP_IFUNC_IMAGE_FLAG_SANDBOX = 1,
    /* TEXT holds LLVM bitcode for the triple that is the string table's
     * first string, not machine code; version 4 only. RELRO and DATA are
     * empty, there are no relocations, and the one symbol is NAME_main. */
    UCP_IFUNC_IMAGE_FLAG_BITCODE = 2
};

/* Relocation kinds: each patches 8 bytes at vaddr (inside RELRO or DATA). */
enum {
    UCP_IFUNC_RELOC_RELATIVE = 1, /* value = image base + addend */
    UCP_IFUNC_RELOC_IMPORT   = 2  /* value = address of import + addend */
};

/* Import flags. */
enum {
    UCP_IFUNC_IMPORT_WEAK = 1 /* unresolved is not an error: value 0 */
};

typedef struct ucp_ifunc_image_seg {
    uint64_t vaddr;       /* start, from the image base */
    uint64_t mem_size;    /* bytes of address space; the tail beyond
                             file_size is zero-filled (.bss) */
    uint64_t file_offset; /* where the initialised bytes are in the image */
    uint64_t file_size;   /* number of initialised bytes */
} ucp_ifunc_image_seg_t;

typedef struct ucp_ifunc_image_desc {
    uint32_t              magic;      /* UCP_IFUNC_IMAGE_MAGIC */
    uint16_t              version;    /* UCP_IFUNC_IMAGE_VERSION */
    uint16_t              machine;    /* ELF e_machine of the code */
    uint32_t              desc_size;  /* sizeof(ucp_ifunc_image_desc_t) */
    uint32_t              flags;      /* 0 */
    uint64_t              image_size; /* whole image, descriptor included;
                                             multiple of 8 */
    uint64_t              page_align; /* alignment of segment vaddrs */
    uint64_t              map_size;   /* address space the image needs;
                                             multiple of page_align */
    ucp_ifunc_image_seg_t seg[UCP_IFUNC_SEG_COUNT];
    uint64_t              entry_vaddr;   /* NAME_main, inside TEXT */
    uint64_t              got_ptr_vaddr; /* the hidden pointer: 8 bytes in
                                             RELRO that the target sets to its
                                             table of resolved imports */
    uint64_t imports_offset; /* n_imports ucp_ifunc_image_import_t */
    uint64_t relocs_offset;  /* n_relocs ucp_ifunc_image_reloc_t */
    uint64_t strtab_offset;  /* NUL-terminated names */
    uint64_t strtab_size;
    uint32_t n_imports;
    uint32_t n_relocs;
    uint64_t needed_offset;    /* n_needed uint32_t string-table offsets:
                                  sonames of the libraries the ifunc was
                                  linked with, tried after the target's
                                  global scope */
    uint64_t symbols_offset;   /* n_symbols ucp_ifunc_image_symbol_t */
    uint64_t signature_offset; /* 0, or image_size minus the size of
                                  ucp_ifunc_image_signature_t */
    uint32_t n_needed;
    uint32_t n_symbols;
} ucp_ifunc_image_desc_t;

/* Slot i of the import table holds the address of import i. Shipped code
 * reaches it as *(*got_ptr + 8 * i). */
typedef struct ucp_ifunc_image_import {
    uint32_t name_offset; /* into the string table */
    uint32_t flags;       /* UCP_IFUNC_IMPORT_* */
} ucp_ifunc_image_import_t;

typedef struct ucp_ifunc_image_reloc {
    uint64_t vaddr;        /* 8-byte aligned, inside RELRO or DATA */
    uint32_t type;         /* UCP_IFUNC_RELOC_* */
    uint32_t import_index; /* for UCP_IFUNC_RELOC_IMPORT */
    int64_t  addend;
} ucp_ifunc_image_reloc_t;

/* A function of the image, for debuggers and profilers on the target. */
typedef struct ucp_ifunc_image_symbol {
    uint32_t name_offset; /* into the string table */
    uint32_t reserved;    /* 0 */
    uint64_t vaddr;       /* inside TEXT */
    uint64_t size;
} ucp_ifunc_image_symbol_t;

typedef struct ucp_ifunc_image_signature {
    uint8_t public_key[32]; /* Ed25519 key that signed */
    uint8_t signature[64];  /* Ed25519 signature (see above) */
} ucp_ifunc_image_signature_t;

#ifdef __cplusplus
static_assert(sizeof(ucp_ifunc_image_seg_t) == 32, "image format");
static_assert(sizeof(ucp_ifunc_image_desc_t) == 224, "image format");
static_assert(sizeof(ucp_ifunc_image_symbol_t) == 24, "image format");
static_assert(sizeof(ucp_ifunc_image_signature_t) == 96, "image format");
static_assert(sizeof(ucp_ifunc_image_import_t) == 8, "image format");
static_assert(sizeof(ucp_ifunc_image_reloc_t) == 24, "image format");
#endif

#endif
