#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The test command of the README: installs what is needed, builds, runs the
# whole test suite ("make check"), then installs to a temporary prefix and
# builds and runs an application against the installed copy.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)

"$top/contrib/install-deps.sh"
"$top/contrib/build.sh"
cd "$top/build"
if ! make -j"$(nproc)" check; then
    for log in test/*/*.log test/*.log; do
        [ -f "$log" ] && { echo "==== $log"; tail -n 60 "$log"; }
    done
    exit 1
fi
"$top/contrib/check-install.sh"
echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
