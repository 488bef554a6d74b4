"""``testbed check``: each measured row beside the analytic and the simulated time from the cluster file.

The figures come only from ``cluster.yaml`` (:func:`tierwise.specs.cluster.load_cluster`), so the check is
what any tierwise user would predict from that file; nothing is fitted to the measured rows. With no results
yet, :func:`check` measures :func:`default_cases` first (every op, 64 KiB - 64 MiB, contiguous layout).
"""

from __future__ import annotations

import math
from pathlib import Path

from tierwise.files import load_json, read_user_text, short_repr
from tierwise.limits import MAX_BYTES
from tierwise.specs.cluster import load_cluster
from tierwise.testbed.run import run_sweep
from tierwise.testbed.schedule import OPS, analytic_time, figures_from_cluster, simulated_time, testbed_fabric
from tierwise.testbed.spec import (
    CLUSTER_FILE,
    LAYOUTS,
    RESULTS_FILE,
    TestbedError,
    load_state,
    node_of_rank,
    spec_from_state,
)

__all__ = ["check", "default_cases", "predict_rows", "DEFAULT_SIZES"]

DEFAULT_SIZES = tuple(64 * 1024 * 4**k for k in range(6))
"""64 KiB, 256 KiB, 1 MiB, 4 MiB, 16 MiB, 64 MiB."""


def default_cases(sizes=DEFAULT_SIZES) -> list[dict]:
    return [{"op": op, "algorithm": "gloo", "size_bytes": int(s)} for s in sizes for op in OPS]


def predict_rows(directory: str, rows: list[dict]) -> list[dict]:
    """``{op, algorithm, size_bytes, layout, measured_s, analytic_s, simulated_s, ...}`` per measured row."""

    state = load_state(directory)
    spec = spec_from_state(state)
    _check_rows(rows, str(Path(directory) / RESULTS_FILE))
    cluster = load_cluster(str(Path(directory) / CLUSTER_FILE))
    fig = figures_from_cluster(cluster, spec.num_nodes)
    fabric = testbed_fabric(fig)
    out = []
    for row in rows:
        layout = row.get("layout", "contiguous")
        placement = [node_of_rank(r, spec, layout) for r in range(spec.num_ranks)]
        args = (row["op"], row["algorithm"], row["size_bytes"], fig, placement)
        analytic = analytic_time(*args)
        simulated = simulated_time(*args, fabric=fabric)
        out.append({"op": row["op"], "algorithm": row["algorithm"], "size_bytes": row["size_bytes"],
                    "layout": layout, "measured_s": row["measured_s"], "min_s": row.get("min_s"),
                    "analytic_s": analytic, "simulated_s": simulated,
                    "load_average": row.get("load_average"),
                    "measured_over_analytic": row["measured_s"] / analytic,
                    "simulated_over_analytic": simulated / analytic})
    return out


def _check_rows(rows, where: str) -> None:
    """Measured rows as ``testbed run`` writes them; a damaged results file is one line naming the row and
    the field, never a ``KeyError`` or ``TypeError`` from the prediction."""
    fix = "move the file aside (testbed run writes a new one)"
    if not isinstance(rows, list):
        raise TestbedError(f"{where} is damaged: not a list of measured rows; {fix}")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TestbedError(f"{where} is damaged: row {i} is not a mapping; {fix}")
        checks = {
            "op": lambda v: v in OPS,
            "algorithm": lambda v: isinstance(v, str) and 0 < len(v) <= 40,
            "size_bytes": lambda v: _positive(v) and v <= MAX_BYTES,
            "measured_s": lambda v: _positive(v) and v <= 1e6,
        }
        for key, ok in checks.items():
            if key not in row or not ok(row[key]):
                shown = short_repr(row.get(key), 40) if key in row else "missing"
                raise TestbedError(f"{where} is damaged: row {i} has {key} {shown}; {fix}")
        if row.get("layout", "contiguous") not in LAYOUTS:
            raise TestbedError(f"{where} is damaged: row {i} has layout {short_repr(row['layout'], 40)}; use "
                               f"{' or '.join(LAYOUTS)}, or {fix}")


def _positive(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and value > 0
    except OverflowError:  # an integer past a float's range
        return False


def check(directory: str, *, sizes=DEFAULT_SIZES, iters: int = 5) -> list[dict]:
    """Rows for every result in ``directory``; measures the default sweep first when there are none."""

    results = Path(directory) / RESULTS_FILE
    if results.exists():
        rows = load_json(read_user_text(str(results), what="testbed results"), str(results), TestbedError)
    else:
        rows = run_sweep(directory, default_cases(sizes), iters=iters)
    return predict_rows(directory, rows)
