"""Wall time of ``tierwise plan`` for Llama 3.1 405B on 16,384 H100 (global batch 2048 x 8192), start-up
included: each run is a fresh ``python -m tierwise`` subprocess. Prints the median of several runs (the
machines are shared and noisy) and the search's counts.

Run: ``python benchmarks/bench_planner.py [--repeats 5] [--precision bf16]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--precision", default=None, help="e.g. bf16 (default: every precision the GPU has)")
    args = parser.parse_args()
    cmd = [sys.executable, "-m", "tierwise", "plan", "--model", "llama3.1-405b", "--cluster", "dgx-h100",
           "--gpus", "16384", "--global-batch", "2048", "--seq", "8192", "--json"]
    if args.precision:
        cmd += ["--precision", args.precision]
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    times, doc = [], None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
        times.append(time.perf_counter() - t0)
        doc = json.loads(out)
    best = doc["plans"][0]
    print(f"tierwise plan llama3.1-405b / 16,384 x dgx-h100: median {statistics.median(times):.2f} s wall over "
          f"{args.repeats} runs (min {min(times):.2f}, max {max(times):.2f}), start-up included")
    print(f"evaluated {doc['num_evaluated']:,} of {doc['space_size']:,} plans "
          f"({doc['num_evaluated'] / doc['space_size']:.1%}); {doc['num_feasible']:,} fit memory")
    print(f"best: tp {best['tp']} pp {best['pp']} cp {best['cp']} dp {best['dp']} mbs {best['micro_batch_size']} "
          f"{best['recompute']} ZeRO-{best['zero_stage']} {best['precision']}: "
          f"{best['estimate']['step_time_s']:.3f} s per step")


if __name__ == "__main__":
    main()
