"""Self-check of a linked image before it is embedded.

Everything checked here should hold by construction; a failure means
ucx-ifunc-cc produced a wrong image (a toolchain bug), not that the user's
code is wrong. The disassembly check catches references that the rewriter or
the linker missed: shipped code must not reach outside its own mapping.
"""

import sys
import warnings

from . import image_format as fmt
from .errors import ToolchainBug


def _import_capstone():
    """capstone, or None if it is not installed.

    capstone 4 imports distutils.sysconfig, and Debian's setuptools puts a
    finder on sys.meta_path (distutils-precedence.pth, when
    SETUPTOOLS_USE_DISTUTILS was not 'stdlib' at start-up) that serves its
    own distutils instead, importing all of setuptools: a quarter of a
    second, four times capstone's own import. The standard library's
    distutils, where there still is one (before Python 3.12), does as well:
    it is imported with that finder set aside."""
    finders = [f for f in sys.meta_path
               if type(f).__module__ == "_distutils_hack"]
    if finders and "distutils" not in sys.modules:
        sys.meta_path[:] = [f for f in sys.meta_path if f not in finders]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                import distutils.sysconfig  # noqa: F401
        except ImportError:
            pass  # no distutils of its own: setuptools' is needed
        finally:
            sys.meta_path[:0] = finders
    try:
        import capstone
    except ImportError:
        return None
    return capstone


def preload():
    """Imports capstone now (while compilers run), if it is installed."""
    _import_capstone()


def _fail(message):
    raise ToolchainBug("image self-check failed: " + message)


def check_structure(image):
    text, relro, data = image.segments
    if text.vaddr != 0:
        _fail("TEXT does not start at vaddr 0")
    end = 0
    for index, seg in enumerate(image.segments):
        if seg.vaddr % fmt.PAGE_ALIGN or seg.vaddr < end:
            _fail("%s vaddr %#x is not page-aligned after %#x"
                  % (fmt.SEG_NAMES[index], seg.vaddr, end))
        if len(seg.data) > seg.mem_size:
            _fail("%s has more file bytes than memory" % fmt.SEG_NAMES[index])
        end = seg.vaddr + seg.mem_size
    if image.map_size != fmt.align_up(end, fmt.PAGE_ALIGN):
        _fail("map_size %#x does not end at the last segment" % image.map_size)
    if image.segment_of(image.entry_vaddr) != fmt.SEG_TEXT:
        _fail("entry %#x is not in TEXT" % image.entry_vaddr)
    if image.flags & fmt.FLAG_SANDBOX:
        _check_sandbox_structure(image)
    elif image.got_ptr_vaddr % 8 or \
            image.segment_of(image.got_ptr_vaddr, 8) != fmt.SEG_RELRO:
        _fail("got_ptr %#x is not an aligned slot in RELRO"
              % image.got_ptr_vaddr)
    for rel in image.relocs:
        seg = image.segment_of(rel.vaddr, 8)
        if seg not in (fmt.SEG_RELRO, fmt.SEG_DATA) or rel.vaddr % 8:
            _fail("relocation at %#x is not an aligned slot in RELRO or DATA"
                  % rel.vaddr)
        if rel.kind == fmt.RELOC_IMPORT and rel.import_index >= len(image.imports):
            _fail("relocation at %#x names import %d of %d"
                  % (rel.vaddr, rel.import_index, len(image.imports)))
        if rel.kind not in (fmt.RELOC_IMPORT, fmt.RELOC_RELATIVE):
            _fail("relocation at %#x has kind %d" % (rel.vaddr, rel.kind))


def _check_sandbox_structure(image):
    """What the target's image check asks of a sandbox image (its code
    is the verifier's: sandbox_verify.cc)."""
    from . import sandbox
    text = image.segments[fmt.SEG_TEXT]
    if image.got_ptr_vaddr != 0:
        _fail("a sandbox image has a got_ptr (%#x)" % image.got_ptr_vaddr)
    if not text.mem_size or text.mem_size % sandbox.BUNDLE_SIZE or \
            len(text.data) != text.mem_size:
        _fail("the sandbox TEXT is not whole bundles in the file")
    if image.entry_vaddr % sandbox.BUNDLE_SIZE:
        _fail("entry %#x is not a bundle start" % image.entry_vaddr)
    if len(image.imports) > sandbox.MAX_GATE_IMPORTS or \
            any(r.kind != fmt.RELOC_RELATIVE for r in image.relocs):
        _fail("a sandbox image with import records or too many imports")


