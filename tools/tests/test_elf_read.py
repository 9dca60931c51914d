"""elf_read reads what pyelftools reads, on real objects and libraries."""

import os
import subprocess
import unittest

from elftools.elf.elffile import ELFFile

from tests import helpers
from ucx_ifunc import elf_read


class ElfReadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = helpers.scratch_dir("elfread")
        source = os.path.join(helpers.DATA_DIR, "kitchen_util.c")
        cls.obj = os.path.join(cls.work, "util.o")
        cls.lib = os.path.join(cls.work, "libutil.so")
        subprocess.run(["cc", "-O2", "-fPIC", "-ffunction-sections",
                        "-fdata-sections", "-c", source, "-o", cls.obj],
                       check=True)
        subprocess.run(["cc", "-shared", "-o", cls.lib, cls.obj,
                        "-Wl,--no-as-needed", "-lz", "-lm"], check=True)

    @staticmethod
    def read(path):
        with open(path, "rb") as stream:
            blob = stream.read()
        with open(path, "rb") as stream:
            theirs = ELFFile(stream)
            sections = [(s.name, s["sh_flags"], s["sh_size"], s.data()
                         if s["sh_type"] != "SHT_NOBITS" else b"")
                        for s in theirs.iter_sections()]
            symbols = [(s.name, s["st_info"]["bind"], s["st_info"]["type"],
                        s["st_shndx"], s["st_value"], s["st_size"])
                       for s in theirs.get_section_by_name(
                           ".symtab").iter_symbols()]
            relocs = [(r["r_offset"], r["r_info_type"], r["r_info_sym"],
                       r["r_addend"])
                      for s in theirs.iter_sections()
                      if s["sh_type"] == "SHT_RELA"
                      for r in s.iter_relocations()]
        return elf_read.ElfFile(blob), sections, symbols, relocs

    def test_object(self):
        ours, sections, symbols, relocs = self.read(self.obj)
        self.assertEqual([(s.name, s.flags, s.size, s.data())
                          for s in ours.sections], sections)
        table = ours.section_by_name(".symtab")
        mine = ours.symbols(table)
        self.assertEqual([(s.name, s.bind, s.type, s.shndx, s.value, s.size)
                          for s in mine], symbols)
        index = {id(s): n for n, s in enumerate(mine)}
        self.assertEqual(
            [(r.offset, r.type, index[id(r.symbol)], r.addend)
             for s in ours.sections if s.type == elf_read.SHT_RELA
             for r in ours.relocations(s, mine)], relocs)
        self.assertTrue(relocs)

    def test_library(self):
        ours = self.read(self.lib)[0]
        with open(self.lib, "rb") as stream:
            theirs = ELFFile(stream)
            needed = [t.needed for t in theirs.get_section_by_name(
                ".dynamic").iter_tags() if t.entry.d_tag == "DT_NEEDED"]
            exported = {s.name for s in theirs.get_section_by_name(
                ".dynsym").iter_symbols()
                if s["st_shndx"] != "SHN_UNDEF"
                and s["st_other"]["visibility"] in ("STV_DEFAULT",
                                                    "STV_PROTECTED")}
        self.assertEqual(ours.needed(), needed)
        self.assertIn("libz.so.1", needed)
        self.assertEqual(ours.exported(), exported)
        self.assertIn("util_say", exported)

    def test_not_elf(self):
        with self.assertRaises(elf_read.ElfFormatError):
            elf_read.ElfFile(b"not an ELF file at all, but long enough " * 2)


if __name__ == "__main__":
    unittest.main()
