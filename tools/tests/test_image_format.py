"""The image layout: Python's encoder against fixed offsets and image.h."""

import os
import re
import struct
import subprocess
import unittest

from tests import helpers
from ucx_ifunc import image_format as fmt

IMAGE_H = os.path.join(helpers.TOOLS_DIR, "..", "src", "ucp", "ifunc",
                       "format", "image.h")

C_READER = r"""
#include <stdio.h>
#include <string.h>
#include <ucp/ifunc/format/image.h>

static unsigned char buf[1 << 16];

int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    size_t n = fread(buf, 1, sizeof(buf), f);
    const ucp_ifunc_image_desc_t *d = (const void *)buf;
    const ucp_ifunc_image_import_t *imp = (const void *)(buf + d->imports_offset);
    const ucp_ifunc_image_reloc_t *rel = (const void *)(buf + d->relocs_offset);
    const char *strtab = (const char *)buf + d->strtab_offset;
    unsigned i;

    printf("sizes %zu %zu %zu %zu read %zu\n", sizeof(*d), sizeof(d->seg[0]),
           sizeof(*imp), sizeof(*rel), n);
    printf("desc %u %u %u %u %u %lu %lu %lu\n", d->magic, d->version,
           d->machine, d->desc_size, d->flags, d->image_size, d->page_align,
           d->map_size);
    for (i = 0; i < UCP_IFUNC_SEG_COUNT; i++) {
        printf("seg %lu %lu %lu %lu first %u\n", d->seg[i].vaddr,
               d->seg[i].mem_size, d->seg[i].file_offset, d->seg[i].file_size,
               d->seg[i].file_size ? buf[d->seg[i].file_offset] : 0u);
    }
    printf("entry %lu got %lu counts %u %u\n", d->entry_vaddr,
           d->got_ptr_vaddr, d->n_imports, d->n_relocs);
    for (i = 0; i < d->n_imports; i++) {
        printf("import %s %u\n", strtab + imp[i].name_offset, imp[i].flags);
    }
    for (i = 0; i < d->n_relocs; i++) {
        printf("reloc %lu %u %u %ld\n", rel[i].vaddr, rel[i].type,
               rel[i].import_index, rel[i].addend);
    }
    for (i = 0; i < d->n_symbols; i++) {
        const ucp_ifunc_image_symbol_t *sym =
            (const void *)(buf + d->symbols_offset + i * sizeof(*sym));
        printf("symbol %s %lu %lu\n", strtab + sym->name_offset, sym->vaddr,
               sym->size);
    }
    for (i = 0; i < d->n_needed; i++) {
        const unsigned *needed = (const void *)(buf + d->needed_offset);
        printf("needed %s\n", strtab + needed[i]);
    }
    printf("signature at %lu of %lu\n", d->signature_offset, d->image_size);
    return 0;
}
"""


def sample_image():
    return fmt.Image(
        segments=[fmt.Segment(0, 0x31, b"\x90" * 0x31),
                  fmt.Segment(0x1000, 0x18, b"\x07" + bytes(0x17)),
                  fmt.Segment(0x2000, 0x40, b"\x09" * 8)],
        entry_vaddr=0x10, got_ptr_vaddr=0x1000, map_size=0x3000,
        imports=[fmt.Import("printf"), fmt.Import("optional_hook", True)],
        relocs=[fmt.Reloc(0x1008, fmt.RELOC_RELATIVE, 0x20),
                fmt.Reloc(0x2000, fmt.RELOC_IMPORT, -8, 1)],
        needed=["libz.so.1", "libc.so.6"],
        symbols=[fmt.FunctionSymbol("helper", 0, 0x10),
                 fmt.FunctionSymbol("demo_main", 0x10, 0x21)])


