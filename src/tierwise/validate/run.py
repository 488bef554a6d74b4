"""Run the estimator on every mapped case, compare with the measurement, and summarize.

The estimator is vectorized per (model, cluster): cases sharing both are estimated as one
:class:`~tierwise.specs.plan.PlanBatch`. Error is ``(predicted - measured) / measured`` on tokens/s per GPU.
Summary statistics are over the rows of high and medium confidence that were used ("scored"), per source
and overall, with the median of per-source medians so that no source dominates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tierwise.errors import did_you_mean
from tierwise.estimate.step import estimate
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import PlanBatch
from tierwise.validate.dataset import DatasetError, load_rows
from tierwise.validate.mapping import Case, borrow_parallelism, case_from_row

__all__ = ["Validation", "load_cases", "predict", "validate", "summarize", "SCORED_CONFIDENCE"]

SCORED_CONFIDENCE = ("high", "medium")


@dataclass
class Validation:
    """Cases with predictions, per-case breakdown terms, and the summary."""

    cases: list[Case]
    predicted: np.ndarray
    """Predicted tokens/s per GPU (NaN for skipped cases)."""
    terms: dict[str, np.ndarray]
    """Per-case step-time breakdown (seconds): compute, recompute, bubble, exposed_comm, optimizer, step."""
    summary: dict = field(default_factory=dict)
    params: Mapping[str, float] | None = None

    @property
    def measured(self) -> np.ndarray:
        return np.array([c.measured_tokens_per_s_per_gpu for c in self.cases], dtype=float)

    @property
    def error_pct(self) -> np.ndarray:
        return (self.predicted - self.measured) / self.measured * 100.0

    @property
    def scored(self) -> np.ndarray:
        return np.array([c.used and c.confidence in SCORED_CONFIDENCE for c in self.cases], dtype=bool)


def load_cases(path: str | Path | None = None, source: str | None = None, *,
               parameters: Parameters | None = None) -> list[Case]:
    """Map every row of a dataset (optionally one source only) under ``parameters`` (None, this being part of
    the validation API: :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    rows = load_rows(path)
    if source is not None:
        known = sorted({r["source_id"] for r in rows})
        if source not in known:

            raise DatasetError(f"unknown source {source!r}{did_you_mean(source, known)}; the dataset has "
                               f"{', '.join(known)}")
        rows = [r for r in rows if r["source_id"] == source]
    return [case_from_row(r, parameters=parameters) for r in borrow_parallelism(rows)]


_TERMS = ("compute_s", "attention_s", "memory_bound_s", "recompute_s", "bubble_s", "exposed_comm_s", "optimizer_s",
          "shard_copy_s", "step_time_s", "memory_fits", "memory_per_gpu_bytes")


_BATCHES: dict[tuple, PlanBatch] = {}
"""The PlanBatch of each group of rows' plans (frozen, hashed by content), kept for the process: a fit estimates
the same groups hundreds of times."""


def predict(cases: Sequence[Case], params: Mapping[str, float] | None = None, *,
            parameters: Parameters | None = None) -> tuple[np.ndarray, dict]:
    """Predicted tokens/s per GPU for each case (NaN where skipped), one estimator call per (model, cluster), under
    ``parameters`` (None: :func:`~tierwise.estimate.step.estimate`'s, the run's)."""
    pred = np.full(len(cases), np.nan)
    terms = {t: np.full(len(cases), np.nan) for t in _TERMS}
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(cases):
        if c.used:
            groups.setdefault((c.model, c.cluster.name), []).append(i)
    for idx in groups.values():
        first = cases[idx[0]]
        key = tuple(cases[i].plan for i in idx)
        batch = _BATCHES.get(key)
        if batch is None:
            batch = _BATCHES[key] = PlanBatch.from_plans(list(key))
        est = estimate(first.model, first.cluster, batch, params=params, parameters=parameters)
        pred[idx] = est.tokens_per_s_per_gpu
        for t in _TERMS:
            if t in ("memory_fits", "memory_per_gpu_bytes"):
                terms[t][idx] = est.memory["fits" if t == "memory_fits" else "per_gpu_bytes"]
            else:
                terms[t][idx] = getattr(est, t)
    return pred, terms


def _stats(abs_err: np.ndarray) -> dict[str, float | int]:
    if abs_err.size == 0:
        return {"rows": 0, "median": float("nan"), "mean": float("nan"), "p90": float("nan"), "max": float("nan")}
    return {"rows": int(abs_err.size), "median": float(np.median(abs_err)), "mean": float(np.mean(abs_err)),
            "p90": float(np.percentile(abs_err, 90)), "max": float(np.max(abs_err))}


def summarize(cases: Sequence[Case], error_pct: np.ndarray) -> dict:
    """Rows used/skipped and median / mean / p90 / max absolute % error per source and overall."""
    scored = np.array([c.used and c.confidence in SCORED_CONFIDENCE for c in cases], dtype=bool)
    abs_err = np.abs(error_pct)
    sources = sorted({c.source_id for c in cases})
    per_source = {}
    for s in sources:
        mask = scored & np.array([c.source_id == s for c in cases])
        per_source[s] = _stats(abs_err[mask])
        per_source[s]["skipped"] = sum(1 for c in cases if c.source_id == s and not c.used)
        per_source[s]["signed_median"] = float(np.median(error_pct[mask])) if mask.any() else float("nan")
    medians = [v["median"] for v in per_source.values() if v["rows"]]
    return {
        "rows": len(cases),
        "used": sum(1 for c in cases if c.used),
        "scored": int(scored.sum()),
        "skipped": [{"row_id": c.row_id, "source_id": c.source_id, "reason": c.skip} for c in cases if not c.used],
        "overall": _stats(abs_err[scored]),
        "median_of_source_medians": float(np.median(medians)) if medians else float("nan"),
        "per_source": per_source,
    }


def memory_misfits(v: Validation) -> list[str]:
    """Row ids of published runs the memory model says would not fit (they are predicted all the same)."""
    fits = v.terms.get("memory_fits")
    if fits is None:
        return []
    return [c.row_id for i, c in enumerate(v.cases) if c.used and fits[i] == 0]


def validate(path: str | Path | None = None, source: str | None = None,
             params: Mapping[str, float] | None = None, cases: Sequence[Case] | None = None, *,
             parameters: Parameters | None = None) -> Validation:
    """Map, predict and summarize a dataset (the shipped one by default) under ``parameters`` (None: the run's;
    ``validate --fit --fit-out`` passes the fitted file's; None, this being the validation API's entry:
    :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    cases = list(cases) if cases is not None else load_cases(path, source, parameters=parameters)
    pred, terms = predict(cases, params, parameters=parameters)
    v = Validation(cases=cases, predicted=pred, terms=terms, params=params)
    v.summary = summarize(cases, v.error_pct)
    v.summary["memory_does_not_fit"] = memory_misfits(v)
    return v


def plan_label(case: Case) -> str:
    """Short plan text: ``tp8 pp12 dp16 cp1 mbs1 vpp3 full-rc ZeRO-1 fp8``."""
    p = case.plan
    if p is None:
        return ""
    parts = [f"tp{p.tp}", f"pp{p.pp}", f"dp{p.dp}"]
    if p.cp > 1:
        parts.append(f"cp{p.cp}")
    parts += [f"mbs{p.micro_batch_size}", f"gbs{p.global_batch_size}", f"seq{p.seq_length}"]
    if p.vpp > 1:
        parts.append(f"vpp{p.vpp}")
    parts += [f"{p.recompute}-rc", f"ZeRO-{p.zero_stage}", p.precision]
    return " ".join(parts)


_SHARE_TERMS = {"gemm": None, "attention": "attention_s", "memory_bound": "memory_bound_s",
                "recompute": "recompute_s", "bubble": "bubble_s", "exposed_comm": "exposed_comm_s",
                "optimizer": "optimizer_s", "zero3_copies": "shard_copy_s"}


def row_records(v: Validation) -> list[dict]:
    """One JSON-ready record per case: what was compared, the prediction, the error, and the step's terms."""
    out = []
    err = v.error_pct
    for i, c in enumerate(v.cases):
        rec = {
            "row_id": c.row_id, "source_id": c.source_id, "model": c.model_label, "model_source": c.model_source,
            "hardware": c.hardware, "cluster": c.cluster.name if c.cluster else None, "num_gpus": c.num_gpus,
            "generation": c.generation or None, "stack": c.stack, "group": c.group,
            "plan": plan_label(c), "confidence": c.confidence, "scored": bool(v.scored[i]),
            "flop_rule": c.rule.key, "flop_rule_label": c.rule.label, "flop_rule_pinned": c.rule.pinned,
            "metric": c.metric, "filled": list(c.filled), "skipped": c.skip or None,
            "measured_tokens_per_s_per_gpu": None, "predicted_tokens_per_s_per_gpu": None, "error_pct": None,
            "step_shares": None, "fits": None,
        }
        if c.used:
            step = v.terms["step_time_s"][i]
            shares = {}
            for name, key in _SHARE_TERMS.items():
                if key is None:
                    val = v.terms["compute_s"][i] - v.terms["attention_s"][i] - v.terms["memory_bound_s"][i]
                else:
                    val = v.terms[key][i]
                shares[name] = float(val / step)
            rec.update({
                "measured_tokens_per_s_per_gpu": float(c.measured_tokens_per_s_per_gpu),
                "predicted_tokens_per_s_per_gpu": float(v.predicted[i]),
                "error_pct": float(err[i]),
                "step_time_s": float(step),
                "step_shares": shares,
                # the published run ran; a "does not fit" here is evidence about the memory model, not a refusal
                "fits": bool(v.terms["memory_fits"][i]),
                "memory_per_gpu_bytes": float(v.terms["memory_per_gpu_bytes"][i]),
            })
        out.append(rec)
    return out


def worst_rows(v: Validation, n: int = 8) -> list[dict]:
    """The ``n`` scored rows with the largest absolute error, with the step term that dominates them.

    The dominant term is the largest non-GEMM share of the predicted step (attention, memory-bound, bubble,
    exposed communication, optimizer; recompute re-runs the others and is not a term of its own); an error
    on a row dominated by one term points at that term's model first.
    """
    recs = [r for r in row_records(v) if r["scored"]]
    recs.sort(key=lambda r: -abs(r["error_pct"]))
    out = []
    for r in recs[:n]:
        shares = {k: s for k, s in r["step_shares"].items() if k not in ("gemm", "recompute")}
        term = max(shares, key=shares.get)
        out.append({**r, "dominant_term": term, "dominant_share": shares[term]})
    return out
