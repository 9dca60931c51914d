#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Checks the installation as a user does it: configure --prefix=P, make,
# make install into a temporary prefix; then checks that the installed copy
# is complete and usable from outside the tree: the hello example is built
# with the installed ucx-ifunc-cc and "pkg-config ucx-ifunc", and run between
# two processes.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/ucx-ifunc-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

[ -x "$top/configure" ] || (cd "$top" && ./autogen.sh)
mkdir -p "$work/build"
(cd "$work/build" && "$top/configure" -q --prefix="$prefix" &&
 make -j"$(nproc)" >/dev/null && make install >/dev/null)
for piece in lib/libucp_ifunc.so include/ucp/api/ucp_ifunc.h \
             lib/pkgconfig/ucx-ifunc.pc bin/ucx-ifunc-cc bin/ucx-ifunc-info; do
    [ -e "$prefix/$piece" ] || { echo "check-install: missing $piece" >&2; exit 1; }
done
# The JIT module, where the build has LLVM: the installed runtime loads
# the installed one (src/ucp/ifunc/load/jit.cc).
if [ -e "$work/build/.libs/libucp_ifunc_jit.so" ] &&
   [ ! -e "$prefix/lib/ucx-ifunc/libucp_ifunc_jit.so" ]; then
    echo "check-install: missing lib/ucx-ifunc/libucp_ifunc_jit.so" >&2
    exit 1
fi

