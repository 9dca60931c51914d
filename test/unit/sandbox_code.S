/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Hand-written sandboxed code for test_sandbox.cc, following rules S1-S7
 * of docs/security.md: 32-byte bundles, memory through %gs with 32-bit
 * addresses or %rip inside the image, no ret (pop, mask, add %r14, jmp),
 * calls to the gate ending on a bundle boundary. The test copies the bytes
 * from sbx_text_start to sbx_text_end to image vaddr 0 of a slot; the data
 * page is at vaddr 0x2000 and the read-only page at 0x3000. Imports, in
 * order: memcpy, memset, memmove, memcmp, strlen, or a test's own. The
 * payload is an array of 64-bit words p[0], p[1], ...
 */
#if defined(__x86_64__)

#define DATA_VADDR 0x2000

    .text
    .bundle_align_mode 5

.macro SBX_RET
    .bundle_lock
    popq %r11
    andl $0xffffffe0, %r11d
    addq %r14, %r11
    jmp *%r11
    .bundle_unlock
.endm

/* Calls import \index; returns to the next bundle. */
.macro SBX_CALL index
    .p2align 5
    .bundle_lock
    .rept 27
    nop
    .endr
    call .Lstart - 0x1000 + 32 * (1 + \index)
    .bundle_unlock
.endm

.macro FUNCTION name
    .p2align 5
    .globl \name
\name:
.endm

    .p2align 12
    .globl sbx_text_start
sbx_text_start:
.Lstart:

/* p[0] = 2 * p[0] + 1; p[1] = ++data[0] */
FUNCTION sbx_t_double
    movq %gs:(%edi), %rax
    leaq 1(%rax,%rax), %rax
    movq %rax, %gs:(%edi)
    incq .Lstart + DATA_VADDR(%rip)
    movq .Lstart + DATA_VADDR(%rip), %rax
    movq %rax, %gs:8(%edi)
    SBX_RET

/* Nothing: the cost of a message. */
FUNCTION sbx_t_nop
    SBX_RET

/* p[1] = the 8 bytes at slot offset p[0] */
FUNCTION sbx_t_read
    movl %gs:(%edi), %eax
    movq %gs:(%eax), %rax
    movq %rax, %gs:8(%edi)
    SBX_RET

/* the 8 bytes at slot offset p[0] = p[1] */
FUNCTION sbx_t_write
    movl %gs:(%edi), %eax
    movq %gs:8(%edi), %rcx
    movq %rcx, %gs:(%eax)
    SBX_RET

FUNCTION sbx_t_loop
1:  jmp 1b

FUNCTION sbx_t_ud2
    ud2

FUNCTION sbx_t_div0
    xorl %ecx, %ecx
    movl $1, %eax
    xorl %edx, %edx
    divl %ecx
    SBX_RET

/* Pushes until the stack's guard. */
FUNCTION sbx_t_overflow
1:  pushq %rax
    jmp 1b

/* p[3] = memcpy(p[0], p[1], p[2]) */
FUNCTION sbx_t_memcpy
    movl %edi, %ebx
    movq %gs:(%ebx), %rdi
    movq %gs:8(%ebx), %rsi
    movq %gs:16(%ebx), %rdx
    SBX_CALL 0
    movq %rax, %gs:24(%ebx)
    SBX_RET

/* p[3] = memset(p[0], p[1], p[2]) */
FUNCTION sbx_t_memset
    movl %edi, %ebx
    movq %gs:(%ebx), %rdi
    movq %gs:8(%ebx), %rsi
    movq %gs:16(%ebx), %rdx
    SBX_CALL 1
    movq %rax, %gs:24(%ebx)
    SBX_RET

/* p[3] = strlen(p[0]) */
FUNCTION sbx_t_strlen
    movl %edi, %ebx
    movq %gs:(%ebx), %rdi
    SBX_CALL 4
    movq %rax, %gs:24(%ebx)
    SBX_RET

/* memset(payload, 0, 0) forever: the budget ends it in or out of the
 * host call. */
FUNCTION sbx_t_call_loop
    movl %edi, %ebx
1:  movq %rbx, %rdi
    xorl %esi, %esi
    xorl %edx, %edx
    SBX_CALL 1
    jmp 1b

