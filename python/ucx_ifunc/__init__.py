"""ucx_ifunc: ifuncs for Python programs (bindings and builder)."""

# --- ifuncs written in Python (builder: pyifunc.py, lowering.py,
# refusals.py, _toolchain.py) ---
from .pyifunc import PythonIfunc, default_triples, ifunc  # noqa: F401
from .refusals import BuildError  # noqa: F401
# --- end of the builder's exports ---
