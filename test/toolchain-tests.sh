#!/bin/sh
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Runs the toolchain's Python tests (tools/tests) against the in-tree
# ucx-ifunc-cc. "make check" sets PYTHON, UCX_IFUNC_CC and UCX_IFUNC_SRCDIR.
set -e
srcdir=${UCX_IFUNC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
exec "${PYTHON:-python3}" -m unittest discover -s "$srcdir/tools/tests" \
    -t "$srcdir/tools" -v
