#!/bin/sh
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Runs the Python package's tests (python/tests) against the library of
# this build. "make check" sets PYTHON, IFUNC_TEST_SRCDIR,
# PY_UCX_IFUNC_LIBRARY (build/.libs/libucp_ifunc.so.0), UCX_IFUNC_LIB_DIR
# (the test ifunc libraries) and IFUNC_TEST_PEER_NODE.
set -e
srcdir=${IFUNC_TEST_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
PYTHONPATH=$srcdir/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
exec "${PYTHON:-python3}" -m unittest discover -s "$srcdir/python/tests" \
    -t "$srcdir/python" -v
