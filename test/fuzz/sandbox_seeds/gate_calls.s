# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Seed of fuzz_sandbox_verify: calls of both imports and of a local
# function, stack frames by the S5 pair
# (test/fuzz/Makefile.inc assembles it, with the number of imports, 2, as
# the first byte of the seed).
.text
.bundle_align_mode 5
start:
    push %rbx
    movq %rdi, %rbx
    call start - 0x1000 + 32
    call start - 0x1000 + 64
    call local
    .bundle_lock
    leaq -64(%rsp), %r11
    andl $0x1fffff, %r11d
    leaq 0x40000000(%r14,%r11), %rsp
    .bundle_unlock
    movq %rax, 8(%rsp)
    movq %gs:(%ebx), %rcx
    cmpq %rcx, 8(%rsp)
    jne start
    pop %rbx
    call start - 0x1000
    .p2align 5
local:
    addl $1, %eax
    .bundle_lock
    popq %r11
    andl $0xffffffe0, %r11d
    addq %r14, %r11
    jmp *%r11
    .bundle_unlock
    .p2align 5
