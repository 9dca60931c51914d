"""ifuncs written in Python: @ucx_ifunc.ifunc.

    import numba, numpy as np
    import ucx_ifunc

    @ucx_ifunc.ifunc
    def scan(payload, size, target_args):
        values = numba.carray(payload, size // 8, np.int64)
        out = numba.carray(target_args, 1, np.int64)
        total = 0
        for i in range(values.shape[0]):
            total += values[i]
        out[0] = total

    out = np.zeros(1, np.int64)
    scan.run(np.arange(10), out)          # runs it here: out[0] == 45
    images = scan.images(key="site.key")  # bytes, for code registration
    code = scan.register(context, key="site.key")  # a Code to send

The function is compiled by Numba as a C callback (void(voidptr, intp,
voidptr): payload, its size in bytes, the target's target_args), then
shipped as LLVM bitcode, one image per target triple (by default those of
docs/toolchain.md: x86-64, aarch64, ppc64le), each exactly as ucx-ifunc-cc
--bitcode-only embeds it in NAME.so (tools/ucx_ifunc/image_format.py, the
same module): the target compiles it for its own CPU when it first
arrives. A key file of ucx-ifunc-keygen signs the images as ucx-ifunc-cc
--sign does. What the target could not run (allocation, exceptions,
Python objects, functions other than libc's and libm's) is refused when
the images are built: BuildError says which construct, on which line.
"""

import keyword
import re
import time
import warnings

from . import _toolchain, lowering, refusals
from .refusals import BuildError

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# NAME_main and the symbols NAME.so holds must fit the runtime's limit
MAX_NAME = 63


def default_triples():
    """The triples images are built for when none are asked for."""
    return list(_toolchain.load("bitcode").DEFAULT)


