#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# Short correctness run of the pointer chase: 4 processes (oversubscribed),
# every implementation over shared memory and over TCP, a fixed number of
# chases per case; fails unless every case says verified=yes.
#
#     check.sh [PATH/ucx_ifunc_chase]
set -uo pipefail
chase=${1:-ucx_ifunc_chase}
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (Debian: openmpi-bin)"; exit 77; }
command -v "$chase" >/dev/null || [ -x "$chase" ] ||
    { echo "SKIP: $chase not built (configure found no MPI: libopenmpi-dev)"; exit 77; }

# Open MPI refuses root unless told; pml ob1 keeps MPI's own traffic off UCX.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
failed=0
for tls in sm tcp; do
    for impl in get am ifunc; do
        out=$(UCX_TLS=$tls timeout 60 mpirun --oversubscribe -np 4 \
            -x UCX_TLS "$chase" -l 16,256 -c 1,8 -t 200c -i "$impl" -v 2>&1)
        status=$?
        rows=$(printf '%s\n' "$out" | sed -n '/^impl,procs,/,$p' | tail -n +2)
        good=$(printf '%s\n' "$rows" | grep -c ',yes$')
        if [ $status -ne 0 ] || [ "$good" -ne 4 ] ||
            [ "$(printf '%s\n' "$rows" | grep -c .)" -ne 4 ]; then
            echo "check-chase: FAILED: UCX_TLS=$tls -i $impl (exit $status)"
            printf '%s\n' "$out" | tail -n 30
            failed=1
        else
            echo "check-chase: UCX_TLS=$tls $impl: 4 cases verified"
        fi
    done
done
exit $failed
