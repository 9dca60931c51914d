"""Binary layout of the shippable code image.

This module writes and reads exactly the layout of src/ucp/ifunc/format/image.h
(change both together and bump VERSION). Offsets count from the start of the
image (the descriptor), vaddrs from the base where the target maps it. All
integers are little-endian.

File layout written by encode():
    descriptor (224 bytes)
    TEXT, RELRO, DATA file bytes, each at a 16-aligned offset
    import records (8-aligned), relocation records (8-aligned), needed
    library records, symbol records, string table
    zero padding to a multiple of 8
    the signature block (96 bytes), if the image is signed: always last

A signature (signing.py) covers SIGNATURE_DOMAIN, the ifunc name, a NUL and
the image bytes before the signature block.

A bitcode image (version 4, FLAG_BITCODE; --bitcode) has the same layout:
its TEXT holds the LLVM bitcode module (vaddr 0), RELRO and DATA are all
zero, nothing is mapped (page_align, map_size, entry_vaddr and got_ptr_vaddr
are 0, no relocations), the string table starts with the module's target
triple, and its one symbol record names NAME_main.
"""

import struct
from dataclasses import dataclass, field
from typing import List, Optional

MAGIC = 0x474D4946  # "FIMG" read as little-endian
VERSION = 2
# Images built for the sandbox (--sandbox): their own version, so that a
# target that reads version 2 only refuses them, and the flag below.
VERSION_SANDBOX = 3
FLAG_SANDBOX = 1
# LLVM bitcode that the target compiles itself (--bitcode): its own version,
# so that a target that reads versions 2 and 3 only refuses it.
VERSION_BITCODE = 4
FLAG_BITCODE = 2
FLAG_NAMES = {FLAG_SANDBOX: "sandbox", FLAG_BITCODE: "bitcode"}
SYMBOL_PREFIX = "__ucp_ifunc_image_"
BITCODE_SYMBOL_PREFIX = "__ucp_ifunc_bitcode_"
EM_X86_64 = 62
EM_AARCH64 = 183
EM_PPC64 = 21
EM_RISCV = 243
MACHINE_NAMES = {EM_X86_64: "x86-64", EM_AARCH64: "aarch64",
                 EM_PPC64: "ppc64", EM_RISCV: "riscv64"}
# What LLVM bitcode starts with: the raw magic 'BC' 0xC0DE, or the wrapper's.
BITCODE_MAGICS = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")
PAGE_ALIGN = 4096

SEG_TEXT, SEG_RELRO, SEG_DATA = 0, 1, 2
SEG_NAMES = ("TEXT", "RELRO", "DATA")
SEG_PROT = ("r-x", "r--", "rw-")

RELOC_RELATIVE = 1
RELOC_IMPORT = 2
RELOC_NAMES = {RELOC_RELATIVE: "RELATIVE", RELOC_IMPORT: "IMPORT"}

IMPORT_WEAK = 1

# What a signature covers first, so that it signs nothing but ifunc images.
SIGNATURE_DOMAIN = b"ucx-ifunc image signature 1\0"
PUBLIC_KEY_SIZE = 32
SIGNATURE_SIZE = 64
SIGNATURE_BLOCK_SIZE = PUBLIC_KEY_SIZE + SIGNATURE_SIZE

SEGMENT_FILE_ALIGN = 16
RECORD_ALIGN = 8

# ucp_ifunc_image_desc_t: the fields before seg[], seg[3], the fields after.
_DESC_HEAD = struct.Struct("<IHHIIQQQ")
_SEG = struct.Struct("<QQQQ")
_DESC_TAIL = struct.Struct("<QQQQQQIIQQQII")
_IMPORT = struct.Struct("<II")
_RELOC = struct.Struct("<QIIq")
_NEEDED = struct.Struct("<I")
_SYMBOL = struct.Struct("<IIQQ")

DESC_SIZE = _DESC_HEAD.size + 3 * _SEG.size + _DESC_TAIL.size
SEG_SIZE = _SEG.size
IMPORT_SIZE = _IMPORT.size
RELOC_SIZE = _RELOC.size
SYMBOL_SIZE = _SYMBOL.size


