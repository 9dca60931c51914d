"""Rewrites gcc's x86-64 AT&T assembly of an ifunc into shippable code.

Shipped code runs at an unknown address in a process that has never loaded
it, so it cannot use the dynamic linker's GOT or PLT. This module turns every
GOT/PLT reference into either a direct PC-relative reference (the symbol is
defined by the ifunc's own sources) or a load from the image's import table,
which the target reaches through the hidden pointer GOT_PTR:

    call *SYM@GOTPCREL(%rip)  ->  movq GOT_PTR(%rip), %r11
                                  call *IMPORT_SLOT_PREFIX.SYM(%r11)

The slot symbol IMPORT_SLOT_PREFIX.SYM is left undefined; the image linker
assigns import indices (in order of first use by code reachable from
NAME_main, so imports used only by the payload functions stay out of the
table) and patches its 32-bit displacement to 8 * index.

Constructs that shipped code cannot support are recorded per section, so that
the image linker reports them only when NAME_main can reach the section.
Constructors and thread-local definitions are refused at once: the same
library is also dlopen'ed on the target.
"""

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from .errors import Location, Refusal, UserError

GOT_PTR = "__ucp_ifunc_got_ptr"
IMPORT_SLOT_PREFIX = "__ucp_ifunc_import."
ADDR_CELL_LABEL = ".Lucp_ifunc_addr."
ADDR_CELL_SECTION = ".data.rel.ro.ucp_ifunc_addr."

TLS_MODIFIERS = {"TLSGD", "TLSLD", "DTPOFF", "DTPMOD", "TPOFF", "NTPOFF",
                 "GOTTPOFF", "GOTNTPOFF", "INDNTPOFF", "TLSDESC", "TLSCALL"}
CALL_JUMP = {"call", "callq", "jmp", "jmpq"}
MOVE = {"mov", "movq"}
COMPARE = {"cmp", "cmpq"}
REG64 = {"%r" + r for r in ("ax", "bx", "cx", "dx", "si", "di", "bp", "sp")} | \
    {"%%r%d" % n for n in range(8, 16)}
# Prefix words gas accepts before a mnemonic.
INSN_PREFIXES = {"lock", "rep", "repe", "repz", "repne", "repnz", "notrack",
                 "bnd", "data16", "data32", "addr32", "rex", "rex64",
                 "xacquire", "xrelease", "cs", "ds", "es", "fs", "gs", "ss"}
DATA_DIRECTIVES = {".byte", ".2byte", ".4byte", ".8byte", ".short", ".value",
                   ".word", ".hword", ".int", ".long", ".quad", ".octa",
                   ".dc.a", ".dc.b", ".dc.w", ".dc.l", ".dc.q", ".sleb128",
                   ".uleb128", ".reloc",
                   ".xword", ".dword"}  # aarch64 spellings
# Sections whose contents the dynamic loader runs as constructors.
CTOR_SECTIONS = (".init_array", ".fini_array", ".ctors", ".dtors",
                 ".preinit_array")
# g++ names the function that runs a file's static constructors this way.
CXX_STATIC_INIT_PREFIX = "_GLOBAL__sub_I_"
TLS_SECTIONS = (".tdata", ".tbss")
# References to these mean a C++ throw: shipped code has no unwind tables
# registered on the target, so the exception could never be caught.
THROW_SYMBOLS = {"__cxa_throw", "__cxa_rethrow"}

_SYM = r"[A-Za-z_.][\w.$]*"
_LABEL_RE = re.compile(r"\s*(%s|\d+)\s*:(?!:)" % _SYM)
_MODIFIER_RE = re.compile(r"(%s)@(\w+)" % _SYM)
_ASSIGN_RE = re.compile(r"^(%s)\s*=(?!=)\s*(.*)$" % _SYM)
_SYM_RE = re.compile(r"^(%s)$" % _SYM)
_GOT_MEM_RE = re.compile(r"^(%s)@GOTPCREL\(%%rip\)$" % _SYM, re.I)
_GOT_CALL_RE = re.compile(r"^\*\s*(%s)@GOTPCREL\(%%rip\)$" % _SYM, re.I)
_PLT_RE = re.compile(r"^(%s)@PLT$" % _SYM, re.I)
_IDENT_RE = re.compile(r"(?<![\w.%%@])(%s)" % _SYM)
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"')




