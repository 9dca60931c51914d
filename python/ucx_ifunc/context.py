#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""The UCP context and the ifunc code registered with it."""

import collections
import functools
import weakref

from . import _ffi
from ._lifetime import Closable, Owned
from ._ffi import ffi, lib
from .errors import check, clear_logged, refuse_closed

#: What :meth:`Context.query` reports: the counters of the context's ifunc
#: state (ucp_ifunc_context_attr_t; the README's counter table says what
#: each counts).
Counters = collections.namedtuple("Counters", [
    "run_raw", "run_channel", "run_am", "run_peer", "bytes_received",
    "rejected_untrusted", "rejected_bad_frame", "rejected_bad_version",
    "rejected_bad_code", "rejected_wrong_isa", "rejected_missing_import",
    "rejected_too_large", "rejected_unknown_code", "rejected_busy",
    "rejected_lost", "rejected_other", "rejected_sandbox_fault",
    "rejected_sandbox_budget", "codes_linked", "codes_evicted",
    "codes_held", "code_memory"])


def _release_context(handle):
    lib.ucp_ifunc_context_release(handle)
    lib.ucp_cleanup(handle)


def _release_code(context_handle, handle):
    # Only called while the context lives: its Owned releases it first.
    lib.ucp_deregister_ifunc(context_handle, handle)


class Context(Closable):
    """A UCP context for ifunc work (UCP_FEATURE_AM), made from the UCX_*
    environment variables as ucp_init makes one.

    Its workers may progress on different threads, but each worker
    belongs to one thread at a time: its calls (progress, sends, close)
    must not run concurrently.

    It owns the workers and code made from it: :meth:`close` (or leaving a
    ``with`` block, or the interpreter's exit) closes them first, then
    releases the context's ifunc state and cleans the context up.
    """

    def __init__(self):
        major, minor, release = (ffi.new("unsigned *") for _ in range(3))
        lib.ucp_get_version(major, minor, release)
        params = ffi.new("ucp_params_t *")
        # Workers of one context may progress on different threads (one
        # thread each): UCX then locks the state they share.
        params.field_mask = (_ffi.UCP_PARAM_FIELD_FEATURES |
                             _ffi.UCP_PARAM_FIELD_MT_WORKERS_SHARED)
        params.features = _ffi.UCP_FEATURE_AM
        params.mt_workers_shared = 1
        handle = ffi.new("ucp_context_h *")
        clear_logged()
        check(lib.ucp_init_version(major[0], minor[0], params, ffi.NULL,
                                   handle), "ucp_init")
        self._h = handle[0]
        self._children = weakref.WeakSet()
        self._owned = Owned(self._h, _release_context)
        self._finalizer = weakref.finalize(self, self._owned)

    def register(self, name):
        """Registers the ifunc library NAME.so of $UCX_IFUNC_LIB_DIR
        (ucp_register_ifunc) and returns its :class:`Code`."""
        if self.closed:
            raise refuse_closed("ucp_register_ifunc", "context")
        handle = ffi.new("ucp_ifunc_h *")
        clear_logged()
        check(lib.ucp_register_ifunc(self._h, name.encode(), handle),
              "ucp_register_ifunc")
        return Code(self, name, handle[0], from_images=False)

    def register_images(self, name, images):
        """Registers ifunc ``name`` from code images in memory
        (ucp_ifunc_code_register) and returns its :class:`Code`.

        ``images``: one bytes-like object holding one or more complete
        images back to back, or a sequence of them (joined in order). Each
        image is as ucx-ifunc-cc embeds it in NAME.so (the bytes of an
        ``__ucp_ifunc_image_*`` or ``__ucp_ifunc_bitcode_*`` symbol,
        signature included), native or bitcode, one for this process's
        ISA. They are copied: the objects may change afterwards. The code
        has no payload functions; its payloads come from the caller
        (:meth:`Peer.send`).
        """
        if not isinstance(images, (bytes, bytearray, memoryview)) and \
                not hasattr(images, "__array_interface__"):
            images = b"".join(bytes(memoryview(i)) for i in images)
        if self.closed:
            raise refuse_closed("ucp_ifunc_code_register", "context")
        buffer = ffi.from_buffer(images)
        params = ffi.new("ucp_ifunc_code_params_t *")
        params.field_mask = (_ffi.UCP_IFUNC_CODE_PARAM_FIELD_NAME |
                             _ffi.UCP_IFUNC_CODE_PARAM_FIELD_IMAGES)
        c_name = ffi.new("char[]", name.encode())
        params.name = c_name
        params.images = buffer
        params.images_size = len(buffer)
        handle = ffi.new("ucp_ifunc_h *")
        clear_logged()
        check(lib.ucp_ifunc_code_register(self._h, params, handle),
              "ucp_ifunc_code_register")
        return Code(self, name, handle[0], from_images=True)

    def query(self):
        """The counters of the context's ifunc state, as a
        :data:`Counters` tuple (ucp_ifunc_context_query)."""
        if self.closed:
            raise refuse_closed("ucp_ifunc_context_query", "context")
        attr = ffi.new("ucp_ifunc_context_attr_t *")
        attr.field_mask = _ffi.UCP_IFUNC_CONTEXT_ATTR_FIELDS
        clear_logged()
        check(lib.ucp_ifunc_context_query(self._h, attr),
              "ucp_ifunc_context_query")
        return Counters(*(getattr(attr, f) for f in Counters._fields))

    @property
    def closed(self):
        """Whether the context was closed."""
        return self._owned.released

    def close(self):
        """Closes the workers and code of the context, then the context.
        Closing again does nothing."""
        if self._owned.released:
            return
        children = list(self._children)
        for child in children:  # refused before anything is closed
            refuse = getattr(child, "_refuse_progressing", None)
            if refuse is not None:
                refuse("ucp_cleanup", "context")
        first_error = None
        # Workers (with their peers) first, then code.
        for child in sorted(children, key=lambda c: isinstance(c, Code)):
            try:
                child.close()
            except BaseException as err:  # the context goes anyway
                first_error = first_error or err
        self._finalizer()
        self._h = ffi.NULL
        if first_error is not None:
            raise first_error


class Code(Closable):
    """A registered ifunc: a library by name (:meth:`Context.register`) or
    code from images (:meth:`Context.register_images`). Send it with
    :meth:`Peer.send`; :meth:`close` (or a ``with`` block) releases it
    (ucp_deregister_ifunc); messages under way are not affected."""

    def __init__(self, context, name, handle, from_images):
        self.context = context
        self.name = name
        self.from_images = from_images
        self._h = handle
        context._children.add(self)
        # Released after the context's workers, before the context.
        self._owned = Owned(handle, functools.partial(_release_code,
                                                      context._h),
                            context._owned, late=True)
        self._finalizer = weakref.finalize(self, self._owned)

    @property
    def closed(self):
        """Whether the code was released."""
        return self._owned.released

    def close(self):
        """Releases the handle; sending it afterwards fails with
        UCS_ERR_INVALID_PARAM."""
        self._h = ffi.NULL
        self._finalizer()

    def __repr__(self):
        return "<ucx_ifunc.Code %r%s%s>" % (
            self.name, " from images" if self.from_images else "",
            " closed" if self.closed else "")