def isa_symbol(name, e_machine):
    """The symbol of ifunc name's image for one ISA, in a library built
    with --target: __ucp_ifunc_image_NAME.em<e_machine, decimal>."""
    return "%s%s.em%d" % (SYMBOL_PREFIX, name, e_machine)


def bitcode_symbol(name, e_machine):
    """The symbol of ifunc name's bitcode image for the triple whose ISA has
    ELF machine e_machine: __ucp_ifunc_bitcode_NAME.em<e_machine>."""
    return "%s%s.em%d" % (BITCODE_SYMBOL_PREFIX, name, e_machine)


class FormatError(Exception):
    """The bytes are not a valid image."""


def align_up(value, align):
    return (value + align - 1) // align * align


@dataclass
class Segment:
    vaddr: int = 0
    mem_size: int = 0
    data: bytes = b""  # the initialised bytes; the rest of mem_size is zero
    # where decode() found data; encode() lays the file out itself
    file_offset: int = field(default=0, compare=False)


@dataclass
class Import:
    name: str
    weak: bool = False


@dataclass
class Reloc:
    vaddr: int
    kind: int  # RELOC_RELATIVE or RELOC_IMPORT
    addend: int
    import_index: int = 0


@dataclass
class FunctionSymbol:
    """A function of the image, for debuggers and profilers on the target."""
    name: str
    vaddr: int
    size: int


@dataclass
class Signature:
    public_key: bytes  # PUBLIC_KEY_SIZE bytes (Ed25519)
    signature: bytes  # SIGNATURE_SIZE bytes


@dataclass
class Image:
    segments: List[Segment]  # indexed by SEG_*
    entry_vaddr: int
    got_ptr_vaddr: int
    map_size: int
    imports: List[Import] = field(default_factory=list)
    relocs: List[Reloc] = field(default_factory=list)
    # sonames of the libraries the ifunc was linked with: the target loads
    # them to resolve imports that its own global scope lacks
    needed: List[str] = field(default_factory=list)
    symbols: List[FunctionSymbol] = field(default_factory=list)
    # None: unsigned. encode(signed=True) leaves a zero block to sign into.
    signature: Optional[Signature] = None
    machine: int = EM_X86_64
    page_align: int = PAGE_ALIGN
    flags: int = 0
    # bitcode images: the module's target triple (the string table's first
    # string); None for machine code
    triple: Optional[str] = None

    def segment_of(self, vaddr, size=1):
        """Index of the segment whose address range holds [vaddr, vaddr+size),
        or None."""
        for index, seg in enumerate(self.segments):
            if seg.vaddr <= vaddr and vaddr + size <= seg.vaddr + seg.mem_size:
                return index
        return None


