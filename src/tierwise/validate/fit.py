"""Fit the global ``compute:`` parameters to the calibration set, and leave-one-source-out cross-validation.

Objective: the robust (soft-L1) sum over scored rows of the log-ratio ``log(predicted / measured)``
of tokens/s per GPU, each row weighted ``1 / rows of its source`` so that every source counts equally (the
dataset's notes ask for this: llm-foundry alone has 52 of 125 rows). ``scipy.optimize.least_squares``
(trust-region reflective, bounded) over the few parameters in :data:`FITTED`; nothing per row or per
source is fitted.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

import numpy as np

from tierwise.atomic import write_atomic
from tierwise.errors import OutputError, TierwiseError
from tierwise.estimate.compute import compute_params
from tierwise.estimate.scenario import scenario_from_mapping
from tierwise.estimate.step import estimate
from tierwise.pricing.comm import comm_memo
from tierwise.specs.catalog import load_yaml_text
from tierwise.specs.parameters import PARAMETERS_ENV, Parameters, load_parameters, parameters_from_mapping
from tierwise.specs.plan import PlanBatch
from tierwise.validate.mapping import Case
from tierwise.validate.run import SCORED_CONFIDENCE, predict

__all__ = ["FITTED", "fit_parameters", "cross_validate", "cross_validate_groups", "group_folds", "params_at_bounds",
           "objective_residuals", "write_parameters", "check_fitted",
           "yaml_number", "installed_parameters_path"]

FITTED: dict[str, tuple[float, float]] = {
    "matmul_residual": (0.5, 1.2),
    "attention_efficiency_flash2": (0.05, 0.95),
    "attention_efficiency_cudnn": (0.05, 0.95),
    "memory_bound_residual": (0.2, 1.1),
    "attention_backward_ratio": (0.375, 1.0),  # per FLOP at 2.5x the forward's FLOPs: 0.3 of the old 2x count
    "overlap_interference": (0.0, 1.0),
}
"""The fitted global parameters and their bounds (physically meaningful ranges).

