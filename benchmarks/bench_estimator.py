"""How many plans per second the vectorized estimator evaluates on one core (prints the figure).

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_estimator.py [--plans 1000000] [--repeats 5]``.
The plans are a realistic mix for Llama 3.1 70B on 16,384 H100 (every tp, pp, cp, micro-batch,
recompute, ZeRO stage and overlap switch), replicated up to the requested count. Reports the median
of several runs: the machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import numpy as np


def make_plans(n: int):
    from tierwise.specs.plan import PlanBatch

    rows = []
    for tp, pp, cp, mbs, rc, zero, sp, ogr in itertools.product(
        (1, 2, 4, 8), (1, 2, 4, 8, 16), (1, 2), (1, 2, 4), (0, 1, 2), (0, 1, 2, 3), (True, False), (True, False)
    ):
        dp = 16384 // (tp * pp * cp)
        rows.append((tp, pp, cp, dp, mbs, rc, zero, sp and tp > 1, ogr))
    reps = -(-n // len(rows))
    arr = np.array(rows * reps, dtype=np.int64)[:n]
    return PlanBatch.from_arrays(
        tp=arr[:, 0], pp=arr[:, 1], cp=arr[:, 2], dp=arr[:, 3], micro_batch_size=arr[:, 4], recompute=arr[:, 5],
        zero_stage=arr[:, 6], sequence_parallel=arr[:, 7].astype(bool), overlap_grad_reduce=arr[:, 8].astype(bool),
        etp=arr[:, 0], dp_shard=arr[:, 3], global_batch_size=2048 * 8, seq_length=8192,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from tierwise.estimate import estimate
    from tierwise.specs.cluster import load_cluster
    from tierwise.specs.model import load_model

    model, cluster = load_model("llama3.1-70b"), load_cluster("dgx-h100")
    plans = make_plans(args.plans)
    estimate(model, cluster, plans)  # one untimed run: first-touch page faults, caches
    times, cpu = [], []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        estimate(model, cluster, plans)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    med, med_cpu = statistics.median(times), statistics.median(cpu)
    print(f"plans: {args.plans:,}  wall: median {med:.3f} s over {args.repeats} runs -> {args.plans / med:,.0f} plans/s "
          f"(min {min(times):.3f} s, max {max(times):.3f} s);  CPU time of this process (what other jobs on a "
          f"shared host do not inflate): median {med_cpu:.3f} s -> {args.plans / med_cpu:,.0f} plans/s")


if __name__ == "__main__":
    main()