def encode(image, signed=None):
    """The image as bytes, laid out as image.h describes. signed=True keeps
    room for a signature block (zeros until signing.sign() fills it);
    signed=None: room if image.signature is set, filled with it."""
    if signed is None:
        signed = image.signature is not None
    bitcode = bool(image.flags & FLAG_BITCODE)
    out = bytearray(DESC_SIZE)
    seg_fields = []
    for seg in image.segments:
        if bitcode and not seg.data and not seg.mem_size:
            seg_fields.append((0, 0, 0, 0))  # RELRO, DATA: all fields 0
            continue
        out += bytes(align_up(len(out), SEGMENT_FILE_ALIGN) - len(out))
        seg_fields.append((seg.vaddr, seg.mem_size, len(out), len(seg.data)))
        out += seg.data

    strtab = bytearray()

    def string(text):
        offset = len(strtab)
        strtab.extend(text.encode() + b"\0")
        return offset

    if bitcode:
        string(image.triple or "")  # offset 0: the target triple

    import_records = bytearray()
    for imp in image.imports:
        flags = IMPORT_WEAK if imp.weak else 0
        import_records += _IMPORT.pack(string(imp.name), flags)

    out += bytes(align_up(len(out), RECORD_ALIGN) - len(out))
    imports_offset = len(out)
    out += import_records
    # Import records keep 8-byte alignment. A bitcode image has no
    # relocations, and its relocs_offset is 0 (image_check.cc insists).
    relocs_offset = 0 if bitcode else len(out)
    for rel in image.relocs:
        out += _RELOC.pack(rel.vaddr, rel.kind, rel.import_index, rel.addend)
    symbols_offset = len(out)
    for sym in image.symbols:
        out += _SYMBOL.pack(string(sym.name), 0, sym.vaddr, sym.size)
    needed_offset = len(out)
    for soname in image.needed:
        out += _NEEDED.pack(string(soname))
    strtab_offset = len(out)
    out += strtab
    out += bytes(align_up(len(out), RECORD_ALIGN) - len(out))
    signature_offset = 0
    if signed:
        signature_offset = len(out)
        if image.signature is not None:
            out += image.signature.public_key + image.signature.signature
        else:
            out += bytes(SIGNATURE_BLOCK_SIZE)

    desc = _DESC_HEAD.pack(MAGIC, version_of(image.flags), image.machine,
                           DESC_SIZE,
                           image.flags, len(out), image.page_align,
                           image.map_size)
    for fields in seg_fields:
        desc += _SEG.pack(*fields)
    desc += _DESC_TAIL.pack(image.entry_vaddr, image.got_ptr_vaddr,
                            imports_offset, relocs_offset, strtab_offset,
                            len(strtab), len(image.imports), len(image.relocs),
                            needed_offset, symbols_offset, signature_offset,
                            len(image.needed), len(image.symbols))
    out[:DESC_SIZE] = desc
    return bytes(out)


def version_of(flags):
    """The format version of an image with these descriptor flags."""
    if flags & FLAG_BITCODE:
        return VERSION_BITCODE
    return VERSION_SANDBOX if flags & FLAG_SANDBOX else VERSION


_FLAGS_OF_VERSION = {VERSION: 0, VERSION_SANDBOX: FLAG_SANDBOX,
                     VERSION_BITCODE: FLAG_BITCODE}


def signed_part(name, blob):
    """What a signature of the encoded image blob of ifunc name covers."""
    signature_offset = _DESC_TAIL.unpack_from(
        blob, _DESC_HEAD.size + 3 * SEG_SIZE)[10]
    if signature_offset == 0:
        raise FormatError("the image has no signature block")
    return SIGNATURE_DOMAIN + name.encode() + b"\0" + blob[:signature_offset]


def with_signature(blob, public_key, signature):
    """blob (encoded with room for a signature) with its block filled."""
    if len(public_key) != PUBLIC_KEY_SIZE or len(signature) != SIGNATURE_SIZE:
        raise FormatError("bad key or signature size")
    return blob[:-SIGNATURE_BLOCK_SIZE] + public_key + signature


def _check_range(what, offset, size, limit):
    if offset > limit or size > limit - offset:
        raise FormatError("%s [%#x, +%#x) lies outside the image (%#x bytes)"
                          % (what, offset, size, limit))


