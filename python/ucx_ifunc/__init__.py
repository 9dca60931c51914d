#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""ucx_ifunc: remote function injection over UCX, from Python.

The default path of the C library (<ucp/api/ucp_ifunc.h>) on both sides:
a target makes a :class:`Worker` with a ``target_args`` buffer, listens
and progresses; a source connects to it and sends payloads that code it
registered (a library by name, or code images it holds) runs there::

    import ucx_ifunc

    with ucx_ifunc.Context() as context:                 # target
        counter = bytearray(8)
        worker = ucx_ifunc.Worker(context, target_args=counter)
        listener = worker.listen("13337")
        worker.progress_until(lambda: counter != bytearray(8), timeout=None)

    with ucx_ifunc.Context() as context:                 # source
        worker = ucx_ifunc.Worker(context)
        peer = worker.connect("localhost:13337")
        code = context.register("counter")   # $UCX_IFUNC_LIB_DIR/counter.so
        peer.send(code, (1).to_bytes(8, "little"))
        peer.close()                          # what is under way arrives

Failures raise :class:`UcxIfuncError` with the UCX status (``status``,
``name``) and the library's log line (``message``). Objects close with
``with`` blocks or ``close()``; whatever is still open when the interpreter
exits is closed then, peers before their worker before its context.

The C library: libucp_ifunc.so.0, found by the dynamic linker (the
installed library), or the file $PY_UCX_IFUNC_LIBRARY names (a build tree:
build/.libs/libucp_ifunc.so.0).

Why cffi (ABI mode, nothing compiled) and not ctypes: a send costs less
(an 8-byte payload by ucp_ifunc_peer_send_nbx, the library's time
included: median 0.20 us a send with cffi, 0.34 us with ctypes; measured
in docs/python.md), and cffi passes any buffer-protocol object, read-only
ones (bytes, read-only memoryviews) included, to C without a copy
(ffi.from_buffer), where ctypes copies read-only buffers. cffi is a Debian
package (python3-cffi).
"""

from .context import Code, Context, Counters
from .errors import PEER_CLOSED, STATUS, UcxIfuncError, status_name
from .worker import PATHS, Listener, Peer, PeerInfo, Worker
from ._ffi import LIBRARY_ENV, ffi as _ffi_instance, lib as _lib

__all__ = ["Code", "Context", "Counters", "Listener", "PATHS", "PEER_CLOSED",
           "Peer", "PeerInfo", "STATUS", "UcxIfuncError", "Worker",
           "LIBRARY_ENV", "library_version", "status_name"]


def library_version():
    """The version of the C library in use, "major.minor.release"."""
    return _ffi_instance.string(_lib.ucp_ifunc_get_version_string()).decode()

# --- ifuncs written in Python (the builder: pyifunc.py, lowering.py,
# refusals.py, kernels.py, _toolchain.py): @ifunc makes a typed Python
# function an ifunc, compiled by Numba to LLVM bitcode (pyifunc.py says
# how). Numba is imported when an ifunc is first built, or offset/pointer
# first used, not with the package. ---
from .pyifunc import PythonIfunc, default_triples, ifunc  # noqa: E402,F401
from .refusals import BuildError  # noqa: E402,F401

_KERNEL_HELPERS = ("offset", "pointer")
__all__ += ["BuildError", "PythonIfunc", "default_triples", "ifunc",
            "offset", "pointer"]


def __getattr__(name):
    if name in _KERNEL_HELPERS:
        from . import kernels
        return getattr(kernels, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
# --- end of the builder's exports ---
