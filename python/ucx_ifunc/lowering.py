"""A typed Python function compiled by Numba, as one LLVM module per triple.

Numba compiles main(payload, size, target_args) as a C callback (a cfunc
of signature void(voidptr, intp, voidptr)), optimised as it optimises any
function but without vectorising loops: vectorised here they would keep
this host's vector width on the target, whose -O2 for its own CPU does not
widen them again (ucx-ifunc-cc --bitcode's -fno-vectorize, for the same
reason). Its LLVM IR is then made into the module a bitcode image carries,
for each target triple asked for:

- the module's triple and data layout are the target's (the triples of
  tools/ucx_ifunc/bitcode.py are all 64-bit little-endian and lay out
  pointers, integers and doubles alike; Numba's IR states its
  alignments);
- no function keeps this host's CPU or features (target-cpu,
  target-features, tune-cpu): the target's JIT compiles for its own;
- NAME_main, void(i8*, i64, i8*), calls Numba's C callback, and is the
  only name left with external linkage; what it does not reach is dropped;
- the math intrinsics that code generation turns into libm calls (sin,
  pow, fmod for frem, ...) are listed, so that the image names them as
  imports: the target resolves no name that its image does not list.
"""

import contextlib
import importlib
import re

from . import _toolchain

_SIGNATURE = None
HOST_ATTRIBUTES = ("target-cpu", "target-features", "tune-cpu")
_ATTRIBUTE_RE = re.compile(r'\s*"(%s)"="[^"]*"' % "|".join(HOST_ATTRIBUTES))
_TRIPLE_RE = re.compile(r'^target triple = "[^"]*"\n', re.M)
_LAYOUT_RE = re.compile(r'^target datalayout = "[^"]*"\n', re.M)
# Intrinsics that LLVM lowers to a libm call on some target (llvm.sin.f64
# to sin, llvm.pow.f32 to powf, ...).
LIBM_INTRINSICS = ("sin", "cos", "exp", "exp2", "log", "log2", "log10",
                   "pow", "floor", "ceil", "trunc", "round", "rint",
                   "nearbyint", "fma")
_INTRINSIC_RE = re.compile(r"@llvm\.(%s)\.(f64|f32)\b"
                           % "|".join(LIBM_INTRINSICS))
_FREM_RE = re.compile(r"\bfrem (?:fast |nnan |ninf |nsz |arcp |contract |"
                      r"afn |reassoc )*(double|float)\b")


def numba_signature():
    """void(voidptr, intp, voidptr): what every Python ifunc's main is."""
    global _SIGNATURE
    if _SIGNATURE is None:
        from numba import types
        _SIGNATURE = types.void(types.voidptr, types.intp, types.voidptr)
    return _SIGNATURE


@contextlib.contextmanager
def _without_vectorizers():
    """Numba's full module optimisation without the loop and SLP
    vectorizers, for the compiles in this block. Numba builds that pass
    manager once, from NUMBA_LOOP_VECTORIZE and NUMBA_SLP_VECTORIZE, for
    its CPU target; it is swapped under Numba's compiler lock, which every
    compile holds, and put back after. (Numba 0.56's CPUCodegen: where it
    is not there, Numba's own optimisation stays.)"""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target
    with global_compiler_lock:
        codegen = cpu_target.target_context.codegen()
        saved = getattr(codegen, "_mpm_full", None)
        if saved is None or not hasattr(codegen, "_module_pass_manager"):
            yield
            return
        codegen._mpm_full = codegen._module_pass_manager(
            loop_vectorize=False, slp_vectorize=False)
        try:
            yield
        finally:
            codegen._mpm_full = saved


def compile_cfunc(pyfunc, debug=False):
    """Numba's C callback of pyfunc (numba.cfunc). The numpy error model:
    an integer division by zero gives 0 instead of raising
    ZeroDivisionError, which would need the interpreter. debug=True adds
    the debug information that says which line each instruction comes
    from, and nothing else (no bounds checks, no longer lifetimes)."""
    import numba
    # offset and pointer registered with Numba before it types main (the
    # package imports them when first used, which may be while it does)
    importlib.import_module(".kernels", __package__)
    options = dict(nopython=True, error_model="numpy", cache=False)
    if debug:
        options.update(debug=True, boundscheck=False,
                       _dbg_extend_lifetimes=False)
    with _without_vectorizers():
        return numba.cfunc(numba_signature(), **options)(pyfunc)


class CompiledFunction:
    """The LLVM IR Numba made of one Python function."""

    def __init__(self, cfunc):
        self.cfunc = cfunc  # numba's CFunc: .ctypes calls it here
        self.ir = cfunc.inspect_llvm()
        self.wrapper = cfunc.native_name  # cfunc.<mangled name>

    def module_text(self, name, triple_name, data_layout):
        """The IR of the module for one triple, as text: NAME_main added,
        the host's CPU removed (not yet internalized)."""
        text = _TRIPLE_RE.sub("", self.ir)
        text = _LAYOUT_RE.sub("", text)
        text = _ATTRIBUTE_RE.sub("", text)
        entry = (
            '\ndefine void @%s_main(i8* %%payload, i64 %%size, '
            'i8* %%target_args) {\n'
            '  %%unused = call i8* @"%s"(i8* %%payload, i64 %%size, '
            'i8* %%target_args)\n'
            '  ret void\n}\n' % (name, self.wrapper))
        return ('target datalayout = "%s"\ntarget triple = "%s"\n'
                % (data_layout, triple_name)) + text + entry


def llvm_triple(triple):
    """The triple as LLVM writes it (clang's -target x86_64-linux-gnu
    makes x86_64-unknown-linux-gnu)."""
    arch, rest = triple.name.split("-", 1)
    return "%s-unknown-%s" % (arch, rest)


_LLVM = None


def _binding():
    global _LLVM
    if _LLVM is None:
        import llvmlite.binding as llvm
        llvm.initialize()
        llvm.initialize_all_targets()
        _LLVM = llvm
    return _LLVM


_LAYOUTS = {}


def data_layout(triple):
    """The data layout LLVM gives the triple's default target machine."""
    if triple.name not in _LAYOUTS:
        llvm = _binding()
        machine = llvm.Target.from_triple(llvm_triple(triple)) \
            .create_target_machine()
        _LAYOUTS[triple.name] = str(machine.target_data)
    return _LAYOUTS[triple.name]


class TripleModule:
    """The final module of one triple: its bitcode, its text (for the
    checks), the libm names its intrinsics need."""

    def __init__(self, triple, bitcode, text):
        self.triple = triple
        self.bitcode = bitcode
        self.text = text
        bitcode_mod = _toolchain.load("bitcode")
        self.parsed = bitcode_mod.parse_module(text)
        self.libm_calls = sorted(
            {op + ("f" if kind == "f32" else "")
             for op, kind in _INTRINSIC_RE.findall(text)} |
            {"fmod" + ("f" if kind == "float" else "")
             for kind in _FREM_RE.findall(text)})


def lower(compiled, name, triple):
    """The TripleModule of compiled (a CompiledFunction) for triple."""
    llvm = _binding()
    module = llvm.parse_assembly(compiled.module_text(
        name, llvm_triple(triple), data_layout(triple)))
    entry = name + "_main"
    for function in module.functions:
        if not function.is_declaration and function.name != entry:
            function.linkage = "internal"
    for variable in module.global_variables:
        if not variable.is_declaration:
            variable.linkage = "internal"
    passes = llvm.create_module_pass_manager()
    passes.add_global_dce_pass()
    passes.run(module)
    module.verify()
    return TripleModule(triple, module.as_bitcode(), str(module))
