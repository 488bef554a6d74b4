"""``serve --simulate`` speed (issue 31: 100,000 requests in under 10 s on one core).

Runs Llama-3.1-8B on one H100, Poisson arrivals at 20 requests/s, 512/128 tokens, 100,000 requests, several
times, and prints the median wall time (the step table is built in each run). ``python
benchmarks/bench_serve_simulate.py [--runs N] [--requests N]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from tierwise.serve.api import ServeConfig
from tierwise.serve.simulate import SimRequest, simulation_block


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=100_000)
    args = ap.parse_args()
    cfg = ServeConfig(model="llama3.1-8b", cluster="dgx-h100", num_gpus=1, input_len=512, output_len=128, rate=20.0)
    times = []
    for k in range(args.runs):
        t0 = time.perf_counter()
        doc = simulation_block(cfg, SimRequest(requests=args.requests, seed=k))
        times.append(time.perf_counter() - t0)
        assert doc["simulation"]["served"] == args.requests
    print(f"serve --simulate: {args.requests:,} requests, median {statistics.median(times):.2f} s over {args.runs} runs "
          f"(min {min(times):.2f}, max {max(times):.2f})")


if __name__ == "__main__":
    main()
