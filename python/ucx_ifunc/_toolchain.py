"""The toolchain's modules (image_format, signing, bitcode), for the builder.

ucx-ifunc-cc's own package is also named ucx_ifunc (tools/ucx_ifunc in the
source tree, installed as $(pkgdatadir)/python/ucx_ifunc, off sys.path),
so it cannot be imported by its name from this package. It is loaded here,
once, under the name ucx_ifunc._cc, from the one place it lives: the
directory "make install" wrote into TOOLCHAIN_DIR below, or the source
tree (next to python/) when the package runs uninstalled. Its modules import
each other relatively (from . import image_format), which keeps working
under the new name. One copy of the image format and of the signing code
for C and Python ifuncs: never a second one to keep in step.
"""

import importlib
import importlib.util
import os
import sys

# "make install" replaces None with the installed toolchain's directory,
# $(pkgdatadir)/python (python/builder.inc).
TOOLCHAIN_DIR = None
NAME = __name__.rsplit(".", 1)[0] + "._cc"


def _candidates():
    """Installed first: the directory install wrote, then where it is
    beside this package in an installed tree (PREFIX/lib/python3/
    dist-packages/ucx_ifunc, PREFIX/share/ucx-ifunc/python: a copy moved
    or installed with DESTDIR); then the source tree."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = [TOOLCHAIN_DIR] if TOOLCHAIN_DIR else []
    found.append(os.path.join(here, *[os.pardir] * 4 +
                              ["share", "ucx-ifunc", "python"]))
    found.append(os.path.join(here, os.pardir, os.pardir, "tools"))
    return [os.path.normpath(d) for d in found]


def _package():
    if NAME in sys.modules:
        return sys.modules[NAME]
    for top in _candidates():
        init = os.path.join(top, "ucx_ifunc", "image_format.py")
        if os.path.isfile(init):
            break
    else:
        raise ImportError("the ucx-ifunc toolchain's Python modules are not "
                          "in %s; reinstall ucx-ifunc"
                          % " or ".join(_candidates()))
    package_dir = os.path.dirname(init)
    spec = importlib.util.spec_from_file_location(
        NAME, os.path.join(package_dir, "__init__.py"),
        submodule_search_locations=[package_dir])
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[NAME]
        raise
    return module


def load(module):
    """The toolchain's module (image_format, signing, bitcode, errors)."""
    _package()
    return importlib.import_module(NAME + "." + module)
