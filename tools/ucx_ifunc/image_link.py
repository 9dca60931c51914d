"""Links the rewritten objects of one ifunc into a code image.

Starting from the section that defines NAME_main, keeps every section that
relocations make reachable, lays them out in three segments (TEXT, RELRO,
DATA), resolves the relocations that can be resolved now, and turns the rest
into the image's relocation records and imports. See docs/toolchain.md.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from . import elf_read
from . import image_format as fmt
from . import isa as isas
from .asm_rewrite import GOT_PTR, IMPORT_SLOT_PREFIX, Unit
from .elf_read import SHF_ALLOC, SHF_EXECINSTR, SHF_STRINGS, SHF_WRITE
from .errors import Location, Refusal, ToolchainBug, UserError
from . import sandbox as sbx

# x86-64 relocation types (psABI numbering).
R_NONE, R_64, R_PC32, R_PLT32 = 0, 1, 2, 4
R_32, R_32S, R_PC64, R_SIZE32, R_SIZE64 = 10, 11, 24, 32, 33
GOT_RELOCS = {3: "GOT32", 9: "GOTPCREL", 25: "GOTOFF64", 26: "GOTPC32",
              27: "GOT64", 28: "GOTPCREL64", 29: "GOTPC64", 30: "GOTPLT64",
              31: "PLTOFF64", 41: "GOTPCRELX", 42: "REX_GOTPCRELX"}
TLS_RELOCS = {16: "DTPMOD64", 17: "DTPOFF64", 18: "TPOFF64", 19: "TLSGD",
              20: "TLSLD", 21: "DTPOFF32", 22: "GOTTPOFF", 23: "TPOFF32",
              34: "GOTPC32_TLSDESC", 35: "TLSDESC_CALL", 36: "TLSDESC"}
RELOC_NAMES = {R_64: "64", R_PC32: "PC32", R_PLT32: "PLT32", R_32: "32",
               R_32S: "32S", R_PC64: "PC64", R_SIZE32: "SIZE32",
               R_SIZE64: "SIZE64", **GOT_RELOCS, **TLS_RELOCS}



def reloc_name(rtype):
    return "R_X86_64_" + RELOC_NAMES.get(rtype, str(rtype))


@dataclass
class Symbol:
    name: str
    bind: str
    type: str
    shndx: object  # section index, or 'SHN_UNDEF' / 'SHN_ABS' / 'SHN_COMMON'
    value: int
    size: int


@dataclass
class Relocation:
    offset: int
    rtype: int
    symbol: Symbol
    addend: int


@dataclass
class InputSection:
    obj: Optional["ObjectFile"]  # None for the synthesised GOT pointer slot
    index: int
    name: str
    flags: int
    align: int
    size: int
    nobits: bool
    data: bytes
    relocs: List[Relocation] = field(default_factory=list)
    segment: Optional[int] = None
    vaddr: int = 0

    def describe(self):
        return "%s(%s)" % (self.obj.unit.source if self.obj else "<linker>",
                           self.name)


def _segment_for(section):
    """The image segment an allocated section belongs in."""
    if section.flags & SHF_EXECINSTR:
        return fmt.SEG_TEXT
    if not section.flags & SHF_WRITE or \
            section.name.startswith(".data.rel.ro"):
        return fmt.SEG_RELRO
    return fmt.SEG_DATA


class ObjectFile:
    """The parts of one relocatable object that the image linker needs."""

    def __init__(self, path, unit: Unit, isa=isas.X86_64):
        self.path = path
        self.unit = unit
        with open(path, "rb") as stream:
            try:
                elf = elf_read.ElfFile(stream.read())
            except elf_read.ElfFormatError as err:
                raise ToolchainBug("%s: %s" % (path, err))
        if not elf.is_supported or elf.machine != isa.e_machine:
            raise UserError("%s: compiled for %s (ELF%d); expected %s code"
                            % (unit.source, isas.machine_name(elf.machine)
                               or "ELF machine %s" % elf.machine,
                               elf.elfclass, isa.display))
        self.sections: Dict[int, InputSection] = {}
        self.symbols: List[Symbol] = []
        rela_sections, group_sections = [], []
        for sec in elf.sections:
            if sec.type == elf_read.SHT_SYMTAB:
                self.symbols = [Symbol(s.name, s.bind, s.type, s.shndx,
                                       s.value, s.size)
                                for s in elf.symbols(sec)]
            elif sec.type == elf_read.SHT_RELA:
                rela_sections.append(sec)
            elif sec.type == elf_read.SHT_GROUP:
                group_sections.append(sec)
            elif sec.flags & SHF_ALLOC:
                nobits = sec.type == elf_read.SHT_NOBITS
                self.sections[sec.index] = InputSection(
                    self, sec.index, sec.name, sec.flags,
                    max(sec.addralign, 1), sec.size, nobits, sec.data())
        # COMDAT groups: (signature, member section indices)
        self.groups = [(self.symbols[g.info].name, _group_members(g))
                       for g in group_sections]
        for rela in rela_sections:
            target = self.sections.get(rela.info)
            if target is None:  # relocations of debug info and the like
                continue
            for rel in elf.relocations(rela, self.symbols):
                target.relocs.append(Relocation(rel.offset, rel.type,
                                                rel.symbol, rel.addend))
            target.relocs.sort(key=lambda r: r.offset)

    def symbol_at(self, section, offset):
        """The function or variable that holds section+offset, if any."""
        for sym in self.symbols:
            if (sym.type in ("STT_FUNC", "STT_OBJECT")
                    and sym.shndx == section.index
                    and sym.value <= offset < sym.value + max(sym.size, 1)):
                return sym.name
        return None


def _group_members(group):
    data = group.data()
    words = [int.from_bytes(data[i:i + 4], "little")
             for i in range(0, len(data), 4)]
    return words[1:]  # word 0 holds the GRP_* flags


@dataclass
class _Target:
    """What a relocation's symbol resolves to."""
    section: Optional[InputSection] = None  # defined: section + offset
    offset: int = 0
    symbol: Optional[Symbol] = None  # the definition (for its size)
    import_name: Optional[str] = None  # undefined: resolved by the target
    slot_of: Optional[str] = None  # an import-table slot (asm_rewrite)
    gate_of: Optional[str] = None  # an import's gate bundle (sandbox)


