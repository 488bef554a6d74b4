"""What ``tierwise plan`` and ``tierwise scale`` answer: ranked plans with their explanation
(:func:`answer_plans`, a :class:`~tierwise.planner.results.PlanAnswer`), and the best plan per GPU count with its
scaling efficiency (:func:`answer_scale`, a :class:`~tierwise.planner.results.ScaleAnswer`). The JSON documents
are those records finished by :mod:`tierwise.documents.training` (:func:`plan_document` and
:func:`scale_document` here do both steps); the CLI only renders them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from tierwise.documents.training import plan_document as _plan_doc
from tierwise.documents.training import scale_document as _scale_doc
from tierwise.errors import PlanError
from tierwise.estimate import estimate
from tierwise.estimate.compute import compute_params
from tierwise.files import short_repr
from tierwise.hierarchy import TIER_ORDER
from tierwise.limits import MAX_GPUS
from tierwise.parallel.ep import moe_imbalance
from tierwise.planner.branch_and_bound import OBJECTIVES, SearchResult, search
from tierwise.planner.capacity import min_gpus_to_fit
from tierwise.planner.explain import (
    AXIS_LABEL,
    compare,
    crossing_head,
    explain_lines,
    plan_label,
    ranked_plan,
)
from tierwise.planner.results import NearMiss, PlanAnswer, RankedPlan, ScaleAnswer, ScalePoint
from tierwise.planner.space import Constraints, check_constraints, to_batch
from tierwise.planner.why import memory_choice
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import PlanBatch, valid_plan_mask

__all__ = ["answer_plans", "answer_scale", "plan_document", "scale_document", "parse_gpu_range"]



def _estimate(model, cluster, batch: PlanBatch, parameters: Parameters):
    return estimate(model, cluster, batch, parameters=parameters)


def _neighbours(model, cluster, result: SearchResult, plan, c: Constraints,
                parameters: Parameters) -> list[tuple[str, float, bool, float]]:
    """The winner with one memory-saving choice undone: less recompute, a lower ZeRO stage, a doubled
    micro-batch. (description, step, fits, memory fraction) of each valid one."""
    cands = []
    order = ("none", "selective", "full")
    if plan.recompute != "none":
        lighter = order[order.index(plan.recompute) - 1]
        if lighter in c.recompute:
            cands.append((f"{lighter} recompute", plan.replace(recompute=lighter)))
    lower = [z for z in c.zero_stages if z < plan.zero_stage]
    if lower:
        cands.append((f"ZeRO-{max(lower)}", plan.replace(zero_stage=max(lower), zero3_gather="flat",
                                                   dp_shard=plan.dp if max(lower) == 0 else plan.dp_shard)))
    if c.micro_batch_size is None and 2 * plan.micro_batch_size <= c.max_micro_batch_size:
        cands.append((f"micro-batch {2 * plan.micro_batch_size}", plan.replace(micro_batch_size=2 * plan.micro_batch_size)))
    if not cands:
        return []
    batch = PlanBatch.from_plans([p for _, p in cands])
    ok = valid_plan_mask(model, batch)
    if not ok.any():
        return []
    keep = np.nonzero(ok)[0]
    est = _estimate(model, cluster, batch.select(keep), parameters)
    mem = est.memory["per_gpu_bytes"] / est.memory["capacity_bytes"]
    return [(cands[j][0], float(est.step_time_s[n]), bool(est.memory["fits"][n]), float(mem[n]))
            for n, j in enumerate(keep)]


def _crossing_lines(model, cluster, result: SearchResult, est, plans, c: Constraints,
                    parameters: Parameters) -> list[str]:
    """For TP, CP or EP groups of the winner that cross scale-out: what crossing buys against the best plan that
    keeps that axis inside one scale-up domain (a second, constrained search). Each line starts with
    :func:`~tierwise.planner.explain.crossing_head`, which the tier rule's pointer names."""
    lines = []
    w = plans[0]
    for axis in ("tp", "cp", "ep"):
        if getattr(w, axis) <= 1 or TIER_ORDER[int(est.axis_tier[axis][0])] != "scale_out":
            continue
        label = AXIS_LABEL[axis]
        try:
            alt = search(model, cluster, result.space.num_gpus, result.space.global_batch_size,
                         result.space.seq_length, constraints=replace(c, inside_scale_up=(axis,), **{axis: None}),
                         objective=result.objective, top=1, parameters=parameters)
        except PlanError:
            alt = None
        if alt is None or not len(alt.plans["tp"]):
            lines.append(f"{crossing_head(axis, w)}: no plan keeping {label} inside one "
                         f"{cluster.scale_up_domain}-GPU scale-up domain fits")
            continue
        other = alt.batch().plan(0)
        both = _estimate(model, cluster, PlanBatch.from_plans([w, other]), parameters)
        gain = float(both.step_time_s[1]) / float(both.step_time_s[0]) - 1
        head = f"{crossing_head(axis, w)} ({float(both.axis_exposed_s[axis][0]):.3g} s exposed)"
        inside = f"the best plan keeping {label} inside one {cluster.scale_up_domain}-GPU scale-up domain"
        verdict = (f"it buys {gain:.1%}: {inside} is that much slower" if gain >= 0 else
                   f"it costs: {inside} takes {-gain:.1%} less time (the constraints forced the crossing)")
        lines.append(f"{head}; {verdict} ({plan_label(other)}; it trades {compare(both, 0, 1)})")
    return lines


