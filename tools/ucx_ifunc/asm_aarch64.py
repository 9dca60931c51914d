"""The assembly pass for aarch64: checks gcc's code, changes none of it.

On x86-64 the rewriter turns GOT and PLT references into the image's own
import table (asm_rewrite.py). On aarch64 every such reference is a
relocation pair or a single relocation that the image linker can serve from
a GOT of its own (reloc_aarch64.py): adrp + ldr :got_lo12:, the tiny
model's ldr :got:, and bl/b to an import (through a stub). So this pass only
follows sections, functions and source lines, and records what shipped code
cannot do, like the x86-64 pass: thread-local variables, C++ throw, and
GOT operators other than :got: and :got_lo12:.
"""

import re

from .asm_rewrite import _FileRewriter, _split_operands

# gas's aarch64 relocation operators, ':name:symbol'.
_OPERATOR_RE = re.compile(r"#?:(\w+):([A-Za-z_.$][\w.$]*)")
_SYM_RE = re.compile(r"^[A-Za-z_.$][\w.$]*$")
BRANCHES = {"b", "bl"}
# Operators the image linker serves from its own GOT.
GOT_OPERATORS = {"got", "got_lo12"}
TLS_OPERATOR_PREFIXES = ("tls", "dtprel", "tprel", "gottprel")


class Aarch64FileRewriter(_FileRewriter):
    comment = "//"

    def instruction(self, stmt):
        """Records problems; always keeps the instruction (returns None)."""
        operators = _OPERATOR_RE.findall(stmt.args)
        operands = _split_operands(stmt.args)
        referenced = [name for _, name in operators]
        if stmt.mnemonic in BRANCHES and len(operands) == 1 and \
                _SYM_RE.match(operands[0]):
            referenced.append(operands[0])
        self.refuse_throws(referenced)
        for operator, name in operators:
            operator = operator.lower()
            if operator.startswith(TLS_OPERATOR_PREFIXES):
                self.problem("'%s' is a thread-local variable: shipped code "
                             "has no TLS block on the target; use a static "
                             "or global variable" % name)
                return None
            if operator.startswith(("got", "gotpage", "gotoff")) and \
                    operator not in GOT_OPERATORS:
                self.problem("unsupported use of ':%s:%s' in '%s': only "
                             "adrp/ldr with :got: and :got_lo12: (and "
                             "ldr :got:) can be linked into shipped code; "
                             "take the address in C instead"
                             % (operator, name, stmt.text))
        return None
