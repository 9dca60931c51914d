#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Configures and builds ucx-ifunc in build/ (out of the source tree).
# Extra arguments go to configure. docs/building.md has the steps by hand.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# After a ./configure in the source tree autoconf refuses every build
# directory ("source directory already configured"), build/ included, even
# one configured before: say what to do instead of failing in configure.
if [ -f config.status ]; then
    echo "build.sh: $top was configured in place (./configure), so autoconf" \
         "refuses the build in build/. Undo it with" >&2
    echo "    make -C $top distclean" >&2
    echo "and run $0 again (docs/building.md)." >&2
    exit 1
fi
[ -x configure ] || ./autogen.sh
mkdir -p build
cd build
[ -f Makefile ] || ../configure "$@"
make -j"$(nproc)"
