"""Wall time of issue 33's three design questions for Llama 3.1 405B (global batch 2048 x 8192), start-up
included: each run is a fresh ``python -m tierwise`` subprocess; prints the median of several runs (the machines
are shared and noisy). Issue 33 asks for the domain sweep and the power-capped design in under 10 s each.

* ``bandwidth --model llama3.1-405b --cluster dgx-h100 --gpus 16384 --window 100ms``
* ``design --model llama3.1-405b --gpus 16384 --domain-sweep``
* ``design --model llama3.1-405b --power 50MW``

Run: ``python benchmarks/bench_design_questions.py [--repeats 5]``.
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

COMMANDS = {
    "bandwidth (405B, 16,384 H100, --window 100ms)": ["bandwidth", "--model", "llama3.1-405b", "--cluster",
                                                      "dgx-h100", "--gpus", "16384", "--window", "100ms"],
    "design --domain-sweep (405B, 16,384 GB200)": ["design", "--model", "llama3.1-405b", "--gpus", "16384",
                                                   "--domain-sweep"],
    "design --power 50MW (405B)": ["design", "--model", "llama3.1-405b", "--power", "50MW"],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for label, argv in COMMANDS.items():
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "tierwise", *argv, "--json"], capture_output=True, text=True,
                                 env=env, check=True).stdout
            times.append(time.perf_counter() - t0)
        doc = json.loads(out)
        extra = doc.get("knee") or (doc.get("best") or {}).get("design") or f"{doc.get('estimator_calls')} estimates"
        print(f"{label}: median {statistics.median(times):.2f} s wall over {args.repeats} runs "
              f"(min {min(times):.2f}, max {max(times):.2f}), start-up included; {extra}")


if __name__ == "__main__":
    main()