def _expert_line(model, cluster, result: SearchResult, plans, c: Constraints, parameters: Parameters) -> list[str]:
    """For an MoE model whose winner uses no expert parallelism: what the best plan with ep >= 2 trades."""
    if model.moe is None or plans[0].ep > 1 or c.ep is not None:
        return []
    try:
        alt = search(model, cluster, result.space.num_gpus, result.space.global_batch_size, result.space.seq_length,
                     constraints=replace(c, min_ep=2), objective=result.objective, top=1, parameters=parameters)
    except PlanError:
        return []
    if not len(alt.plans["tp"]):
        return ["EP is not used: no plan with expert parallelism fits"]
    other = alt.batch().plan(0)
    both = _estimate(model, cluster, PlanBatch.from_plans([plans[0], other]), parameters)
    tier = TIER_ORDER[int(both.axis_tier["ep"][1])]
    loss = float(both.step_time_s[1]) / float(both.step_time_s[0]) - 1
    return [f"EP is not used: the best plan with expert parallelism ({plan_label(other)}, its EP group on {tier}) "
            f"is {loss:.1%} slower; it trades {compare(both, 0, 1)}"]


def _balance_line(model, cluster, plans, parameters: Parameters) -> list[str]:
    """For an MoE winner with ``ep > 1`` and the router's own load: what its expert balance costs, and what
    auxiliary-loss-free balancing (DeepSeek-V3 arXiv:2412.19437 sec. 2.1.2; Megatron-Core
    ``--moe-router-enable-expert-bias``) would give the same plan (:func:`tierwise.parallel.eplb.
    expert_load_imbalance`); for a router already balanced that way, its figure."""
    p = plans[0]
    if model.moe is None or p.ep <= 1 or p.moe_force_balance:
        return []
    batch = PlanBatch.from_plans([p])
    cparams = {**compute_params(parameters), **cluster.compute}
    tokens = np.array([p.micro_batch_size * p.seq_length / p.cp], dtype=float)
    load = float(moe_imbalance(model, batch, cparams, tokens)[0])
    if model.moe.balance == "aux-free":
        return [f"expert balance: auxiliary-loss-free router, the busiest of {p.ep} EP ranks gets {load:.2f}x the "
                "mean tokens (sampling only)"]
    free = replace(model, moe=replace(model.moe, balance="aux-free"))
    both = [_estimate(m, cluster, batch, parameters) for m in (model, free)]
    gain = 1.0 - float(both[1].step_time_s[0]) / float(both[0].step_time_s[0])
    load_free = float(moe_imbalance(free, batch, cparams, tokens)[0])
    return [f"expert balance: the auxiliary-loss router puts {load:.2f}x the mean tokens on the busiest of {p.ep} EP "
            f"ranks; auxiliary-loss-free balancing would bring it to {load_free:.2f}x and the step {gain:.1%} lower "
            "(a change to how the model is trained; its effect on quality is not scored)"]


