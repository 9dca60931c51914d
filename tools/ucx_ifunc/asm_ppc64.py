"""The assembly pass for ppc64el: reads gcc's code for the checks that hold
for the whole library, and builds no image.

No native image is built for ppc64el (targets run only bitcode there:
isa.PPC64LE.bitcode_only), so nothing is rewritten and no instruction is
looked at. What this pass is for is the rest of asm_rewrite's work on
NAME.so's own assembly: the sections, labels and data directives that
show a constructor or destructor (.init_array...), a thread-local
definition (.tdata, .tbss), and which global functions the sources
define (the three functions of a convention).
"""

from .asm_rewrite import _FileRewriter


class Ppc64FileRewriter(_FileRewriter):
    comment = "#"

    def instruction(self, stmt):
        """Keeps every instruction (no image is built from them)."""
        return None
