"""How many plans per second ``plan --goodput`` scores (goodput.evaluate after the estimator), on one core.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_goodput.py [--plans 100000] [--repeats 3]``. The plans are
bench_estimator's mix (Llama 3.1 70B on 16,384 H100). Prints the median of the repeats for the estimator
alone and for the estimator plus the goodput evaluation.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_estimator import make_plans

    from tierwise.estimate import estimate
    from tierwise.goodput.model import GoodputOptions, evaluate, failure_model
    from tierwise.specs.cluster import load_cluster
    from tierwise.specs.model import load_model
    from tierwise.specs.parameters import load_parameters

    model, cluster = load_model("llama3.1-70b"), load_cluster("dgx-h100")
    plans = make_plans(args.plans)
    opts = GoodputOptions()
    fm = failure_model(cluster, 16384, opts)
    parameters = load_parameters()
    est_t, both_t = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        est = estimate(model, cluster, plans, parameters=parameters)
        t1 = time.perf_counter()
        evaluate(model, cluster, 16384, plans, est, opts, fm, parameters=parameters)
        t2 = time.perf_counter()
        est_t.append(t1 - t0)
        both_t.append(t2 - t0)
    n = len(plans)
    print(f"{n:,} plans: estimator {n / statistics.median(est_t):,.0f} plans/s; estimator + goodput "
          f"{n / statistics.median(both_t):,.0f} plans/s (goodput adds {statistics.median(both_t) - statistics.median(est_t):.3f} s)")


if __name__ == "__main__":
    main()
