"""Writes the object that embeds the images in NAME.so: a 64-bit
little-endian ELF relocatable with one read-only data section and a global
object symbol per image. Written here, it spares an assembler run (of an
.incbin file) in the final link.
"""

import struct

ET_REL, EV_CURRENT = 1, 1
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 1, 2, 3
SHF_ALLOC = 0x2
STB_GLOBAL, STB_WEAK, STT_OBJECT = 1, 2, 1

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")


def _strtab(names):
    """(table bytes, {name: offset}); offset 0 is the empty name."""
    table, offsets = bytearray(b"\0"), {"": 0}
    for name in names:
        if name not in offsets:
            offsets[name] = len(table)
            table += name.encode() + b"\0"
    return bytes(table), offsets


def data_object(e_machine, section, align, data, symbols):
    """The bytes of a relocatable object for e_machine whose only
    allocated section, named section, holds data (aligned to align), with a
    global STT_OBJECT symbol (name, offset, size) for each of symbols, and
    an empty .note.GNU-stack (no executable stack)."""
    names = ["", section, ".note.GNU-stack", ".symtab", ".strtab",
             ".shstrtab"]
    shstrtab, shnames = _strtab(names[1:])
    strtab, symnames = _strtab(name for name, _, _ in symbols)
    symtab = bytes(_SYM.size) + b"".join(
        _SYM.pack(symnames[name], (STB_GLOBAL << 4) | STT_OBJECT, 0, 1,
                  offset, size) for name, offset, size in symbols)

    def padded(offset, alignment):
        return (offset + alignment - 1) // alignment * alignment

    # file layout: header, data, symtab, strtab, shstrtab, section headers
    data_at = padded(_EHDR.size, align)
    symtab_at = padded(data_at + len(data), 8)
    strtab_at = symtab_at + len(symtab)
    shstrtab_at = strtab_at + len(strtab)
    headers_at = padded(shstrtab_at + len(shstrtab), 8)
    sections = [
        None,  # the null section
        (SHT_PROGBITS, SHF_ALLOC, data_at, len(data), 0, 0, align, 0),
        (SHT_PROGBITS, 0, data_at + len(data), 0, 0, 0, 1, 0),
        # info: index of the first global symbol (all but the null one)
        (SHT_SYMTAB, 0, symtab_at, len(symtab), 4, 1, 8, _SYM.size),
        (SHT_STRTAB, 0, strtab_at, len(strtab), 0, 0, 1, 0),
        (SHT_STRTAB, 0, shstrtab_at, len(shstrtab), 0, 0, 1, 0),
    ]
    out = bytearray(_EHDR.pack(
        b"\x7fELF\x02\x01\x01" + bytes(9), ET_REL, e_machine, EV_CURRENT,
        0, 0, headers_at, 0, _EHDR.size, 0, 0, _SHDR.size, len(sections), 5))
    out += bytes(data_at - len(out)) + data
    out += bytes(symtab_at - len(out)) + symtab + strtab + shstrtab
    out += bytes(headers_at - len(out))
    for name, fields in zip(names, sections):
        if not name:
            out += bytes(_SHDR.size)
            continue
        sh_type, flags, offset, size, link, info, alignment, entsize = fields
        out += _SHDR.pack(shnames[name], sh_type, flags, 0, offset, size,
                          link, info, alignment, entsize)
    return bytes(out)


def weaken_symbols(path, names):
    """Makes the global symbols named in names weak in the object at path,
    in place, as objcopy --weaken-symbol does (only the binding byte of
    each symbol table entry changes). Returns the names found."""
    from .elf_read import SHT_SYMTAB, ElfFile
    with open(path, "r+b") as stream:
        blob = bytearray(stream.read())
        elf = ElfFile(bytes(blob))
        found = set()
        for table in elf.sections:
            if table.type != SHT_SYMTAB:
                continue
            for number, sym in enumerate(elf.symbols(table)):
                if sym.name in names and sym.bind == "STB_GLOBAL":
                    at = table.offset + number * _SYM.size + 4  # st_info
                    blob[at] = (STB_WEAK << 4) | (blob[at] & 0xf)
                    found.add(sym.name)
        stream.seek(0)
        stream.write(blob)
    return found
