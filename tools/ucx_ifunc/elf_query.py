"""Reads what ucx-ifunc-cc needs from finished shared libraries: the embedded
image (for --dump and tests) and the dynamic symbol table."""

import io
import os

from . import image_format as fmt
from .errors import UserError


def _load(path):
    # pyelftools only here: its import is slow, and the build's own reads
    # go through elf_read
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    try:
        with open(path, "rb") as stream:
            blob = stream.read()
    except OSError as err:
        raise UserError("%s: cannot read: %s" % (path, err.strerror))
    try:
        return ELFFile(io.BytesIO(blob))
    except ELFError as err:
        raise UserError("%s: not an ELF file (%s)" % (path, err))


def read_embedded_images(path):
    """[(symbol, ifunc name, image bytes)] of every image embedded in path:
    __ucp_ifunc_image_NAME and, in a library built with --target, the
    per-ISA __ucp_ifunc_image_NAME.em<e_machine>, in symbol table order."""
    images = _read_images(_load(path), fmt.SYMBOL_PREFIX)
    if not images:
        raise UserError("%s: no ifunc image in it (no symbol %s*)"
                        % (path, fmt.SYMBOL_PREFIX))
    return images


def read_embedded_bitcode(path, elf=None):
    """[(symbol, ifunc name, image bytes)] of the bitcode images in path
    (__ucp_ifunc_bitcode_NAME.em<e_machine>), by ELF machine."""
    return _read_images(elf or _load(path), fmt.BITCODE_SYMBOL_PREFIX)


def _read_images(elf, prefix):
    images, seen = [], set()
    for table_name in (".symtab", ".dynsym"):
        table = elf.get_section_by_name(table_name)
        if table is None:
            continue
        for sym in table.iter_symbols():
            if not sym.name.startswith(prefix) or \
                    not isinstance(sym["st_shndx"], int) or sym.name in seen:
                continue
            seen.add(sym.name)
            section = elf.get_section(sym["st_shndx"])
            start = sym["st_value"] - section["sh_addr"]
            blob = section.data()[start:start + sym["st_size"]]
            name = sym.name[len(prefix):].split(".")[0]
            images.append((sym.name, name, blob))
        if images:
            break
    # the library's own image first, then one per ISA by ELF machine
    return sorted(images, key=lambda image: (
        "." in image[0], int(image[0].rpartition(".em")[2] or 0)
        if ".em" in image[0] else 0))


def read_embedded_image(path, e_machine=None):
    """Returns (ifunc name, image bytes): the image of the library's own
    ISA (__ucp_ifunc_image_NAME), or with e_machine, the image for that ISA
    (__ucp_ifunc_image_NAME.em<e_machine>)."""
    images = read_embedded_images(path)
    for symbol, name, blob in images:
        wanted = fmt.SYMBOL_PREFIX + name if e_machine is None else \
            fmt.isa_symbol(name, e_machine)
        if symbol == wanted:
            return name, blob
    raise UserError("%s: no image for ELF machine %s in it"
                    % (path, e_machine))


def _read_fast(path):
    """elf_read's ElfFile of path, or None where it does not read it."""
    from . import elf_read
    try:
        with open(path, "rb") as stream:
            elf = elf_read.ElfFile(stream.read())
    except (OSError, elf_read.ElfFormatError):
        return None
    return elf if elf.is_supported else None


def exported_symbols(path):
    """Names of the symbols path defines and exports (its .dynsym)."""
    elf = _read_fast(path)
    if elf is not None:
        return elf.exported()
    table = _load(path).get_section_by_name(".dynsym")
    if table is None:
        return set()
    return {sym.name for sym in table.iter_symbols()
            if sym["st_shndx"] != "SHN_UNDEF"
            and sym["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED")}


