#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The demo of the README: installs what is needed, builds, and injects the
# hello ifunc from one process into another, over shared memory and over TCP.
# The target process has no copy of the code; it arrives in the message,
# signed with the demo's key, which the target trusts.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

"$top/contrib/install-deps.sh"
echo "demo: building ucx-ifunc in build/ (about a minute the first time)"
"$top/contrib/build.sh" >/dev/null 2>&1 || "$top/contrib/build.sh"
cd "$top/build/examples/hello"

run_hello() {
    local tls=$1 port=$(( 20000 + RANDOM % 20000 ))
    echo
    echo "== hello over UCX_TLS=$tls: the source injects hello_main into the target"
    # The target: no UCX_IFUNC_LIB_DIR, only the public key it trusts.
    UCX_TLS=$tls UCX_IFUNC_TRUSTED_KEYS=$PWD/demo.pub timeout 60 ./hello_target "$port" &
    local target=$!
    UCX_TLS=$tls UCX_IFUNC_LIB_DIR=$PWD ./hello_source "localhost:$port" \
        "hello over $tls"
    wait "$target"
}

# Peers connect through UCX's TCP connection manager; messages then go by
# shared memory where both are on this host.
run_hello sm,tcp
run_hello tcp

echo
echo "== short benchmark over shared memory: ifunc (channel, code sent once; and the"
echo "   paper's mode, code in every message) against active messages, pinned to CPUs 0 and 1"
echo "   (one-way latency and message rate; the full comparison: contrib/bench_report.sh)"
cd "$top/build"
UCX_TLS=sm tools/ucx_ifunc_perftest -l -p 0 -c 0,1 -f \
    -t ifunc_lat,ifunc_full_lat,am_lat,ifunc_bw,ifunc_full_bw,am_bw \
    -s 8,64K -L tools/perftest

# The application the ifunc is for: a pointer chase across processes started
# by mpirun, where the chase is code that sends itself to the process
# holding the next node (docs/applications.md). Over TCP, where a remote
# read costs a round trip and a forwarded chase one message.
if [ -x examples/pointer_chase/ucx_ifunc_chase ] && command -v mpirun >/dev/null; then
    echo
    echo "== pointer chase, 2 processes under mpirun over UCX_TLS=tcp: 2^20 nodes, chases of"
    echo "   256 links by RDMA get, by an active-message handler deployed in advance, and by"
    echo "   an ifunc that sends itself on (the other process has no copy of it)"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp UCX_TLS=tcp \
        mpirun -np 2 --bind-to core --map-by core -x UCX_TLS \
        examples/pointer_chase/ucx_ifunc_chase -l 256 -c 1,64 -t 0.5 \
        -i get,am,ifunc
fi