class EncodeTest(unittest.TestCase):
    def test_record_sizes(self):
        self.assertEqual((fmt.DESC_SIZE, fmt.SEG_SIZE, fmt.IMPORT_SIZE,
                          fmt.RELOC_SIZE, fmt.SYMBOL_SIZE,
                          fmt.SIGNATURE_BLOCK_SIZE), (224, 32, 8, 24, 24, 96))

    def test_fields_at_image_h_offsets(self):
        blob = fmt.encode(sample_image())
        self.assertEqual(blob[:4], b"FIMG")
        version, machine, desc_size, flags = struct.unpack_from("<HHII", blob, 4)
        self.assertEqual((version, machine, desc_size, flags), (2, 62, 224, 0))
        image_size, page_align, map_size = struct.unpack_from("<QQQ", blob, 16)
        self.assertEqual(image_size, len(blob))
        self.assertEqual(image_size % 8, 0)
        self.assertEqual((page_align, map_size), (4096, 0x3000))
        previous_end = 224
        for index in range(3):
            vaddr, mem_size, offset, size = struct.unpack_from(
                "<QQQQ", blob, 40 + 32 * index)
            self.assertEqual(offset % 16, 0)
            self.assertGreaterEqual(offset, previous_end)
            previous_end = offset + size
        self.assertEqual(struct.unpack_from("<QQ", blob, 136), (0x10, 0x1000))
        imports_off, relocs_off, strtab_off, strtab_size = struct.unpack_from(
            "<QQQQ", blob, 152)
        n_imports, n_relocs = struct.unpack_from("<II", blob, 184)
        self.assertEqual((n_imports, n_relocs), (2, 2))
        self.assertEqual(imports_off % 8, 0)
        self.assertEqual(relocs_off % 8, 0)
        self.assertGreaterEqual(imports_off, previous_end)
        self.assertEqual(blob[strtab_off:strtab_off + strtab_size],
                         b"printf\0optional_hook\0helper\0demo_main\0"
                         b"libz.so.1\0libc.so.6\0")
        needed_off, symbols_off, signature_off = struct.unpack_from(
            "<QQQ", blob, 192)
        self.assertEqual(struct.unpack_from("<II", blob, 216), (2, 2))
        self.assertEqual(signature_off, 0)
        self.assertEqual(symbols_off % 8, 0)
        self.assertEqual(struct.unpack_from("<IIQQ", blob, symbols_off + 24),
                         (28, 0, 0x10, 0x21))
        self.assertEqual(struct.unpack_from("<II", blob, needed_off),
                         (38, 48))
        self.assertEqual(struct.unpack_from("<II", blob, imports_off + 8),
                         (7, fmt.IMPORT_WEAK))
        self.assertEqual(struct.unpack_from("<QIIq", blob, relocs_off + 24),
                         (0x2000, fmt.RELOC_IMPORT, 1, -8))

    def test_round_trip(self):
        image = sample_image()
        decoded = fmt.decode(fmt.encode(image))
        self.assertEqual(decoded, image)

    def test_decode_rejects_damage(self):
        blob = bytearray(fmt.encode(sample_image()))
        with self.assertRaisesRegex(fmt.FormatError, "magic"):
            fmt.decode(b"XXXX" + bytes(blob[4:]))
        with self.assertRaisesRegex(fmt.FormatError, "too short"):
            fmt.decode(blob[:100])
        struct.pack_into("<Q", blob, 152, len(blob) + 8)  # imports_offset
        with self.assertRaisesRegex(fmt.FormatError, "import records"):
            fmt.decode(blob)

    def test_describe_lists_everything(self):
        text = fmt.describe(sample_image(), "demo")
        for needle in ("TEXT", "RELRO", "DATA", "entry    0x10 (demo_main)",
                       "got_ptr  0x1000 (RELRO)", "[1] optional_hook  weak",
                       "IMPORT   [1] optional_hook -8",
                       "RELATIVE base + 0x20"):
            self.assertIn(needle, text)


def sandbox_image():
    """A sandbox image: one bundle of code, a pointer to import 0's gate
    bundle (a RELATIVE record below vaddr 0), no GOT pointer."""
    return fmt.Image(
        segments=[fmt.Segment(0, 0x20, b"\x90" * 0x20),
                  fmt.Segment(0x1000, 0, b""),
                  fmt.Segment(0x1000, 8, b"")],
        entry_vaddr=0, got_ptr_vaddr=0, map_size=0x2000,
        imports=[fmt.Import("memcpy")],
        relocs=[fmt.Reloc(0x1000, fmt.RELOC_RELATIVE, -0x1000 + 32)],
        flags=fmt.FLAG_SANDBOX)