def _nothing_fits(model, cluster, result: SearchResult, c: Constraints, parameters: Parameters) -> str:
    acc = cluster.accelerator
    cap = acc.hbm_capacity_bytes / 2**30
    name = model.display_name or model.name
    head = f"no plan of {name} fits {result.space.num_gpus} GPUs of {cap:.0f} GiB"
    if len(result.infeasible.get("tp", [])):
        head += f" (the lightest needs {float(result.infeasible['_memory'][0]):.0%} of the memory)"
    fit = min_gpus_to_fit(model, cluster, result.space.num_gpus, result.space.global_batch_size,
                          result.space.seq_length, c, parameters=parameters)
    if fit is None:
        return head + "; none fits up to 2,097,152 GPUs either"
    p = fit.plan
    sharding = f"ZeRO-{p.zero_stage}" if p.dp * p.cp > 1 else "no data parallelism"
    memory = (f"{p.recompute} recompute" if not p.activation_offload_layers else
              f"no recompute and {p.activation_offload_layers} layers' activations offloaded to the host")
    return (f"{head}; {name} needs at least {fit.num_gpus} GPUs of {cap:.0f} GiB ({acc.display_name}) with "
            f"{sharding} and {memory} (e.g. {plan_label(p)}, {fit.memory_fraction:.0%} of memory)")


def answer_plans(model, cluster, num_gpus: int, global_batch_size: int, seq_length: int, *,
                 constraints: Constraints | None = None, objective: str = "step_time", top: int = 10,
                 show_infeasible: bool = False, parameters: Parameters | None = None) -> PlanAnswer:
    """The planner's answer: ranked plans best first, the explanation, and the search's counts (priced under
    ``parameters``; None, this being a command's entry point: :func:`load_parameters`)."""
    c = constraints or Constraints()
    parameters = parameters if parameters is not None else load_parameters()
    result = search(model, cluster, num_gpus, global_batch_size, seq_length, constraints=c, objective=objective,
                    top=top, parameters=parameters)
    n = len(result.plans["tp"])
    ranked: list[RankedPlan] = []
    if n:
        batch = result.batch()
        plans = [batch.plan(i) for i in range(n)]
        if result.space.framework:
            plans = [p.replace(framework=result.space.framework) for p in plans]
        est = _estimate(model, cluster, batch, parameters)
        ranked = [ranked_plan(model, cluster, num_gpus, plans[i], est, i) for i in range(n)]
        why = memory_choice(model, cluster, plans[0], result.space, parameters=parameters)
        ranked[0] = replace(ranked[0], recompute_why=why)
        lines = explain_lines(model, cluster, est, plans, memory=why,
                              neighbours=_neighbours(model, cluster, result, plans[0], c, parameters),
                              crossing=_crossing_lines(model, cluster, result, est, plans, c, parameters)
                              + _expert_line(model, cluster, result, plans, c, parameters)
                              + _balance_line(model, cluster, plans, parameters))
    else:
        lines = [_nothing_fits(model, cluster, result, c, parameters)]
    return PlanAnswer(
        model=model.name, cluster=cluster.name, num_gpus=num_gpus, global_batch_size=global_batch_size,
        seq_length=seq_length, objective=objective, plans=tuple(ranked), explanation=tuple(lines),
        num_evaluated=result.num_evaluated, num_feasible=result.num_feasible, space_size=result.space_size,
        notes=tuple(n for n in (result.space.precision_note, *result.notes) if n),
        framework=result.space.framework or None, assumed=tuple(result.space.assumed),
        infeasible=_infeasible(model, cluster, result, parameters) if show_infeasible else None)


def plan_document(model, cluster, num_gpus: int, global_batch_size: int, seq_length: int, **kw) -> dict[str, Any]:
    """The ``plan --json`` document (:func:`tierwise.documents.training.plan_document` of :func:`answer_plans`;
    the same keywords)."""
    return _plan_doc(answer_plans(model, cluster, num_gpus, global_batch_size, seq_length, **kw))