def dump(path):
    """The text that --dump prints for path: every image it holds, then
    every bitcode image."""
    elf = _load(path)
    images = _read_images(elf, fmt.SYMBOL_PREFIX)
    bitcode = read_embedded_bitcode(path, elf)
    if not images and not bitcode:
        raise UserError("%s: no ifunc image in it (no symbol %s* or %s*)"
                        % (path, fmt.SYMBOL_PREFIX,
                           fmt.BITCODE_SYMBOL_PREFIX))
    parts = []
    for symbol, name, blob in images:
        twin = [other for other, _, other_blob in images
                if other != symbol and other_blob == blob]
        if "." not in symbol and twin:
            parts.append("%s: image %s: the same bytes as %s"
                         % (path, symbol, twin[0]))
            continue
        try:
            image = fmt.decode(blob)
        except fmt.FormatError as err:
            raise UserError("%s: %s: damaged image: %s" % (path, symbol, err))
        header = "%s: image %s, %d bytes, format version %d" % (
            path, symbol, len(blob), fmt.version_of(image.flags))
        parts.append(header + "\n" + fmt.describe(image, name))
    for symbol, name, blob in bitcode:
        try:
            image = fmt.decode(blob)
        except fmt.FormatError as err:
            raise UserError("%s: %s: damaged image: %s" % (path, symbol, err))
        if not image.flags & fmt.FLAG_BITCODE:
            raise UserError("%s: %s: damaged image: not a bitcode image "
                            "(flags %#x)" % (path, symbol, image.flags))
        parts.append("%s: bitcode image %s, %d bytes, format version %d\n%s"
                     % (path, symbol, len(blob), fmt.version_of(image.flags),
                        fmt.describe_bitcode(image)))
    return "\n".join(parts)


def needed_libraries(path):
    """The sonames path needs (its DT_NEEDED entries), in order."""
    elf = _read_fast(path)
    if elf is not None:
        return elf.needed()
    dynamic = _load(path).get_section_by_name(".dynamic")
    if dynamic is None:
        return []
    return [tag.needed for tag in dynamic.iter_tags()
            if tag.entry.d_tag == "DT_NEEDED"]


def definition_lines(path):
    """{symbol: (file, line)} of the functions and variables that an object
    compiled with -g declares, from its DWARF: by linkage (mangled) name
    where there is one, else by name. For error messages only."""
    from elftools.common.exceptions import ELFError
    try:
        return _definition_lines(path)
    except (ELFError, UserError, ValueError, KeyError, IndexError):
        return {}  # the messages go without lines, as before


def _definition_lines(path):
    elf = _load(path)
    if not elf.has_dwarf_info():
        return {}
    dwarf = elf.get_dwarf_info()
    found = {}
    for cu in dwarf.iter_CUs():
        lineprog = dwarf.line_program_for_CU(cu)
        if lineprog is None:
            continue
        files = lineprog["file_entry"]
        dirs = lineprog["include_directory"]
        # DWARF 5 numbers files from 0, earlier versions from 1
        first = 0 if lineprog.header["version"] >= 5 else 1
        top = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
        comp_dir = top.value.decode("utf-8", "replace") if top else ""
        for die in cu.iter_DIEs():
            if die.tag not in ("DW_TAG_variable", "DW_TAG_subprogram"):
                continue
            attrs = die.attributes
            name = attrs.get("DW_AT_linkage_name") or attrs.get("DW_AT_name")
            if name is None or "DW_AT_decl_line" not in attrs or \
                    "DW_AT_decl_file" not in attrs:
                continue
            name = name.value.decode("utf-8", "replace")
            index = attrs["DW_AT_decl_file"].value - first
            if not 0 <= index < len(files):
                continue
            entry = files[index]
            file_name = entry.name.decode("utf-8", "replace")
            # DWARF 5: directory 0 is the compile's; before: 0 is the
            # compile's, the list starts at 1
            dir_index = entry.dir_index - (0 if first == 0 else 1)
            if 0 <= dir_index < len(dirs) and (first == 0 or entry.dir_index):
                file_name = os.path.join(
                    dirs[dir_index].decode("utf-8", "replace"), file_name)
            file_name = os.path.join(comp_dir, file_name)
            # a definition wins over a declaration of the same name
            if name not in found or "DW_AT_declaration" in found[name][2]:
                found[name] = (os.path.normpath(file_name),
                               attrs["DW_AT_decl_line"].value, attrs)
    return {name: (file, line) for name, (file, line, _) in found.items()}