def decode(blob):
    """Parses image bytes back into an Image; raises FormatError."""
    blob = bytes(blob)
    if len(blob) < DESC_SIZE:
        raise FormatError("%d bytes is too short for a descriptor" % len(blob))
    (magic, version, machine, desc_size, flags, image_size, page_align,
     map_size) = _DESC_HEAD.unpack_from(blob, 0)
    if magic != MAGIC:
        raise FormatError("bad magic %#x" % magic)
    if version not in _FLAGS_OF_VERSION:
        raise FormatError("version %d, expected %d, %d or %d"
                          % (version, VERSION, VERSION_SANDBOX,
                             VERSION_BITCODE))
    if flags != _FLAGS_OF_VERSION[version]:
        raise FormatError("flags %#x do not fit version %d" % (flags, version))
    if desc_size != DESC_SIZE:
        raise FormatError("descriptor size %d, expected %d"
                          % (desc_size, DESC_SIZE))
    if image_size > len(blob) or image_size % RECORD_ALIGN:
        raise FormatError("image_size %d does not fit the %d bytes given"
                          % (image_size, len(blob)))

    segments = []
    for index in range(3):
        vaddr, mem_size, file_offset, file_size = _SEG.unpack_from(
            blob, _DESC_HEAD.size + index * SEG_SIZE)
        _check_range(SEG_NAMES[index], file_offset, file_size, image_size)
        if file_size > mem_size:
            raise FormatError("%s file_size exceeds mem_size" % SEG_NAMES[index])
        segments.append(Segment(vaddr, mem_size,
                                blob[file_offset:file_offset + file_size],
                                file_offset))

    (entry_vaddr, got_ptr_vaddr, imports_offset, relocs_offset, strtab_offset,
     strtab_size, n_imports, n_relocs, needed_offset, symbols_offset,
     signature_offset, n_needed, n_symbols) = _DESC_TAIL.unpack_from(
         blob, _DESC_HEAD.size + 3 * SEG_SIZE)
    _check_range("import records", imports_offset, n_imports * IMPORT_SIZE,
                 image_size)
    _check_range("relocation records", relocs_offset, n_relocs * RELOC_SIZE,
                 image_size)
    _check_range("string table", strtab_offset, strtab_size, image_size)
    _check_range("needed libraries", needed_offset, n_needed * _NEEDED.size,
                 image_size)
    _check_range("symbols", symbols_offset, n_symbols * SYMBOL_SIZE,
                 image_size)
    strtab = blob[strtab_offset:strtab_offset + strtab_size]

    def string(what, offset):
        end = strtab.find(b"\0", offset)
        if offset >= len(strtab) or end < 0:
            raise FormatError("%s: bad name offset %d" % (what, offset))
        return strtab[offset:end].decode()

    imports = []
    for index in range(n_imports):
        name_offset, imp_flags = _IMPORT.unpack_from(
            blob, imports_offset + index * IMPORT_SIZE)
        imports.append(Import(string("import %d" % index, name_offset),
                              bool(imp_flags & IMPORT_WEAK)))
    needed = [string("needed library %d" % index,
                     _NEEDED.unpack_from(blob, needed_offset + 4 * index)[0])
              for index in range(n_needed)]
    symbols = []
    for index in range(n_symbols):
        name_offset, _, vaddr, size = _SYMBOL.unpack_from(
            blob, symbols_offset + index * SYMBOL_SIZE)
        symbols.append(FunctionSymbol(string("symbol %d" % index, name_offset),
                                      vaddr, size))
    signature = None
    if signature_offset:
        if signature_offset + SIGNATURE_BLOCK_SIZE != image_size:
            raise FormatError("the signature block is not the image's end")
        block = blob[signature_offset:image_size]
        signature = Signature(block[:PUBLIC_KEY_SIZE], block[PUBLIC_KEY_SIZE:])

    relocs = []
    for index in range(n_relocs):
        vaddr, kind, import_index, addend = _RELOC.unpack_from(
            blob, relocs_offset + index * RELOC_SIZE)
        relocs.append(Reloc(vaddr, kind, addend, import_index))

    triple = None
    if flags & FLAG_BITCODE:
        triple = string("the target triple", 0)
        text = segments[SEG_TEXT].data
        if not text.startswith(BITCODE_MAGICS):
            raise FormatError("TEXT does not start with LLVM bitcode's magic")
        if any(segments[index].mem_size or segments[index].data
               for index in (SEG_RELRO, SEG_DATA)) or n_relocs or \
                map_size or page_align or entry_vaddr or got_ptr_vaddr:
            raise FormatError("a bitcode image maps nothing: RELRO, DATA, "
                              "relocations, map_size, page_align, entry and "
                              "got_ptr must be 0")
        if n_symbols != 1:
            raise FormatError("a bitcode image names one function, its "
                              "entry; it names %d" % n_symbols)

    return Image(segments=segments, entry_vaddr=entry_vaddr,
                 got_ptr_vaddr=got_ptr_vaddr, map_size=map_size,
                 imports=imports, relocs=relocs, needed=needed,
                 symbols=symbols, signature=signature, machine=machine,
                 page_align=page_align, flags=flags, triple=triple)


