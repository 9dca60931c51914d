#!/bin/sh
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The tests of ifuncs written in Python (python/tests/pyifunc_*_test.py):
# the builder's, then end to end (a C target and a Python one, over sm and
# tcp). "make check" sets PYTHON, IFUNC_TEST_SRCDIR and IFUNC_TEST_BUILDDIR.
set -e
srcdir=${IFUNC_TEST_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
python=${PYTHON:-python3}
if ! "$python" -c "import numba, llvmlite" 2>/dev/null; then
    echo "SKIP: $0: $python has no numba (Debian: apt install python3-numba;" \
         "contrib/install-deps.sh)"
    exit 77
fi
# The package's bindings load the build's C library.
if [ -z "${PY_UCX_IFUNC_LIBRARY:-}" ] && [ -n "${IFUNC_TEST_BUILDDIR:-}" ]; then
    PY_UCX_IFUNC_LIBRARY=$IFUNC_TEST_BUILDDIR/.libs/libucp_ifunc.so.0
    export PY_UCX_IFUNC_LIBRARY
fi
exec "$python" -m unittest discover -s "$srcdir/python/tests" \
    -p 'pyifunc_*_test.py' -v