/* Masks x87 exceptions and divides 1 by 0: a pending zero-divide flag. */
FUNCTION sbx_t_x87_flag
    fldcw %gs:(%edi)
    fld1
    fldz
    fdivrp
    fstp %st(0)
    SBX_RET

/* Takes %rsp to the stack window's offset p[0] (masked, as S5 does) and
 * enters gate bundle 1 (memcpy) by a masked jump (S7), not by a call. */
FUNCTION sbx_t_gate_with_rsp
    movl %gs:(%edi), %r11d
    .bundle_lock
    andl $0x1fffff, %r11d
    leaq 0x40000000(%r14,%r11), %rsp
    .bundle_unlock
    .bundle_lock
    movl $(0x1f000 + 32), %r11d
    andl $0xffffffe0, %r11d
    addq %r14, %r11
    jmp *%r11
    .bundle_unlock

/* The same with %rsp at the stack's top: the entry's return address
 * popped. */
FUNCTION sbx_t_gate_at_top
    popq %r11
    .bundle_lock
    movl $(0x1f000 + 32), %r11d
    andl $0xffffffe0, %r11d
    addq %r14, %r11
    jmp *%r11
    .bundle_unlock

/* Stores the registers as it finds them at \base (a 32-bit register that
 * holds the payload's address): test_sandbox.cc's ProbedState. */
.macro STORE_STATE base
    movq %rax, %gs:0(\base)
    movq %rbx, %gs:8(\base)
    movq %rcx, %gs:16(\base)
    movq %rdx, %gs:24(\base)
    movq %rsi, %gs:32(\base)
    movq %rdi, %gs:40(\base)
    movq %rbp, %gs:48(\base)
    movq %r8, %gs:56(\base)
    movq %r9, %gs:64(\base)
    movq %r10, %gs:72(\base)
    movq %r12, %gs:80(\base)
    movq %r13, %gs:88(\base)
    movq %r15, %gs:96(\base)
    lahf
    seto %al
    movw %ax, %gs:104(\base)
    stmxcsr %gs:108(\base)
    .irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
    movdqu %xmm\n, %gs:112 + 16 * \n(\base)
    .endr
    fnsave %gs:368(\base)
.endm

/* The state a message starts with. */
FUNCTION sbx_t_probe
    STORE_STATE %edi
    SBX_RET

/* The state after a host call: MXCSR = p[0] and the x87 control word =
 * p[1], then import 0, then the state. */
FUNCTION sbx_t_probe_call
    movl %edi, %ebx
    ldmxcsr %gs:(%ebx)
    fldcw %gs:8(%ebx)
    SBX_CALL 0
    STORE_STATE %ebx
    SBX_RET

/* Leaves its values where a later tenant or the host could look: p[2] in
 * %xmm0-15 and in the x87 registers (popped: marked empty, not cleared),
 * MXCSR = p[0], the x87 control word = p[1] and its zero divide flag. */
FUNCTION sbx_t_dirty
    .irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
    movdqu %gs:16(%edi), %xmm\n
    .endr
    .rept 8
    fildq %gs:16(%edi)
    .endr
    .rept 8
    fstp %st(0)
    .endr
    fldcw %gs:8(%edi)
    fld1
    fldz
    fdivrp
    fstp %st(0)
    ldmxcsr %gs:(%edi)
    SBX_RET

/* The code above keeps the rules (test_sandbox.cc has the verifier check
 * it); what follows breaks them on purpose, to test the runtime alone. */
    .p2align 5
    .globl sbx_clean_end
sbx_clean_end:

/* Calls gate bundle 127, which no import uses: hlt. */
FUNCTION sbx_t_gate_hlt
    call .Lstart - 0x1000 + 32 * 127

/* Sets the direction flag, MXCSR = p[0] and the x87 control word = p[1],
 * and leaves two values on the x87 stack. */
FUNCTION sbx_t_flags
    ldmxcsr %gs:(%edi)
    fldcw %gs:8(%edi)
    fld1
    fld1
    std
    SBX_RET

    .p2align 5
    .globl sbx_text_end
sbx_text_end:

#endif

    .section .note.GNU-stack, "", @progbits
