"""ucx_ifunc: ifuncs for Python programs (bindings and builder)."""

# --- ifuncs written in Python (the builder: pyifunc.py, lowering.py,
# refusals.py, kernels.py, _toolchain.py). Numba is imported when an ifunc
# is first built, or offset/pointer first used, not with the package. ---
from .pyifunc import PythonIfunc, default_triples, ifunc  # noqa: F401
from .refusals import BuildError  # noqa: F401

_KERNEL_HELPERS = ("offset", "pointer")


def __getattr__(name):
    if name in _KERNEL_HELPERS:
        from . import kernels
        return getattr(kernels, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
# --- end of the builder's exports ---
