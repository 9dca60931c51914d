"""ucx-ifunc-cc: builds ifunc libraries with an embedded, shippable code image."""

__version__ = "0.1.0"