@dataclass
class Unit:
    """One rewritten assembly file."""
    source: str  # the C/C++ source, for messages
    text: str    # the rewritten assembly
    # section name -> Refusals to report if the image linker keeps that
    # section
    problems: Dict[str, List[Refusal]] = field(default_factory=dict)
    # (section, symbol) -> first place that section refers to symbol
    ref_locs: Dict[Tuple[str, str], Location] = field(default_factory=dict)
    # function -> its first source line
    func_locs: Dict[str, Location] = field(default_factory=dict)
    # sandbox (sandbox.py): imports called or jumped to, which are functions,
    # and the first place each other import's address is taken
    imports_called: Set[str] = field(default_factory=set)
    imports_addressed: Dict[str, Location] = field(default_factory=dict)


@dataclass
class RewriteResult:
    units: List[Unit]
    global_defs: Set[str]  # global symbols defined by any of the files
    functions: Set[str]    # symbols typed @function in any of the files


@dataclass
class _Statement:
    labels: List[str]
    text: str  # without labels and comments
    mnemonic: str = ""  # directive name or instruction mnemonic
    args: str = ""
    prefixes: List[str] = field(default_factory=list)

    @property
    def is_directive(self):
        return self.mnemonic.startswith(".")


def _strip_comment_and_split(line, comment="#"):
    """Splits a line into statements at ';', dropping a comment (from
    `comment` on; on aarch64, where '#' marks immediates, '//' and a '#'
    that starts the line); both are ignored inside string literals."""
    if comment != "#" and line.lstrip().startswith("#"):
        return []
    statements, current, in_string, escaped = [], [], False, False
    for position, char in enumerate(line):
        if in_string:
            current.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
            current.append(char)
        elif line.startswith(comment, position):
            break
        elif char == ";":
            statements.append("".join(current))
            current = []
        else:
            current.append(char)
    statements.append("".join(current))
    return [s.strip() for s in statements if s.strip()]


def _parse_statement(text):
    labels = []
    while True:
        match = _LABEL_RE.match(text)
        if not match:
            break
        labels.append(match.group(1))
        text = text[match.end():].strip()
    stmt = _Statement(labels, text)
    assignment = _ASSIGN_RE.match(text)
    if assignment:  # 'SYM = EXPR' defines SYM like .set
        stmt.mnemonic = ".set"
        stmt.args = "%s, %s" % assignment.groups()
        return stmt
    words = text.split(None, 1)
    while words and words[0].lower() in INSN_PREFIXES and len(words) > 1:
        stmt.prefixes.append(words[0].lower())
        words = words[1].split(None, 1)
    if words:
        stmt.mnemonic = words[0] if words[0].startswith(".") else words[0].lower()
        stmt.args = words[1].strip() if len(words) > 1 else ""
    return stmt


def _split_operands(args):
    """Splits operands at commas outside parentheses and strings."""
    operands, current, depth, in_string = [], [], 0, False
    for char in args:
        if char == '"':
            in_string = not in_string
        elif not in_string and char == "(":
            depth += 1
        elif not in_string and char == ")":
            depth -= 1
        elif not in_string and depth == 0 and char == ",":
            operands.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if current or operands:
        operands.append("".join(current).strip())
    return operands


def _unquote(text):
    text = text.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1]
    return text


def _parse_lines(text, comment="#"):
    """Yields (line, statements) for every line of an assembly file."""
    for line in text.split("\n"):
        yield line, [_parse_statement(s)
                     for s in _strip_comment_and_split(line, comment)]