Not fitted since issue 29 (held at their catalog values, parameters.yaml): ``matmul_memory_weight``, which the
training rows do not identify (refits from different starts put it anywhere from 0.01 to 1.15 at equal cost)
while it sets every decode step's weight read in serving; and ``torch_op_overhead``, which has its own
measurement (13.48 us of CPU per eager op, TE issue #2053) and which, fitted, the few rows that depend on it
(ZeRO-3 tensor-list copies, MoE host floors) pulled to a bound in the folds that hold one kind of them out
(docs/validation.md "Issue 29")."""

START: dict[str, float] = {
    "matmul_residual": 1.0,
    "attention_efficiency_flash2": 0.7,
    "attention_efficiency_cudnn": 0.75,
    "memory_bound_residual": 0.8,
    "attention_backward_ratio": 0.86,
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


def objective_residuals(cases: Sequence[Case], params: dict[str, float], *,
                        parameters: Parameters | None = None) -> np.ndarray:
    """Weighted log-ratio residuals of the scored rows under ``params`` (over ``parameters``: None, the run's)."""
    mask = _scored(cases)
    pred, _ = predict(cases, params, parameters=parameters)
    meas = np.array([c.measured_tokens_per_s_per_gpu for c in cases])
    sources = np.array([c.source_id for c in cases])
    counts = {s: int((mask & (sources == s)).sum()) for s in set(sources[mask])}
    w = np.array([1.0 / np.sqrt(counts[s]) if m else 0.0 for s, m in zip(sources, mask, strict=True)])
    r = np.log(np.where(mask, pred, 1.0) / np.where(mask, meas, 1.0)) * w
    return r[mask]


def fit_parameters(cases: Sequence[Case], start: dict[str, float] | None = None,
                   names: Sequence[str] | None = None, *, parameters: Parameters | None = None
                   ) -> tuple[dict[str, float], dict]:
    """Least-squares fit of :data:`FITTED` on ``cases`` from ``parameters`` (None, this being an entry point of
    the validation API: :func:`load_parameters`); returns (parameters, fit info)."""
    from scipy.optimize import least_squares

    parameters = parameters if parameters is not None else load_parameters()
    names = list(names or FITTED)
    base = {**compute_params(parameters), **START, **(start or {})}
    x0 = np.array([float(base[n]) for n in names])
    lo = np.array([FITTED[n][0] for n in names])
    hi = np.array([FITTED[n][1] for n in names])
    x0 = np.clip(x0, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
    scale = hi - lo

    with comm_memo():
        # a parameter no scored row depends on (an attention family no row of a fold runs) keeps its starting
        # value: the data say nothing about it
        r0 = objective_residuals(cases, base, parameters=parameters)
        informed = [n for n in names
                    if not np.allclose(objective_residuals(cases, {**base, n: base[n] + 1e-2 * (FITTED[n][1] -
                                                                                                 FITTED[n][0])},
                                                                    parameters=parameters),
                                       r0, rtol=0.0, atol=1e-12)]
        keep = [i for i, n in enumerate(names) if n in informed]
        fixed = {n: float(x0[i]) for i, n in enumerate(names) if n not in informed}
        names, x0, lo, hi, scale = [names[i] for i in keep], x0[keep], lo[keep], hi[keep], scale[keep]

        def resid(z):
            params = dict(base, **dict(zip(names, lo + z * scale, strict=True)))
            return objective_residuals(cases, params, parameters=parameters)

        res = least_squares(resid, (x0 - lo) / scale, bounds=(0.0, 1.0), loss="soft_l1",
                            f_scale=_SOFT_L1_SCALE, x_scale=1.0, diff_step=1e-3, max_nfev=400,
                            ftol=1e-3, xtol=1e-4, gtol=1e-6)
    fitted = {**fixed, **{n: float(v) for n, v in zip(names, lo + res.x * scale, strict=True)}}
    info = {"method": f"scipy.optimize.least_squares (trf, soft_l1, f_scale={_SOFT_L1_SCALE}), per-source weights",
            "evaluations": int(res.nfev), "jacobians": int(res.njev or 0), "cost": float(res.cost),
            "rows": int(_scored(cases).sum()), "not_informed": sorted(fixed)}
    return fitted, info


_FOLD_CASES: Sequence[Case] = ()
_FOLD_PARAMETERS: list[Parameters] = []
"""The rows and the parameters of the folds in progress (forked workers inherit them)."""

_QUIET = {"initializer": signal.signal, "initargs": (signal.SIGINT, signal.SIG_IGN)}
"""Pool workers ignore SIGINT: a terminal's Ctrl-C reaches the whole process group; the parent stops the pool,
and no worker prints a traceback."""


def _fold(source: str) -> tuple[str, dict, np.ndarray]:
    """One leave-one-source-out fold: fit without ``source``, predict its scored rows."""
    cases = _FOLD_CASES
    scored = _scored(cases)
    train = [c for c in cases if c.source_id != source]
    test = [c for i, c in enumerate(cases) if c.source_id == source and scored[i]]
    parameters = _FOLD_PARAMETERS[0]
    params, _ = fit_parameters(train, parameters=parameters)
    with comm_memo():
        pred, _ = predict(test, {**compute_params(parameters), **params}, parameters=parameters)
    meas = np.array([c.measured_tokens_per_s_per_gpu for c in test])
    err = np.abs(pred - meas) / meas * 100.0
    return source, params, err


def cross_validate(cases: Sequence[Case], workers: int | None = None, *, parameters: Parameters | None = None) -> dict:
    """Leave-one-source-out: fit on all sources but one, predict the held-out source, for each source.

    Folds are independent; they run in ``workers`` forked processes (default: the CPU count) where the
    platform forks, else one after another. ``parameters``: None, this being an entry point, the run's.
    """
    import multiprocessing
    import os

    global _FOLD_CASES
    sources = sorted({c.source_id for c in cases if c.used})
    _FOLD_CASES = list(cases)
    _FOLD_PARAMETERS[:] = [parameters if parameters is not None else load_parameters()]
    workers = min(workers or os.cpu_count() or 1, len(sources))
    try:
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            with multiprocessing.get_context("fork").Pool(workers, **_QUIET) as pool:
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


def group_folds(cases: Sequence[Case]) -> list[tuple[str, list[int], list[int]]]:
    """Leave-one-(hardware x stack)-out folds: ``(group, training indices, held-out scored indices)`` for each
    group (:attr:`~tierwise.validate.mapping.Case.group`) with scored rows. Every mapped row is in exactly one
    group; a fold trains on the rows of every other group only."""
    scored = _scored(cases)
    groups = sorted({c.group for c in cases if c.used})
    out = []
    for g in groups:
        test = [i for i, c in enumerate(cases) if c.group == g and scored[i]]
        if test:
            out.append((g, [i for i, c in enumerate(cases) if c.group != g], test))
    return out


def params_at_bounds(params: dict[str, float], rel: float = 1e-3) -> dict[str, str]:
    """Fitted parameters within ``rel`` of their bound's range from a bound of :data:`FITTED`: ``lower`` or
    ``upper`` (a parameter pinned at a bound is the fit saying the model's structure lacks something)."""
    out = {}
    for name, value in params.items():
        if name not in FITTED:
            continue
        lo, hi = FITTED[name]
        if value <= lo + rel * (hi - lo):
            out[name] = "lower"
        elif value >= hi - rel * (hi - lo):
            out[name] = "upper"
    return out


def _group_fold(fold: tuple[str, list[int], list[int]]) -> tuple[str, dict, np.ndarray]:
    """One leave-one-(hardware x stack)-out fold: fit on its training rows, predict its held-out rows."""
    group, train_idx, test_idx = fold
    cases = _FOLD_CASES
    parameters = _FOLD_PARAMETERS[0]
    params, _ = fit_parameters([cases[i] for i in train_idx], parameters=parameters)
    test = [cases[i] for i in test_idx]
    with comm_memo():
        pred, _ = predict(test, {**compute_params(parameters), **params}, parameters=parameters)
    meas = np.array([c.measured_tokens_per_s_per_gpu for c in test])
    return group, params, np.abs(pred - meas) / meas * 100.0


def _run_folds(fn, folds, workers: int | None, cases: Sequence[Case], parameters: Parameters):
    """``fn`` over ``folds`` in forked worker processes where the platform forks, else one after another."""
    import multiprocessing
    import os

    global _FOLD_CASES
    _FOLD_CASES = list(cases)
    _FOLD_PARAMETERS[:] = [parameters]
    workers = min(workers or os.cpu_count() or 1, len(folds))
    try:
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            with multiprocessing.get_context("fork").Pool(workers, **_QUIET) as pool:
                return pool.map(fn, folds)
        return [fn(f) for f in folds]
    finally:
        _FOLD_CASES = ()


def cross_validate_groups(cases: Sequence[Case], workers: int | None = None, *,
                          parameters: Parameters | None = None) -> dict:
    """Leave-one-(hardware x software-stack)-out: for each group (accelerator generation / stack,
    :func:`tierwise.validate.mapping.stack_for_row`), refit the global parameters on every other group and
    predict the held-out group's scored rows. The headline of ``tierwise validate`` (docs/validation.md):
    unlike leave-one-source-out, no fold trains on rows of its own hardware and software era. ``parameters``:
    None, this being an entry point, the run's."""
    folds = group_folds(cases)
    results = _run_folds(_group_fold, folds, workers, cases,
                         parameters if parameters is not None else load_parameters())
    per_group = {}
    for (group, _, test_idx), (_, params, err) in zip(folds, results, strict=True):
        per_group[group] = {
            "rows": int(err.size), "median": float(np.median(err)), "p90": float(np.percentile(err, 90)),
            "max": float(np.max(err)), "sources": sorted({cases[i].source_id for i in test_idx}),
            "row_ids": [cases[i].row_id for i in test_idx], "params": params,
            "params_at_bounds": params_at_bounds(params),
        }
    every = np.concatenate([r[2] for r in results]) if results else np.array([])
    medians = [v["median"] for v in per_group.values()]
    return {
        "grouping": "accelerator generation / software stack (framework and era), docs/validation.md",
        "per_group": per_group,
        "median_of_group_medians": float(np.median(medians)) if medians else float("nan"),
        "p90": float(np.percentile(every, 90)) if every.size else float("nan"),
        "overall_median": float(np.median(every)) if every.size else float("nan"),
        "max": float(np.max(every)) if every.size else float("nan"),
        "params_at_bounds": {g: v["params_at_bounds"] for g, v in per_group.items()},
    }


def installed_parameters_path() -> str:
    """The installed ``catalog/parameters.yaml`` (read, never written by ``validate --fit``)."""
    from importlib import resources

    return str(resources.files("tierwise.specs").joinpath("catalog", "parameters.yaml"))


def yaml_number(value: float) -> str:
    """``value`` to 4 significant digits, spelled so YAML reads it back as a float: PyYAML reads ``1e-05``
    as a *string* (YAML 1.1 floats need a dot), so the mantissa always carries one (``1.0e-05``)."""
    text = f"{float(value):.4g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        text = f"{mantissa}e{exponent}"
    elif "." not in text:
        text += ".0"
    return text


_REFERENCE = {"model": "llama3.1-8b", "cluster": "dgx-h100", "num_gpus": 8,
              "plan": {"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 64, "seq_length": 4096}}
"""The scenario a fitted parameter set must estimate (finite, positive step time) before it is written."""


def check_fitted(fitted: dict[str, float]) -> None:
    """Refuse a fit whose values are unusable: not finite, or outside the parameter's bounds (:data:`FITTED`;
    efficiencies stay in (0, 1])."""

    for key, value in fitted.items():
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise TierwiseError(f"the fit gave {key}={value!r}, not a number; nothing was written") from None
        if not np.isfinite(v):
            raise TierwiseError(f"the fit gave {key}={v}; nothing was written (check the dataset's rows)")
        lo, hi = FITTED.get(key, (-np.inf, np.inf))
        if key.endswith("_efficiency") or key.endswith("_efficiency_max"):
            lo, hi = max(lo, 0.0), min(hi, 1.0)
            if v <= 0.0:
                raise TierwiseError(f"the fit gave {key}={v:.4g}, outside (0, 1]; nothing was written")
        if not lo - 1e-9 <= v <= hi + 1e-9:
            raise TierwiseError(f"the fit gave {key}={v:.4g}, outside its bounds [{lo:g}, {hi:g}]; nothing was "
                                "written")


def _check_usable(text: str, fitted: dict[str, float], where: str) -> None:
    """The text reads back as parameters whose fitted values are those numbers, and a reference scenario
    estimates with them (finite, positive step time); else a one-line error and nothing is written."""

    params = parameters_from_mapping(load_yaml_text(text, where), where)
    for key, value in fitted.items():
        back = params.compute.get(key)
        if not isinstance(back, float) or not np.isclose(back, float(value), rtol=1e-3, atol=0.0):
            raise TierwiseError(f"{where}: {key} would read back as {back!r}, not {float(value):.4g}; nothing "
                                "was written")
    compute = {k: v for k, v in params.compute.items() if k not in ("source", "fit")}
    scenario = scenario_from_mapping(_REFERENCE, origin="the reference scenario", parameters=params)
    result = estimate(scenario.model, scenario.cluster, PlanBatch.from_plans([scenario.plan]), params=compute,
                      parameters=params)  # the record read back
    step = float(np.asarray(result.step_time_s).ravel()[0])
    if not (np.isfinite(step) and step > 0):
        raise TierwiseError(f"the fitted parameters give a step time of {step} s on the reference scenario "
                            f"({_REFERENCE['model']} on {_REFERENCE['num_gpus']} x {_REFERENCE['cluster']}); "
                            "nothing was written")


def write_parameters(fitted: dict[str, float], note: str, path=None, out=None) -> str:
    """Write the parameters file ``path`` (default: the installed ``catalog/parameters.yaml``) with the fitted
    values in its ``compute:`` section and a ``fit:`` note, to ``out`` (default: ``path`` when one is
    given). The installed file is never written: without ``path`` or ``out`` this is an error.

    The file is edited line by line so its comments (each value's source) survive; a key not yet in the
    section is appended to it. Values are written as YAML floats (:func:`yaml_number`). Before anything is
    written the fit is checked (:func:`check_fitted`) and the new text is read back and used on a reference
    scenario; the write is atomic. Returns the path written.
    """
    import re
    from pathlib import Path

    installed = Path(installed_parameters_path())
    src = Path(path) if path else installed
    dest = Path(out) if out else (Path(path) if path else None)
    if dest is None:
        raise OutputError("validate --fit writes the fitted parameters to a file you name: add --fit-out FILE "
                          "(the installed catalog/parameters.yaml is never overwritten)")
    if dest.exists() and installed.exists() and dest.resolve() == installed.resolve():
        raise OutputError(f"--fit-out {str(dest)!r} is the installed parameters file; write the fit elsewhere "
                          f"and use it with {_env()}=FILE")
    check_fitted(fitted)
    lines = src.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip() == "compute:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith((" ", "#"))),
               len(lines))
    section = lines[start:end]
    section = [line for line in section if not line.startswith("  fit:")]
    for key, value in fitted.items():
        pat = re.compile(rf"^  {re.escape(key)}:\s")
        text = f"  {key}: {yaml_number(value)}"
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
    new = "\n".join(lines[:start] + section + ([""] if end < len(lines) else []) + lines[end:]) + "\n"
    _check_usable(new, fitted, f"the fitted parameters for {str(dest)!r}")
    written = write_atomic(dest, new, "--fit-out")

    load_parameters.cache_clear()  # a process that already read this path reads it again
    return written


def _env() -> str:

    return PARAMETERS_ENV
