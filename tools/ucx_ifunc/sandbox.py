"""Rewrites x86-64 assembly for the sandbox (ucx-ifunc-cc --sandbox).

Sandboxed code runs in a 4 GiB slot whose base B is in %r14 and in the %gs
base (docs/security.md, "Sandboxed code"). This pass turns gcc's assembly,
already rewritten by asm_rewrite for shipped code, into code that keeps
rules S1-S7 there, so that the target's verifier accepts it:

* the text is made of 32-byte bundles (gas's .bundle_align_mode 5), every
  function starts one, and every call ends one, so that return addresses
  are bundle starts (S1);
* memory operands other than %rip-relative ones and %rsp plus a small
  displacement become %gs: with 32-bit address registers (S3);
* every write to %rsp other than push, pop and call goes through %r11 and
  the masked leaq of S5; ret and indirect branches go through %r11 masked
  to a bundle start of the slot (S7);
* calls to imports are direct calls to the import's bundle of the gate
  page, 4 KiB before the image (S6).

The compiler keeps %r14 (the base) and %r11 (the scratch register of these
sequences) out of its code (COMPILE_FLAGS). What cannot be kept inside the
rules is recorded as a problem of its section, reported if NAME_main
reaches it. The constants are sandbox_layout.h's.
"""

import re

from .asm_rewrite import _FileRewriter, _parse_statement, _split_operands

# sandbox_layout.h
BUNDLE_SIZE = 32
BUNDLE_ALIGN_LOG2 = 5
BUNDLE_MASK = 0xffffffe0
GATE_FROM_IMAGE = -0x1000  # kGateOffset - kImageOffset
MAX_GATE_IMPORTS = 127     # kMaxGateImports
STACK_WINDOW = 0x40000000  # kStackWindow
STACK_MASK = 0x1fffff      # kStackMask
RSP_DISP_MIN, RSP_DISP_MAX = -32768, 32767

# Undefined symbols that stand for import SYM's gate bundle: the image
# linker gives the import its index and resolves them.
GATE_PREFIX = "__ucp_ifunc_gate."

# After the user's flags, so that they win. Why each:
# -ffixed-r14: %r14 holds B at every instruction (S4).
# -ffixed-r11: the sequences below compute in %r11 at any point of a
#   function, where gcc could otherwise keep a value.
# -fno-stack-protector: its canary is at %fs:40, outside the slot.
# -fno-jump-tables: a jump table is an indirect jump to a label that is not
#   a bundle start.
# -fcf-protection=none: no endbr64 or notrack (nothing to land on).
# -mstringop-strategy=loop: gcc expands memcpy/memset and structure copies
#   it inlines as loops of moves, never rep movs/stos, which S2 forbids
#   (libcall would import memcpy for each one, through the host).
COMPILE_FLAGS = ("-ffixed-r14", "-ffixed-r11", "-fno-stack-protector",
                 "-fno-jump-tables", "-fcf-protection=none",
                 "-mstringop-strategy=loop")

SCRATCH = "%r11"
_MASK_TO_BUNDLE = "andl\t$%#x, %%r11d" % BUNDLE_MASK
_ADD_BASE = "addq\t%r14, %r11"
_SET_RSP = ["andl\t$%#x, %%r11d" % STACK_MASK,
            "leaq\t%#x(%%r14,%%r11), %%rsp" % STACK_WINDOW]
# Bytes of the instructions a padded call group ends with.
_DIRECT_CALL_SIZE = 5       # e8 rel32
_MASKED_CALL_SIZE = 4 + 3 + 3  # andl, addq, call *%r11
# Multi-byte nops (0f 1f /0 forms), by size, for padding inside a group:
# gas's own .nops is not counted inside a locked group (binutils 2.40).
_NOPS = {1: "90", 2: "66 90", 3: "0f 1f 00", 4: "0f 1f 40 00",
         5: "0f 1f 44 00 00", 6: "66 0f 1f 44 00 00",
         7: "0f 1f 80 00 00 00 00", 8: "0f 1f 84 00 00 00 00 00",
         9: "66 0f 1f 84 00 00 00 00 00"}

_REG32 = {"%r" + r: "%e" + r for r in ("ax", "bx", "cx", "dx", "si", "di",
                                        "bp", "sp")}
