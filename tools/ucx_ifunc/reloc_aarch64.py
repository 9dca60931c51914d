"""aarch64 relocations of the image linker.

gcc's aarch64 code is linked as it is (asm_aarch64.py changes nothing):

* GOT references (adrp + ldr :got_lo12:, the tiny model's ldr :got:) use a
  GOT that the linker makes in RELRO: one 8-byte entry per symbol, filled
  by the target through a RELATIVE record (a symbol of the image) or an
  IMPORT record (an import).
* bl/b to an import go to a stub at the end of TEXT that jumps through the
  import's GOT entry: adrp x16, entry; ldr x16, [x16, :lo12:entry]; br x16.
  x16 and x17 are the intra-procedure-call scratch registers of AAPCS64:
  free at every call, which is what a linker's veneer may use.
* Everything else that refers to a symbol of the image (adrp/add/ldr/str
  :lo12:, adr, branches, literal loads, PC-relative data) is patched in
  place. adrp computes a 4 KiB page of the PC: its offset is invariant
  because the target maps images at a page-aligned base (image.h
  page_align; the runtime's mmap gives at least 4 KiB alignment).
* Absolute pointers in data (R_AARCH64_ABS64) become relocation records.
"""

from dataclasses import dataclass
from typing import Dict

from elftools.elf.constants import SH_FLAGS

from . import image_format as fmt
from .errors import ToolchainBug
from .image_link import InputSection

# Relocation types (ELF for the Arm 64-bit Architecture, AArch64 numbering).
R_NONE, R_NONE_OLD = 0, 256
R_ABS64, R_ABS32, R_ABS16 = 257, 258, 259
R_PREL64, R_PREL32, R_PREL16 = 260, 261, 262
R_LD_PREL_LO19 = 273
R_ADR_PREL_LO21 = 274
R_ADR_PREL_PG_HI21, R_ADR_PREL_PG_HI21_NC = 275, 276
R_ADD_ABS_LO12_NC = 277
R_LDST8_ABS_LO12_NC = 278
R_TSTBR14, R_CONDBR19 = 279, 280
R_JUMP26, R_CALL26 = 282, 283
R_LDST16_ABS_LO12_NC, R_LDST32_ABS_LO12_NC, R_LDST64_ABS_LO12_NC = 284, 285, 286
R_LDST128_ABS_LO12_NC = 299
R_GOT_LD_PREL19, R_ADR_GOT_PAGE, R_LD64_GOT_LO12_NC = 309, 311, 312

NAMES = {
    R_NONE: "NONE", R_NONE_OLD: "NONE", R_ABS64: "ABS64", R_ABS32: "ABS32",
    R_ABS16: "ABS16", R_PREL64: "PREL64", R_PREL32: "PREL32",
    R_PREL16: "PREL16", R_LD_PREL_LO19: "LD_PREL_LO19",
    R_ADR_PREL_LO21: "ADR_PREL_LO21", R_ADR_PREL_PG_HI21: "ADR_PREL_PG_HI21",
    R_ADR_PREL_PG_HI21_NC: "ADR_PREL_PG_HI21_NC",
    R_ADD_ABS_LO12_NC: "ADD_ABS_LO12_NC",
    R_LDST8_ABS_LO12_NC: "LDST8_ABS_LO12_NC", R_TSTBR14: "TSTBR14",
    R_CONDBR19: "CONDBR19", R_JUMP26: "JUMP26", R_CALL26: "CALL26",
    R_LDST16_ABS_LO12_NC: "LDST16_ABS_LO12_NC",
    R_LDST32_ABS_LO12_NC: "LDST32_ABS_LO12_NC",
    R_LDST64_ABS_LO12_NC: "LDST64_ABS_LO12_NC",
    R_LDST128_ABS_LO12_NC: "LDST128_ABS_LO12_NC",
    R_GOT_LD_PREL19: "GOT_LD_PREL19", R_ADR_GOT_PAGE: "ADR_GOT_PAGE",
    R_LD64_GOT_LO12_NC: "LD64_GOT_LO12_NC",
    263: "MOVW_UABS_G0", 264: "MOVW_UABS_G0_NC", 265: "MOVW_UABS_G1",
    266: "MOVW_UABS_G1_NC", 267: "MOVW_UABS_G2", 268: "MOVW_UABS_G2_NC",
    269: "MOVW_UABS_G3", 270: "MOVW_SABS_G0", 271: "MOVW_SABS_G1",
    272: "MOVW_SABS_G2", 300: "MOVW_GOTOFF_G0", 308: "GOTREL32",
    310: "LD64_GOTOFF_LO15", 313: "LD64_GOTPAGE_LO15",
}
GOT_RELOCS = {R_GOT_LD_PREL19, R_ADR_GOT_PAGE, R_LD64_GOT_LO12_NC}
# GOT-relative forms the image's GOT cannot serve (no GOT base register).
OTHER_GOT_RELOCS = set(range(300, 309)) | {310, 313}
BRANCH_RELOCS = {R_JUMP26, R_CALL26}
ABSOLUTE_RELOCS = {R_ABS32, R_ABS16} | set(range(263, 273))
# lo12 loads and stores: the shift of their scaled immediate
LO12_SHIFT = {R_ADD_ABS_LO12_NC: 0, R_LDST8_ABS_LO12_NC: 0,
              R_LDST16_ABS_LO12_NC: 1, R_LDST32_ABS_LO12_NC: 2,
              R_LDST64_ABS_LO12_NC: 3, R_LDST128_ABS_LO12_NC: 4}