def check_code(image):
    """Disassembles TEXT; returns False if capstone is not installed."""
    capstone = _import_capstone()
    if capstone is None:
        return False
    if image.machine == fmt.EM_AARCH64:
        _check_aarch64(capstone, image)
        return True
    from capstone import x86
    text = image.segments[fmt.SEG_TEXT]
    disasm = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    disasm.detail = True
    code = bytes(text.data)
    gates = _gate_bundles(image)
    offset = 0
    while offset < len(code):
        last_end = offset
        for insn in disasm.disasm(code[offset:], offset):
            last_end = insn.address + insn.size
            branch = insn.group(capstone.CS_GRP_JUMP) or \
                insn.group(capstone.CS_GRP_CALL)
            for op in insn.operands:
                if op.type == x86.X86_OP_MEM and op.mem.base == x86.X86_REG_RIP:
                    target = last_end + op.mem.disp
                    if not 0 <= target < image.map_size and not (
                            insn.mnemonic == "lea" and target in gates):
                        _fail("'%s %s' at %#x refers to %#x, outside the "
                              "image" % (insn.mnemonic, insn.op_str,
                                         insn.address, target))
                elif branch and op.type == x86.X86_OP_IMM:
                    if not 0 <= op.imm < text.mem_size and not (
                            insn.mnemonic == "call" and op.imm in gates):
                        _fail("'%s %s' at %#x branches outside TEXT"
                              % (insn.mnemonic, insn.op_str, insn.address))
        # capstone stops at bytes it cannot decode (data in inline asm):
        # skip one and go on
        offset = last_end if last_end > offset else offset + 1
    return True


def _gate_bundles(image):
    """The vaddrs of a sandbox image's import gates, which its calls and
    address loads may name (none for other images)."""
    if not image.flags & fmt.FLAG_SANDBOX:
        return set()
    from .sandbox import gate_vaddr
    # capstone shows addresses below 0 as 64-bit unsigned numbers
    return {gate_vaddr(i) % (1 << 64) for i in range(len(image.imports))} | \
        {gate_vaddr(i) for i in range(len(image.imports))}


# aarch64 instructions whose immediate is an address: PC-relative loads
# (literal pools) and address computations.
_AARCH64_ADDRESS = {"adr", "adrp", "ldr", "ldrsw", "prfm"}


def _check_aarch64(capstone, image):
    """Every direct branch must stay in TEXT, and every adr/adrp/literal
    load must point into the image (adrp: into one of its pages)."""
    from capstone import arm64
    text = image.segments[fmt.SEG_TEXT]
    disasm = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
    disasm.detail = True
    code = bytes(text.data)
    # instructions are 4 bytes: decode one at a time, so that data in TEXT
    # (inline asm .word) does not stop the check
    for offset in range(0, len(code) - 3, 4):
        insn = next(disasm.disasm(code[offset:offset + 4], offset), None)
        if insn is None:
            continue
        targets = [op.imm for op in insn.operands
                   if op.type == arm64.ARM64_OP_IMM]
        if not targets:
            continue
        branch = insn.group(capstone.CS_GRP_JUMP) or \
            insn.group(capstone.CS_GRP_CALL)
        if branch:
            if not 0 <= targets[-1] < text.mem_size:
                _fail("'%s %s' at %#x branches outside TEXT"
                      % (insn.mnemonic, insn.op_str, insn.address))
        elif insn.mnemonic in _AARCH64_ADDRESS and len(insn.operands) == 2 \
                and insn.operands[1].type == arm64.ARM64_OP_IMM:
            if not 0 <= targets[-1] < image.map_size:
                _fail("'%s %s' at %#x refers to %#x, outside the image"
                      % (insn.mnemonic, insn.op_str, insn.address,
                         targets[-1]))


def verify(image):
    """Raises ToolchainBug if the image is inconsistent. Returns whether the
    disassembly check ran."""
    check_structure(image)
    return check_code(image)