_REG32.update({"%%r%d" % n: "%%r%dd" % n for n in range(8, 16)})
_REG_RE = re.compile(r"^%[a-z0-9]+$|^%st(\(\d\))?$")
_MEM_RE = re.compile(r"^(?:%(?P<seg>[a-z]s)\s*:)?(?P<disp>[^(]*)"
                     r"(?:\((?P<base>%\w+)?(?:,\s*(?P<index>%\w+)?"
                     r"(?:,\s*(?P<scale>\d+))?)?\))?$")
_NUMBER_RE = re.compile(r"^[-+]?(0x[0-9a-f]+|\d+)$", re.I)
_R14_RE = re.compile(r"%r14[dwb]?\b")
_SYMBOL_RE = re.compile(r"(?<![\w.%$@])([A-Za-z_.][\w.$]*)")
_RSP_NARROW = ("%esp", "%sp", "%spl")

RETURNS = {"ret", "retq"}
CALLS = {"call", "callq"}
JUMPS = {"jmp", "jmpq"}
# Instructions that name memory without accessing it (S3).
_NO_ACCESS = re.compile(r"^(lea[wlq]?|nop[wlq]?|prefetch\w*)$")
# Instructions that read %rsp as their last operand without writing it.
_NO_WRITE = re.compile(r"^(cmp|test|bt[wlq]?$|push|ucomi|comi)")
# S2: what sandboxed code may never run, besides string instructions and
# AVX (below).
FORBIDDEN = {
    "syscall", "sysenter", "sysexit", "sysret", "int", "int1", "int3",
    "into", "iret", "iretl", "iretq", "iretw", "hlt", "cpuid", "rdtsc",
    "rdtscp", "rdpid", "rdpmc", "rdrand", "rdseed", "rdfsbase", "rdgsbase",
    "wrfsbase", "wrgsbase", "swapgs", "in", "inb", "inw", "inl", "out",
    "outb", "outw", "outl", "xlat", "xlatb", "enter", "enterq", "pushf",
    "pushfq", "pushfw", "popf", "popfq", "popfw", "lcall", "ljmp", "lret",
    "lretq", "lds", "les", "lfs", "lgs", "lss", "maskmovq", "maskmovdqu",
    "xbegin", "xend", "xabort", "xtest", "ud1", "clts", "cli", "sti",
    "lgdt", "lidt", "lldt", "ltr", "sgdt", "sidt", "sldt", "str", "invlpg",
    "wbinvd", "invd", "rdmsr", "wrmsr", "monitor", "mwait", "xgetbv",
    "xsetbv", "vmcall", "sysretq", "sysexitq", "retf", "lretl",
}
FORBIDDEN_PREFIXES = ("xsave", "xrstor", "fxsave", "fxrstor", "vgather",
                      "vpgather", "vscatter", "vpscatter")
# One string operation without rep, as moves of the same width (the ABI
# keeps the direction flag clear): gcc -Os writes a single stos in the tail
# of the loops -mstringop-strategy=loop gives (its strset pattern prefers
# stos when optimising for size).
_STRING_WIDTHS = {"b": (1, "%al", "%r11b"), "w": (2, "%ax", "%r11w"),
                  "l": (4, "%eax", "%r11d"), "q": (8, "%rax", "%r11")}
STRING_INSNS = {base + suffix
                for base in ("movs", "stos", "lods", "scas", "cmps", "ins",
                             "outs")
                for suffix in ("", "b", "w", "l", "d", "q")}


def gate_vaddr(index):
    """The image vaddr of gate bundle 1 + index, which calls import index."""
    return GATE_FROM_IMAGE + BUNDLE_SIZE * (1 + index)


def nop_bytes(size):
    """'.byte' operands of nops filling size bytes."""
    chunks = []
    while size > 0:
        step = min(size, 9)
        chunks.append(_NOPS[step])
        size -= step
    return ", ".join("0x" + b for chunk in chunks for b in chunk.split())


def locked(lines):
    """lines as one bundle-locked group: gas keeps it in one bundle."""
    return ["\t.bundle_lock"] + ["\t" + line for line in lines] + \
        ["\t.bundle_unlock"]


def ending_bundle(lines, size):
    """lines (size bytes) padded in front with nops to a whole bundle, so
    that the group starts, and its last instruction ends, on a boundary.
    The .p2align before it moves nothing (the group is a whole bundle),
    but has gas pad with long nops instead of the one-byte nops it pads
    locked groups with."""
    pad = BUNDLE_SIZE - size
    return ["\t.p2align\t%d" % BUNDLE_ALIGN_LOG2] + \
        locked(([".byte\t" + nop_bytes(pad)] if pad else []) + lines)