STUB = (0x90000010,  # adrp x16, entry
        0xf9400210,  # ldr  x16, [x16, #:lo12:entry]
        0xd61f0200)  # br   x16
STUB_SIZE = 4 * len(STUB)
GOT_ENTRY_SIZE = 8


def is_tls(rtype):
    # static TLS relocations 512-573 (TLSGD ... TLSDESC), dynamic ones 1024+
    return 512 <= rtype <= 573 or 1024 <= rtype <= 1031


def reloc_name(rtype):
    if is_tls(rtype):
        return "R_AARCH64_TLS(%d)" % rtype
    return "R_AARCH64_" + NAMES.get(rtype, str(rtype))


def _page(address):
    return address & ~0xfff


@dataclass
class _GotEntry:
    index: int            # position in the GOT
    import_name: str = ""  # an import, or
    target: object = None  # the linker's _Target of a symbol of the image
    addend: int = 0


class Aarch64Relocator:
    """Makes the GOT and the stubs, and applies the relocations."""

    def __init__(self, linker):
        self.linker = linker
        self.got: Dict[tuple, _GotEntry] = {}
        self.stubs: Dict[str, int] = {}  # import name -> stub number
        self.got_section = None
        self.stub_section = None

    @staticmethod
    def _new_section(name, flags, align, size, segment):
        return InputSection(None, 0, name, flags, align, size, False,
                            bytes(size), segment=segment)

    # -- before layout: how big the GOT and the stubs are --------------------

    def _got_key(self, target, addend):
        if target.import_name is not None:
            return ("import", target.import_name, addend)
        if target.section is None:
            return None  # an absolute symbol: reported by apply()
        return ("local", id(target.section), target.offset + addend)

    def _entry(self, target, addend):
        key = self._got_key(target, addend)
        if key is None:
            return None
        entry = self.got.get(key)
        if entry is None:
            entry = self.got[key] = _GotEntry(
                len(self.got), target.import_name or "", target, addend)
        return entry

    def prepare(self, sections):
        """Finds the GOT entries and stubs the sections need, in order of
        first use; returns (extra TEXT sections, extra RELRO sections)."""
        for section in sections:
            for rel in section.relocs:
                target = self.linker.resolve(section.obj, rel.symbol)
                if rel.rtype in GOT_RELOCS:
                    self._entry(target, rel.addend)
                elif rel.rtype in BRANCH_RELOCS and target.import_name:
                    if target.import_name not in self.stubs:
                        self.stubs[target.import_name] = len(self.stubs)
                    self._entry(target, 0)
        text, relro = [], []
        if self.stubs:
            self.stub_section = self._new_section(
                "<ucp_ifunc_import_stubs>",
                SH_FLAGS.SHF_ALLOC | SH_FLAGS.SHF_EXECINSTR, 16,
                STUB_SIZE * len(self.stubs), fmt.SEG_TEXT)
            text.append(self.stub_section)
        if self.got:
            self.got_section = self._new_section(
                "<ucp_ifunc_got>", SH_FLAGS.SHF_ALLOC | SH_FLAGS.SHF_WRITE, 8,
                GOT_ENTRY_SIZE * len(self.got), fmt.SEG_RELRO)
            relro.append(self.got_section)
        return text, relro

    def got_vaddr(self, entry):
        return self.got_section.vaddr + GOT_ENTRY_SIZE * entry.index

    # -- after layout --------------------------------------------------------

    def finish(self, segments):
        """Writes the stubs; returns the relocation records of the GOT."""
        if self.stub_section is not None:
            seg = segments[fmt.SEG_TEXT]
            for name, number in self.stubs.items():
                entry = self.got[("import", name, 0)]
                place = self.stub_section.vaddr + STUB_SIZE * number
                pos = place - seg.vaddr
                for i, word in enumerate(STUB):
                    seg.data[pos + 4 * i:pos + 4 * i + 4] = \
                        word.to_bytes(4, "little")
                target = self.got_vaddr(entry)
                self._adrp(seg, place, target, pos)
                self._field(seg.data, pos + 4,
                            (target & 0xfff) >> 3, 10, 12)
        records = []
        for entry in self.got.values():
            vaddr = self.got_vaddr(entry)
            if entry.import_name:
                index = self.linker.import_index[entry.import_name]
                records.append(fmt.Reloc(vaddr, fmt.RELOC_IMPORT,
                                         entry.addend, index))
            else:
                target = entry.target
                records.append(fmt.Reloc(vaddr, fmt.RELOC_RELATIVE,
                                         target.section.vaddr + target.offset
                                         + entry.addend))
        return records

    # -- instruction fields --------------------------------------------------

    @staticmethod
    def _field(data, pos, value, shift, bits):
        word = int.from_bytes(data[pos:pos + 4], "little")
        mask = ((1 << bits) - 1) << shift
        word = (word & ~mask) | ((value << shift) & mask)
        data[pos:pos + 4] = word.to_bytes(4, "little")

    def _adr_immediate(self, data, pos, value):
        """adr/adrp: a 21-bit immediate split into immlo (bits 29-30) and
        immhi (bits 5-23)."""
        self._field(data, pos, value & 3, 29, 2)
        self._field(data, pos, (value >> 2) & 0x7ffff, 5, 19)

    def _adrp(self, seg, place, target, pos):
        self._adr_immediate(seg.data, pos,
                            (_page(target) - _page(place)) >> 12)

    # -- relocations ---------------------------------------------------------

    def apply(self, section, rel, place, seg):
        """Like ImageLinker._apply for aarch64: patches seg.data, or returns
        an image relocation record."""
        linker = self.linker
        name = rel.symbol.name
        target = linker.resolve(section.obj, rel.symbol)
        if not name and target.section is not None:
            name = "section " + target.section.name
        rtype = rel.rtype
        pos = place - seg.vaddr
        data = seg.data

        def error(message):
            linker.error(section, rel.offset, name, message)

        def fits(value, bits, what):
            if -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
                return True
            error("%s to '%s' overflows (%s %#x)"
                  % (reloc_name(rtype), name, what, value))
            return False

        if rtype in (R_NONE, R_NONE_OLD):
            return None
        if is_tls(rtype):
            error("'%s' is a thread-local variable (%s): shipped code has no "
                  "TLS block" % (name, reloc_name(rtype)))
            return None
        if rtype in OTHER_GOT_RELOCS:
            error("GOT reference to '%s' (%s) that shipped code cannot use; "
                  "only adrp/ldr :got_lo12: and ldr :got: are supported"
                  % (name, reloc_name(rtype)))
            return None
        if target.slot_of is not None:
            raise ToolchainBug("%s against import slot %s"
                               % (reloc_name(rtype), name))
        if target.section is None and target.import_name is None:
            error("'%s' is an absolute or common symbol, which shipped code "
                  "cannot refer to (compile with -fno-common)" % name)
            return None
        if rtype in GOT_RELOCS or (rtype in BRANCH_RELOCS
                                   and target.import_name is not None):
            if target.import_name is not None:
                # indices in order of first use, as on x86-64
                linker.add_import(target.import_name,
                                  rel.symbol.bind == "STB_WEAK")
            if rtype in GOT_RELOCS:
                address = self.got_vaddr(self._entry(target, rel.addend))
            else:
                address = self.stub_section.vaddr + \
                    STUB_SIZE * self.stubs[target.import_name]
                if rel.addend:
                    error("branch to '%s%+d': only a call or jump to an "
                          "import's start can be linked" % (name, rel.addend))
                    return None
            return self._patch_code(rtype, data, pos, place, address, error,
                                    fits)
        if rtype == R_ABS64:
            if section.segment == fmt.SEG_TEXT:
                error("text relocation against '%s' (R_AARCH64_ABS64 in "
                      "code, such as a literal 'ldr x0, =%s'): compile with "
                      "-fPIC and take addresses with adrp" % (name, name))
            elif place % 8:
                error("pointer to '%s' at a misaligned address (packed "
                      "structure?): pointers in shipped data must be 8-byte "
                      "aligned" % name)
            elif target.import_name is not None:
                index = linker.add_import(target.import_name,
                                          rel.symbol.bind == "STB_WEAK")
                return fmt.Reloc(place, fmt.RELOC_IMPORT, rel.addend, index)
            else:
                return fmt.Reloc(place, fmt.RELOC_RELATIVE,
                                 target.section.vaddr + target.offset
                                 + rel.addend)
            return None
        if rtype in ABSOLUTE_RELOCS:
            error("'%s' is referenced by an absolute address (%s): compile "
                  "with -fPIC" % (name, reloc_name(rtype)))
            return None
        if target.import_name is not None:
            # one message for an adrp + add/ldr pair: no relocation name
            error("'%s' is not defined by the ifunc's sources and is "
                  "addressed directly (adrp/adr/:lo12:), which cannot import "
                  "it (is it declared with hidden visibility?); only calls, "
                  "GOT loads and pointers in data can be imported" % name)
            return None
        address = target.section.vaddr + target.offset + rel.addend
        if rtype in (R_PREL64, R_PREL32, R_PREL16):
            size = {R_PREL64: 8, R_PREL32: 4, R_PREL16: 2}[rtype]
            value = address - place
            # ELF for AArch64 allows PREL32/16 to be read as signed or
            # unsigned: the range is [-2^(n-1), 2^n)
            if not -(1 << (8 * size - 1)) <= value < (1 << (8 * size)):
                error("%s to '%s' overflows (value %#x)"
                      % (reloc_name(rtype), name, value))
                return None
            data[pos:pos + size] = (value % (1 << (8 * size))).to_bytes(
                size, "little")
            return None
        if rtype in LO12_SHIFT or rtype in (
                R_ADR_PREL_PG_HI21, R_ADR_PREL_PG_HI21_NC, R_ADR_PREL_LO21,
                R_LD_PREL_LO19, R_CONDBR19, R_TSTBR14, R_JUMP26, R_CALL26):
            return self._patch_code(rtype, data, pos, place, address, error,
                                    fits)
        error("relocation %s against '%s' is not supported in shipped code"
              % (reloc_name(rtype), name))
        return None

    def _patch_code(self, rtype, data, pos, place, address, error, fits):
        if pos % 4:
            raise ToolchainBug("instruction relocation %s at a misaligned "
                               "place %#x" % (reloc_name(rtype), place))
        if rtype in (R_ADR_PREL_PG_HI21, R_ADR_PREL_PG_HI21_NC,
                     R_ADR_GOT_PAGE):
            value = (_page(address) - _page(place)) >> 12
            if rtype == R_ADR_PREL_PG_HI21_NC or fits(value, 21, "pages"):
                self._adr_immediate(data, pos, value)
        elif rtype == R_ADR_PREL_LO21:
            value = address - place
            if fits(value, 21, "offset"):
                self._adr_immediate(data, pos, value)
        elif rtype in LO12_SHIFT or rtype == R_LD64_GOT_LO12_NC:
            shift = LO12_SHIFT.get(rtype, 3)
            low = address & 0xfff
            if low % (1 << shift):
                error("%s: address %#x of the target is not %d-byte aligned "
                      "for the scaled load or store"
                      % (reloc_name(rtype), address, 1 << shift))
                return None
            self._field(data, pos, low >> shift, 10, 12)
        elif rtype in BRANCH_RELOCS:
            value = address - place
            if fits(value, 28, "offset"):
                self._field(data, pos, value >> 2, 0, 26)
        elif rtype in (R_LD_PREL_LO19, R_CONDBR19, R_GOT_LD_PREL19):
            value = address - place
            if fits(value, 21, "offset"):
                self._field(data, pos, value >> 2, 5, 19)
        elif rtype == R_TSTBR14:
            value = address - place
            if fits(value, 16, "offset"):
                self._field(data, pos, value >> 2, 5, 14)
        else:
            raise ToolchainBug("no patch for %s" % reloc_name(rtype))
        return None
