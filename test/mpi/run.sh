#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Recursive propagation across 4 processes started by mpirun (more
# processes than this machine may have cores: correctness only), over
# shared memory and over TCP: 16 chains of 1000 hops each, every chain
# verified at the origin; then a process that does not trust the code stops
# the chains that reach it and only those. Run by "make check" from the
# build directory; exits 77 (skipped) without mpirun.
set -euo pipefail
build=$(pwd)
program=$build/test/mpi/propagate
libs=$build/test/ifuncs/lib/recursive
key=$build/test/ifuncs/keys/site.pub
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (apt install openmpi-bin)"; exit 77; }
[ -x "$program" ] || { echo "SKIP: $program not built (no MPI at configure time)"; exit 77; }

# Open MPI refuses to run as root unless told it is meant.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI only exchanges addresses here: its own transports, not its UCX
# one (which would read the UCX_TLS meant for the test).
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
mpi=(mpirun --oversubscribe -np 4)
status=0
for tls in sm tcp; do
    for run in "16 1000" "64 3 2"; do
        echo "== UCX_TLS=$tls propagate $run"
        # shellcheck disable=SC2086
        if ! timeout 300 "${mpi[@]}" -x UCX_TLS=$tls "$program" "$libs" \
                "$key" $run; then
            echo "FAIL: UCX_TLS=$tls propagate $run"
            status=1
        fi
    done
done
exit $status
