"""Fit the global ``compute:`` parameters to the calibration set, and leave-one-source-out cross-validation.

Objective: the robust (soft-L1) sum over scored rows of the log-ratio ``log(predicted / measured)``
of tokens/s per GPU, each row weighted ``1 / rows of its source`` so that every source counts equally (the
dataset's notes ask for this: llm-foundry alone has 52 of 125 rows). ``scipy.optimize.least_squares``
(trust-region reflective, bounded) over the few parameters in :data:`FITTED`; nothing per row or per
source is fitted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tierwise.estimate.step import _compute_params, comm_memo
from tierwise.validate.mapping import Case
from tierwise.validate.run import SCORED_CONFIDENCE, predict

__all__ = ["FITTED", "fit_parameters", "cross_validate", "objective_residuals"]

FITTED: dict[str, tuple[float, float]] = {
    "matmul_efficiency_max": (0.4, 0.98),
    "attention_efficiency": (0.1, 0.9),
    "memory_bound_efficiency": (0.2, 1.0),
    "matmul_memory_weight": (0.0, 4.0),
    "attention_backward_ratio": (0.3, 1.0),
    "torch_op_overhead": (2e-6, 3e-5),
    "overlap_interference": (0.0, 1.0),
}
"""The fitted global parameters and their bounds (physically meaningful ranges)."""

START: dict[str, float] = {
    "matmul_efficiency_max": 0.80,
    "attention_efficiency": 0.55,
    "memory_bound_efficiency": 0.70,
    "matmul_memory_weight": 0.5,
    "attention_backward_ratio": 0.86,
    "torch_op_overhead": 1e-5,
    "overlap_interference": 0.0,
}
"""Where every fit starts: the values from public measurements before any fit (parameters.yaml's source
note: cuBLAS ~80% of peak, FlashAttention-2 ~55% forward and the backward at 63/73 of the forward's rate,
HBM ~70%), so a fit, and each
leave-one-source-out fold, depends only on the rows it is given."""

_SOFT_L1_SCALE = 0.1
"""Residuals (log-ratios) beyond ~5% count linearly, not quadratically: a few rows the model cannot
explain do not drag the global parameters."""


def _scored(cases: Sequence[Case]) -> np.ndarray:
    return np.array([c.used and c.confidence in SCORED_CONFIDENCE for c in cases], dtype=bool)


def objective_residuals(cases: Sequence[Case], params: dict[str, float]) -> np.ndarray:
    """Weighted log-ratio residuals of the scored rows under ``params``."""
    mask = _scored(cases)
    pred, _ = predict(cases, params)
    meas = np.array([c.measured_tokens_per_s_per_gpu for c in cases])
    sources = np.array([c.source_id for c in cases])
    counts = {s: int((mask & (sources == s)).sum()) for s in set(sources[mask])}
    w = np.array([1.0 / np.sqrt(counts[s]) if m else 0.0 for s, m in zip(sources, mask, strict=True)])
    r = np.log(np.where(mask, pred, 1.0) / np.where(mask, meas, 1.0)) * w
    return r[mask]


def fit_parameters(cases: Sequence[Case], start: dict[str, float] | None = None,
                   names: Sequence[str] | None = None) -> tuple[dict[str, float], dict]:
    """Least-squares fit of :data:`FITTED` on ``cases``; returns (parameters, fit info)."""
    from scipy.optimize import least_squares

    names = list(names or FITTED)
    base = {**_compute_params(), **START, **(start or {})}
    x0 = np.array([float(base[n]) for n in names])
    lo = np.array([FITTED[n][0] for n in names])
    hi = np.array([FITTED[n][1] for n in names])
    x0 = np.clip(x0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
    scale = hi - lo

    with comm_memo():
        # a parameter no scored row depends on (torch_op_overhead without a ZeRO-3 tensor-list row, e.g. in a
        # leave-one-source-out fold) keeps its starting value: the data say nothing about it
        r0 = objective_residuals(cases, base)
        informed = [n for n in names
                    if not np.allclose(objective_residuals(cases, {**base, n: base[n] + 1e-2 * (FITTED[n][1] -
                                                                                                 FITTED[n][0])}),
                                       r0, rtol=0.0, atol=1e-12)]
        keep = [i for i, n in enumerate(names) if n in informed]
        fixed = {n: float(x0[i]) for i, n in enumerate(names) if n not in informed}
        names, x0, lo, hi, scale = [names[i] for i in keep], x0[keep], lo[keep], hi[keep], scale[keep]

        def resid(z):
            params = dict(base, **dict(zip(names, lo + z * scale, strict=True)))
            return objective_residuals(cases, params)

        res = least_squares(resid, (x0 - lo) / scale, bounds=(0.0, 1.0), loss="soft_l1",
                            f_scale=_SOFT_L1_SCALE, x_scale=1.0, diff_step=1e-3, max_nfev=400,
                            ftol=1e-3, xtol=1e-4, gtol=1e-6)
    fitted = {**fixed, **{n: float(v) for n, v in zip(names, lo + res.x * scale, strict=True)}}
    info = {"method": f"scipy.optimize.least_squares (trf, soft_l1, f_scale={_SOFT_L1_SCALE}), per-source weights",
            "evaluations": int(res.nfev), "jacobians": int(res.njev or 0), "cost": float(res.cost),
            "rows": int(_scored(cases).sum()), "not_informed": sorted(fixed)}
    return fitted, info


_FOLD_CASES: Sequence[Case] = ()


def _fold(source: str) -> tuple[str, dict, np.ndarray]:
    """One leave-one-source-out fold: fit without ``source``, predict its scored rows."""
    cases = _FOLD_CASES
    scored = _scored(cases)
    train = [c for c in cases if c.source_id != source]
    test = [c for i, c in enumerate(cases) if c.source_id == source and scored[i]]
    params, _ = fit_parameters(train)
    with comm_memo():
        pred, _ = predict(test, {**_compute_params(), **params})
    meas = np.array([c.measured_tokens_per_s_per_gpu for c in test])
    err = np.abs(pred - meas) / meas * 100.0
    return source, params, err


def cross_validate(cases: Sequence[Case], workers: int | None = None) -> dict:
    """Leave-one-source-out: fit on all sources but one, predict the held-out source, for each source.

    Folds are independent; they run in ``workers`` forked processes (default: the CPU count) where the
    platform forks, else one after another.
    """
    import multiprocessing
    import os

    global _FOLD_CASES
    sources = sorted({c.source_id for c in cases if c.used})
    _FOLD_CASES = list(cases)
    workers = min(workers or os.cpu_count() or 1, len(sources))
    try:
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                results = pool.map(_fold, sources)
        else:
            results = [_fold(s) for s in sources]
    finally:
        _FOLD_CASES = ()
    out = {}
    for s, params, err in results:
        out[s] = {"rows": int(err.size), "median": float(np.median(err)), "p90": float(np.percentile(err, 90)),
                  "max": float(np.max(err)), "params": params}
    medians = [v["median"] for v in out.values()]
    return {"per_source": out, "median_of_source_medians": float(np.median(medians)),
            "overall_median": float(np.median(np.concatenate([r[2] for r in results])))}


def write_parameters(fitted: dict[str, float], note: str, path=None) -> str:
    """Write fitted values into the ``compute:`` section of ``catalog/parameters.yaml``, with a ``fit:`` note.

    The file is edited line by line so its comments (each value's source) survive; a key not yet in the
    section is appended to it. Returns the path written.
    """
    import re
    from pathlib import Path

    from tierwise.specs import catalog
    from tierwise.specs.parameters import load_parameters

    p = Path(path) if path else Path(str(__import__("importlib.resources").resources.files("tierwise.specs")
                                          .joinpath("catalog", "parameters.yaml")))
    lines = p.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip() == "compute:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith((" ", "#"))),
               len(lines))
    section = lines[start:end]
    section = [line for line in section if not line.startswith("  fit:")]
    for key, value in fitted.items():
        pat = re.compile(rf"^  {re.escape(key)}:\s")
        text = f"  {key}: {value:.4g}"
        for i, line in enumerate(section):
            if pat.match(line):
                section[i] = text
                break
        else:
            section.append(text)
    escaped = note.replace('"', "'")
    section.insert(1, f'  fit: "{escaped}"')
    while section and not section[-1].strip():
        section.pop()
    out = lines[:start] + section + ([""] if end < len(lines) else []) + lines[end:]
    p.write_text("\n".join(out) + "\n")
    catalog.entries.cache_clear()
    load_parameters.cache_clear()
    return str(p)
