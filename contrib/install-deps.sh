#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Installs the Debian 12 packages ucx-ifunc needs to build, test, fuzz,
# benchmark, plot and package. Only what is missing is installed; nothing
# else is changed.
set -euo pipefail

packages=(
    build-essential autoconf automake libtool pkg-config   # build
    libucx-dev ucx-utils                                    # UCX 1.13
    libsodium-dev                                           # code ids, signatures
    libzydis-dev                                            # sandbox verifier
    llvm-14-dev                                             # bitcode JIT
    python3 python3-pyelftools python3-capstone             # ucx-ifunc-cc
    python3-nacl                                            # ucx-ifunc-cc --sign
    python3-cffi python3-numpy python3-numba                # the Python package, Python ifuncs
    libgtest-dev zlib1g-dev gdb                             # tests
    libzstd-dev libsqlite3-dev                              # examples/record_insert
    csmith libcsmith-dev                                    # make check-csmith
    clang-14 libclang-rt-14-dev llvm-14                     # make fuzz, --bitcode
    libc6-dev-ppc64el-cross                                 # --bitcode for ppc64le
    clang-format codespell abigail-tools                    # CI checks
    doxygen                                                 # make doc
    gnuplot-nox python3-matplotlib                          # benchmark plots
    openmpi-bin libopenmpi-dev                              # pointer-chase example
    iproute2 procps ca-certificates                         # scripts
    nftables                                                # test/netns
    dpkg-dev debhelper dh-python fakeroot lintian           # contrib/check-packages.sh
)

# test/cross/run.sh: the other ISA's compiler, libraries and emulator, so
# that a cross build of the tree runs beside the native one under QEMU.
# libstdc++6 (not its -dev package): the cross compiler brings its own
# headers and link-time libraries, the emulated programs need the run-time
# one where the foreign loader looks.
native_arch=$(dpkg --print-architecture)
case $native_arch in
amd64) foreign_arch=arm64; foreign_gnu=aarch64-linux-gnu ;;
arm64) foreign_arch=amd64; foreign_gnu=x86-64-linux-gnu ;;
*) foreign_arch= ;;
esac
if [ -n "$foreign_arch" ]; then
    packages+=(
        "gcc-$foreign_gnu" "g++-$foreign_gnu" qemu-user
        "libucx-dev:$foreign_arch" "libsodium-dev:$foreign_arch"
        "libzydis-dev:$foreign_arch"
        "zlib1g-dev:$foreign_arch" "libgtest-dev:$foreign_arch"
        "libstdc++6:$foreign_arch"
    )
fi

# The third ISA (test/cross/run-ppc64el.sh): a ppc64el target that runs
# bitcode, cross-built on amd64. Optional: Debian 12's ppc64el packages
# from the security mirror can lag behind amd64's (linux-libc-dev,
# liblzma5), and then apt cannot install them together; the ppc64el tests
# skip without them. Only the LLVM run-time library: the cross build uses
# the amd64 LLVM headers. IFUNC_DEPS_PPC64EL=no leaves this part out.
ppc64el_packages=()
if [ "$native_arch" = amd64 ] && [ "${IFUNC_DEPS_PPC64EL:-yes}" != no ]; then
    ppc64el_packages=(
        gcc-powerpc64le-linux-gnu g++-powerpc64le-linux-gnu
        libucx-dev:ppc64el libsodium-dev:ppc64el libzydis-dev:ppc64el
        libgtest-dev:ppc64el libstdc++6:ppc64el libllvm14:ppc64el
    )
fi

missing_of()
{
    local pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" ||
            echo "$pkg"
    done
}
mapfile -t missing < <(missing_of "${packages[@]}")
mapfile -t ppc64el_missing < <(missing_of "${ppc64el_packages[@]}")
if [ ${#missing[@]} -eq 0 ] && [ ${#ppc64el_missing[@]} -eq 0 ]; then
    echo "install-deps: all packages present"
    exit 0
fi

sudo=
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
    sudo=sudo
fi

install_ppc64el()
{
    [ ${#ppc64el_missing[@]} -gt 0 ] || return 0
    if ! dpkg --print-foreign-architectures | grep -qx ppc64el; then
        echo "install-deps: adding the ppc64el architecture (test/cross/run-ppc64el.sh)"
        $sudo dpkg --add-architecture ppc64el
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    fi
    echo "install-deps: installing ${ppc64el_missing[*]} (optional)"
    if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${ppc64el_missing[@]}"; then
        echo "install-deps: NOTE: the optional ppc64el packages did not install" \
            "(on Debian 12 the ppc64el and amd64 versions of a shared package" \
            "can differ for a while); the ppc64el tests will skip." \
            "Retry later, or set IFUNC_DEPS_PPC64EL=no to leave them out." >&2
    fi
}

if [ ${#missing[@]} -eq 0 ]; then
    install_ppc64el
    exit 0
fi
if [ -n "$foreign_arch" ] &&
    ! dpkg --print-foreign-architectures | grep -qx "$foreign_arch"; then
    echo "install-deps: adding the $foreign_arch architecture (test/cross/run.sh)"
    $sudo dpkg --add-architecture "$foreign_arch"
fi
echo "install-deps: installing ${missing[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_ppc64el
