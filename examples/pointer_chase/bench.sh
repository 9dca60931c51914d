#!/bin/bash
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
# The pointer-chase benchmark: two processes pinned to two cores, every
# implementation over shared memory (UCX_TLS=sm) and over TCP
# (UCX_TLS=tcp); prints chases/s with the ratios ifunc/get and ifunc/am for
# each (L, c), and keeps the CSV, the table and a PNG plot (plot.py,
# python3-matplotlib) in OUTDIR.
#
#     ucx_ifunc_chase_bench [-o OUTDIR] [-t SECONDS] [-l LENGTHS] [-c CONCS]
#                           [-T "sm tcp"] [PATH/ucx_ifunc_chase]
#
# Installed as ucx_ifunc_chase_bench; in the source tree it is
# examples/pointer_chase/bench.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=chase-bench-$(date +%Y%m%d-%H%M%S)
seconds=1
lengths=16,256,4096
concs=1,64
transports="sm tcp"
usage() {
    cat <<EOF
usage: ucx_ifunc_chase_bench [-o OUTDIR] [-t SECONDS] [-l LENGTHS] [-c CONCS]
                             [-T "sm tcp"] [PATH/ucx_ifunc_chase]
       ucx_ifunc_chase_bench -h | --help | --version
Runs ucx_ifunc_chase on 2 processes pinned to 2 cores, every implementation
over each transport, and keeps the CSV, the table and a plot in OUTDIR.
  -o OUTDIR   where the results go (default chase-bench-DATE-TIME)
  -t SECONDS  seconds per case (default $seconds)
  -l LENGTHS  chase lengths, comma-separated (default $lengths)
  -c CONCS    chases in flight at once, comma-separated (default $concs)
  -T TLS      UCX_TLS values to run, blank-separated (default "$transports")
  -h, --help  print this help and exit
  --version   print the version and exit
EOF
}
case ${1:-} in
--help) usage; exit 0 ;;
--version)
    # The build writes the version in; the script in the source tree has none.
    version="@PACKAGE_VERSION@"
    case $version in @*) version="(not built: examples/pointer_chase/bench.sh)" ;; esac
    echo "ucx_ifunc_chase_bench $version"
    exit 0 ;;
esac
while getopts "o:t:l:c:T:h" opt; do
    case $opt in
    o) out=$OPTARG ;;
    t) seconds=$OPTARG ;;
    l) lengths=$OPTARG ;;
    c) concs=$OPTARG ;;
    T) transports=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

# The program: the argument, else the one beside this script (build tree,
# or the installed bin/), else the one on PATH.
chase=${1:-}
if [ -z "$chase" ]; then
    for c in "$here/ucx_ifunc_chase" "$here/../../build/examples/pointer_chase/ucx_ifunc_chase"; do
        [ -x "$c" ] && { chase=$c; break; }
    done
    chase=${chase:-$(command -v ucx_ifunc_chase || true)}
fi
[ -n "$chase" ] || { echo "bench: ucx_ifunc_chase not found; pass its path" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "bench: mpirun not found (Debian: openmpi-bin)" >&2; exit 2; }
plot=
for p in "$here/plot.py" "@CHASE_PLOT@" "@CHASE_SRC_PLOT@"; do
    [ -f "$p" ] && { plot=$p; break; }
done
[ -n "$plot" ] || { echo "bench: plot.py not found" >&2; exit 2; }

# Open MPI refuses root unless told; pml ob1 keeps MPI's own traffic (only
# the setup and the final barrier) off UCX.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1}
mkdir -p "$out"
csv=$out/results.csv
: >"$csv"
for tls in $transports; do
    echo "bench: UCX_TLS=$tls, $chase" >&2
    UCX_TLS=$tls mpirun -np 2 --bind-to core --map-by core -x UCX_TLS \
        "$chase" -l "$lengths" -c "$concs" -t "$seconds" -v |
        tee "$out/run-$tls.txt" >&2
    sed -n '/^impl,procs,/,$p' "$out/run-$tls.txt" |
        if [ -s "$csv" ]; then tail -n +2; else cat; fi >>"$csv"
done
# Debian's python3 has python3-matplotlib; a python3 earlier on PATH may not.
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" "$plot" "$csv" "$out/chase.png" | tee "$out/table.txt"
echo "bench: CSV, table and plot in $out" >&2
