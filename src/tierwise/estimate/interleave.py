"""What interleaving would give a pipeline whose bubble is a large share of its step (issue 32).

A plan with ``pp > 1`` on the plain 1F1B schedule (``vpp = 1``) idles ``(pp - 1)`` micro-batch slots at fill
and drain: ``bubble / ideal = (pp - 1) / m`` (Narayanan et al. 2021, arXiv:2104.04473, Sec. 2.2.1). The
interleaved schedule with ``v`` model chunks per device divides that by ``v`` at the price of ``v`` times the
pipeline sends (Sec. 2.2.2), so whether it pays is the estimator's question, not a rule of thumb. When the
bubble exceeds :data:`BUBBLE_WARN_SHARE` of the step, :func:`interleaving_options` estimates the same plan at
every valid ``vpp > 1`` (the schedule ``interleaved``, nothing else changed) and returns the smallest valid one
and the fastest, or the reason none is valid (the plan rules of :mod:`tierwise.specs.plan`: every virtual
stage holds a layer, at least ``pp`` micro-batches, ...).
"""

from __future__ import annotations

from typing import Any

from tierwise.errors import PlanError
from tierwise.estimate.step import estimate
from tierwise.specs.plan import PlanBatch, validate_plan_batch

__all__ = ["BUBBLE_WARN_SHARE", "interleaving_options", "interleaving_warning"]

BUBBLE_WARN_SHARE = 0.15
"""Bubble share of the step past which ``estimate`` says what interleaving would give (the issue's bound:
at 15% the bubble costs more than most single communication axes of a tuned plan)."""


def _candidates(model, plan) -> tuple[list, str]:
    """Every valid interleaved version of ``plan`` (vpp 2 .. num_layers // pp) and, if none, why."""
    out, why = [], ""
    for v in range(2, model.num_layers // plan.pp + 1):
        cand = plan.replace(vpp=v, schedule="interleaved")
        try:
            validate_plan_batch(model, [cand])
        except PlanError as exc:
            why = why or f"vpp={v}: {exc}"
            continue
        out.append(cand)
    if not out and not why:
        why = (f"pp x 2 = {2 * plan.pp} virtual stages exceed num_layers={model.num_layers} (each needs a layer)")
    return out, why


def interleaving_options(model, cluster, plan, step_s: float, bubble_s: float, *,
                         top: int = 2, parameters=None) -> dict[str, Any] | None:
    """``None`` unless ``plan`` is a non-interleaved pipeline (pp > 1, vpp 1, not DualPipe) whose bubble is over
    :data:`BUBBLE_WARN_SHARE` of ``step_s``; else the ``interleaving`` block of the estimate document: the
    bubble's share, and per option (the smallest valid vpp, then the fastest) its step, bubble and fit, priced
    under ``parameters`` (:func:`~tierwise.estimate.step.estimate`'s)."""
    dual = str(plan.schedule).startswith("dualpipe")
    if plan.pp <= 1 or plan.vpp > 1 or dual or bubble_s <= BUBBLE_WARN_SHARE * step_s:
        return None
    cands, why = _candidates(model, plan)
    block: dict[str, Any] = {"bubble_share": bubble_s / step_s, "threshold": BUBBLE_WARN_SHARE, "options": [],
                             "why_none": why if not cands else None}
    if not cands:
        return block
    est = estimate(model, cluster, PlanBatch.from_plans(cands), parameters=parameters)
    rows = [{"vpp": c.vpp, "step_time_s": float(est.step_time_s[k]), "bubble_s": float(est.bubble_s[k]),
             "bubble_share": float(est.bubble_s[k] / est.step_time_s[k]), "fits": bool(est.memory["fits"][k]),
             "memory_per_gpu_bytes": float(est.memory["per_gpu_bytes"][k])} for k, c in enumerate(cands)]
    fitting = [r for r in rows if r["fits"]] or rows
    picks = [fitting[0], *sorted(fitting, key=lambda r: r["step_time_s"])]
    block["options"] = [r for n, r in enumerate(picks) if r not in picks[:n]][:top]
    return block


def interleaving_warning(block: dict[str, Any], plan, step_s: float) -> str:
    """The one warning line of an ``interleaving`` block."""
    head = (f"pipeline bubble is {block['bubble_share']:.0%} of the step (pp {plan.pp}, vpp 1, "
            f"{plan.num_microbatches} micro-batches; over {block['threshold']:.0%})")
    if not block["options"]:
        return f"{head}; no interleaved schedule is valid for this plan: {block['why_none']}"
    shown = "; ".join(
        f"vpp {r['vpp']}: step {r['step_time_s']:.3g} s ({r['step_time_s'] / step_s - 1:+.1%}), bubble "
        f"{r['bubble_s']:.3g} s ({r['bubble_share']:.0%})" + ("" if r["fits"] else ", does not fit memory")
        for r in block["options"])
    return f"{head}; interleaving (schedule interleaved, the same plan otherwise) would give {shown}"