def _infeasible(model, cluster, result: SearchResult, parameters: Parameters) -> tuple[NearMiss, ...]:
    """The nearest misses: per structure that fits with no switches, its lightest plan and memory."""
    miss = result.infeasible
    if not len(miss.get("tp", [])):
        return ()
    batch = to_batch(miss, result.space.global_batch_size, result.space.seq_length)
    est = _estimate(model, cluster, batch, parameters)
    plans = [batch.plan(i) for i in range(len(batch))]
    return tuple(NearMiss(plan=p, label=plan_label(p), memory_per_gpu_bytes=float(est.memory["per_gpu_bytes"][i]),
                          capacity_bytes=float(est.memory["capacity_bytes"][i])) for i, p in enumerate(plans))


def parse_gpu_range(text: str) -> list[int]:
    """``"8:16384"`` -> 8, 16, ..., 16384 (doubling); ``"64"`` -> [64]; ``"8,24,72"`` -> that list.

    Counts are 1..2^20 (:data:`~tierwise.limits.MAX_GPUS`) and a list holds at most
    :data:`MAX_SCALE_POINTS`: each point is a full plan search.
    """
    text = str(text).strip()
    try:
        if ":" in text:
            lo, hi = (int(x) for x in text.split(":", 1))
        else:
            counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise PlanError(f"--gpus {text!r}; give a count (64), a doubling range (8:16384) or a list (8,24,72) of "
                        "positive integers") from None
    if ":" in text:
        counts = [lo, hi]
    bad = next((x for x in counts if not 1 <= x <= MAX_GPUS), None)
    if bad is not None:
        raise PlanError(f"--gpus {text!r}: the count {bad} is out of range; use GPU counts 1 <= N <= {MAX_GPUS:,}")
    if ":" in text:
        if hi < lo:
            raise PlanError(f"--gpus {text!r}: the range runs backwards; write it as {hi}:{lo}")
        counts = []
        while lo <= hi:
            counts.append(lo)
            lo *= 2
    if len(counts) > MAX_SCALE_POINTS:
        raise PlanError(f"--gpus {text!r} lists {len(counts)} GPU counts; give at most {MAX_SCALE_POINTS}")
    return counts


MAX_SCALE_POINTS = 64
"""GPU counts ``tierwise scale`` plans at most (a doubling range 1:2^20 has 21)."""


def answer_scale(model, cluster, counts: list[int], global_batch_size: int, seq_length: int, *,
                 constraints: Constraints | None = None, objective: str = "step_time",
                 plan_fn=None, parameters: Parameters | None = None) -> ScaleAnswer:
    """Best plan per GPU count (fixed global batch: strong scaling) and the efficiency against linear.

    ``plan_fn`` answers one count (default :func:`answer_plans`; ``tierwise scale`` passes
    :func:`tierwise.planner.gpus.answer_any_gpus`, which leaves GPUs idle where no layout uses them all, and the
    point then carries its GPU use).

    ``efficiency_vs_linear`` = tokens/s per GPU against the smallest count that has a plan; the knee is the
    first doubling that buys less than 1.5x the tokens/s (half of its GPUs' linear share is lost), and its
    reason is the step component whose share of the step grew most from the previous point. ``parameters``:
    the model's parameters every count is priced under (None, this being ``scale``'s entry point:
    :func:`load_parameters`).
    """
    parameters = parameters if parameters is not None else load_parameters()
    if objective not in OBJECTIVES:  # checked once: a bad argument is an error, not a "-" at every count
        raise PlanError(f"--objective {short_repr(objective, 40)} is unknown; choose one of {', '.join(OBJECTIVES)}")
    check_constraints(model, cluster, constraints or Constraints())
    points: list[ScalePoint] = []
    precision, note = None, []
    for n in counts:
        if precision is not None:
            constraints = replace(constraints or Constraints(), precision=(precision,))
        try:
            answer = (plan_fn or answer_plans)(model, cluster, n, global_batch_size, seq_length,
                                               constraints=constraints, objective=objective, top=1,
                                               parameters=parameters)
        except PlanError as exc:
            points.append(ScalePoint(num_gpus=n, best=None, reason=str(exc)))
            continue
        if not answer.plans:
            points.append(ScalePoint(num_gpus=n, best=None, reason="\n".join(answer.explanation)))
            continue
        best = answer.plans[0]
        if precision is None:  # the curve keeps the first point's precision: tokens/s compare like with like
            precision, note = best.plan.precision, _one_precision(constraints, best.plan.precision, n)
        points.append(ScalePoint(num_gpus=n, best=best, gpus=answer.gpus))
    points = _fill_linear(points)
    knee, lines = _knee(points)
    return ScaleAnswer(model=model.name, cluster=cluster.name, global_batch_size=global_batch_size,
                       seq_length=seq_length, objective=objective, precision=precision, points=tuple(points),
                       knee_num_gpus=knee, explanation=(*note, *lines))


