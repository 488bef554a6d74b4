"""Explain a ranked plan in terms of the tiers: where each axis's traffic lands, what is hidden, what limits it.

Everything here reads the estimator's own arrays (:class:`~tierwise.estimate.step.StepEstimates`): the
tier of each axis's group (``axis_tier``), its bytes, time and exposed time per step, and the step's
decomposition, which the estimator makes exact::

    step = compute + recompute + bubble + sum over axes of exposed communication + optimizer

(``estimate/step.py``: ``m t_mb = compute + recompute + m x exposed per micro-batch`` and ``exposed_comm_s``
adds the exposed DP). The tier rule is the yardstick: high-frequency traffic (TP, CP, EP every layer) on
the scale-up tier, the once-per-step DP reduction on scale-out, hidden behind the backward pass. Hidden shares
are the model's (they rest on the fitted ``overlap_interference``), and the explanation says so; the DP group
is counted as the estimate's table counts it (dp x cp ranks, :func:`~tierwise.estimate.scenario.axis_group_ranks`).
"""

from __future__ import annotations

from typing import Any

from tierwise.documents.training import plan_entry as document_entry
from tierwise.estimate.scenario import (
    Scenario,
    axis_group_label,
    axis_group_ranks,
    interference_note,
    result_dict,
)
from tierwise.hierarchy import TIER_ORDER
from tierwise.planner.results import RankedPlan
from tierwise.specs.plan import ORDERS

__all__ = ["plan_label", "components", "plan_entry", "ranked_plan", "explain_lines", "compare", "crossing_head", "AXIS_LABEL"]

AXIS_LABEL = {"tp": "TP", "cp": "CP", "ep": "EP", "pp": "PP", "dp": "DP"}
_AXES = ("tp", "cp", "ep", "pp", "dp")
_HIGH_FREQUENCY = ("tp", "cp", "ep")


def plan_label(plan) -> str:
    """Short one-line description of a :class:`~tierwise.specs.plan.Plan`."""
    parts = [f"tp {plan.tp}", f"pp {plan.pp}", f"dp {plan.dp}"]
    parts += [f"{k} {getattr(plan, k)}" for k in ("cp", "ep") if getattr(plan, k) > 1]
    if plan.ep > 1 and plan.etp != plan.tp:
        parts.append(f"etp {plan.etp}")
    if plan.vpp > 1:
        parts.append(f"vpp {plan.vpp}")
    parts.append(f"mbs {plan.micro_batch_size}")
    offload = getattr(plan, "activation_offload_layers", 0)
    extra = [f"{plan.recompute} recompute" if plan.recompute != "none" else
             (f"no recompute, {offload} layers offloaded" if offload else "no recompute"),
             f"ZeRO-{plan.zero_stage}" + (f" (HSDP shard {plan.dp_shard})" if plan.dp_shard < plan.dp else "")
             + (f" {plan.zero3_gather}" if plan.zero_stage == 3 and plan.zero3_gather != "flat" else ""),
             plan.precision]
    if plan.sequence_parallel and plan.tp > 1:
        extra.append("SP")
    if plan.tp_comm_overlap and plan.tp > 1:
        extra.append("TP overlap")
    if plan.ep_comm_overlap and plan.ep > 1:
        extra.append("EP overlap")
    if str(plan.schedule).startswith("dualpipe"):
        extra.append(plan.schedule)
    if not plan.fused_elementwise:
        extra.append("eager")
    if plan.fused_cross_entropy:
        extra.append("fused CE")
    if plan.order != ORDERS[0]:
        extra.append(f"order {plan.order}")
    return " x ".join(parts[:3]) + (", " + ", ".join(parts[3:]) if parts[3:] else "") + "; " + ", ".join(extra)


def components(est, i: int) -> dict[str, float]:
    """The step of plan ``i`` split into parts that add up to ``step_time_s``."""
    out = {"compute": float(est.compute_s[i]), "recompute": float(est.recompute_s[i]),
           "bubble": float(est.bubble_s[i])}
    for axis in _AXES:
        out[f"exposed {AXIS_LABEL[axis]}"] = float(est.axis_exposed_s[axis][i])
    out["optimizer"] = float(est.optimizer_s[i])
    out["ZeRO-3 copies"] = float(est.shard_copy_s[i])
    if est.offload_exposed_s is not None:  # every plan of one estimate has the same keys (compare)
        out["exposed activation offload"] = float(est.offload_exposed_s[i])
    return out


