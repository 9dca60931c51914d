#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""Writes an assembly file that defines, as read-only data, the image
symbols of an ifunc library (__ucp_ifunc_image_NAME.em<E> and
__ucp_ifunc_bitcode_NAME.em<E>) with the bytes they hold in it.

    repackage.py LIBRARY.so OUT.S

ucx-ifunc-cc builds NAME.so for x86-64 and aarch64 only; a ppc64el source
(test/cross/run-ppc64el.sh) needs a ppc64el NAME.so. Its payload functions
are compiled by the ppc64el compiler, and OUT.S gives it the images of
LIBRARY.so byte for byte (signatures included), all but the plain
__ucp_ifunc_image_NAME, which would claim the machine code of another ISA
as the library's own.
"""

import sys

from elftools.elf.elffile import ELFFile

PREFIXES = ("__ucp_ifunc_image_", "__ucp_ifunc_bitcode_")
ALIGN = 64  # as ucx-ifunc-cc aligns images (cli.IMAGE_ALIGN)


def image_symbols(path):
    """(name, bytes) of every per-ISA image symbol of @a path."""
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        symbols = elf.get_section_by_name(".dynsym")
        found = []
        for symbol in symbols.iter_symbols():
            name = symbol.name
            if not name.startswith(PREFIXES) or ".em" not in name:
                continue
            address, size = symbol["st_value"], symbol["st_size"]
            for segment in elf.iter_segments():
                start = segment["p_vaddr"]
                if segment["p_type"] == "PT_LOAD" and \
                        start <= address < start + segment["p_filesz"]:
                    offset = segment["p_offset"] + address - start
                    stream.seek(offset)
                    found.append((name, stream.read(size)))
                    break
            else:
                sys.exit("repackage: %s: %s is not in a loaded segment"
                         % (path, name))
        return found


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: repackage.py LIBRARY.so OUT.S")
    symbols = image_symbols(sys.argv[1])
    if not symbols:
        sys.exit("repackage: %s has no per-ISA image symbols" % sys.argv[1])
    with open(sys.argv[2], "w") as out:
        out.write('\t.section .rodata.ucp_ifunc_images,"a"\n')
        for name, data in symbols:
            out.write('\t.balign %d\n\t.globl "%s"\n\t.type "%s", @object\n'
                      % (ALIGN, name, name))
            out.write('"%s":\n' % name)
            for i in range(0, len(data), 32):
                out.write("\t.byte %s\n"
                          % ",".join(str(b) for b in data[i:i + 32]))
            out.write('\t.size "%s", %d\n' % (name, len(data)))
        out.write('\t.section .note.GNU-stack,"",@progbits\n')


if __name__ == "__main__":
    main()