def scale_document(model, cluster, counts: list[int], global_batch_size: int, seq_length: int,
                   **kw) -> dict[str, Any]:
    """The ``scale --json`` document (:func:`tierwise.documents.training.scale_document` of
    :func:`answer_scale`; the same keywords)."""
    return _scale_doc(answer_scale(model, cluster, counts, global_batch_size, seq_length, **kw))


def _one_precision(constraints: Constraints | None, chosen: str, n: int) -> list[str]:
    """The line saying which precision a curve searched over several keeps (``efficiency_vs_linear`` of an fp8
    point against a bf16 one would read the precision's peak as scaling)."""
    asked = (constraints or Constraints()).precision or ()
    if len(asked) < 2:
        return []
    others = ", ".join(p for p in asked if p != chosen)
    return [f"one precision per curve: {chosen} (the best at {n} GPUs) at every count; rerun with --precision "
            f"{others} for the {others} curve"]


def _shares(best: RankedPlan) -> dict[str, float]:
    e = best.estimate
    bd = e["breakdown"]
    step = e["step_time_s"]
    out = {"recompute": bd["recompute_s"] / step, "bubble": bd["bubble_s"] / step,
           "optimizer": bd["optimizer_s"] / step, "ZeRO-3 copies": bd["shard_copy_s"] / step}
    for axis, row in bd["per_axis"].items():
        out[f"exposed {AXIS_LABEL[axis]}"] = row["exposed_s"] / step
    return out


def _fill_linear(points: list[ScalePoint]) -> list[ScalePoint]:
    ref = next((p for p in points if p.best is not None and p.best.tokens_per_s), None)
    if ref is None:
        return points
    per_gpu = ref.best.tokens_per_s / ref.num_gpus
    return [replace(p, efficiency_vs_linear=p.best.tokens_per_s / p.num_gpus / per_gpu)
            if p.best is not None and p.best.tokens_per_s else p for p in points]


def _knee(points: list[ScalePoint]) -> tuple[int | None, list[str]]:
    lines: list[str] = []
    knee, verdict = None, "every doubling kept more than half of its GPUs' linear share"
    prev = None
    for p in points:
        if p.best is None or not p.best.tokens_per_s:
            lines.append(f"{p.num_gpus:>6} GPUs: no plan ({p.reason})")
            continue
        share, tps = _shares(p.best), p.best.tokens_per_s
        lines.append(f"{p.num_gpus:>6} GPUs: {tps:,.0f} tokens/s, {p.efficiency_vs_linear:.0%} of linear, "
                     f"compute {p.best.estimate['scaling_efficiency']:.0%} of the step ({plan_label(p.best.plan)})")
        if prev is not None and knee is None:
            gain = tps / prev[0].best.tokens_per_s
            ratio = p.num_gpus / prev[0].num_gpus
            if gain < 1 + 0.5 * (ratio - 1):
                grew = max(share, key=lambda k: share[k] - prev[1].get(k, 0.0))
                knee = p.num_gpus
                verdict = (f"adding GPUs stops paying at {knee}: {ratio:g}x the GPUs give {gain:.2f}x the tokens/s; "
                           f"{grew}{_tier_of(p.best, grew)} grew from {prev[1].get(grew, 0):.0%} to "
                           f"{share[grew]:.0%} of the step (the global batch is fixed, so each GPU gets fewer "
                           "tokens and micro-batches)")
        prev = (p, share)
    return knee, [*lines, verdict]


def _tier_of(best: RankedPlan, component: str) -> str:
    """`` on scale_out`` for an exposed-communication component, from the plan's axis tiers."""
    labels = {v: k for k, v in AXIS_LABEL.items()}
    if not component.startswith("exposed "):
        return ""
    return f" (on {best.tiers[labels[component.split()[-1]]]})"
