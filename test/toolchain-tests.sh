#!/bin/sh
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Runs the toolchain's Python tests (tools/tests) against the in-tree
# ucx-ifunc-cc. "make check" sets PYTHON, IFUNC_TEST_CC and IFUNC_TEST_SRCDIR.
set -e
srcdir=${IFUNC_TEST_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
exec "${PYTHON:-python3}" -m unittest discover -s "$srcdir/tools/tests" \
    -t "$srcdir/tools" -v
