"""collective_cost speed: every collective on three clusters, as the estimator and serving's tables call it.

Each round costs, on dgx-h100, gb200-nvl72 and mi300x-8 (switched, NVL72 and mesh scale-up), every kind but
send-recv on four groups (8 and 64 ranks, 16 ranks two per node, 1,024 ranks) at one size and at 4,096 sizes,
and four kinds over a batch of 1,800 groups of 1-256 ranks with the chosen algorithm and wire bytes read (the
lazily computed parts). Prints the median of several rounds of five such passes (the machines are shared and
noisy). Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_collectives.py [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tierwise.collectives.model import collective_cost
from tierwise.hierarchy import group_span
from tierwise.specs.cluster import load_cluster

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast")


def one_pass(clusters) -> None:
    sizes = np.logspace(3, 10, 4096)
    for c in clusters:
        for n, stride in ((8, 1), (64, 1), (16, 8), (1024, 1)):
            span = group_span(c, n, stride)
            for kind in KINDS:
                collective_cost(kind, np.float64(2**20), span, c)
                collective_cost(kind, sizes, span, c)
        ns = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256] * 200)
        span = group_span(c, ns, 1)
        for kind in KINDS[:4]:
            cost = collective_cost(kind, np.full(ns.shape, 2.0**24), span, c)
            _ = cost.algorithm, cost.scale_up_bytes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    clusters = [load_cluster(name) for name in ("dgx-h100", "gb200-nvl72", "mi300x-8")]
    one_pass(clusters)  # warm: catalog, parameters, span caches
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(5):
            one_pass(clusters)
        times.append(time.perf_counter() - t0)
    print(f"collective_cost: median {statistics.median(times):.3f} s per 5 passes over {args.repeats} rounds "
          f"(min {min(times):.3f} s, max {max(times):.3f} s)")


if __name__ == "__main__":
    main()
