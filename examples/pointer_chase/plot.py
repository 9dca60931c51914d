#!/usr/bin/env python3
#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""Table and plot of the pointer-chase CSV (ucx_ifunc_chase -v).

    plot.py results.csv [chase.png]

Prints chases/s of get, am and ifunc with the ratios ifunc/get and ifunc/am
for each transport, L and c; writes a bar chart when a PNG name is given
(needs python3-matplotlib). Exits non-zero if a row is not verified.
"""
import csv
import sys

IMPLS = ("get", "am", "ifunc")


def load(path):
    rows = {}
    verified = True
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = (r["tls"], int(r["length"]), int(r["concurrency"]))
            rows.setdefault(key, {})[r["impl"]] = float(r["chases_per_s"])
            verified &= r["verified"] == "yes"
    return rows, verified


def ratio(a, b):
    return f"{a / b:.2f}" if (a is not None and b) else "-"


def table(rows):
    print(f"{'tls':<8} {'L':>5} {'c':>4} {'get/s':>11} {'am/s':>11} "
          f"{'ifunc/s':>11} {'ifunc/get':>9} {'ifunc/am':>8}")
    for (tls, length, conc), v in sorted(rows.items()):
        cells = [f"{v[i]:11.1f}" if i in v else f"{'-':>11}" for i in IMPLS]
        print(f"{tls:<8} {length:>5} {conc:>4} {' '.join(cells)} "
              f"{ratio(v.get('ifunc'), v.get('get')):>9} "
              f"{ratio(v.get('ifunc'), v.get('am')):>8}")


def plot(rows, png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: no matplotlib (Debian: python3-matplotlib); no plot",
              file=sys.stderr)
        return
    transports = sorted({k[0] for k in rows})
    fig, axes = plt.subplots(1, len(transports), squeeze=False,
                             figsize=(6 * len(transports), 4.5))
    for ax, tls in zip(axes[0], transports):
        keys = sorted(k for k in rows if k[0] == tls)
        width = 0.8 / len(IMPLS)
        for n, impl in enumerate(IMPLS):
            ax.bar([i + (n - 1) * width for i in range(len(keys))],
                   [rows[k].get(impl, 0) for k in keys], width, label=impl)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([f"L={k[1]}\nc={k[2]}" for k in keys],
                           fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("chases/s")
        ax.set_title(f"pointer chase, 2 processes, UCX_TLS={tls}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    print(f"plot.py: wrote {png}", file=sys.stderr)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    rows, verified = load(sys.argv[1])
    table(rows)
    if len(sys.argv) == 3:
        plot(rows, sys.argv[2])
    if not verified:
        print("plot.py: some chases were not verified", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