class PythonIfunc:
    """An ifunc whose main is a typed Python function (see the module's
    documentation). Build its images with images(); the Numba compile
    happens once, on the first build."""

    def __init__(self, pyfunc, name=None, triples=None):
        name = name or pyfunc.__name__
        if not _NAME_RE.match(name) or keyword.iskeyword(name) or \
                len(name) > MAX_NAME:
            raise ValueError("ifunc name %r: a C identifier of at most %d "
                             "characters is needed (it names NAME_main)"
                             % (name, MAX_NAME))
        self.pyfunc = pyfunc
        self.name = name
        self.triples = list(triples) if triples else default_triples()
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc
        self._compiled = None
        self._modules = {}
        # seconds spent: Numba's compile, lowering and checks, packaging
        # and signing (the last build)
        self.timings = {}

    def __repr__(self):
        return "<Python ifunc %s (%s)>" % (self.name,
                                           ", ".join(self.triples))

    def run(self, payload, target_args):
        """Runs the compiled main here, as a target would run it: payload
        and target_args are buffers (bytes, bytearray, NumPy arrays;
        target_args writable), size is the payload's length in bytes.
        For trying an ifunc out before sending it."""
        import numpy as np
        data = np.frombuffer(memoryview(payload).cast("B"), np.uint8)
        args = np.frombuffer(memoryview(target_args).cast("B"), np.uint8)
        if args.size and not args.flags.writeable:
            raise ValueError("target_args must be writable")
        self._compile().cfunc.ctypes(data.ctypes.data, data.size,
                                     args.ctypes.data)

    def _compile(self):
        if self._compiled is None:
            from numba.core.errors import NumbaError
            start = time.perf_counter()
            try:
                cfunc = lowering.compile_cfunc(self.pyfunc)
            except NumbaError as err:
                raise BuildError(refusals.from_numba_error(err, self.pyfunc))
            self._compiled = lowering.CompiledFunction(cfunc)
            self.timings["numba"] = time.perf_counter() - start
        return self._compiled

    def module(self, triple_name):
        """The checked lowering.TripleModule of one triple."""
        if triple_name not in self._modules:
            bitcode = _toolchain.load("bitcode")
            errors = _toolchain.load("errors")
            try:
                triple = bitcode.parse_triples(triple_name, "triples")[0]
            except errors.UserError as err:
                raise ValueError("; ".join(err.lines))
            compiled = self._compile()
            start = time.perf_counter()
            module = lowering.lower(compiled, self.name, triple)
            found = refusals.problems(module)
            if found:
                with warnings.catch_warnings():
                    # where Numba finds no source (its array expressions)
                    warnings.simplefilter("ignore")
                    debug = lowering.compile_cfunc(self.pyfunc, debug=True)
                raise BuildError(refusals.locate(
                    found[0], debug.inspect_llvm(), self.pyfunc))
            self._modules[triple_name] = module
            self.timings["lower"] = self.timings.get("lower", 0) + \
                time.perf_counter() - start
        return self._modules[triple_name]

    def image(self, triple_name, key=None):
        """The encoded bitcode image of one triple, signed with the secret
        key file key (as ucx-ifunc-keygen writes it) if given."""
        return self._image(triple_name, _secret_key(key))

    def _image(self, triple_name, secret):
        fmt = _toolchain.load("image_format")
        module = self.module(triple_name)
        start = time.perf_counter()
        imports = [g.name for g in module.parsed.imports()]
        imports += [n for n in module.libm_calls if n not in imports]
        code = module.bitcode
        image = fmt.Image(
            segments=[fmt.Segment(0, len(code), code), fmt.Segment(),
                      fmt.Segment()],
            entry_vaddr=0, got_ptr_vaddr=0, map_size=0,
            imports=[fmt.Import(n) for n in imports],
            needed=["libm.so.6", "libc.so.6"] if imports else [],
            symbols=[fmt.FunctionSymbol(self.name + "_main", 0, 0)],
            machine=module.triple.e_machine, page_align=0,
            flags=fmt.FLAG_BITCODE, triple=module.parsed.triple)
        blob = fmt.encode(image, signed=secret is not None)
        if secret is not None:
            blob = _toolchain.load("signing").sign(self.name, blob, secret)
        self.timings["package"] = self.timings.get("package", 0) + \
            time.perf_counter() - start
        return blob

    def images(self, triples=None, key=None):
        """The images of all the triples (default: this ifunc's), back to
        back, each at an offset that is a multiple of 8: what code
        registration (ucp_ifunc_code_register) takes."""
        self.timings = {k: v for k, v in self.timings.items()
                        if k == "numba"}
        secret = _secret_key(key)
        out = bytearray()
        for triple in triples or self.triples:
            blob = self._image(triple, secret)
            # ucp_ifunc_code_register reads the images back to back, with
            # nothing between them: each must end at a multiple of 8 by
            # itself (padding here would be read as a broken image).
            assert len(blob) % 8 == 0, (triple, len(blob))
            out += blob
        return bytes(out)

    def register(self, context, key=None, triples=None):
        """Registers this ifunc's images (images(triples, key)) with the
        ucx_ifunc.Context context (Context.register_images) and returns
        the Code to send with Peer.send."""
        return context.register_images(self.name, self.images(triples, key))


def _secret_key(path):
    """The signing key in the key file path (None: None)."""
    if path is None:
        return None
    signing = _toolchain.load("signing")
    errors = _toolchain.load("errors")
    try:
        return signing.load_secret_key(path)
    except errors.UserError as err:
        raise ValueError("; ".join(err.lines))


def ifunc(pyfunc=None, *, name=None, triples=None):
    """Makes a typed Python function main(payload, size, target_args) an
    ifunc (a PythonIfunc), as a decorator (@ifunc, or @ifunc(name="scan",
    triples=["x86_64-linux-gnu"])) or a call (ifunc(main, name="scan")).
    payload and target_args are raw pointers (numba.carray makes arrays
    of them), size is the payload's size in bytes. name defaults to the
    function's name; triples to x86-64, aarch64 and ppc64le Linux."""
    def make(function):
        return PythonIfunc(function, name=name, triples=triples)
    return make if pyfunc is None else make(pyfunc)
