/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Entry into a sandbox, the way out, and the host side of the gate page
 * (sandbox.h; docs/security.md, "The runtime's part"). The per-thread state
 * is ucx_ifunc_sbx_thread (sandbox.cc), reached through %fs, which
 * sandboxed code cannot change; the offsets below are checked there.
 *
 * What sandboxed code can observe is defined on entry and after each host
 * call: general registers zero but its arguments, %xmm0-15 zero, the x87
 * unit in its initial state (registers zero and empty, control word 0x37f,
 * status and pointers zero), MXCSR 0x1f80, the arithmetic flags clear. The
 * host's MXCSR, x87 control and status words and direction flag are as
 * they were once it is back. Initialising the x87 unit costs about 30 ns:
 * it is done only when XINUSE says the unit was used since it was last
 * initialised (XGETBV with %ecx = 1, ucx_ifunc_sbx_xinuse), else always.
 */
#if defined(__x86_64__) && defined(__linux__)

#define HOST_RSP      0
#define SANDBOX_RSP   8
#define SANDBOX_RET   16
#define LEAVE_STATUS  24
#define BASE          32
#define GS_BASE       40
#define SANDBOX_MXCSR 48
#define SANDBOX_FCW   52

/* The host's frame of enter, at HOST_RSP: its MXCSR, x87 control and
 * status words, room for an x87 environment (28 bytes) and 4 spare; a
 * multiple of 16 with the six pushes, so host calls run from it down. */
#define FRAME_MXCSR 0
#define FRAME_FCW   4
#define FRAME_FSW   6
#define FRAME_ENV   8
#define FRAME_SIZE  40

#define STACK_BASE   0x40100000 /* kStackBase */
#define STACK_TOP    0x40200000 /* kStackTop */
#define GATE_OFFSET  0x1f000    /* kGateOffset */
#define BUNDLE_MASK  0xffffffe0 /* kBundleMask */

#define X87_DEFAULT_FCW 0x037f

/* %reg = the thread pointer's offset of ucx_ifunc_sbx_thread */
#define THREAD(reg) movq ucx_ifunc_sbx_thread@gottpoff(%rip), reg

/* Goes to \init if the x87 unit is in its initial state (XINUSE[0] clear);
 * without XINUSE it may not be. Clobbers %eax, %ecx, %edx. */
.macro IF_X87_INIT init
    cmpb $0, ucx_ifunc_sbx_xinuse(%rip)
    je .Lused\@
    movl $1, %ecx
    xgetbv
    testb $1, %al
    jz \init
.Lused\@:
.endm

/* Puts the x87 unit in its initial state: XRSTOR of a component marked
 * initial (which clears XINUSE[0] too), or FRSTOR of a clean image.
 * Clobbers %eax, %edx. */
.macro X87_INIT
    cmpb $0, ucx_ifunc_sbx_xinuse(%rip)
    je .Lfrstor\@
    movl $1, %eax
    xorl %edx, %edx
    xrstor64 .Lxsave_initial(%rip)
    jmp .Lx87_done\@
.Lfrstor\@:
    frstor .Lx87_initial(%rip)
.Lx87_done\@:
.endm

/* The host's floating-point state from its frame at \frame: MXCSR, the
 * x87 unit initial, then its control and status words. Clobbers %eax,
 * %ecx, %edx. (XGETBV costs some 100 ns more here before the LDMXCSR than
 * after it, measured with Sandbox.EntryCost.) */
.macro HOST_FP frame
    ldmxcsr FRAME_MXCSR(\frame)
    IF_X87_INIT .Linit\@
    X87_INIT
.Linit\@:
    cmpl $X87_DEFAULT_FCW, FRAME_FCW(\frame) /* and a status word of 0 */
    je .Ldone\@
    fldcw FRAME_FCW(\frame)
    cmpw $0, FRAME_FSW(\frame)
    je .Ldone\@
    fnstenv FRAME_ENV(\frame)
    movw FRAME_FSW(\frame), %ax
    movw %ax, FRAME_ENV + 4(\frame)
    fldenv FRAME_ENV(\frame)
.Ldone\@:
.endm

.macro ZERO_XMM
    xorps %xmm0, %xmm0
    xorps %xmm1, %xmm1
    xorps %xmm2, %xmm2
    xorps %xmm3, %xmm3
    xorps %xmm4, %xmm4
    xorps %xmm5, %xmm5
    xorps %xmm6, %xmm6
    xorps %xmm7, %xmm7
    xorps %xmm8, %xmm8
    xorps %xmm9, %xmm9
    xorps %xmm10, %xmm10
    xorps %xmm11, %xmm11
    xorps %xmm12, %xmm12
    xorps %xmm13, %xmm13
    xorps %xmm14, %xmm14
    xorps %xmm15, %xmm15
.endm

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
    subq $FRAME_SIZE, %rsp
    stmxcsr FRAME_MXCSR(%rsp)
    fnstcw FRAME_FCW(%rsp)
    fnstsw FRAME_FSW(%rsp)
    THREAD(%rax)
    movq %rsp, %fs:HOST_RSP(%rax)
    movq %rdi, %r14
    /* Nothing on the host reads %gs: set it once per slot change. */
    cmpq %rdi, %fs:GS_BASE(%rax)
    je 1f
    wrgsbase %rdi
    movq %rdi, %fs:GS_BASE(%rax)
1:  movq %rsi, %r11
    movq %rdx, %rdi
    movq %rcx, %rsi
    /* Whatever the host or the last tenant left in them. */
    IF_X87_INIT 2f
    X87_INIT
2:  movq %r8, %rdx
    ldmxcsr .Lmxcsr_default(%rip)
    ZERO_XMM
    leaq STACK_TOP(%r14), %rsp
    leaq GATE_OFFSET(%r14), %rax
    pushq %rax /* NAME_main returns to gate bundle 0 */
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
    sahf /* SF, ZF, AF, PF, CF from %ah = 0; xorl cleared OF */
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
    HOST_FP %rsp
    movl %edi, %eax
    addq $FRAME_SIZE, %rsp
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
    stmxcsr %fs:SANDBOX_MXCSR(%rax)
    fnstcw %fs:SANDBOX_FCW(%rax)
    movq %fs:HOST_RSP(%rax), %rsp
.Lcall_on_host_stack:
    cld
    movq %rsp, %r10
    pushq %rdx
    pushq %rcx
    HOST_FP %r10
    popq %rcx
    popq %rdx
    call *%r11
    THREAD(%rcx)
    movq %fs:LEAVE_STATUS(%rcx), %rdi
    testq %rdi, %rdi
    jnz ucx_ifunc_sbx_leave
    /* What the code sees after the call: the x87 unit initial with its
     * control word, its MXCSR, %xmm0-15 and the call-clobbered registers
     * zero but the result. */
    movq %rax, %r8
    ldmxcsr %fs:SANDBOX_MXCSR(%rcx)
    IF_X87_INIT 1f
    X87_INIT
1:  THREAD(%rcx)
    cmpw $X87_DEFAULT_FCW, %fs:SANDBOX_FCW(%rcx)
    je 2f
    fldcw %fs:SANDBOX_FCW(%rcx)
2:  ZERO_XMM
    movq %r8, %rax
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

    .section .rodata
    .p2align 6
/* An XSAVE area whose header marks every component initial. */
.Lxsave_initial:
    .zero 576
/* An FSAVE image of the initial x87 state (32-bit format). */
.Lx87_initial:
    .long X87_DEFAULT_FCW, 0, 0xffff
    .zero 108 - 12
.Lmxcsr_default:
    .long 0x1f80

#endif

    .section .note.GNU-stack, "", @progbits