def set_rsp():
    """%rsp = the value in %r11, kept in the stack window (S5)."""
    return locked(_SET_RSP)


def masked_branch(mnemonic):
    """jmp/call *%r11 to the bundle start of the slot that %r11 names
    (S7); a call ends a bundle."""
    branch = "%s\t*%%r11" % mnemonic
    if mnemonic == "call":
        return ending_bundle([_MASK_TO_BUNDLE, _ADD_BASE, branch],
                             _MASKED_CALL_SIZE)
    return locked([_MASK_TO_BUNDLE, _ADD_BASE, branch])


def direct_call(target):
    return ending_bundle(["call\t" + target], _DIRECT_CALL_SIZE)


def return_sequence():
    return locked(["popq\t%r11", _MASK_TO_BUNDLE, _ADD_BASE, "jmpq\t*%r11"])


def is_memory(operand):
    operand = operand.lstrip("*").strip()
    return bool(operand) and not operand.startswith("$") and \
        not _REG_RE.match(operand)


def _disp_in_rsp_range(disp):
    disp = disp.strip() or "0"
    if not _NUMBER_RE.match(disp):
        return False
    return RSP_DISP_MIN <= int(disp, 0) <= RSP_DISP_MAX


class Unconfinable(Exception):
    """A construct the rewrite cannot keep inside the rules."""


def confine_memory(operand):
    """(operand as S3 allows it, whether the instruction needs addr32)."""
    star = "*" if operand.startswith("*") else ""
    match = _MEM_RE.match(operand.lstrip("*").strip())
    if match is None:
        raise Unconfinable("memory operand '%s' cannot be rewritten"
                           % operand)
    seg, disp, base, index, scale = match.group("seg", "disp", "base",
                                                "index", "scale")
    if seg:
        raise Unconfinable(
            "'%s' uses the %%%s segment: %s" % (
                operand, seg, "thread-local storage and the stack "
                "protector's canary lie outside the sandbox"
                if seg == "fs" else "only the sandbox's own %gs accesses "
                "are allowed, which ucx-ifunc-cc writes itself"))
    disp = disp.strip()
    if base == "%rip":
        return operand, False
    if base == "%rsp" and index is None and _disp_in_rsp_range(disp):
        return operand, False
    for reg in (base, index):
        if reg is not None and reg not in _REG32 and \
                reg not in _REG32.values():
            raise Unconfinable("memory operand '%s' uses %s as an address "
                               "register" % (operand, reg))
    if base is None and index is None:
        return "%s%%gs:%s" % (star, disp), True
    inside = _REG32.get(base, base) or ""
    if index is not None:
        inside += "," + _REG32.get(index, index)
        if scale is not None:
            inside += "," + scale
    return "%s%%gs:%s(%s)" % (star, disp, inside), False


