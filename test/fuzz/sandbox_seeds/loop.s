# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Seed of fuzz_sandbox_verify: a loop over %gs memory with SSE2 arithmetic,
# the function of test/sandbox/verify_bench.cc
# (test/fuzz/Makefile.inc assembles it, with the number of imports, 2, as
# the first byte of the seed).
.text
.bundle_align_mode 5
start:
    endbr64
    push %rbp
    push %rbx
    push %r12
    movl %gs:(%edi), %eax
    movq %gs:8(%edi,%esi,8), %rcx
    addq %rcx, %rax
    cmpl $16, %eax
    jae 2f
1:  movl %gs:(%edi,%eax,4), %edx
    imull %edx, %edx
    addl %edx, %ebx
    incl %eax
    cmpl %esi, %eax
    jb 1b
2:  movq %rax, 8(%rsp)
    movsd %gs:(%edx), %xmm0
    mulsd %xmm1, %xmm0
    addsd %xmm0, %xmm2
    movsd %xmm2, %gs:8(%edx)
    leal 1(%rax,%rbx), %ecx
    testl %ecx, %ecx
    cmovzl %ebx, %ecx
    movl %ecx, %gs:4(%r8d)
    shrq $3, %rcx
    xorl %eax, %eax
    movzbl %gs:(%r9d,%eax), %r10d
    jmp 3f
    .bundle_lock
    andl $0x1fffff, %r11d
    leaq 0x40000000(%r14,%r11), %rsp
    .bundle_unlock
3:  movq 16(%rsp), %r12
    .bundle_lock
    andl $0xffffffe0, %r11d
    addq %r14, %r11
    call *%r11
    .bundle_unlock
    pop %r12
    pop %rbx
    pop %rbp
    .bundle_lock
    popq %r11
    andl $0xffffffe0, %r11d
    addq %r14, %r11
    jmp *%r11
    .bundle_unlock
    .p2align 5
