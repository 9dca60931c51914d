"""The instruction sets ucx-ifunc-cc builds images for.

Everything that differs between ISAs and is not code (names, numbers,
compiler flags) is described here; the ISA-specific code lives in its own
modules (asm_rewrite.py for x86-64 assembly, reloc_aarch64.py for aarch64
relocations).
"""

from dataclasses import dataclass
from typing import Tuple

from .errors import UserError


@dataclass(frozen=True)
class Isa:
    triplet: str         # the --target name, and the cross compilers' prefix
    arch: str            # first field of `cc -dumpmachine`
    e_machine: int       # ELF e_machine, also in the image descriptor
    elf_machine: str     # pyelftools' name of e_machine
    display: str         # for messages and --dump
    debian_package: str  # what provides TRIPLET-gcc on Debian
    # image compile flags after the shared ones (see cli.IMAGE_FLAGS)
    image_flags: Tuple[str, ...]
    text_fill: bytes     # fills gaps between functions in TEXT
    asm_comment: str     # how gcc's assembly starts a comment
    # No native image: the runtime runs no machine code of this ISA, only
    # bitcode (ucx-ifunc-cc --bitcode), which its targets compile for
    # themselves. NAME.so can still be built for it.
    bitcode_only: bool = False

    def cross_compiler(self, cxx=False):
        return self.triplet + ("-g++" if cxx else "-gcc")

    def matches(self, dumpmachine):
        """Whether `cc -dumpmachine` output names a Linux compiler for us
        (x86_64-linux-gnu, x86_64-pc-linux-gnu, aarch64-redhat-linux...)."""
        fields = dumpmachine.strip().split("-")
        return fields[0] == self.arch and "linux" in fields[1:]


X86_64 = Isa(triplet="x86_64-linux-gnu", arch="x86_64", e_machine=62,
             elf_machine="EM_X86_64", display="x86-64",
             debian_package="gcc-x86-64-linux-gnu",
             # the rewriter reads AT&T syntax
             image_flags=("-masm=att",),
             text_fill=b"\xcc",  # int3
             asm_comment="#")

AARCH64 = Isa(triplet="aarch64-linux-gnu", arch="aarch64", e_machine=183,
              elf_machine="EM_AARCH64", display="aarch64",
              debian_package="gcc-aarch64-linux-gnu",
              # libgcc's __aarch64_cas4_acq and friends are hidden in
              # libgcc.a: no target could import them by name. Inline LL/SC
              # (or LSE with -march=armv8.1-a+) needs nothing.
              image_flags=("-mno-outline-atomics",),
              text_fill=b"\0",  # udf #0
              asm_comment="//")

PPC64LE = Isa(triplet="powerpc64le-linux-gnu", arch="powerpc64le",
              e_machine=21, elf_machine="EM_PPC64", display="ppc64el",
              debian_package="gcc-powerpc64le-linux-gnu",
              image_flags=(),  # compiled for NAME.so's objects only
              text_fill=b"\0",  # an illegal instruction
              asm_comment="#", bitcode_only=True)

ALL = (X86_64, AARCH64, PPC64LE)
BY_TRIPLET = {isa.triplet: isa for isa in ALL}
BY_MACHINE = {isa.e_machine: isa for isa in ALL}


def by_dumpmachine(dumpmachine):
    """The Isa a compiler with this -dumpmachine targets, or None."""
    for isa in ALL:
        if isa.matches(dumpmachine):
            return isa
    return None


def parse_targets(text):
    """The Isa list of a --target value 'T1[,T2...]', in order."""
    targets = []
    for triplet in text.split(","):
        triplet = triplet.strip()
        isa = BY_TRIPLET.get(triplet)
        if isa is None:
            raise UserError("--target: unknown target '%s'; known: %s"
                            % (triplet, ", ".join(BY_TRIPLET)))
        if isa in targets:
            raise UserError("--target: '%s' is given twice" % triplet)
        targets.append(isa)
    return targets


def machine_name(e_machine):
    isa = BY_MACHINE.get(e_machine)
    return isa.display if isa else None