def describe_signature(image):
    if image.signature is None:
        return "signature: none"
    if any(image.signature.signature):
        return "signature: Ed25519, key %s" % image.signature.public_key.hex()
    return "signature: room for one, not signed"


def describe_bitcode(image):
    """A readable description of a bitcode image (for --dump)."""
    text = image.segments[SEG_TEXT]
    lines = ["machine %d%s, triple %s, flags %#x (bitcode)"
             % (image.machine, " (%s)" % MACHINE_NAMES[image.machine]
                if image.machine in MACHINE_NAMES else "", image.triple,
                image.flags),
             "bitcode: %d bytes at file_offset %#x" % (len(text.data),
                                                       text.file_offset),
             "entry    %s" % ", ".join(s.name for s in image.symbols),
             "imports: %d" % len(image.imports)]
    for index, imp in enumerate(image.imports):
        lines.append("  [%d] %s%s" % (index, imp.name,
                                      "  weak" if imp.weak else ""))
    lines.append("needed libraries: %s" % (", ".join(image.needed) or "none"))
    lines.append(describe_signature(image))
    return "\n".join(lines)


def describe(image, name=None):
    """A readable multi-line description of an image (for --dump)."""
    lines = ["machine %d%s, page_align %#x, map_size %#x, flags %#x%s"
             % (image.machine, " (%s)" % MACHINE_NAMES[image.machine]
                if image.machine in MACHINE_NAMES else "",
                image.page_align, image.map_size, image.flags,
                "".join(" (%s)" % FLAG_NAMES[f] for f in FLAG_NAMES
                        if image.flags & f)),
             "segments:"]
    for index, seg in enumerate(image.segments):
        lines.append("  %-5s vaddr %#8x  mem_size %#8x  file_size %#8x  "
                     "file_offset %#6x  %s"
                     % (SEG_NAMES[index], seg.vaddr, seg.mem_size,
                        len(seg.data), seg.file_offset, SEG_PROT[index]))
    entry_note = " (%s_main)" % name if name else ""
    lines.append("entry    %#x%s" % (image.entry_vaddr, entry_note))
    got_seg = image.segment_of(image.got_ptr_vaddr, 8)
    if image.flags & FLAG_SANDBOX:
        lines.append("got_ptr  none (sandbox: imports are called through "
                     "the gate page)")
    else:
        lines.append("got_ptr  %#x (%s)" % (
            image.got_ptr_vaddr, SEG_NAMES[got_seg] if got_seg is not None
            else "outside any segment"))
    lines.append("imports: %d" % len(image.imports))
    for index, imp in enumerate(image.imports):
        lines.append("  [%d] %s%s" % (index, imp.name, "  weak" if imp.weak else ""))
    lines.append("needed libraries: %s" % (", ".join(image.needed) or "none"))
    lines.append("functions: %d" % len(image.symbols))
    for sym in image.symbols:
        lines.append("  %#8x %#6x %s" % (sym.vaddr, sym.size, sym.name))
    lines.append(describe_signature(image))
    lines.append("relocations: %d" % len(image.relocs))
    for rel in image.relocs:
        kind = RELOC_NAMES.get(rel.kind, "type %d" % rel.kind)
        if rel.kind == RELOC_IMPORT:
            target = "[%d]" % rel.import_index
            if rel.import_index < len(image.imports):
                target += " " + image.imports[rel.import_index].name
            if rel.addend:
                target += " %+d" % rel.addend
        else:
            target = "base %s %#x" % ("-" if rel.addend < 0 else "+",
                                      abs(rel.addend))
        lines.append("  %#8x  %-8s %s" % (rel.vaddr, kind, target))
    return "\n".join(lines)