@dataclass
class LinkResult:
    image: fmt.Image
    link_map: str  # where every kept section went, for --keep-temps
    # imports that the payload functions do not use: the source never needs
    # them (they may exist only in the target program)
    target_only_imports: List[str] = field(default_factory=list)


class ImageLinker:
    def __init__(self, ifunc_name, objects: List[ObjectFile], isa=isas.X86_64,
                 payload_functions=(), sandbox=False):
        self.name = ifunc_name
        # the functions that run on the source (the bound function of the
        # library's convention and NAME_payload_init)
        self.payload_functions = payload_functions
        self.objects = objects
        self.isa = isa
        # aarch64 code is linked as gcc wrote it, with a GOT and stubs of
        # the linker's own; x86-64 code was rewritten to need neither
        self.aarch64 = None
        if isa is isas.AARCH64:
            # imported here: reloc_aarch64 builds on this module's classes
            from .reloc_aarch64 import Aarch64Relocator
            self.aarch64 = Aarch64Relocator(self)
        self.errors: List[str] = []
        # sandbox images call imports through the gate page and have no
        # import table, so no hidden pointer either
        self.sandbox = sandbox
        self.got_slot = InputSection(None, 0, "<ucp_ifunc_got_ptr>",
                                     SHF_ALLOC | SHF_WRITE,
                                     8, 8, False, bytes(8),
                                     segment=fmt.SEG_RELRO)
        self.discarded = set()  # (object id, section index)
        self.globals: Dict[str, tuple] = {}  # name -> (ObjectFile, Symbol)
        self.imports: List[fmt.Import] = []
        self.import_index: Dict[str, int] = {}

    # -- errors -------------------------------------------------------------

    def error(self, section, offset, symbol_name, message):
        loc = section.obj.unit.ref_locs.get((section.name, symbol_name))
        if loc is None:
            # the function or variable that holds the place; its
            # definition's line is looked up later
            holder = section.obj.symbol_at(section, offset)
            loc = Location(section.obj.unit.source, function=holder,
                           symbol=holder)
        line = Refusal(loc, message)
        if line not in self.errors:
            self.errors.append(line)

    @staticmethod
    def target_name(rel, target):
        """(the symbol's name, how messages show what it refers to). A
        section symbol (a string literal, or a static variable that the
        assembler names by its section) is shown as what is at its offset."""
        name = rel.symbol.name
        if name or target.section is None:
            return name, "'%s'" % name
        section = target.section
        offset = target.offset + rel.addend
        held = section.obj.symbol_at(section, offset) if section.obj else None
        if held:
            return name, "'%s'" % held
        # what has no symbol in read-only data is the compiler's: at -O0,
        # string literals sit in .rodata itself
        end = section.data.find(b"\0", offset)
        if not section.flags & SHF_WRITE and not section.nobits \
                and end > offset:
            text = section.data[offset:end].decode("utf-8", "replace")
            if section.flags & SHF_STRINGS or text.isprintable():
                if len(text) > 24:
                    text = text[:24] + "..."
                import json  # only for error messages
                return name, "the string literal %s" % json.dumps(text)
        return name, "section %s%+d" % (section.name, offset) if offset \
            else "section %s" % section.name

    def raise_errors(self):
        if self.errors:
            raise UserError(*self.errors)

    # -- symbols ------------------------------------------------------------

    def _select_comdat(self):
        seen = set()
        for obj in self.objects:
            for signature, members in obj.groups:
                if signature in seen:
                    self.discarded.update((id(obj), m) for m in members)
                seen.add(signature)

    def _collect_globals(self):
        for obj in self.objects:
            for sym in obj.symbols:
                if sym.bind == "STB_LOCAL" or sym.shndx == "SHN_UNDEF":
                    continue
                if (id(obj), sym.shndx) in self.discarded:
                    continue
                if sym.name == GOT_PTR or sym.name.startswith(IMPORT_SLOT_PREFIX):
                    self.errors.append(Refusal(
                        Location(obj.unit.source, symbol=sym.name),
                        "'%s' is a name reserved for ucx-ifunc-cc"
                        % sym.name))
                    continue
                other = self.globals.get(sym.name)
                if other is None or (other[1].bind == "STB_WEAK"
                                     and sym.bind == "STB_GLOBAL"):
                    self.globals[sym.name] = (obj, sym)
                elif sym.bind == "STB_GLOBAL" and other[1].bind == "STB_GLOBAL":
                    self.errors.append(Refusal(
                        Location(other[0].unit.source, symbol=sym.name),
                        "'%s' is defined in both %s and %s" % (
                            sym.name, other[0].unit.source, obj.unit.source)))
        self.raise_errors()

    def resolve(self, obj, sym):
        if sym.bind != "STB_LOCAL":
            definition = self.globals.get(sym.name)
            if definition is not None:
                obj, sym = definition
            elif sym.name == GOT_PTR:
                return _Target(section=self.got_slot)
            elif sym.name.startswith(IMPORT_SLOT_PREFIX):
                return _Target(slot_of=sym.name[len(IMPORT_SLOT_PREFIX):])
            elif sym.name.startswith(sbx.GATE_PREFIX):
                return _Target(gate_of=sym.name[len(sbx.GATE_PREFIX):])
            elif sym.shndx == "SHN_UNDEF":
                return _Target(import_name=sym.name)
        if not isinstance(sym.shndx, int):
            return _Target(symbol=sym)  # SHN_ABS or SHN_COMMON
        section = obj.sections.get(sym.shndx)
        if section is None or (id(obj), sym.shndx) in self.discarded:
            raise ToolchainBug("symbol %s refers to a section that is not "
                               "linked" % sym.name)
        return _Target(section=section, offset=sym.value, symbol=sym)

    def add_import(self, name, weak):
        index = self.import_index.get(name)
        if index is None:
            index = self.import_index[name] = len(self.imports)
            self.imports.append(fmt.Import(name, weak))
        elif not weak:  # one strong reference makes the import strong
            self.imports[index].weak = False
        return index

    # -- the link -----------------------------------------------------------

    def _function(self, name):
        """(section, offset) of the global function name."""
        definition = self.globals.get(name)
        if definition is None:
            raise UserError("%s: not defined by the ifunc's sources (it must "
                            "be a global function)" % name)
        obj, sym = definition
        section = obj.sections.get(sym.shndx) if isinstance(sym.shndx, int) else None
        if sym.type != "STT_FUNC" or section is None or \
                _segment_for(section) != fmt.SEG_TEXT:
            raise UserError(Refusal(
                Location(obj.unit.source, symbol=name),
                "'%s' must be a function (it is defined as %s)"
                % (name, sym.type)))
        return section, sym.value

    def _imports_used_by(self, sections):
        names = set()
        for section in sections:
            for rel in section.relocs:
                target = self.resolve(section.obj, rel.symbol)
                name = target.import_name or target.slot_of or \
                    target.gate_of
                if name:
                    names.add(name)
        return names

    def _reachable(self, root):
        keep, work = [root], [root]
        seen = {id(root)}
        while work:
            section = work.pop()
            for rel in section.relocs:
                target = self.resolve(section.obj, rel.symbol).section
                if target is not None and id(target) not in seen:
                    seen.add(id(target))
                    keep.append(target)
                    work.append(target)
        return keep

    def _report_deferred(self, kept):
        for section in kept:
            if section.obj is None:
                continue
            for line in section.obj.unit.problems.get(section.name, ()):
                if line not in self.errors:
                    self.errors.append(line)
        self.raise_errors()

    def _in_input_order(self, sections):
        order = {id(s): n for n, s in enumerate(
            s for obj in self.objects for s in obj.sections.values())}
        return sorted(sections, key=lambda s: order.get(id(s), -1))

    def _layout(self, kept, extra_text=(), extra_relro=()):
        """Assigns vaddrs; returns the three segments (with unpatched
        bytearray data) and the sections in layout order. extra_text goes
        at the end of TEXT, extra_relro right after the GOT pointer."""
        kept = self._in_input_order(kept)
        by_segment = [[], ([] if self.sandbox else [self.got_slot]) +
                      list(extra_relro), []]
        for section in kept:
            if section.obj is None:
                continue
            if section.align > fmt.PAGE_ALIGN:
                holder = section.obj.symbol_at(section, 0)
                self.errors.append(Refusal(
                    Location(section.obj.unit.source, function=holder,
                             symbol=holder),
                    "section %s is aligned to %d bytes, more than the page "
                    "size" % (section.name, section.align)))
            section.segment = _segment_for(section)
            by_segment[section.segment].append(section)
        by_segment[fmt.SEG_TEXT] += extra_text
        self.raise_errors()
        # .bss last, so that DATA's zero-filled tail needs no file bytes
        by_segment[fmt.SEG_DATA].sort(key=lambda s: s.nobits)

        segments, laid_out, vaddr = [], [], 0
        for index, sections in enumerate(by_segment):
            vaddr = fmt.align_up(vaddr, fmt.PAGE_ALIGN)
            data = bytearray()
            file_size = offset = 0
            for section in sections:
                align = section.align
                if self.sandbox and index == fmt.SEG_TEXT:
                    # gas laid its bundles out from the section's start
                    align = max(align, sbx.BUNDLE_SIZE)
                start = fmt.align_up(offset, align)
                section.vaddr = vaddr + start
                offset = start + section.size
                if section.nobits and index == fmt.SEG_DATA:
                    continue
                data += self._fill(index, len(data), start - len(data))
                data += section.data if not section.nobits else bytes(section.size)
                file_size = len(data)
            if self.sandbox and index == fmt.SEG_TEXT:
                # whole bundles, all of them in the file (the verifier
                # decodes every byte of the text)
                offset = fmt.align_up(offset, sbx.BUNDLE_SIZE)
                data += self._fill(index, len(data), offset - len(data))
                file_size = len(data)
            segments.append(fmt.Segment(vaddr, offset, data[:file_size]))
            laid_out += sections
            vaddr += offset
        return segments, laid_out

    def _fill(self, segment, start, size):
        """Bytes for a gap of size bytes at offset start of a segment."""
        if segment != fmt.SEG_TEXT:
            return bytes(size)
        if not self.sandbox:
            return self.isa.text_fill * size
        return sbx.text_fill(start, size)

    def _relocate(self, segments, laid_out):
        records = []
        for section in laid_out:
            seg = segments[section.segment]
            for rel in section.relocs:
                place = section.vaddr + rel.offset
                if self.aarch64 is not None:
                    record = self.aarch64.apply(section, rel, place, seg)
                else:
                    record = self._apply(section, rel, place, seg)
                if record is not None:
                    records.append(record)
        return records

    def _apply(self, section, rel, place, seg):
        """Resolves one relocation: patches seg.data, or returns the image
        relocation record the target must apply."""
        target = self.resolve(section.obj, rel.symbol)
        name, shown = self.target_name(rel, target)
        rtype = rel.rtype

        def patch(value, size, signed):
            lo, hi = (-(1 << (8 * size - 1)), 1 << (8 * size - 1)) if signed \
                else (0, 1 << (8 * size))
            if not lo <= value < hi:
                self.error(section, rel.offset, name,
                           "%s to %s overflows (value %#x)"
                           % (reloc_name(rtype), shown, value))
                return
            pos = place - seg.vaddr
            seg.data[pos:pos + size] = value.to_bytes(size, "little",
                                                      signed=signed)

        if rtype == R_NONE:
            return None
        if target.gate_of is not None:
            return self._apply_gate(section, rel, place, patch, target.gate_of)
        if self.sandbox and rtype == R_64 and target.import_name is not None \
                and section.segment != fmt.SEG_TEXT and not place % 8:
            # a pointer to an imported function in data: its gate bundle
            return self._apply_gate(section, rel, place, patch,
                                    target.import_name)
        if rtype in TLS_RELOCS:
            self.error(section, rel.offset, name, "%s is a thread-local "
                       "variable (%s): shipped code has no TLS block"
                       % (shown, reloc_name(rtype)))
        elif rtype in GOT_RELOCS:
            self.error(section, rel.offset, name, "GOT reference to %s (%s) "
                       "that could not be rewritten for shipped code"
                       % (shown, reloc_name(rtype)))
        elif target.slot_of is not None:
            if rtype not in (R_32, R_32S):
                raise ToolchainBug("%s against import slot %s"
                                   % (reloc_name(rtype), shown))
            weak = rel.symbol.bind == "STB_WEAK"
            index = self.add_import(target.slot_of, weak)
            patch(8 * index + rel.addend, 4, rtype == R_32S)
        elif target.section is None and target.import_name is None:
            self.error(section, rel.offset, name, "%s is an absolute or "
                       "common symbol, which shipped code cannot refer to "
                       "(compile with -fno-common)" % shown)
        elif rtype in (R_32, R_32S):
            self.error(section, rel.offset, name, "%s is referenced by an "
                       "absolute 32-bit address (%s): compile with -fPIC"
                       % (shown, reloc_name(rtype)))
        elif rtype == R_64:
            if section.segment == fmt.SEG_TEXT:
                self.error(section, rel.offset, name, "text relocation against "
                           "%s (R_X86_64_64 in code): compile with -fPIC"
                           % shown)
            elif place % 8:
                self.error(section, rel.offset, name, "pointer to %s at a "
                           "misaligned address (packed structure?): pointers "
                           "in shipped data must be 8-byte aligned" % shown)
            elif target.import_name is not None:
                weak = rel.symbol.bind == "STB_WEAK"
                return fmt.Reloc(place, fmt.RELOC_IMPORT, rel.addend,
                                 self.add_import(target.import_name, weak))
            else:
                return fmt.Reloc(place, fmt.RELOC_RELATIVE,
                                 target.section.vaddr + target.offset + rel.addend)
        elif target.import_name is not None:
            self.error(section, rel.offset, name, "%s is not defined by the "
                       "ifunc's sources and %s cannot import it (is it "
                       "declared with hidden visibility?); only calls, "
                       "address loads and pointers in data can be imported"
                       % (shown, reloc_name(rtype)))
        elif rtype in (R_PC32, R_PLT32, R_PC64):
            value = target.section.vaddr + target.offset + rel.addend - place
            patch(value, 8 if rtype == R_PC64 else 4, True)
        elif rtype in (R_SIZE32, R_SIZE64):
            patch(target.symbol.size + rel.addend, 4 if rtype == R_SIZE32 else 8,
                  rtype == R_SIZE64)
        else:
            self.error(section, rel.offset, name, "relocation %s against %s "
                       "is not supported in shipped code"
                       % (reloc_name(rtype), shown))
        return None

    def _apply_gate(self, section, rel, place, patch, name):
        """A reference to import name's gate bundle (sandbox images):
        direct calls and address loads are patched, pointers in data become
        RELATIVE records (the gate page lies before image vaddr 0)."""
        weak = rel.symbol.bind == "STB_WEAK"
        index = self.add_import(name, weak)
        gate = sbx.gate_vaddr(index)
        if rel.rtype in (R_PC32, R_PLT32):
            patch(gate + rel.addend - place, 4, True)
            return None
        if rel.rtype == R_64 and section.segment != fmt.SEG_TEXT:
            return fmt.Reloc(place, fmt.RELOC_RELATIVE, gate + rel.addend)
        self.error(section, rel.offset, name, "%s to the gate of import '%s' "
                   "is not supported in sandboxed code"
                   % (reloc_name(rel.rtype), name))
        return None

    def _check_sandbox_imports(self):
        """Sandboxed code calls imported functions through the gate page;
        it cannot reach the host's data, and the gate page has room for
        MAX_GATE_IMPORTS."""
        called = set()
        addressed = {}
        for obj in self.objects:
            called |= obj.unit.imports_called
            for name, loc in obj.unit.imports_addressed.items():
                addressed.setdefault(name, loc)
        for imp in self.imports:
            if imp.name in called:
                continue
            loc = addressed.get(imp.name)
            if loc is None:
                loc = next((l for o in self.objects
                            for (sec, sym), l in o.unit.ref_locs.items()
                            if sym == imp.name), Location(self.name + "_main"))
            self.errors.append(Refusal(
                loc, "'%s' is imported but never called: sandboxed code may "
                "import functions only (not data such as stdout, nor "
                "thread-local variables), and ucx-ifunc-cc tells a function "
                "by a call to it in the sources" % imp.name))
        if len(self.imports) > sbx.MAX_GATE_IMPORTS:
            self.errors.append(
                "%s_main: the sandboxed code imports %d functions (%s, ...); "
                "the gate page has room for %d" % (
                    self.name, len(self.imports),
                    ", ".join(i.name for i in self.imports[:4]),
                    sbx.MAX_GATE_IMPORTS))
        self.raise_errors()

    def link(self):
        self._select_comdat()
        self._collect_globals()
        entry_section, entry_offset = self._function(self.name + "_main")
        kept = self._reachable(entry_section)
        self._report_deferred(kept)
        extra_text, extra_relro = [], []
        if self.aarch64 is not None:
            extra_text, extra_relro = self.aarch64.prepare(
                self._in_input_order(kept))
        segments, laid_out = self._layout(kept, extra_text, extra_relro)
        records = self._relocate(segments, laid_out)
        self.raise_errors()
        if self.sandbox:
            self._check_sandbox_imports()
        if self.aarch64 is not None:
            records += self.aarch64.finish(segments)
        for seg in segments:
            seg.data = bytes(seg.data)
        last = segments[-1]
        image = fmt.Image(
            segments=segments,
            entry_vaddr=entry_section.vaddr + entry_offset,
            got_ptr_vaddr=0 if self.sandbox else self.got_slot.vaddr,
            map_size=fmt.align_up(last.vaddr + last.mem_size, fmt.PAGE_ALIGN),
            imports=self.imports, relocs=records,
            symbols=self._function_symbols(laid_out),
            machine=self.isa.e_machine,
            flags=fmt.FLAG_SANDBOX if self.sandbox else 0)
        source_code = []
        for function in self.payload_functions:
            root, _ = self._function(function)
            source_code += self._reachable(root)
        source_imports = self._imports_used_by(source_code)
        target_only = [imp.name for imp in self.imports
                       if imp.name not in source_imports]
        return LinkResult(image, self._map(laid_out, image), target_only)

    @staticmethod
    def _function_symbols(laid_out):
        """Every function in the image, by address: the target registers
        them with debuggers and profilers."""
        found = {}
        for section in laid_out:
            if section.obj is None:
                continue
            for sym in section.obj.symbols:
                if (sym.type == "STT_FUNC" and sym.shndx == section.index
                        and sym.name):
                    vaddr = section.vaddr + sym.value
                    found.setdefault((vaddr, sym.name),
                                     fmt.FunctionSymbol(sym.name, vaddr,
                                                        sym.size))
        return [found[key] for key in sorted(found)]

    def _map(self, laid_out, image):
        names = [section.describe() for section in laid_out]
        width = max(len(name) for name in names)
        lines = ["# %-*s %8s %6s segment" % (width - 2, "section", "vaddr",
                                             "size")]
        for name, section in zip(names, laid_out):
            lines.append("%-*s %#8x %#6x %s" % (
                width, name, section.vaddr, section.size,
                fmt.SEG_NAMES[section.segment]))
        lines.append("# entry %#x got_ptr %#x map_size %#x"
                     % (image.entry_vaddr, image.got_ptr_vaddr, image.map_size))
        return "\n".join(lines) + "\n"


def link_image(ifunc_name, objects, isa=isas.X86_64, payload_functions=(),
               sandbox=False):
    """objects: list of (object path, asm_rewrite.Unit); payload_functions:
    the names of the functions that run on the source; sandbox: link for
    the sandbox (gate calls, bundled text, format version 3). Returns
    LinkResult."""
    return ImageLinker(ifunc_name,
                       [ObjectFile(path, unit, isa) for path, unit in objects],
                       isa, payload_functions, sandbox).link()
