"""Grid search of serving's fitted global parameters on the shipped serving set's throughput rows.

Prints, for every grid point, the p90 and median absolute % error over the high/medium-confidence throughput
rows (docs/serving.md, "Parameters"). Slow (each point runs every row): ``python tools/fit_serving.py``.
"""

from __future__ import annotations

import itertools

import numpy as np

from tierwise.serve import params as P
from tierwise.serve.validate import THROUGHPUT_METRICS, _row_record, load_serving_rows

GRID = {
    "matmul_efficiency": (0.6, 0.65, 0.7),
    "gemm_memory_overlap_loss": (0.5, 1.0),
    "decode_hbm_efficiency": (0.8, 0.9),
    "step_overhead_s": (0.008, 0.012),
    "fp4_efficiency_ratio": (0.7, 0.85),
}


def main() -> None:
    rows = [r for r in load_serving_rows() if r["metric"] in THROUGHPUT_METRICS and r["confidence"] in ("high", "med")]
    results = []
    for values in itertools.product(*GRID.values()):
        P._OVERRIDES.clear()
        P._OVERRIDES.update(dict(zip(GRID, values, strict=True)))
        err = np.abs([_row_record(r)["error_pct"] for r in rows])
        results.append((float(np.percentile(err, 90)), float(np.median(err)), values))
        print(f"p90 {results[-1][0]:5.1f}  median {results[-1][1]:5.1f}  {dict(zip(GRID, values, strict=True))}",
              flush=True)
    P._OVERRIDES.clear()
    best = min((r for r in results if r[1] <= 15.0), default=min(results))
    print("best (lowest p90 with median <= 15%):", dict(zip(GRID, best[2], strict=True)))


if __name__ == "__main__":
    main()