def ranked_plan(model, cluster, num_gpus: int, plan, est, i: int) -> RankedPlan:
    """Plan ``i`` of an estimate as a :class:`~tierwise.planner.results.RankedPlan`: the plan, the tier of each
    axis, the full estimate block."""
    tiers = {axis: TIER_ORDER[int(est.axis_tier[axis][i])] for axis in _AXES}
    return RankedPlan(plan=plan, tiers=tiers, estimate=result_dict(
        est, i, plan, Scenario(model=model, cluster=cluster, num_gpus=num_gpus, plan=plan)))


def plan_entry(model, cluster, num_gpus: int, plan, est, i: int) -> dict[str, Any]:
    """One ``plans[...]`` entry of ``plan --json`` (:func:`tierwise.documents.training.plan_entry` of
    :func:`ranked_plan`): the degrees, the tier of each axis, the full estimate."""
    return document_entry(ranked_plan(model, cluster, num_gpus, plan, est, i))


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f} GB" if x >= 1e8 else f"{x / 1e6:,.1f} MB"


def _axis_line(est, i: int, axis: str, plan) -> str | None:

    size = axis_group_ranks(plan)[axis]
    group = axis_group_label(axis, plan)
    counted = f"{size} ranks" if group == axis else f"{group} = {plan.dp} x {plan.cp} = {size} ranks"
    total, exposed = float(est.axis_time_s[axis][i]), float(est.axis_exposed_s[axis][i])
    if float(est.axis_bytes[axis][i]) <= 0 or size <= 1:
        return None
    tier = TIER_ORDER[int(est.axis_tier[axis][i])]
    hidden = 1 - exposed / total if total > 0 else 1.0
    dual = str(plan.schedule).startswith("dualpipe")
    how = {"tp": "behind the layer's GEMMs" if plan.tp_comm_overlap else "(not overlapped)",
           "cp": "behind attention",
           "ep": ("behind the paired chunk (DualPipe)" if dual else
                  "behind the adjacent micro-batch (combined 1F1B)" if plan.ep_comm_overlap
                  else "(the all-to-all is not overlapped)"),
           "pp": "behind the paired chunk (DualPipe)" if dual else "(send/recv on the critical path)",
           "dp": "behind the backward pass" if plan.zero_stage < 3 else "by prefetching a layer ahead"}[axis]
    return (f"{AXIS_LABEL[axis]} ({counted}) on {tier}: {_gb(float(est.axis_bytes[axis][i]))} per GPU per step, "
            f"{total:.3g} s, modelled {hidden:.0%} hidden {how}")


def crossing_head(axis: str, plan) -> str:
    """The heading of the line that says what an axis crossing scale-out buys (``CP 4 crosses scale_out``): the
    tier rule's pointer names it, and :func:`tierwise.planner.answer` writes the line under it."""
    return f"{AXIS_LABEL[axis]} {getattr(plan, axis)} crosses scale_out"


def _tier_rule(est, i: int, plan, crossing_lines: list[str]) -> str:
    crossing = [a for a in _HIGH_FREQUENCY
                if getattr(plan, a) > 1 and TIER_ORDER[int(est.axis_tier[a][i])] == "scale_out"]
    if crossing:
        # a pointer only to a line that is printed below (issue 32: "see what it buys below" led nowhere)
        heads = [crossing_head(a, plan) for a in crossing
                 if any(line.startswith(crossing_head(a, plan)) for line in crossing_lines)]
        see = f"; see {' and '.join(repr(h) for h in heads)} below" if heads else ""
        return (f"tier rule broken: {', '.join(AXIS_LABEL[a] for a in crossing)} traffic (every layer) crosses "
                f"scale_out{see}")
    inside = [AXIS_LABEL[a] for a in _HIGH_FREQUENCY if getattr(plan, a) > 1]
    if not inside:
        return "tier rule: no per-layer collectives (tp, cp, ep are 1); only DP and PP traffic leaves the GPU"
    return f"tier rule kept: per-layer traffic ({', '.join(inside)}) stays inside the scale-up domain"