class _Cursor:
    """What the assembler knows at each statement: the current section, the
    source line from .file/.loc, and the enclosing function."""

    def __init__(self, source):
        self.source = source
        self.section = ".text"
        self.previous = ".text"
        self.stack = []
        self.flags = {}  # section name -> flags string of its .section
        self.files = {}  # .file number -> path
        self.file = source
        self.line = 0
        self.function = None
        self.function_types = set()
        self.func_locs = {}
        self._pending_function = None  # waiting for its first .loc
        self.in_data = False  # after the label of a variable

    def location(self):
        if self.in_data and not self.in_code():
            # data has no .loc: its variable's definition gives the line
            return Location(self.source, 0, self.function, self.function)
        return Location(self.file, self.line, self.function)

    def _switch(self, name):
        self.previous, self.section = self.section, name

    def label(self, name):
        if name in self.function_types:
            self.function = name
            self._pending_function = name
            self.in_data = False
        elif not name.startswith(".L") and not name.isdigit() and \
                not self.in_code():
            self.function = name
            self.in_data = True

    def in_code(self):
        return self.section.startswith(".text") or \
            "x" in self.flags.get(self.section, "")

    def directive(self, stmt):
        name, args = stmt.mnemonic, stmt.args
        if name in (".text", ".data", ".bss"):
            self._switch(name)
        elif name in (".section", ".pushsection"):
            fields = _split_operands(args)
            section = _unquote(fields[0]) if fields else ""
            if len(fields) > 1:
                self.flags.setdefault(section, _unquote(fields[1]))
            if name == ".pushsection":
                self.stack.append((self.section, self.previous))
            self._switch(section)
        elif name == ".popsection" and self.stack:
            self.section, self.previous = self.stack.pop()
        elif name == ".previous":
            self.section, self.previous = self.previous, self.section
        elif name == ".type":
            fields = _split_operands(args)
            if len(fields) == 2 and fields[1].lstrip("@%") in ("function",
                                                                "STT_FUNC"):
                self.function_types.add(fields[0])
        elif name == ".file":
            self._file(args)
        elif name == ".loc":
            numbers = args.split()
            if len(numbers) >= 2 and numbers[0].isdigit() and numbers[1].isdigit():
                self.file = self.files.get(int(numbers[0]), self.source)
                self.line = int(numbers[1])
                if self._pending_function:
                    self.func_locs[self._pending_function] = self.location()
                    self._pending_function = None

    def _file(self, args):
        number, _, rest = args.partition(" ")
        if not number.isdigit():
            return
        strings = [_unquote(s) for s in _STRING_RE.findall(rest)]
        if len(strings) == 1:
            self.files[int(number)] = strings[0]
        elif len(strings) >= 2:
            self.files[int(number)] = os.path.join(strings[0], strings[1])

    def in_sections(self, prefixes):
        return any(self.section == p or self.section.startswith(p + ".")
                   for p in prefixes)

    def in_tls_section(self):
        return self.in_sections(TLS_SECTIONS) or "T" in self.flags.get(
            self.section, "")


@dataclass
class _FileSymbols:
    defined: Set[str] = field(default_factory=set)
    globals: Set[str] = field(default_factory=set)
    weak: Set[str] = field(default_factory=set)
    functions: Set[str] = field(default_factory=set)
    def_section: Dict[str, str] = field(default_factory=dict)
    set_targets: Dict[str, str] = field(default_factory=dict)
    ifuncs: Set[str] = field(default_factory=set)


def _scan(source, text, comment="#"):
    """First pass: the symbols a file defines, declares global or weak."""
    syms = _FileSymbols()
    cursor = _Cursor(source)
    for _, statements in _parse_lines(text, comment):
        for stmt in statements:
            for label in stmt.labels:
                if not label.isdigit():
                    syms.defined.add(label)
                    syms.def_section.setdefault(label, cursor.section)
            if not stmt.is_directive:
                continue
            cursor.directive(stmt)
            fields = _split_operands(stmt.args)
            if stmt.mnemonic in (".globl", ".global"):
                syms.globals.update(fields)
            elif stmt.mnemonic == ".weak":
                syms.weak.update(fields)
            elif stmt.mnemonic in (".set", ".equ", ".equiv") and len(fields) == 2:
                syms.defined.add(fields[0])
                syms.set_targets[fields[0]] = fields[1]
            elif stmt.mnemonic in (".comm", ".lcomm") and fields:
                syms.defined.add(fields[0])
                syms.def_section.setdefault(fields[0], ".bss")
            elif stmt.mnemonic == ".type" and len(fields) == 2:
                kind = fields[1].lstrip("@%")
                if kind in ("gnu_indirect_function", "STT_GNU_IFUNC"):
                    syms.ifuncs.add(fields[0])
    syms.functions = cursor.function_types
    return syms


