#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Installs the Debian 12 packages ucx-ifunc needs to build, test, fuzz,
# benchmark and plot. Only what is missing is installed; nothing else is
# changed.
set -euo pipefail

packages=(
    build-essential autoconf automake libtool pkg-config   # build
    libucx-dev ucx-utils                                    # UCX 1.13
    libsodium-dev                                           # code ids, signatures
    python3 python3-pyelftools python3-capstone             # ucx-ifunc-cc
    python3-nacl                                            # ucx-ifunc-cc --sign
    libgtest-dev zlib1g-dev gdb                             # tests
    csmith libcsmith-dev                                    # make check-csmith
    clang-14 libclang-rt-14-dev llvm-14                     # make fuzz
    clang-format codespell abigail-tools                    # CI checks
    gnuplot-nox                                             # benchmark plots
    iproute2 procps ca-certificates                         # scripts
    nftables                                                # test/netns
)

missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" ||
        missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
    exit 0
fi

sudo=
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
    sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
