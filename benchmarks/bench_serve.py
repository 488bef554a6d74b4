"""serve-plan speed: the P/D split, TP/EP per pool and batch search of a 72-GPU GB200 NVL72 rack.

Prints the median and spread of several runs (target: under a second). Run:
``python benchmarks/bench_serve.py``.
"""

from __future__ import annotations

import statistics
import time

from tierwise.serve.api import ServeConfig, serve_plan_document


def main(repeats: int = 7) -> None:
    cases = [("llama3.1-70b", "interactive", "fp8"), ("llama3.1-70b", "offline", "fp8"),
             ("llama3.1-70b", "server", "fp8"), ("deepseek-v3", "interactive", "fp8"),
             ("deepseek-v3", "server", "fp8")]
    for model, scenario, precision in cases:
        cfg = ServeConfig(model=model, cluster="gb200-nvl72", num_gpus=72, precision=precision, input_len=2000,
                          output_len=256, scenario=scenario)
        serve_plan_document(cfg)  # warm the caches (catalog, collective geometries)
        times, doc = [], None
        for _ in range(repeats):
            t = time.perf_counter()
            doc = serve_plan_document(cfg)
            times.append(time.perf_counter() - t)
        print(f"serve-plan {model} {scenario} on 72 x gb200-nvl72: {doc['candidates']} candidates, "
              f"median {statistics.median(times) * 1e3:.0f} ms (min {min(times) * 1e3:.0f}, max "
              f"{max(times) * 1e3:.0f}) over {repeats} runs")


if __name__ == "__main__":
    main()
