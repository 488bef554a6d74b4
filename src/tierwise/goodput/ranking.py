"""Plans ranked, and GPU counts scaled, by goodput: the blocks ``plan --goodput`` and ``scale --goodput`` add to
the planner's documents (the planner itself knows nothing of failures). A plan's goodput-adjusted throughput is
``tokens/s x ETTR x N / (N + spare GPUs at p99)``: the spare pool its fault unit needs is capacity bought and
not training (:mod:`tierwise.goodput.model`)."""

from __future__ import annotations

import numpy as np

from tierwise.estimate import estimate
from tierwise.goodput.model import evaluate, failure_model
from tierwise.specs.plan import Plan, PlanBatch

__all__ = ["GOODPUT_POOL", "rank_plans_by_goodput", "scale_with_goodput"]

GOODPUT_POOL = 32
"""Plans ``plan --goodput`` asks the planner for (its best by step time) before re-ranking them by goodput."""


def rank_plans_by_goodput(doc: dict, m, cl, gpus: int, top: int, opts) -> dict:
    """Re-rank ``plan --json``'s plans by goodput-adjusted throughput (one vectorized evaluation).

    adjusted = tokens/s x ETTR x N / (N + spare GPUs at p99): the spare pool a layout's fault unit needs
    (a rack when its scale-up group spans an NVL72 domain, else a host) is capacity bought and not training.
    """
    if not doc["plans"]:
        return doc
    plans = [Plan(**e["estimate"]["plan"]) for e in doc["plans"]]
    batch = PlanBatch.from_plans(plans)
    est = estimate(m, cl, batch)
    fm = failure_model(cl, gpus, opts)
    ev = evaluate(m, cl, gpus, batch, est, opts, fm)
    adjusted = ev.goodput_tokens_per_s * gpus / (gpus + ev.spare_gpus_p99)
    order = np.argsort(-adjusted, kind="stable")
    for i, e in enumerate(doc["plans"]):
        dom = ev.fault_domain[i]
        e["goodput"] = {"ettr": float(ev.ettr[i]), "goodput_tokens_per_s": float(ev.goodput_tokens_per_s[i]),
                        "adjusted_tokens_per_s": float(adjusted[i]), "fault_unit": dom["unit"],
                        "gpus_unavailable_per_failure": dom["gpus_unavailable_per_failure"],
                        "spare_gpus_p99": dom["spare_gpus_p99"],
                        "checkpoint_interval_s": float(ev.checkpoint_interval_s[i]),
                        "checkpoint_bytes_per_gpu": float(ev.checkpoint.bytes_per_gpu[i]),
                        "step_rank": i + 1}
    doc["plans"] = [doc["plans"][int(j)] for j in order[:top]]
    doc["goodput"] = {"ranked_by": "tokens/s x ETTR x N / (N + spare GPUs at p99), over the planner's "
                                   f"{len(plans)} best plans by step time",
                      "mtti_s": fm.mtti_s, "interruptions_per_day": fm.interruptions_per_day,
                      "assumed": sorted(set(ev.assumed))}
    return doc



def scale_with_goodput(doc: dict, m, cl, opts) -> dict:
    """Add goodput to each ``scale`` point and the GPU count where adding GPUs stops paying once failures
    count (the first doubling whose adjusted goodput grows less than 1.5x, as ``scale``'s own knee)."""
    prev, knee = None, None
    for p in doc["points"]:
        if p["plan"] is None:
            continue
        plan = Plan(**p["plan"]["estimate"]["plan"])
        batch = PlanBatch.from_plans([plan])
        n = p["num_gpus"]
        used = p.get("gpus", {}).get("used", n)  # idle GPUs (no layout uses them) are held, like spares
        ev = evaluate(m, cl, used, batch, estimate(m, cl, batch), opts)
        adjusted = float(ev.goodput_tokens_per_s[0]) * used / max(n, used + float(ev.spare_gpus_p99[0]))
        p["goodput"] = {"ettr": float(ev.ettr[0]), "goodput_tokens_per_s": float(ev.goodput_tokens_per_s[0]),
                        "adjusted_tokens_per_s": adjusted, "mtti_s": ev.failure_model.mtti_s,
                        "spare_gpus_p99": float(ev.spare_gpus_p99[0])}
        if prev is not None and knee is None:
            ratio = n / prev[0]
            if adjusted < prev[1] * (1 + 0.5 * (ratio - 1)):
                knee = n
        prev = (n, adjusted)
    doc["goodput_knee_num_gpus"] = knee
    doc["goodput_explanation"] = (f"with failures counted, adding GPUs stops paying at {knee} GPUs (goodput per "
                                  "doubling < 1.5x)" if knee else
                                  "with failures counted, every doubling still buys at least 1.5x the goodput")
    return doc