# An application outside the tree, as a user would build it.
app=$work/app
mkdir -p "$app"
cp "$top"/examples/hello/*.c "$top"/examples/hello/*.h "$app"/
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
cd "$app"
# The installed tools say the version configure gave the package, as the
# installed .pc file does.
version=$(pkg-config --modversion ucx-ifunc)
for tool in ucx-ifunc-cc ucx-ifunc-keygen ucx-ifunc-info; do
    said=$("$prefix/bin/$tool" --version)
    if [ "$said" != "$tool $version" ]; then
        echo "check-install: $tool --version says '$said', not '$tool $version'" >&2
        exit 1
    fi
done
"$prefix/bin/ucx-ifunc-cc" -O2 -o hello.so hello.c
# ucx-ifunc-info knows the variables and reads the library it describes.
# (Read whole first: grep -q may leave before the tool ends, which then
# dies of SIGPIPE, and pipefail counts that as the tool failing.)
info_config=$("$prefix/bin/ucx-ifunc-info" -c) || info_config=
info_hello=$("$prefix/bin/ucx-ifunc-info" hello.so) || info_hello=
if ! grep -q '^UCX_IFUNC_TRUST=' <<<"$info_config" ||
   ! grep -q '^#     code id: ' <<<"$info_hello"; then
    echo "check-install: the installed ucx-ifunc-info does not work:" >&2
    "$prefix/bin/ucx-ifunc-info" -c hello.so >&2 || true
    exit 1
fi
for prog in hello_target hello_source; do
    cc -Wall -Werror -o $prog $prog.c $(pkg-config --cflags --libs ucx-ifunc)
done

# shellcheck source=contrib/run-hello.sh
. "$top/contrib/run-hello.sh"
hello_target_env=(UCX_IFUNC_LIB_DIR="$app")
hello_source_env=(UCX_IFUNC_LIB_DIR="$app")
run_hello check-install "installed copy works" \
    "installed to a temporary prefix, example built with pkg-config ucx-ifunc and run"

# The Python package, from its installed directory and the installed
# library (found by the dynamic linker, here through LD_LIBRARY_PATH): a
# source in Python sends hello to the C target. The toolchain's launcher
# still uses its own, private package of the same name when the public
# one is on PYTHONPATH.
pydir=$(find "$prefix" -path '*-packages/ucx_ifunc/__init__.py' | head -n 1)
[ -n "$pydir" ] || { echo "check-install: the Python package ucx_ifunc is not installed" >&2; exit 1; }
pydir=$(dirname "$(dirname "$pydir")")
cat >hello_source.py <<'EOP'
import sys
import ucx_ifunc

with ucx_ifunc.Context() as context:
    worker = ucx_ifunc.Worker(context)
    peer = worker.connect(sys.argv[1])
    peer.send(context.register("hello"), sys.argv[2].encode() + b"\0")
    peer.close()
EOP
python=$(sed -n 's/^PYTHON = //p' "$work/build/Makefile")
hello_source_cmd=(env PYTHONPATH="$pydir" LD_LIBRARY_PATH="$prefix/lib"
                  "$python" hello_source.py)
run_hello check-install "hello from python" \
    "the installed Python package sends to the C target"
unset hello_source_cmd
mkdir -p again
PYTHONPATH=$pydir "$prefix/bin/ucx-ifunc-cc" -O2 -o again/hello.so hello.c ||
    { echo "check-install: ucx-ifunc-cc fails with the Python package on PYTHONPATH" >&2; exit 1; }
# An ifunc written in Python, built and signed by the installed package
# with the installed toolchain's modules (where Numba is installed).
if "$python" -c "import numba" 2>/dev/null; then
    "$prefix/bin/ucx-ifunc-keygen" site >/dev/null
    cat >build_ifunc.py <<'EOP'
import sys
import ucx_ifunc
import numba
import numpy as np


@ucx_ifunc.ifunc
def total(payload, size, target_args):
    values = numba.carray(payload, size // 8, np.int64)
    numba.carray(target_args, 1, np.int64)[0] = values.sum()


images = total.images(key="site.key")
where = sys.modules["ucx_ifunc._cc"].__file__
assert where.startswith(sys.argv[1]), where
print(len(images))
EOP
    env PYTHONPATH="$pydir" LD_LIBRARY_PATH="$prefix/lib" "$python" \
        build_ifunc.py "$prefix/" >/dev/null ||
        { echo "check-install: the installed Python package does not build an ifunc with the installed toolchain" >&2; exit 1; }
    echo "check-install: OK: the installed Python package builds a signed Python ifunc"
fi
export UCX_IFUNC_LIB_DIR=$app

# The MPI launch helper, where configure found MPI: a C program built
# against the installed header and library, run on two ranks (each reads
# the other's mapped word with a get).
if [ -e "$prefix/lib/libucx_ifunc_mpi.so" ] && command -v mpicc >/dev/null &&
    command -v mpirun >/dev/null; then
    cat >mpi_get.c <<'EOC'
#include <ucx_ifunc_mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    ucx_ifunc_mpi_h               mpi;
    ucx_ifunc_mpi_mem_h           mem;
    ucx_ifunc_mpi_mem_params_t    mp   = {0};
    ucx_ifunc_mpi_attr_t          attr = {0};
    const ucx_ifunc_mpi_remote_t *rem;
    uint64_t                      got  = 0;
    int                           peer, ok;

    MPI_Init(&argc, &argv);
    if (ucx_ifunc_mpi_init(NULL, &mpi) != UCS_OK) {
        return 1;
    }
    attr.field_mask = UCX_IFUNC_MPI_ATTR_FIELD_RANK |
                      UCX_IFUNC_MPI_ATTR_FIELD_SIZE |
                      UCX_IFUNC_MPI_ATTR_FIELD_EPS;
    ucx_ifunc_mpi_query(mpi, &attr);
    mp.field_mask = UCX_IFUNC_MPI_MEM_FIELD_LENGTH;
    mp.length     = sizeof(uint64_t);
    if (ucx_ifunc_mpi_mem_map(mpi, &mp, &mem) != UCS_OK) {
        return 1;
    }
    *(uint64_t *)ucx_ifunc_mpi_mem_address(mem) = 1000 + attr.rank;
    ucx_ifunc_mpi_barrier(mpi);
    peer = (attr.rank + 1) % attr.size;
    rem  = ucx_ifunc_mpi_mem_remotes(mem);
    {
        ucp_request_param_t param = {0};
        ok = ucx_ifunc_mpi_wait(mpi, ucp_get_nbx(attr.eps[peer], &got,
                                                 sizeof(got), rem[peer].address,
                                                 rem[peer].rkey, &param)) ==
             UCS_OK;
    }
    ok = ok && (got == (uint64_t)(1000 + peer));
    printf("rank %d read %lu from rank %d: %s\n", attr.rank,
           (unsigned long)got, peer, ok ? "ok" : "WRONG");
    ucx_ifunc_mpi_mem_release(mem);
    ucx_ifunc_mpi_finalize(mpi);
    MPI_Finalize();
    return !ok;
}
EOC
    mpicc -Wall -Werror -o mpi_get mpi_get.c -I"$prefix/include" \
        $(pkg-config --cflags --libs ucx-ifunc) -L"$prefix/lib" \
        -Wl,-rpath,"$prefix/lib" -lucx_ifunc_mpi
    if OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        OMPI_MCA_pml=ob1 timeout 60 mpirun --oversubscribe -np 2 ./mpi_get \
        >mpi.out 2>&1 && [ "$(grep -c ': ok$' mpi.out)" -eq 2 ]; then
        echo "check-install: OK (libucx_ifunc_mpi: a program built against the installed copy ran on 2 ranks)"
    else
        echo "check-install: the installed libucx_ifunc_mpi did not work" >&2
        cat mpi.out >&2
        exit 1
    fi
fi