class _FileRewriter:
    """Second pass over one file."""

    comment = "#"

    def refuse_throws(self, referenced):
        """Records a problem for each C++ throw helper among @referenced."""
        for thrower in sorted(THROW_SYMBOLS.intersection(referenced)):
            self.problem("C++ throw ('%s') is not supported in shipped code "
                         "(the target cannot unwind it); keep exceptions out "
                         "of code reached from the ifunc's main function"
                         % thrower)

    def __init__(self, source, syms, global_defs):
        self.unit = Unit(source=source, text="")
        self.syms = syms
        self.defs = syms.defined | global_defs
        self.weak_imports = syms.weak - self.defs
        self.cursor = _Cursor(source)
        self.fatal = []
        self.used_slots = set()
        self.addr_cells = []  # symbols whose address needs a RELRO cell
        self.exception_sections = set()

    # -- recording ----------------------------------------------------------

    def problem(self, message):
        text = Refusal(self.cursor.location(), message)
        bucket = self.unit.problems.setdefault(self.cursor.section, [])
        if text not in bucket:
            bucket.append(text)

    def note_refs(self, args):
        for name in _IDENT_RE.findall(_STRING_RE.sub("", args)):
            if name.startswith(".L"):  # relocations name these by section
                continue
            key = (self.cursor.section, name)
            self.unit.ref_locs.setdefault(key, self.cursor.location())

    def _where_defined(self, name):
        """The Location of a function's first line, else of name's
        definition (looked up later)."""
        loc = self.cursor.func_locs.get(name)
        return Location(loc.file, loc.line) if loc else \
            Location(self.unit.source, symbol=name)

    # -- references ---------------------------------------------------------

    def slot(self, name):
        self.used_slots.add(name)
        return IMPORT_SLOT_PREFIX + name

    def call_or_jump(self, mnemonic, name):
        op = mnemonic.rstrip("q")
        if name in self.defs:
            return ["%s\t%s" % (op, name)]
        return ["movq\t%s(%%rip), %%r11" % GOT_PTR,
                "%s\t*%s(%%r11)" % (op, self.slot(name))]

    def load_address(self, name, reg):
        if name in self.defs:
            return ["leaq\t%s(%%rip), %s" % (name, reg)]
        return ["movq\t%s(%%rip), %s" % (GOT_PTR, reg),
                "movq\t%s(%s), %s" % (self.slot(name), reg, reg)]

    def compare_address(self, mnemonic, operands, index, name):
        """cmpq X, SYM@GOTPCREL(%rip) (gcc's test of a weak symbol): read the
        address from a private cell in RELRO, filled by a relocation."""
        other = operands[1 - index]
        if not (other.startswith("$") or other in REG64):
            return None
        if name not in self.addr_cells:
            self.addr_cells.append(name)
        operands = list(operands)
        operands[index] = "%s%s(%%rip)" % (ADDR_CELL_LABEL, name)
        return ["%s\t%s" % (mnemonic, ", ".join(operands))]

    # -- statements ---------------------------------------------------------

    def instruction(self, stmt):
        """Returns replacement instruction texts, or None to keep stmt."""
        operands = _split_operands(stmt.args)
        modified = _MODIFIER_RE.findall(stmt.args)
        single = operands[0] if len(operands) == 1 else ""
        plain_call = (stmt.mnemonic in CALL_JUMP and not modified
                      and _SYM_RE.match(single) and not single.startswith(".L")
                      and single not in self.defs)
        referenced = [name for name, _ in modified]
        if plain_call:
            referenced.append(single)
        self.refuse_throws(referenced)
        for name, modifier in modified:
            if modifier.upper() in TLS_MODIFIERS:
                self.problem("'%s' is a thread-local variable: shipped code "
                             "has no TLS block on the target; use a static "
                             "or global variable" % name)
                return None
        if not modified:
            if plain_call and not stmt.prefixes:
                return self.call_or_jump(stmt.mnemonic, single)
            return None
        if not stmt.prefixes:
            replacement = self._got_form(stmt.mnemonic, operands, single)
            if replacement is not None:
                return replacement
        name, modifier = modified[0]
        self.problem("unsupported use of '%s@%s' in '%s': only calls, jumps, "
                     "address loads (movq) and address compares (cmpq) can "
                     "be rewritten for shipped code; take the address in C "
                     "instead" % (name, modifier, stmt.text))
        return None

    def _got_form(self, mnemonic, operands, single):
        if mnemonic in CALL_JUMP:
            match = _GOT_CALL_RE.match(single) or _PLT_RE.match(single)
            return self.call_or_jump(mnemonic, match.group(1)) if match else None
        if len(operands) != 2:
            return None
        match = _GOT_MEM_RE.match(operands[0])
        if mnemonic in MOVE and match and operands[1] in REG64:
            return self.load_address(match.group(1), operands[1])
        if mnemonic in COMPARE:
            for index, operand in enumerate(operands):
                match = _GOT_MEM_RE.match(operand)
                if match:
                    return self.compare_address(mnemonic, operands, index,
                                                match.group(1))
        return None

    def directive(self, stmt):
        name = stmt.mnemonic
        self.cursor.directive(stmt)
        if name in (".cfi_personality", ".cfi_lsda"):
            if self.cursor.section not in self.exception_sections:
                self.exception_sections.add(self.cursor.section)
                self.problem("C++ exception handling (%s) is not supported in "
                             "shipped code; compile with -fno-exceptions or "
                             "keep code with exceptions or cleanups out of "
                             "what the ifunc's main function reaches" % name)
        elif name in DATA_DIRECTIVES:
            self.note_refs(stmt.args)
            if self.cursor.in_sections(CTOR_SECTIONS):
                self.constructor(stmt.args)
            for sym, modifier in _MODIFIER_RE.findall(stmt.args):
                if modifier.upper() in TLS_MODIFIERS:
                    self.problem("'%s' is a thread-local variable: shipped "
                                 "code has no TLS block on the target" % sym)
                else:
                    self.problem("'%s@%s' in data is not supported in shipped "
                                 "code" % (sym, modifier))

    def constructor(self, args):
        names = [n for n in _IDENT_RE.findall(args) if not n.startswith(".L")]
        for fn in names or [self.cursor.section]:
            what = "'%s' is a constructor or destructor" % fn
            if fn.startswith(CXX_STATIC_INIT_PREFIX):
                what = ("C++ static objects with constructors or destructors "
                        "need '%s'" % fn)
            self.fatal.append(Refusal(
                self._where_defined(fn),
                "%s (%s): ifunc libraries cannot have any, because shipped "
                "code cannot run them; initialise lazily instead"
                % (what, self.cursor.section)))

    def label(self, name):
        self.cursor.label(name)
        if self.cursor.in_tls_section() and not name.startswith(".L"):
            self.fatal.append(Refusal(
                Location(self.unit.source, symbol=name),
                "'%s' is a thread-local variable (%s): ifunc libraries "
                "cannot define any, because shipped code has no TLS block; "
                "use a static or global variable"
                % (name, self.cursor.section)))

    def header(self):
        """Lines that start the rewritten file (none here; the sandbox's
        pass sets its bundle mode)."""
        return []

    def raw_line(self, line):
        """Sees every line as gcc wrote it, comments included, before its
        statements (the sandbox's pass follows #APP/#NO_APP)."""

    def label_lines(self, label):
        """What a label of the input becomes."""
        return [label + ":"]

    def run(self, text):
        out = self.header()
        for line, statements in _parse_lines(text, self.comment):
            self.raw_line(line)
            new_lines, changed = [], False
            for stmt in statements:
                for label in stmt.labels:
                    self.label(label)
                    labelled = self.label_lines(label)
                    changed = changed or len(labelled) > 1
                    new_lines.extend(labelled)
                if not stmt.mnemonic:
                    continue
                if stmt.is_directive:
                    self.directive(stmt)
                    new_lines.append("\t" + stmt.text)
                    continue
                self.note_refs(stmt.args)
                replacement = self.instruction(stmt)
                if replacement is None:
                    new_lines.append("\t" + stmt.text)
                else:
                    changed = True
                    new_lines.extend("\t" + r for r in replacement)
            out.extend(new_lines if changed else [line])
        self.unit.func_locs = self.cursor.func_locs
        self._ifunc_problems()
        out.extend(self._trailer())
        self.unit.text = "\n".join(out) + "\n"
        return self.unit

    def _ifunc_problems(self):
        for name in sorted(self.syms.ifuncs):
            target = self.syms.set_targets.get(name, name)
            section = self.syms.def_section.get(target)
            if section is None:
                continue
            message = Refusal(
                self._where_defined(target),
                "'%s' is a GNU indirect function (ifunc resolver): not "
                "supported in shipped code" % name)
            self.unit.problems.setdefault(section, []).append(message)

    def _trailer(self):
        lines = []
        for name in sorted(self.used_slots & self.weak_imports):
            lines.append("\t.weak\t%s%s" % (IMPORT_SLOT_PREFIX, name))
        for name in self.addr_cells:
            lines += ['\t.section\t%s%s,"aw",@progbits' % (ADDR_CELL_SECTION, name),
                      "\t.p2align\t3",
                      "%s%s:" % (ADDR_CELL_LABEL, name),
                      "\t.quad\t%s" % name]
        return lines


def rewrite(files, rewriter_class=None):
    """Rewrites the assembly of all translation units of one ifunc.

    files: list of (source path, assembly text). rewriter_class: the
    per-file pass for the ISA (default: x86-64's). Returns a RewriteResult;
    raises UserError for constructs refused wherever they are.
    """
    rewriter_class = rewriter_class or _FileRewriter
    scans = [_scan(source, text, rewriter_class.comment)
             for source, text in files]
    global_defs = set()
    functions = set()
    for syms in scans:
        global_defs |= syms.defined & (syms.globals | syms.weak)
        functions |= syms.functions
    units, fatal = [], []
    for (source, text), syms in zip(files, scans):
        rewriter = rewriter_class(source, syms, global_defs)
        units.append(rewriter.run(text))
        fatal += [f for f in rewriter.fatal if f not in fatal]
    if fatal:
        raise UserError(*fatal)
    return RewriteResult(units, global_defs, functions)
