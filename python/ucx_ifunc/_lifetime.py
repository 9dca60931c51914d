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