class SandboxFileRewriter(_FileRewriter):
    """asm_rewrite's pass over one file, with imports called through the
    gate page and every instruction confined (see the module's
    docstring)."""

    def __init__(self, source, syms, global_defs):
        super().__init__(source, syms, global_defs)
        self.in_inline_asm = False

    # -- asm_rewrite's hooks -------------------------------------------------

    def header(self):
        return ["\t.bundle_align_mode\t%d" % BUNDLE_ALIGN_LOG2]

    def raw_line(self, line):
        text = line.strip()
        if text == "#APP":
            self.in_inline_asm = True
        elif text == "#NO_APP":
            self.in_inline_asm = False

    def label_lines(self, label):
        # functions start bundles: their addresses are what indirect calls
        # land on
        if label in self.cursor.function_types and self.cursor.in_code():
            return ["\t.p2align\t%d" % BUNDLE_ALIGN_LOG2, label + ":"]
        return [label + ":"]

    def call_or_jump(self, mnemonic, name):
        op = mnemonic.rstrip("q")
        if name in self.defs:
            return ["%s\t%s" % (op, name)]
        self.unit.imports_called.add(name)
        # a jump to the gate is no call: S6 lets only calls reach it, so a
        # tail call becomes a call and a return
        return ["call\t%s%s" % (GATE_PREFIX, name)] + \
            ([] if op == "call" else ["ret"])

    def load_address(self, name, reg):
        if name in self.defs:
            return ["leaq\t%s(%%rip), %s" % (name, reg)]
        self.unit.imports_addressed.setdefault(name, self.cursor.location())
        return ["leaq\t%s%s(%%rip), %s" % (GATE_PREFIX, name, reg)]

    def compare_address(self, mnemonic, operands, index, name):
        if name not in self.defs:
            self.unit.imports_addressed.setdefault(name,
                                                   self.cursor.location())
        return super().compare_address(mnemonic, operands, index, name)

    def directive(self, stmt):
        super().directive(stmt)
        if stmt.mnemonic in (".byte", ".quad", ".long", ".int", ".4byte",
                             ".8byte", ".value", ".short", ".word") and \
                self.cursor.section.startswith((".data", ".rodata", ".bss")):
            self.refuse_code_labels(stmt.args)

    def instruction(self, stmt):
        replacement = super().instruction(stmt)
        if replacement is None:
            statements = [stmt]
        else:
            statements = [_parse_statement(text) for text in replacement]
        out = []
        for each in statements:
            try:
                out += self.confine(each)
            except Unconfinable as err:
                self.problem("%s%s: not possible in sandboxed code"
                             % ("inline asm: " if self.in_inline_asm else "",
                                err))
                out.append(each.text)
        return out

    # -- the rules ----------------------------------------------------------

    def refuse_code_labels(self, args):
        """A local code label's address (computed goto, a jump table in
        inline asm) is no bundle start: a jump to it would be masked to
        another instruction."""
        for name in _SYMBOL_RE.findall(args):
            section = self.syms.def_section.get(name)
            if name.startswith(".L") and section is not None and \
                    section.startswith(".text") and \
                    name not in self.syms.functions:
                self.problem("the address of the code label %s (computed "
                             "goto, or a jump table) cannot be branched to "
                             "in sandboxed code: indirect branches land on "
                             "bundle starts only" % name)
                return

    def confine(self, stmt):
        """The lines that replace one instruction (statement) in the
        sandbox; raises Unconfinable."""
        mnemonic = stmt.mnemonic
        operands = _split_operands(stmt.args) if stmt.args else []
        prefixes = [p for p in stmt.prefixes if p not in ("rep", "repz")] \
            if mnemonic in RETURNS else stmt.prefixes
        shown = stmt.text
        if _R14_RE.search(stmt.args) and not mnemonic.startswith("nop"):
            raise Unconfinable("'%s' uses %%r14, which holds the sandbox's "
                               "base" % shown)
        single = self.single_string_op(mnemonic, operands, stmt.prefixes)
        if single is not None:
            return single
        self.check_allowed(mnemonic, operands, shown)
        if mnemonic in RETURNS:
            if operands or prefixes:
                raise Unconfinable("'%s': only a plain ret can be rewritten"
                                   % shown)
            return return_sequence()
        if mnemonic in ("leave", "leaveq"):
            return ["movq\t%rbp, %r11"] + set_rsp() + ["popq\t%rbp"]
        if mnemonic in CALLS | JUMPS:
            return self.branch(mnemonic.rstrip("q"), operands, prefixes,
                               shown)
        if mnemonic.startswith(("j", "loop")) and operands and \
                not operands[0].startswith("*"):
            return [stmt.text]  # direct: a label, checked by the verifier
        if ".L" in stmt.args:
            self.refuse_code_labels(stmt.args)
        addr32 = False
        if not _NO_ACCESS.match(mnemonic):
            confined = []
            for operand in operands:
                if is_memory(operand):
                    operand, needs = confine_memory(operand)
                    addr32 = addr32 or needs
                confined.append(operand)
            operands = confined
        if any(o in ("%rsp",) + _RSP_NARROW for o in operands) and \
                mnemonic.startswith(("xchg", "xadd", "cmpxchg")):
            raise Unconfinable("'%s' writes %%rsp" % shown)
        if operands and operands[-1] in _RSP_NARROW + ("%rsp",) and \
                not _NO_WRITE.match(mnemonic):
            return self.write_rsp(mnemonic, operands, prefixes, shown)
        words = prefixes + (["addr32"] if addr32 else []) + [mnemonic]
        text = " ".join(words)
        return [text + ("\t" + ", ".join(operands) if operands else "")]

    @staticmethod
    def single_string_op(mnemonic, operands, prefixes):
        """The moves that do what one stos, lods or movs (no rep, no
        operands) does; None for anything else."""
        if operands or prefixes or len(mnemonic) != 5 or \
                mnemonic[4] not in _STRING_WIDTHS:
            return None
        size, accumulator, scratch = _STRING_WIDTHS[mnemonic[4]]
        move = "mov" + mnemonic[4]
        if mnemonic.startswith("stos"):
            return ["%s\t%s, %%gs:(%%edi)" % (move, accumulator),
                    "leaq\t%d(%%rdi), %%rdi" % size]
        if mnemonic.startswith("lods"):
            return ["%s\t%%gs:(%%esi), %s" % (move, accumulator),
                    "leaq\t%d(%%rsi), %%rsi" % size]
        if mnemonic.startswith("movs"):
            return ["%s\t%%gs:(%%esi), %s" % (move, scratch),
                    "%s\t%s, %%gs:(%%edi)" % (move, scratch),
                    "leaq\t%d(%%rsi), %%rsi" % size,
                    "leaq\t%d(%%rdi), %%rdi" % size]
        return None

    @staticmethod
    def check_allowed(mnemonic, operands, shown):
        if mnemonic in FORBIDDEN or mnemonic.startswith(FORBIDDEN_PREFIXES):
            raise Unconfinable("instruction '%s' (rule S2)" % shown)
        if mnemonic in STRING_INSNS and all(is_memory(o) for o in operands):
            raise Unconfinable("string instruction '%s' (rule S2)" % shown)
        if mnemonic.startswith("v"):
            raise Unconfinable("AVX instruction '%s': only integer, "
                               "SSE/SSE2 and x87 instructions are allowed "
                               "(rule S2; leave -mavx and -march out)"
                               % shown)
        if mnemonic.startswith(("mov", "pop")) and operands and \
                re.match(r"^%[c-gs]s$", operands[-1]):
            raise Unconfinable("'%s' writes a segment register (rule S2)"
                               % shown)

    def branch(self, op, operands, prefixes, shown):
        if len(operands) != 1 or prefixes:
            raise Unconfinable("'%s': branch form" % shown)
        target = operands[0]
        if not target.startswith("*"):
            return direct_call(target) if op == "call" else \
                ["%s\t%s" % (op, target)]
        target = target[1:].strip()
        if _REG_RE.match(target):
            if target == SCRATCH:
                load = []
            else:
                load = ["movq\t%s, %%r11" % target]
        else:
            memory, addr32 = confine_memory(target)
            load = ["%smovq\t%s, %%r11" % ("addr32 " if addr32 else "",
                                            memory)]
        return load + masked_branch(op)

    def write_rsp(self, mnemonic, operands, prefixes, shown):
        if operands[-1] != "%rsp" or prefixes:
            raise Unconfinable("'%s' writes part of %%rsp" % shown)
        source = operands[0] if len(operands) == 2 else None
        if mnemonic.startswith("pop"):
            raise Unconfinable("'%s' loads %%rsp from the stack" % shown)
        if source is not None and mnemonic in ("subq", "sub", "addq",
                                                "add") and \
                _NUMBER_RE.match(source.lstrip("$")) and \
                source.startswith("$"):
            amount = int(source[1:], 0)
            if mnemonic.startswith("sub"):
                amount = -amount
            compute = ["leaq\t%d(%%rsp), %%r11" % amount]
        elif source is not None and mnemonic in ("movq", "mov", "leaq",
                                                 "lea"):
            compute = ["%s\t%s, %%r11" % (mnemonic, source)]
        elif len(operands) in (1, 2):
            compute = ["movq\t%rsp, %r11",
                       "%s\t%s" % (mnemonic, ", ".join(operands[:-1] +
                                                       [SCRATCH]))]
        else:
            raise Unconfinable("'%s' writes %%rsp" % shown)
        return compute + set_rsp()



def text_fill(start, size):
    """Bytes for a gap of size bytes at text offset start: ud2 (which
    faults, and which S2 allows) at even offsets, so that none crosses a
    bundle boundary, and a one-byte nop where a byte is left over."""
    out = bytearray()
    position, end = start, start + size
    while position < end:
        if position % 2 or end - position < 2:
            out += b"\x90"
            position += 1
        else:
            out += b"\x0f\x0b"
            position += 2
    return bytes(out)
