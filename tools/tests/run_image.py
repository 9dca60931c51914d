"""A minimal stand-in for the target side, used by the tests.

    run_image.py [--native] LIB.so PAYLOAD_TEXT RUNS [PRELOAD.so ...]

Loads the PRELOAD libraries globally (they play the target program's own
exported symbols), dlopens LIB.so, builds a payload with its payload
functions (as the source would), then links the embedded image the way the
runtime does and calls NAME_main RUNS times. Prints what NAME_main prints.
With --native it calls LIB.so's own NAME_main instead, which gives the
output the image must reproduce. It exists to prove that built images really
run; the real runtime is C++.
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ucx_ifunc import elf_query  # noqa: E402
from ucx_ifunc import image_format as fmt  # noqa: E402

PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_PRIVATE, MAP_ANONYMOUS = 0x02, 0x20

libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.dlsym.restype = ctypes.c_void_p
libc.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
libc.fflush.argtypes = [ctypes.c_void_p]


def make_payload(lib, name, text):
    bound = getattr(lib, name + "_payload_bound")
    bound.restype = ctypes.c_size_t
    bound.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    init = getattr(lib, name + "_payload_init")
    init.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                     ctypes.POINTER(ctypes.c_size_t)]
    args = ctypes.create_string_buffer(text)
    capacity = bound(args, len(text))
    payload = ctypes.create_string_buffer(capacity)
    size = ctypes.c_size_t(capacity)
    if init(args, len(text), payload, ctypes.byref(size)) != 0:
        sys.exit("payload_init failed")
    return payload, size.value


def link(image, lib):
    base = libc.mmap(None, image.map_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    for seg in image.segments:
        ctypes.memmove(base + seg.vaddr, seg.data, len(seg.data))
    addresses = []
    for imp in image.imports:
        name = imp.name.encode()
        address = libc.dlsym(None, name) or libc.dlsym(lib._handle, name)
        if not address and not imp.weak:
            sys.exit("unresolved import " + imp.name)
        addresses.append(address or 0)
    table = (ctypes.c_uint64 * max(len(addresses), 1))(*addresses)
    ctypes.c_uint64.from_address(base + image.got_ptr_vaddr).value = \
        ctypes.addressof(table)
    for rel in image.relocs:
        if rel.kind == fmt.RELOC_RELATIVE:
            value = base + rel.addend
        else:
            value = addresses[rel.import_index] + rel.addend
        ctypes.c_uint64.from_address(base + rel.vaddr).value = value % (1 << 64)
    for seg, prot in zip(image.segments, (PROT_READ | PROT_EXEC, PROT_READ,
                                          PROT_READ | PROT_WRITE)):
        size = fmt.align_up(seg.mem_size, fmt.PAGE_ALIGN)
        if size and libc.mprotect(base + seg.vaddr, size, prot) != 0:
            sys.exit("mprotect failed")
    return base, table


def main():
    args = sys.argv[1:]
    native = args[0] == "--native"
    if native:
        args.pop(0)
    lib_path, text, runs = args[0], args[1].encode(), int(args[2])
    for preload in args[3:]:
        ctypes.CDLL(preload, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(os.path.abspath(lib_path))
    name, blob = elf_query.read_embedded_image(lib_path)
    payload, size = make_payload(lib, name, text)
    entry_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_void_p)
    if native:
        entry = entry_type((name + "_main", lib))
    else:
        image = fmt.decode(blob)
        base, _table = link(image, lib)
        entry = entry_type(base + image.entry_vaddr)
    for _ in range(runs):
        entry(payload, size, None)
    libc.fflush(None)


if __name__ == "__main__":
    main()
