# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Seed of fuzz_sandbox_verify: every form the verifier accepts; the unit
# test test/unit/test_sandbox_verify.cc reads its lines after "start:"
# (test/fuzz/Makefile.inc assembles it, with the number of imports, 2, as
# the first byte of the seed).
.text
.bundle_align_mode 5
start:
    endbr64
    push %rbp
    push %rbx
    push %rsp
    movl %gs:(%edi), %eax
    movq %gs:8(%edi,%esi,4), %rcx
    movq %rax, %gs:0x10(%ebx)
    addl %gs:-4(%r8d,%r9d,8), %eax
    movq 8(%rsp), %rdx
    movq %rdx, -32768(%rsp)
    movq 32767(%rsp), %rdx
    movq start(%rip), %r8
    movq start+0x100(%rip), %r8
    pop (%rsp)
    movsd %gs:(%eax), %xmm0
    addsd %xmm1, %xmm0
    movsd %xmm0, 16(%rsp)
    cvttsd2si %xmm0, %eax
    pxor %xmm2, %xmm2
    fldl 8(%rsp)
    fstpl %gs:(%ecx)
    lea 8(%rax,%rbx,4), %rcx
    lea (%rsp,%rax), %rcx
    lea start+0x100000(%rip), %rcx
    nopw 0(%rax,%rax,1)
    prefetcht0 (%rax)
    cmovz %rax, %rcx
    imul %rcx, %rax
    lock xaddl %eax, %gs:(%edx)
    mov %r14, %rax
    addq %r14, %rax
    mov %rsp, %rax
    test %eax, %eax
    jz 1f
    call start
    call start - 0x1000
    call start - 0x1000 + 64
1:  loop 1b
    .bundle_lock
    andl $0x1fffff, %r11d
    leaq 0x40000000(%r14,%r11), %rsp
    .bundle_unlock
    .bundle_lock
    andl $0xffffffe0, %r11d
    addq %r14, %r11
    call *%r11
    .bundle_unlock
    pop %rbx
    pop %rbp
    .bundle_lock
    popq %r11
    andl $0xffffffe0, %r11d
    addq %r14, %r11
    jmp *%r11
    .bundle_unlock
    ud2
    .p2align 5