def _limit(est, i: int) -> str:
    parts = components(est, i)
    step = float(est.step_time_s[i])
    overheads = {k: v for k, v in parts.items() if k != "compute" and v > 0}
    mem = float(est.memory["per_gpu_bytes"][i]) / float(est.memory["capacity_bytes"][i])
    eff = float(est.scaling_efficiency[i])
    name, value = max(overheads.items(), key=lambda kv: kv[1]) if overheads else ("nothing", 0.0)
    if value < 0.01 * step:
        head = f"almost nothing but compute (largest overhead: {name}, {value / step:.1%} of the step)"
    else:
        head = f"{name} ({value:.3g} s, {value / step:.0%} of the step)"
    return (f"limits: {head}; compute is {eff:.0%} of the step (scaling efficiency = compute / (compute + "
            f"communication and idle)); memory {mem:.0%} of capacity")


def compare(est, a: int, b: int, top: int = 3) -> str:
    """What plan ``b`` trades against plan ``a``: the largest differences of their step components."""
    ca, cb = components(est, a), components(est, b)
    diffs = sorted(((cb[k] - ca[k], k) for k in ca), key=lambda d: -abs(d[0]))
    shown = [f"{k} {d:+.3g} s" for d, k in diffs[:top] if abs(d) > 1e-6]
    return ", ".join(shown) if shown else "nothing measurable (same time)"


def _memory_binding(neighbours: list[tuple[str, float, bool, float]], step: float) -> str | None:
    """From (description, step, fits, memory fraction) of the winner's lighter-on-memory neighbours' undo."""
    faster = [n for n in neighbours if n[1] < step and not n[2]]
    if not faster:
        return None
    desc, t, _, mem = min(faster, key=lambda n: n[1])
    return (f"memory binds: {desc} would be {1 - t / step:.1%} faster but needs {mem:.0%} of the GPU's memory")


def _runner_up(est, plans) -> list[str]:
    """The runner-up and what it trades; plans tying the winner are named, then the first slower one."""
    step = est.step_time_s
    ties = [i for i in range(1, len(plans)) if abs(float(step[i]) / float(step[0]) - 1) <= 1e-9]
    lines = [f"ties with the winner (same step time): {plan_label(plans[i])}" for i in ties[:2]]
    if len(ties) > 2:
        lines.append(f"... and {len(ties) - 2} more tying plans")
    slower = next((i for i in range(1, len(plans)) if i not in ties), None)
    if slower is not None:
        gap = float(step[slower]) / float(step[0]) - 1
        lines.append(f"runner-up: {plan_label(plans[slower])}: {gap:+.2%} step time; it trades "
                     f"{compare(est, 0, slower)}")
    return lines


def explain_lines(model, cluster, est, plans, *, neighbours=None, crossing=None, memory=None) -> list[str]:
    """The explanation of the winner (plan 0) and what the runner-up (plan 1) trades; ``memory`` is the line on
    its recompute / offload (:func:`tierwise.planner.why.memory_choice`), shown when it recomputes or offloads."""
    w = plans[0]
    vs_bf16 = f" ({float(est.mfu_bf16[0]):.1%} against the bf16 peak)" if w.precision != "bf16" else ""
    lines = [f"best: {plan_label(w)}: {float(est.step_time_s[0]):.3g} s per step, "
             f"{float(est.tokens_per_s[0]):,.0f} tokens/s, MFU {float(est.mfu[0]):.1%}{vs_bf16}"]
    hides = False
    for axis in _AXES:
        line = _axis_line(est, 0, axis, w)
        if line:
            lines.append("  " + line)
            hides = hides or float(est.axis_exposed_s[axis][0]) < float(est.axis_time_s[axis][0])
    if hides:

        lines.append("  note: " + interference_note(cluster, est.parameters))
    lines.append(_tier_rule(est, 0, w, crossing or []))
    lines.append(_limit(est, 0))
    if memory and (w.recompute != "none" or w.activation_offload_layers):
        lines.append(memory)
    binding = _memory_binding(neighbours or [], float(est.step_time_s[0]))
    if binding:
        lines.append(binding)
    lines.extend(_runner_up(est, plans))
    lines.extend(crossing or [])
    return lines
