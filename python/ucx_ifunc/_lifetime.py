#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""What every object of the package that wraps a C handle shares: a
``with`` block closes it."""


class Closable:
    """Base of the package's handles: ``with obj:`` calls ``obj.close()``
    on the way out, whatever happened inside."""

    def close(self):
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Owned:
    """A C handle and how to release it, shared by its object and its
    parent's: what a ``weakref.finalize`` holds instead of the raw handle.

    Garbage collection runs the finalizers of a cycle in any order, and a
    parent's C release frees its children (ucp_ifunc_worker_destroy its
    peers, ucp_cleanup its workers' state). So releasing an Owned
    releases its children first, and a child whose parent went is not
    released again.
    """

    __slots__ = ("handle", "release", "children", "parent", "late")

    def __init__(self, handle, release, parent=None, late=False):
        self.handle = handle
        self.release = release  # None: released, or not this side's to
        self.children = {}  # in creation order
        self.parent = parent
        self.late = late  # released after the siblings that are not
        if parent is not None:
            parent.children[self] = None

    @property
    def released(self):
        """Whether the handle was released (or given up)."""
        return self.release is None

    def forget(self):
        """Gives the handle up: the C side releases it."""
        self.release = None
        if self.parent is not None:
            self.parent.children.pop(self, None)

    def __call__(self):
        """Releases the children not yet released, then the handle; once."""
        release = self.release
        if release is None:
            return
        self.forget()
        for child in sorted(self.children, key=lambda c: c.late):
            child()
        self.children.clear()
        release(self.handle)