class SandboxFormatTest(unittest.TestCase):
    """Format version 3: sandbox images, and only they, carry it."""

    def test_version_follows_the_flag(self):
        blob = fmt.encode(sandbox_image())
        self.assertEqual(struct.unpack_from("<HHII", blob, 4),
                         (fmt.VERSION_SANDBOX, 62, 224, fmt.FLAG_SANDBOX))
        self.assertEqual(struct.unpack_from("<H", fmt.encode(sample_image()),
                                            4), (fmt.VERSION,))
        decoded = fmt.decode(blob)
        self.assertEqual(decoded, sandbox_image())
        self.assertEqual(decoded.relocs[0].addend, -0x1000 + 32)

    def test_decode_refuses_mismatched_version_and_flags(self):
        sandbox_blob = bytearray(fmt.encode(sandbox_image()))
        native_blob = bytearray(fmt.encode(sample_image()))
        struct.pack_into("<I", sandbox_blob, 12, 0)  # version 3, flags 0
        with self.assertRaisesRegex(fmt.FormatError, "flags 0x0"):
            fmt.decode(sandbox_blob)
        struct.pack_into("<I", native_blob, 12, fmt.FLAG_SANDBOX)
        with self.assertRaisesRegex(fmt.FormatError, "flags 0x1"):
            fmt.decode(native_blob)
        struct.pack_into("<H", native_blob, 4, 4)
        with self.assertRaisesRegex(fmt.FormatError, "version 4"):
            fmt.decode(native_blob)

    def test_describe_says_sandbox(self):
        text = fmt.describe(sandbox_image(), "sbx")
        self.assertIn("flags 0x1 (sandbox)", text)
        self.assertIn("got_ptr  none", text)
        self.assertIn("RELATIVE base - 0xfe0", text)

    @unittest.skipUnless(os.path.exists(IMAGE_H), "image.h not found")
    def test_constants_are_image_h_ones(self):
        with open(IMAGE_H) as stream:
            header = stream.read()
        for name, value in (("UCP_IFUNC_IMAGE_VERSION_SANDBOX",
                             fmt.VERSION_SANDBOX),
                            ("UCP_IFUNC_IMAGE_FLAG_SANDBOX", fmt.FLAG_SANDBOX)):
            found = re.search(r"%s\s*=?\s*(\d+)" % name, header)
            self.assertIsNotNone(found, name)
            self.assertEqual(int(found.group(1)), value, name)


@unittest.skipUnless(os.path.exists(IMAGE_H), "src/ucp/ifunc/format/image.h not found")
class ImageHeaderTest(unittest.TestCase):
    """A C program reading the image through image.h sees what we wrote."""

    def test_c_reader_agrees(self):
        work = helpers.scratch_dir("format")
        reader_c = os.path.join(work, "reader.c")
        with open(reader_c, "w") as stream:
            stream.write(C_READER)
        reader = os.path.join(work, "reader")
        subprocess.run(["cc", "-std=c11", "-I", os.path.join(
            os.path.dirname(IMAGE_H), "..", "..", ".."), reader_c, "-o", reader],
            check=True)
        image = sample_image()
        blob_path = os.path.join(work, "image.bin")
        blob = fmt.encode(image)
        with open(blob_path, "wb") as stream:
            stream.write(blob)
        out = subprocess.run([reader, blob_path], stdout=subprocess.PIPE,
                             universal_newlines=True, check=True).stdout
        lines = out.splitlines()
        self.assertEqual(lines[0], "sizes 224 32 8 24 read %d" % len(blob))
        self.assertEqual(lines[1], "desc %d 2 62 224 0 %d 4096 %d"
                         % (fmt.MAGIC, len(blob), image.map_size))
        for seg, line in zip(image.segments, lines[2:5]):
            fields = line.split()
            vaddr, mem_size, offset, size = map(int, fields[1:5])
            self.assertEqual((vaddr, mem_size, size),
                             (seg.vaddr, seg.mem_size, len(seg.data)))
            self.assertEqual(blob[offset:offset + size], seg.data)
            self.assertEqual(int(fields[6]), seg.data[0])
        self.assertEqual(lines[5:], [
            "entry 16 got 4096 counts 2 2", "import printf 0",
            "import optional_hook 1", "reloc 4104 1 0 32", "reloc 8192 2 1 -8",
            "symbol helper 0 16", "symbol demo_main 16 33",
            "needed libz.so.1", "needed libc.so.6",
            "signature at 0 of %d" % len(blob)])

    def test_c_reader_finds_the_signature_block(self):
        blob = fmt.encode(sample_image(), signed=True)
        signature_off = struct.unpack_from("<Q", blob, 208)[0]
        self.assertEqual(signature_off + fmt.SIGNATURE_BLOCK_SIZE, len(blob))
        self.assertEqual(len(blob) % 8, 0)


if __name__ == "__main__":
    unittest.main()
