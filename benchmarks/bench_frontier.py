"""Frontier scale (issue 28): wall time of ``plan``, ``goodput`` and ``design`` at 98,304 and 131,072 GPUs and of
``plan`` at 1,048,576 GPUs, start-up included (each run a fresh ``python -m tierwise`` subprocess, one core:
``OMP_NUM_THREADS=1``). Prints the median of several runs (the machines are shared and noisy), the CPU seconds
and peak RSS of the child (``os.wait4``), and the fabric each run chose. Targets (issue 28): plan, goodput and
design under 2 s (design under 30 s) at 98,304 and 131,072 GPUs; plan under 5 s at 1,048,576.

Run: ``python benchmarks/bench_frontier.py [--repeats 3] [--only plan]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
JOB = ["--model", "llama3.1-405b", "--global-batch", "2048", "--seq", "8192"]
CASES = [
    ("plan", 98304, ["plan", *JOB, "--cluster", "dgx-h100", "--top", "3"], 2.0),
    ("plan", 131072, ["plan", *JOB, "--cluster", "dgx-h100", "--top", "3"], 2.0),
    ("goodput", 98304, ["goodput", "--model", "llama3.1-70b", "--cluster", "dgx-a100",
                        "--node-failure-rate", "0.00234"], 2.0),
    ("goodput", 131072, ["goodput", "--model", "llama3.1-70b", "--cluster", "dgx-a100",
                         "--node-failure-rate", "0.00234"], 2.0),
    ("design", 98304, ["design", "--model", "llama3.1-405b"], 30.0),
    ("design", 131072, ["design", "--model", "llama3.1-405b"], 30.0),
    ("plan", 2**20, ["plan", "--model", "llama3.1-405b", "--global-batch", "16384", "--seq", "8192",
                     "--cluster", "dgx-h100", "--top", "3"], 5.0),
]


def _run(cmd: list[str], env: dict) -> tuple[float, float, float, dict]:
    """Wall s, child CPU s and peak RSS (MiB) of one run, and its JSON document."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: the command with stdout to a pipe file
        with open(env["_BENCH_OUT"], "w") as fh:
            os.dup2(fh.fileno(), 1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.execve(cmd[0], cmd, {k: v for k, v in env.items() if k != "_BENCH_OUT"})
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if status:
        raise SystemExit(f"{' '.join(cmd)} failed (status {status})")
    with open(env["_BENCH_OUT"]) as fh:
        doc = json.load(fh)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, doc


def _fabric(doc: dict) -> str:
    fab = doc.get("fabric") or (doc.get("economics") or {}).get("fabric")
    if fab is None and "designs" in doc:
        row = doc["designs"][0]
        return f"{row['name']}: radix {row['switch_radix']}, {row['num_switches']:,} switches"
    if fab is None:
        return ""
    return f"radix {fab['switch_radix']}, {fab['tiers']} tiers, {fab['planes']} plane(s), {fab['num_switches']:,} " \
           "switches"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default=None, help="plan | goodput | design")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "_BENCH_OUT": f"/tmp/bench_frontier_{os.getpid()}.json"}
    print(f"{'command':8} {'GPUs':>9} {'median s':>9} {'runs s':>22} {'CPU s':>6} {'RSS MiB':>8} {'target':>7}  "
          "fabric / GPUs")
    for name, gpus, argv, target in CASES:
        if args.only and name != args.only:
            continue
        cmd = [sys.executable, "-m", "tierwise", *argv, "--gpus", str(gpus), "--json"]
        runs = [_run(cmd, env) for _ in range(args.repeats)]
        walls = [r[0] for r in runs]
        doc = runs[-1][3]
        used = doc.get("gpus", {}).get("summary", "")
        print(f"{name:8} {gpus:>9,} {statistics.median(walls):>9.2f} {' / '.join(f'{w:.2f}' for w in walls):>22} "
              f"{statistics.median(r[1] for r in runs):>6.2f} {max(r[2] for r in runs):>8.0f} {target:>7.0f}  "
              f"{_fabric(doc)}{'; ' + used if used else ''}")


if __name__ == "__main__":
    main()
