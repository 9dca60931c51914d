"""A small reader of 64-bit little-endian ELF files (x86-64 and aarch64
objects and shared libraries): the sections, symbols, relocations and
DT_NEEDED entries that every build reads. Importing pyelftools takes longer
than a whole image link, so it is left to what is not on every build's
path (DWARF for error messages, --dump, files of another ELF class).
"""

import struct
from typing import List, Optional

SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_DYNAMIC = 2, 3, 4, 6
SHT_NOBITS, SHT_DYNSYM, SHT_GROUP, SHT_SYMTAB_SHNDX = 8, 11, 17, 18
SHN_UNDEF, SHN_ABS, SHN_COMMON, SHN_XINDEX = 0, 0xfff1, 0xfff2, 0xffff
SHN_LORESERVE = 0xff00
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_STRINGS = 0x1, 0x2, 0x4, 0x20
DT_NULL, DT_NEEDED = 0, 1
# Names as pyelftools spells them, which the linker's code compares with.
SPECIAL_SECTIONS = {SHN_UNDEF: "SHN_UNDEF", SHN_ABS: "SHN_ABS",
                    SHN_COMMON: "SHN_COMMON"}
BINDS = {0: "STB_LOCAL", 1: "STB_GLOBAL", 2: "STB_WEAK",
         10: "STB_GNU_UNIQUE"}
TYPES = {0: "STT_NOTYPE", 1: "STT_OBJECT", 2: "STT_FUNC", 3: "STT_SECTION",
         4: "STT_FILE", 5: "STT_COMMON", 6: "STT_TLS", 10: "STT_GNU_IFUNC"}
VISIBILITIES = ("STV_DEFAULT", "STV_INTERNAL", "STV_HIDDEN", "STV_PROTECTED")

_EHDR = struct.Struct("<HHIQQQIHHHHHH")  # after e_ident
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")
_DYN = struct.Struct("<qQ")


class ElfFormatError(Exception):
    pass


class Section:
    __slots__ = ("elf", "index", "name", "type", "flags", "offset", "size",
                 "link", "info", "addralign", "entsize")

    def __init__(self, elf, index, fields):
        (name, self.type, self.flags, _, self.offset, self.size, self.link,
         self.info, self.addralign, self.entsize) = fields
        self.elf, self.index, self.name = elf, index, name

    def data(self):
        if self.type == SHT_NOBITS:
            return b""
        end = self.offset + self.size
        if end > len(self.elf.blob):
            raise ElfFormatError("section %d ends past the file" % self.index)
        return self.elf.blob[self.offset:end]


class Symbol:
    __slots__ = ("name", "bind", "type", "visibility", "shndx", "value",
                 "size")


class Relocation:
    __slots__ = ("offset", "type", "symbol", "addend")


class ElfFile:
    """blob: the whole file. Only ELF64 little-endian is read: is_supported
    says whether it is that."""

    def __init__(self, blob):
        if blob[:4] != b"\x7fELF" or len(blob) < 64:
            raise ElfFormatError("not an ELF file")
        self.blob = blob
        self.elfclass = 64 if blob[4] == 2 else 32
        self.is_supported = self.elfclass == 64 and blob[5] == 1
        self.sections: List[Section] = []
        self.machine: Optional[int] = None
        if not self.is_supported:
            return
        (_, self.machine, _, _, _, shoff, _, _, _, _, shentsize, shnum,
         shstrndx) = _EHDR.unpack_from(blob, 16)
        if not shoff:
            return
        if shentsize != _SHDR.size:
            raise ElfFormatError("section headers of %d bytes" % shentsize)
        first = _SHDR.unpack_from(blob, shoff)
        if shnum == 0:  # more than SHN_LORESERVE sections
            shnum = first[5]
        if shstrndx == SHN_XINDEX:
            shstrndx = first[6]
        headers = [_SHDR.unpack_from(blob, shoff + i * _SHDR.size)
                   for i in range(shnum)]
        names = headers[shstrndx]
        self.sections = [Section(self, i, h) for i, h in enumerate(headers)]
        for section in self.sections:
            section.name = self._string(names[4], section.name)

    def _string(self, offset, index):
        start = offset + index
        end = self.blob.find(b"\0", start)
        if end < 0:
            raise ElfFormatError("unterminated string")
        return self.blob[start:end].decode("utf-8", "replace")

    def section_by_name(self, name):
        return next((s for s in self.sections if s.name == name), None)

    def symbols(self, table):
        """The symbols of a SHT_SYMTAB or SHT_DYNSYM section, in order."""
        strtab = self.sections[table.link].offset
        extended = next((s.data() for s in self.sections
                         if s.type == SHT_SYMTAB_SHNDX
                         and s.link == table.index), None)
        result = []
        for number in range(table.size // _SYM.size):
            name, info, other, shndx, value, size = _SYM.unpack_from(
                self.blob, table.offset + number * _SYM.size)
            sym = Symbol()
            sym.name = self._string(strtab, name)
            sym.bind = BINDS.get(info >> 4, str(info >> 4))
            sym.type = TYPES.get(info & 0xf, str(info & 0xf))
            sym.visibility = VISIBILITIES[other & 3]
            if shndx == SHN_XINDEX and extended is not None:
                shndx = int.from_bytes(
                    extended[4 * number:4 * number + 4], "little")
            elif shndx >= SHN_LORESERVE or shndx == SHN_UNDEF:
                shndx = SPECIAL_SECTIONS.get(shndx, "SHN_%#x" % shndx)
            sym.shndx = shndx
            sym.value, sym.size = value, size
            result.append(sym)
        return result

    def relocations(self, rela, symbols):
        """The entries of a SHT_RELA section; symbols: its symbol table's."""
        result = []
        for number in range(rela.size // _RELA.size):
            offset, info, addend = _RELA.unpack_from(
                self.blob, rela.offset + number * _RELA.size)
            rel = Relocation()
            rel.offset, rel.type, rel.addend = offset, info & 0xffffffff, addend
            rel.symbol = symbols[info >> 32]
            result.append(rel)
        return result

    def needed(self):
        """The DT_NEEDED sonames, in order."""
        dynamic = next((s for s in self.sections if s.type == SHT_DYNAMIC),
                       None)
        if dynamic is None:
            return []
        strtab = self.sections[dynamic.link].offset
        names = []
        for number in range(dynamic.size // _DYN.size):
            tag, value = _DYN.unpack_from(self.blob,
                                          dynamic.offset + number * _DYN.size)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                names.append(self._string(strtab, value))
        return names

    def exported(self):
        """Names that the dynamic symbol table defines with default or
        protected visibility."""
        table = next((s for s in self.sections if s.type == SHT_DYNSYM), None)
        if table is None:
            return set()
        return {sym.name for sym in self.symbols(table)
                if sym.shndx != "SHN_UNDEF"
                and sym.visibility in ("STV_DEFAULT", "STV_PROTECTED")}
