"""Wall time of ``tierwise design`` and ``tierwise trend`` for Llama 3.1 405B (global batch 2048 x 8192), start-up
included: each run is a fresh ``python -m tierwise`` subprocess. Prints the median of several runs (the machines
are shared and noisy), the designs compared and the Pareto front; issue 17 asks for design in under 10 s.

Run: ``python benchmarks/bench_design.py [--repeats 3] [--gpus 16384]``.
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


def _run(cmd, env, repeats):
    times, doc = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
        times.append(time.perf_counter() - t0)
        doc = json.loads(out)
    return times, doc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gpus", type=int, default=16384)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    base = [sys.executable, "-m", "tierwise"]
    job = ["--model", "llama3.1-405b", "--gpus", str(args.gpus), "--json"]
    times, doc = _run([*base, "design", *job, "--tokens", "15e12"], env, args.repeats)
    print(f"tierwise design llama3.1-405b / {args.gpus:,} GPUs: median {statistics.median(times):.2f} s wall over "
          f"{args.repeats} runs (min {min(times):.2f}, max {max(times):.2f}), start-up included; "
          f"{len(doc['designs'])} designs")
    for r in doc["designs"]:
        if r["fits"]:
            print(f"  {r['name']:40s} {r['tokens_per_s']:>12,.0f} tok/s  ${r['capex_usd'] / 1e6:7.1f}M  "
                  f"net {r['network_share_of_capex']:.1%}  ${r['usd_per_million_tokens']:.3f}/M tok"
                  f"{'  Pareto' if r['pareto'] else ''}")
    rs = doc["right_size"]
    print(f"  right size: slowest NIC within {100 * rs['tolerance']:g}% of the best step: {rs['slowest_gbps_within']} Gb/s")
    times, doc = _run([*base, "trend", *job], env, args.repeats)
    print(f"tierwise trend llama3.1-405b / {args.gpus:,} GPUs: median {statistics.median(times):.2f} s wall; "
          f"{doc['summary'].get('sentence', '')}")


if __name__ == "__main__":
    main()
