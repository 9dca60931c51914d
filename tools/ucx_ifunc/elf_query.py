"""Reads what ucx-ifunc-cc needs from finished shared libraries: the embedded
image (for --dump and tests) and the dynamic symbol table."""

import io

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from . import image_format as fmt
from .errors import UserError


def _load(path):
    try:
        with open(path, "rb") as stream:
            blob = stream.read()
    except OSError as err:
        raise UserError("%s: cannot read: %s" % (path, err.strerror))
    try:
        return ELFFile(io.BytesIO(blob))
    except ELFError as err:
        raise UserError("%s: not an ELF file (%s)" % (path, err))


def read_embedded_image(path):
    """Returns (ifunc name, image bytes) of the image embedded in path."""
    elf = _load(path)
    for table_name in (".symtab", ".dynsym"):
        table = elf.get_section_by_name(table_name)
        if table is None:
            continue
        for sym in table.iter_symbols():
            if not sym.name.startswith(fmt.SYMBOL_PREFIX) or \
                    not isinstance(sym["st_shndx"], int):
                continue
            section = elf.get_section(sym["st_shndx"])
            start = sym["st_value"] - section["sh_addr"]
            blob = section.data()[start:start + sym["st_size"]]
            return sym.name[len(fmt.SYMBOL_PREFIX):], blob
    raise UserError("%s: no ifunc image in it (no symbol %s*)"
                    % (path, fmt.SYMBOL_PREFIX))


def exported_symbols(path):
    """Names of the symbols path defines and exports (its .dynsym)."""
    table = _load(path).get_section_by_name(".dynsym")
    if table is None:
        return set()
    return {sym.name for sym in table.iter_symbols()
            if sym["st_shndx"] != "SHN_UNDEF"
            and sym["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED")}


def dump(path):
    """The text that --dump prints for path."""
    name, blob = read_embedded_image(path)
    try:
        image = fmt.decode(blob)
    except fmt.FormatError as err:
        raise UserError("%s: %s%s: damaged image: %s"
                        % (path, fmt.SYMBOL_PREFIX, name, err))
    header = "%s: image %s%s, %d bytes, format version %d" % (
        path, fmt.SYMBOL_PREFIX, name, len(blob), fmt.VERSION)
    return header + "\n" + fmt.describe(image, name)


def needed_libraries(path):
    """The sonames path needs (its DT_NEEDED entries), in order."""
    dynamic = _load(path).get_section_by_name(".dynamic")
    if dynamic is None:
        return []
    return [tag.needed for tag in dynamic.iter_tags()
            if tag.entry.d_tag == "DT_NEEDED"]
