/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * A stand-in for the sandbox runtime, for the toolchain's tests: runs the
 * code of a sandbox image (ucx-ifunc-cc --sandbox) in a slot laid out as
 * docs/security.md says, with %r14 and the %gs base set to the slot's
 * base, so that what the rewritten code computes can be compared with the
 * native program's result. It is no sandbox: the gate bundles jump
 * straight to the process's functions, on the slot's stack, and nothing
 * is verified (src/ucp/ifunc/sandbox.cc and sandbox_verify.cc are the
 * real ones).
 *
 * Usage: run_sandboxed IMAGE_FILE PAYLOAD_HEX
 * Runs NAME_main(payload, size, args) with payload and a zeroed 64-byte
 * args block in the slot, then prints the args block in hex.
 */
#define _GNU_SOURCE
#include "ucp/ifunc/image.h"

#include <asm/prctl.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SLOT_SIZE (1ull << 32)
#define GATE_OFFSET 0x1f000ull
#define IMAGE_OFFSET 0x20000ull
#define STACK_BASE 0x40100000ull
#define STACK_TOP 0x40200000ull
#define PAYLOAD_OFFSET 0x60000000ull
#define BUNDLE 32

/* Enters the code at entry with %rsp at stack_top, %r14 = base, the
 * address of gate bundle 0 as its return address; gate bundle 0 comes
 * back through sandbox_exit. */
uint64_t sandbox_enter(uint64_t entry, uint64_t stack_top, uint64_t base,
                       uint64_t payload, uint64_t size, uint64_t args);
void     sandbox_exit(void);
uint64_t host_rsp;

__asm__(".text\n"
        ".globl sandbox_enter\n"
        "sandbox_enter:\n"
        "  pushq %rbx; pushq %rbp; pushq %r12; pushq %r13; pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, host_rsp(%rip)\n"
        "  movq %rsi, %rsp\n"
        "  leaq 0x1f000(%rdx), %rax\n"
        "  pushq %rax\n"
        "  movq %rdx, %r14\n"
        "  movq %rdi, %rax\n"
        "  movq %rcx, %rdi\n"
        "  movq %r8, %rsi\n"
        "  movq %r9, %rdx\n"
        "  jmpq *%rax\n"
        ".globl sandbox_exit\n"
        "sandbox_exit:\n"
        "  movq host_rsp(%rip), %rsp\n"
        "  popq %r15; popq %r14; popq %r13; popq %r12; popq %rbp\n"
        "  popq %rbx\n"
        "  ret\n");

static void die(const char *what)
{
    fprintf(stderr, "run_sandboxed: %s\n", what);
    exit(2);
}

/* movabs $target, %r11; jmp *%r11 */
static void write_gate(uint8_t *bundle, uint64_t target)
{
    bundle[0] = 0x49;
    bundle[1] = 0xbb;
    memcpy(bundle + 2, &target, 8);
    bundle[10] = 0x41;
    bundle[11] = 0xff;
    bundle[12] = 0xe3;
}

static void *map_at(uint64_t addr, uint64_t size, int prot)
{
    void *p = mmap((void *)addr, size, prot,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) {
        die("mmap in the slot failed");
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        die("usage: run_sandboxed IMAGE_FILE PAYLOAD_HEX");
    }
    FILE *file = fopen(argv[1], "rb");
    if (file == NULL) {
        die("cannot open the image");
    }
    static uint8_t blob[1 << 22];
    size_t         blob_size = fread(blob, 1, sizeof(blob), file);
    fclose(file);
    ucp_ifunc_image_desc_t d;
    if (blob_size < sizeof(d)) {
        die("short image");
    }
    memcpy(&d, blob, sizeof(d));
    if ((d.version != UCP_IFUNC_IMAGE_VERSION_SANDBOX) ||
        (d.flags != UCP_IFUNC_IMAGE_FLAG_SANDBOX)) {
        die("not a sandbox image");
    }

    /* The slot: 4 GiB aligned to 4 GiB, PROT_NONE but what is mapped. */
    uint8_t *reserve = mmap(NULL, 2 * SLOT_SIZE, PROT_NONE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserve == MAP_FAILED) {
        die("cannot reserve a slot");
    }
    uint64_t base = ((uint64_t)reserve + SLOT_SIZE - 1) & ~(SLOT_SIZE - 1);

    uint64_t image = base + IMAGE_OFFSET;
    map_at(image, d.map_size, PROT_READ | PROT_WRITE);
    for (int i = 0; i < UCP_IFUNC_SEG_COUNT; ++i) {
        memcpy((void *)(image + d.seg[i].vaddr), blob + d.seg[i].file_offset,
               d.seg[i].file_size);
    }
    for (uint32_t i = 0; i < d.n_relocs; ++i) {
        ucp_ifunc_image_reloc_t rel;
        memcpy(&rel, blob + d.relocs_offset + i * sizeof(rel), sizeof(rel));
        if (rel.type != UCP_IFUNC_RELOC_RELATIVE) {
            die("a relocation other than RELATIVE");
        }
        uint64_t value = image + rel.addend;
        memcpy((void *)(image + rel.vaddr), &value, 8);
    }
    mprotect((void *)image, d.seg[UCP_IFUNC_SEG_TEXT].mem_size,
             PROT_READ | PROT_EXEC);

    uint8_t *gate = map_at(base + GATE_OFFSET, 0x1000, PROT_READ | PROT_WRITE);
    memset(gate, 0xcc, 0x1000);
    write_gate(gate, (uint64_t)sandbox_exit);
    const char *strtab = (const char *)blob + d.strtab_offset;
    for (uint32_t i = 0; i < d.n_imports; ++i) {
        ucp_ifunc_image_import_t imp;
        memcpy(&imp, blob + d.imports_offset + i * sizeof(imp), sizeof(imp));
        void *fn = dlsym(RTLD_DEFAULT, strtab + imp.name_offset);
        if (fn == NULL) {
            die("an import this process does not have");
        }
        write_gate(gate + BUNDLE * (1 + i), (uint64_t)fn);
    }
    mprotect(gate, 0x1000, PROT_READ | PROT_EXEC);

    map_at(base + STACK_BASE, STACK_TOP - STACK_BASE, PROT_READ | PROT_WRITE);
    uint8_t *payload =
            map_at(base + PAYLOAD_OFFSET, 1 << 20, PROT_READ | PROT_WRITE);
    size_t size = strlen(argv[2]) / 2;
    for (size_t i = 0; i < size; ++i) {
        unsigned byte;
        sscanf(argv[2] + 2 * i, "%2x", &byte);
        payload[i] = (uint8_t)byte;
    }
    uint8_t *args = payload + (1 << 19);

    if (syscall(SYS_arch_prctl, ARCH_SET_GS, base) != 0) {
        die("arch_prctl(ARCH_SET_GS) failed");
    }
    sandbox_enter(image + d.entry_vaddr, base + STACK_TOP, base,
                  (uint64_t)payload, size, (uint64_t)args);
    for (int i = 0; i < 64; ++i) {
        printf("%02x", args[i]);
    }
    printf("\n");
    return 0;
}
