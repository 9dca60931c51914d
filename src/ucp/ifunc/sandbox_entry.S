/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Entry into a sandbox, the way out, and the host side of the gate page
 * (sandbox.h; docs/security.md, "The runtime's part"). The per-thread state
 * is ucx_ifunc_sbx_thread (sandbox.cc), reached through %fs, which
 * sandboxed code cannot change; the offsets below are checked there.
 */
#if defined(__x86_64__) && defined(__linux__)

#define HOST_RSP     0
#define SANDBOX_RSP  8
#define SANDBOX_RET  16
#define LEAVE_STATUS 24
#define BASE         32
#define GS_BASE      40

#define STACK_BASE   0x40100000 /* kStackBase */
#define STACK_TOP    0x40200000 /* kStackTop */
#define GATE_OFFSET  0x1f000    /* kGateOffset */
#define BUNDLE_MASK  0xffffffe0 /* kBundleMask */

/* %reg = the thread pointer's offset of ucx_ifunc_sbx_thread */
#define THREAD(reg) movq ucx_ifunc_sbx_thread@gottpoff(%rip), reg

    .text

/* int ucx_ifunc_sbx_enter(uint64_t base, uint64_t entry, void *payload,
 *                         size_t size, void *target_args)
 * Returns the status that ucx_ifunc_sbx_leave was given. */
    .globl ucx_ifunc_sbx_enter
    .hidden ucx_ifunc_sbx_enter
    .type ucx_ifunc_sbx_enter, @function
    .p2align 4
ucx_ifunc_sbx_enter:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    /* MXCSR at 0, the x87 control word at 4, scratch at 8; %rsp
     * 16-aligned after it, so
     * host calls may run on the host stack from here down. */
    subq $24, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    THREAD(%rax)
    movq %rsp, %fs:HOST_RSP(%rax)
    movq %rdi, %r14
    /* Nothing on the host reads %gs: set it once per slot change. */
    cmpq %rdi, %fs:GS_BASE(%rax)
    je 1f
    wrgsbase %rdi
    movq %rdi, %fs:GS_BASE(%rax)
1:  movq %rsi, %r11
    leaq STACK_TOP(%r14), %rsp
    leaq GATE_OFFSET(%r14), %rax
    pushq %rax /* NAME_main returns to gate bundle 0 */
    movq %rdx, %rdi
    movq %rcx, %rsi
    movq %r8, %rdx
    /* No host address stays in a register the code can read. */
    xorl %eax, %eax
    xorl %ecx, %ecx
    xorl %ebx, %ebx
    xorl %ebp, %ebp
    xorl %r8d, %r8d
    xorl %r9d, %r9d
    xorl %r10d, %r10d
    xorl %r12d, %r12d
    xorl %r13d, %r13d
    xorl %r15d, %r15d
    jmp *%r11
    .size ucx_ifunc_sbx_enter, . - ucx_ifunc_sbx_enter

/* Gate bundle 0 jumps here: the code returned. */
    .globl ucx_ifunc_sbx_exit
    .hidden ucx_ifunc_sbx_exit
    .type ucx_ifunc_sbx_exit, @function
    .p2align 4
ucx_ifunc_sbx_exit:
    xorl %edi, %edi /* UCS_OK */
/* The way out with the status in %edi: from the exit, a refused or
 * interrupted host call, or a signal handler that rewrote the context. */
    .globl ucx_ifunc_sbx_leave
    .hidden ucx_ifunc_sbx_leave
ucx_ifunc_sbx_leave:
    THREAD(%rax)
    movq %fs:HOST_RSP(%rax), %rsp
    cld
    /* MXCSR and the x87 control word as the host had them. Reading the
     * x87 status word costs more than the rest: pending x87 exceptions
     * are cleared only where they could trap in the host (a control word
     * the code changed, or a host that unmasks exceptions). */
    ldmxcsr (%rsp)
    fnstcw 8(%rsp)
    movw 8(%rsp), %ax
    cmpw 4(%rsp), %ax
    jne 5f
    movb 4(%rsp), %al
    notb %al
    testb $0x3f, %al
    jz 3f
5:  fnclex
    fldcw 4(%rsp)
3:  emms /* no x87 register left in use (the ABI wants the stack empty) */
    movl %edi, %eax
    addq $24, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size ucx_ifunc_sbx_exit, . - ucx_ifunc_sbx_exit

/* A host call: gate bundle 1 + i names import i's checking wrapper
 * (sandbox.cc, host_functions) in %r11 and jumps here. The sandbox's
 * return address is on its stack; the wrapper runs on the host's stack.
 * Gate bundles are reached by masked jumps too (S7), with %rsp anywhere in
 * the stack window: the return address is read only where the stack is
 * mapped, else the message ends (ucx_ifunc_sbx_refuse_stack). */
    .globl ucx_ifunc_sbx_host_call
    .hidden ucx_ifunc_sbx_host_call
    .p2align 4
    .type ucx_ifunc_sbx_host_call, @function
ucx_ifunc_sbx_host_call:
    THREAD(%rax)
    movq %rsp, %r10
    subq %fs:BASE(%rax), %r10
    subq $STACK_BASE, %r10
    cmpq $(STACK_TOP - STACK_BASE - 8), %r10
    ja .Lbad_stack
    popq %r10
    movq %rsp, %fs:SANDBOX_RSP(%rax)
    movq %r10, %fs:SANDBOX_RET(%rax)
    movq %fs:HOST_RSP(%rax), %rsp
.Lcall_on_host_stack:
    cld
    call *%r11
    THREAD(%rcx)
    movq %fs:LEAVE_STATUS(%rcx), %rdi
    testq %rdi, %rdi
    jnz ucx_ifunc_sbx_leave
    movq %fs:SANDBOX_RSP(%rcx), %rsp
    movq %fs:SANDBOX_RET(%rcx), %r11
    andl $BUNDLE_MASK, %r11d
    addq %fs:BASE(%rcx), %r11
    xorl %ecx, %ecx
    xorl %edx, %edx
    xorl %esi, %esi
    xorl %edi, %edi
    xorl %r8d, %r8d
    xorl %r9d, %r9d
    xorl %r10d, %r10d
    jmp *%r11
.Lbad_stack:
    movq %rsp, %rdi
    subq %fs:BASE(%rax), %rdi
    leaq ucx_ifunc_sbx_refuse_stack(%rip), %r11
    movq %fs:HOST_RSP(%rax), %rsp
    jmp .Lcall_on_host_stack
    .size ucx_ifunc_sbx_host_call, . - ucx_ifunc_sbx_host_call

    .globl ucx_ifunc_sbx_code_end
    .hidden ucx_ifunc_sbx_code_end
ucx_ifunc_sbx_code_end:

#endif

    .section .note.GNU-stack, "", @progbits
