"""Pointers in Python ifuncs: what Numba's nopython mode lacks for them.

An ifunc's main gets raw pointers (payload, target_args); numba.carray
makes arrays of them. A target's structures hold more pointers and data
at offsets; these two functions, callable from a Python ifunc's code
only, reach them:

    offset(ptr, nbytes)  the pointer nbytes past ptr (a voidptr)
    pointer(address)     the pointer whose address is the integer address
                         (read from target_args, say)

Both compile to one LLVM instruction (getelementptr, inttoptr). An
address that is a constant of the building process (a Python integer
global) stays a constant in the code and is refused when it is built:
it means nothing on the target.
"""

from numba import types
from numba.extending import intrinsic


@intrinsic
def offset(typingctx, ptr, nbytes):
    """The voidptr nbytes bytes past the voidptr ptr."""
    if ptr != types.voidptr or not isinstance(nbytes, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        index = context.cast(builder, args[1], nbytes, types.intp)
        return builder.gep(args[0], [index])
    return types.voidptr(ptr, nbytes), codegen


@intrinsic
def pointer(typingctx, address):
    """The voidptr whose address is the integer address."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], address, types.uintp)
        return builder.inttoptr(value, context.get_value_type(types.voidptr))
    return types.voidptr(address), codegen
