"""A check of x86-64 code against the sandbox's rules S1-S7
(docs/security.md, "Sandboxed code"), written for the tests from the rules
alone, with capstone: it does not trust ucx-ifunc-cc's sandbox pass, which
it checks. The target's own verifier (src/ucp/ifunc/sandbox/sandbox_verify.cc) is
the check that counts; this one keeps the toolchain honest until both run
on the same images.

check(text, image) returns a list of problems (empty: the code keeps the
rules), each 'offset: instruction: rule and what'.
"""

import capstone
from capstone import x86

from ucx_ifunc import image_format as fmt
from ucx_ifunc import sandbox

BUNDLE = sandbox.BUNDLE_SIZE

_NO_ACCESS = ("lea", "nop", "prefetch")
_FORBIDDEN = {
    "syscall", "sysenter", "int", "int1", "int3", "into", "iretd", "iretq",
    "iret", "hlt", "cpuid", "rdtsc", "rdtscp", "rdpid", "rdfsbase",
    "rdgsbase", "wrfsbase", "wrgsbase", "swapgs", "in", "out", "insb",
    "insw", "insd", "outsb", "outsw", "outsd", "xlatb", "enter", "leave",
    "pushfq", "popfq", "pushf", "popf", "lcall", "ljmp", "retf", "retfq",
    "lds", "les", "lfs", "lgs", "lss", "maskmovq", "maskmovdqu", "xbegin",
    "xend", "xabort", "xtest", "ret",
}
_FORBIDDEN_PREFIXES = ("movs", "stos", "lods", "scas", "cmps", "xsave",
                       "xrstor", "fxsave", "fxrstor", "vgather", "vpgather",
                       "vscatter", "vpscatter")
_R14 = {x86.X86_REG_R14, x86.X86_REG_R14D, x86.X86_REG_R14W,
        x86.X86_REG_R14B}
_RSP = {x86.X86_REG_RSP, x86.X86_REG_ESP, x86.X86_REG_SP, x86.X86_REG_SPL}


def _string_op(insn):
    # movsd/cmpsd with xmm operands are SSE2, not string instructions
    return insn.mnemonic.startswith(_FORBIDDEN_PREFIXES[:5]) and \
        all(op.type == x86.X86_OP_MEM for op in insn.operands) and \
        insn.mnemonic not in ("movsx", "movsxd", "movss")


def _is(insn, mnemonic, op_str):
    return insn.mnemonic == mnemonic and insn.op_str == op_str


def decode(text):
    """[capstone instruction] of text, decoded from its first byte; raises
    ValueError where a byte sequence does not decode."""
    disasm = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    disasm.detail = True
    out, offset = [], 0
    while offset < len(text):
        insn = next(disasm.disasm(text[offset:offset + 15], offset), None)
        if insn is None:
            raise ValueError("%#x: bytes %s do not decode"
                             % (offset, text[offset:offset + 4].hex()))
        out.append(insn)
        offset += insn.size
    return out


def check(text, map_size, n_imports, text_vaddr=0):
    """Problems of text (the TEXT segment's bytes at text_vaddr of an image
    of map_size bytes with n_imports imports)."""
    problems = []

    def problem(insn, what):
        problems.append("%#x: %s %s: %s" % (insn.address, insn.mnemonic,
                                            insn.op_str, what))

    if len(text) % BUNDLE:
        problems.append("text size %d is not whole bundles" % len(text))
    try:
        insns = decode(text)
    except ValueError as err:
        return [str(err)]
    starts = {i.address for i in insns}
    inner = set()  # second and third instructions of S5/S7 sequences
    gates = {sandbox.gate_vaddr(k - 1) for k in range(n_imports + 1)}
    for n, insn in enumerate(insns):
        end = insn.address + insn.size
        prev = insns[n - 1] if n else None
        prev2 = insns[n - 2] if n > 1 else None
        same = lambda other: other is not None and \
            other.address // BUNDLE == insn.address // BUNDLE
        # S1
        if insn.address // BUNDLE != (end - 1) // BUNDLE:
            problem(insn, "S1: crosses a bundle boundary")
        # S2
        if insn.mnemonic in _FORBIDDEN or \
                insn.mnemonic.startswith(_FORBIDDEN_PREFIXES[5:]) or \
                _string_op(insn) or insn.mnemonic.startswith("v"):
            problem(insn, "S2: not allowed")
        # S3
        if not insn.mnemonic.startswith(_NO_ACCESS):
            for op in insn.operands:
                if op.type != x86.X86_OP_MEM:
                    continue
                mem = op.mem
                if mem.segment == x86.X86_REG_GS:
                    if 0x67 not in insn.prefix:
                        problem(insn, "S3: %gs access without addr32")
                elif mem.segment != 0:
                    problem(insn, "S3: segment override")
                elif mem.base == x86.X86_REG_RIP:
                    target = text_vaddr + end + mem.disp
                    if not (0 <= target and target + op.size <= map_size):
                        problem(insn, "S3: %rip-relative outside the image")
                elif not (mem.base == x86.X86_REG_RSP and mem.index == 0 and
                          -32768 <= mem.disp <= 32767):
                    problem(insn, "S3: unconfined memory operand")
        read, written = insn.regs_access()
        # S4
        if _R14 & set(written):
            problem(insn, "S4: writes %r14")
        # S5
        if _RSP & set(written):
            if insn.mnemonic in ("push", "call") or \
                    (insn.mnemonic == "pop" and "rsp" not in insn.op_str):
                pass
            elif _is(insn, "lea", "rsp, [r14 + r11 + 0x40000000]") and \
                    same(prev) and _is(prev, "and", "r11d, 0x1fffff"):
                inner.add(insn.address)
            else:
                problem(insn, "S5: writes %rsp")
        # S7
        if insn.group(capstone.CS_GRP_JUMP) or \
                insn.group(capstone.CS_GRP_CALL):
            if insn.operands and insn.operands[0].type != x86.X86_OP_IMM:
                if insn.op_str != "r11" or \
                        insn.mnemonic not in ("jmp", "call") or \
                        not (same(prev) and same(prev2) and
                             _is(prev2, "and", "r11d, 0xffffffe0") and
                             _is(prev, "add", "r11, r14")):
                    problem(insn, "S7: unmasked indirect branch")
                else:
                    inner.update((prev.address, insn.address))
            if insn.mnemonic == "call" and end % BUNDLE:
                problem(insn, "call does not end a bundle (its return "
                        "address would not be a bundle start)")
    # S6, once every sequence is known
    for insn in insns:
        if not (insn.group(capstone.CS_GRP_JUMP) or
                insn.group(capstone.CS_GRP_CALL)):
            continue
        if not insn.operands or insn.operands[0].type != x86.X86_OP_IMM:
            continue
        target = insn.operands[0].imm
        if target >= 1 << 63:
            target -= 1 << 64
        if insn.mnemonic == "call" and target - text_vaddr in gates:
            continue
        if target not in starts or target in inner:
            problem(insn, "S6: lands on %#x, no allowed instruction start"
                    % target)
    return problems


def check_image(image):
    """Problems of a decoded sandbox image (image_format.Image)."""
    problems = []
    if image.flags != fmt.FLAG_SANDBOX:
        problems.append("flags %#x, not the sandbox's" % image.flags)
    text = image.segments[fmt.SEG_TEXT]
    if len(text.data) != text.mem_size:
        problems.append("TEXT has zero-filled bytes")
    return problems + check(bytes(text.data), image.map_size,
                            len(image.imports), text.vaddr)
