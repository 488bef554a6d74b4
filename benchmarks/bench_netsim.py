"""Simulator scale benchmark (issue 5): prints wall seconds and peak memory; not a timed test.

Run on one core: ``OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench_netsim.py [--quick]``.

Cases (targets from the issue):
  * hierarchical all-reduce, 16,384 GPUs, 3-tier radix-64 fat tree   (<= 10 s)
  * hierarchical all-reduce, 131,072 GPUs, 3-tier radix-128 fat tree (<= 120 s)
  * all-to-all among 1,024 GPUs                                      (<= 10 s)
  * peak memory of each                                              (<= 4 GiB)
Times are the median of ``--repeats`` runs (build + simulate); memory is tracemalloc's peak in one extra
run (numpy reports its buffers to tracemalloc) and the process's max RSS at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import tracemalloc

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from tierwise.netsim import simulate  # noqa: E402
from tierwise.topology import TopologySpec, build_fabric  # noqa: E402

CASES = [
    ("hier all-reduce 16384 GPUs r64 3-tier adaptive", dict(gpus=16384, radix=64, tiers=3),
     dict(kind="all-reduce", algorithm="hierarchical", routing="adaptive"), 10.0),
    ("hier all-reduce 16384 GPUs r64 3-tier ecmp", dict(gpus=16384, radix=64, tiers=3),
     dict(kind="all-reduce", algorithm="hierarchical", routing="ecmp"), 10.0),
    ("hier all-reduce 131072 GPUs r128 3-tier adaptive", dict(gpus=131072, radix=128, tiers=3),
     dict(kind="all-reduce", algorithm="hierarchical", routing="adaptive"), 120.0),
    ("hier all-reduce 131072 GPUs r128 3-tier ecmp", dict(gpus=131072, radix=128, tiers=3),
     dict(kind="all-reduce", algorithm="hierarchical", routing="ecmp"), 120.0),
    ("ring all-reduce 131072 GPUs r128 3-tier adaptive", dict(gpus=131072, radix=128, tiers=3),
     dict(kind="all-reduce", algorithm="ring", routing="adaptive"), 120.0),
    ("all-to-all 1024 GPUs r64 3-tier adaptive", dict(gpus=1024, radix=64, tiers=3),
     dict(kind="all-to-all", algorithm="direct", routing="adaptive"), 10.0),
    ("all-to-all 1024 GPUs r64 3-tier ecmp", dict(gpus=1024, radix=64, tiers=3),
     dict(kind="all-to-all", algorithm="direct", routing="ecmp"), 10.0),
]


def run(topo: dict, sim: dict) -> dict:
    fab = build_fabric(TopologySpec(family="fat-tree", **topo))
    return simulate(fab, sim["kind"], 1e9, algorithm=sim["algorithm"], routing=sim["routing"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="skip the 131,072-GPU case")
    args = ap.parse_args()
    print(f"{'case':52s} {'median s':>9s} {'target s':>8s} {'peak MiB':>9s} {'sim/analytic':>12s}")
    for name, topo, sim, target in CASES:
        if args.quick and topo["gpus"] > 20000:
            continue
        times = []
        for _ in range(args.repeats if topo["gpus"] <= 20000 else 1):
            t0 = time.perf_counter()
            r = run(topo, sim)
            times.append(time.perf_counter() - t0)
        tracemalloc.start()
        run(topo, sim)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        ratio = r["time_s"] / r["analytic_time_s"]
        print(f"{name:52s} {statistics.median(times):9.2f} {target:8.0f} {peak / 2**20:9.0f} {ratio:12.4f}",
              flush=True)
    print(f"process max RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")


if __name__ == "__main__":
    main()
