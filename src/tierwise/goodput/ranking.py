"""Plans ranked, and GPU counts scaled, by goodput: the records (:class:`~tierwise.goodput.results.GoodputRanking`,
:class:`~tierwise.goodput.results.GoodputScaling`) whose blocks ``plan --goodput`` and ``scale --goodput`` add to
the planner's documents (:func:`tierwise.documents.training.with_goodput_ranking` and ``with_goodput_scaling``;
the planner itself knows nothing of failures). A plan's goodput-adjusted throughput is
``tokens/s x ETTR x N / (N + spare GPUs at p99)``: the spare pool its fault unit needs is capacity bought and
not training (:mod:`tierwise.goodput.model`)."""

from __future__ import annotations

import numpy as np

from tierwise.estimate import estimate
from tierwise.goodput.model import evaluate, failure_model
from tierwise.goodput.results import GoodputRanking, GoodputScaling, PlanGoodput, ScaleGoodput
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import PlanBatch

__all__ = ["GOODPUT_POOL", "goodput_ranking", "goodput_scaling"]

GOODPUT_POOL = 32
"""Plans ``plan --goodput`` asks the planner for (its best by step time) before re-ranking them by goodput."""


def goodput_ranking(answer, m, cl, opts, *, parameters: Parameters | None = None) -> GoodputRanking | None:
    """The planner's plans (a :class:`tierwise.planner.results.PlanAnswer`, read by attribute) re-ranked by
    goodput-adjusted throughput on the GPUs they use (one vectorized evaluation); ``None`` when the planner
    found no plan.

    adjusted = tokens/s x ETTR x N / (N + spare GPUs at p99): the spare pool a layout's fault unit needs
    (a rack when its scale-up group spans an NVL72 domain, else a host) is capacity bought and not training.
    """
    if not answer.plans:
        return None
    gpus = answer.gpus_used
    plans = [r.plan for r in answer.plans]
    batch = PlanBatch.from_plans(plans)
    parameters = parameters if parameters is not None else load_parameters()  # a command's entry point
    est = estimate(m, cl, batch, parameters=parameters)
    fm = failure_model(cl, gpus, opts)
    ev = evaluate(m, cl, gpus, batch, est, opts, fm, parameters=parameters)
    adjusted = ev.goodput_tokens_per_s * gpus / (gpus + ev.spare_gpus_p99)
    order = np.argsort(-adjusted, kind="stable")
    rows = []
    for i in range(len(plans)):
        dom = ev.fault_domain[i]
        rows.append(PlanGoodput(ettr=float(ev.ettr[i]), goodput_tokens_per_s=float(ev.goodput_tokens_per_s[i]),
                                adjusted_tokens_per_s=float(adjusted[i]), fault_unit=dom["unit"],
                                gpus_unavailable_per_failure=dom["gpus_unavailable_per_failure"],
                                spare_gpus_p99=dom["spare_gpus_p99"],
                                checkpoint_interval_s=float(ev.checkpoint_interval_s[i]),
                                checkpoint_bytes_per_gpu=float(ev.checkpoint.bytes_per_gpu[i]), step_rank=i + 1))
    return GoodputRanking(plans=tuple(rows), order=tuple(int(j) for j in order), mtti_s=fm.mtti_s,
                          interruptions_per_day=fm.interruptions_per_day, assumed=tuple(sorted(set(ev.assumed))))


def goodput_scaling(answer, m, cl, opts, *, parameters: Parameters | None = None) -> GoodputScaling:
    """Goodput at each point of a :class:`tierwise.planner.results.ScaleAnswer` that has a plan, and the GPU count where adding GPUs stops paying once
    failures count (the first doubling whose adjusted goodput grows less than 1.5x, as ``scale``'s own knee)."""
    parameters = parameters if parameters is not None else load_parameters()  # a command's entry point
    prev, knee, points = None, None, {}
    for k, p in enumerate(answer.points):
        if p.best is None:
            continue
        batch = PlanBatch.from_plans([p.best.plan])
        n = p.num_gpus
        used = p.gpus.used if p.gpus is not None else n  # idle GPUs (no layout uses them) are held, like spares
        ev = evaluate(m, cl, used, batch, estimate(m, cl, batch, parameters=parameters), opts, parameters=parameters)
        adjusted = float(ev.goodput_tokens_per_s[0]) * used / max(n, used + float(ev.spare_gpus_p99[0]))
        points[k] = ScaleGoodput(ettr=float(ev.ettr[0]), goodput_tokens_per_s=float(ev.goodput_tokens_per_s[0]),
                                 adjusted_tokens_per_s=adjusted, mtti_s=ev.failure_model.mtti_s,
                                 spare_gpus_p99=float(ev.spare_gpus_p99[0]))
        if prev is not None and knee is None:
            ratio = n / prev[0]
            if adjusted < prev[1] * (1 + 0.5 * (ratio - 1)):
                knee = n
        prev = (n, adjusted)
    return GoodputScaling(points=points, knee_num_gpus=knee)
