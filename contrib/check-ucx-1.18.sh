#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The test suite ("make check") on UCX 1.18.1, Debian 13's, built from its
# source package into ~/.cache/ucx-ifunc/ucx-1.18.1 (UCX118_DIR), in
# build-ucx118/: contrib/check-ucx.sh says how.
#
#     contrib/check-ucx-1.18.sh        (IFUNC_TEST_UCX_118=1 contrib/test.sh runs it)
#
# UCX118_SOURCE=PATH builds UCX 1.18.1 from PATH instead of Debian's source
# package (an unpacked tree, a release tarball, or a git repository with the
# tag v1.18.1), where the archive cannot be reached. UCX118_MIRROR=URI
# replaces the archive found in the apt configuration, UCX118_KEYRING=FILE
# the keyring that signs it.
set -euo pipefail
export IFUNC_TEST_UCX_VERSION=1.18.1
export IFUNC_TEST_UCX_SRC=${UCX118_SOURCE:-}
for v in DIR MIRROR KEYRING; do
    old=UCX118_$v
    if [ -n "${!old:-}" ]; then export "IFUNC_TEST_UCX_$v=${!old}"; fi
done
exec "$(dirname "$0")/check-ucx.sh"
