"""ucx-ifunc-cc: builds ifunc libraries with an embedded, shippable code image."""

# The package's version is configure's (configure.ac), its one source: the
# launcher the build makes from tools/ucx-ifunc-cc.in sets it before it
# imports anything else of the package.
__version__ = "unknown"
