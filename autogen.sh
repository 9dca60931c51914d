#!/bin/sh
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Generates ./configure from configure.ac (needs autoconf, automake, libtool).
set -e
cd "$(dirname "$0")"
mkdir -p config/m4 config/aux
autoreconf --install --force --warnings=all
