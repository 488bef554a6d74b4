"""The training documents: estimate, plan, scale, bandwidth, goodput, design (and its two sweeps), trend.

Shapes are written in the notation of :mod:`tierwise.documents._spec`. Keys other tools read keep their
names (issue 32): ``estimate``'s ``tokens_per_s_per_gpu``, ``memory.fits`` and ``breakdown.*`` in each
result; ``goodput``'s ``mtti_s``, ``ettr`` and ``ettr_simulated.mean``.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

__all__ = ["DOCUMENTS", "goodput_document", "with_goodput_ranking", "with_goodput_scaling", "plan_document",
           "scale_document", "plan_entry", "gpus_document"]

BREAKDOWN = {
    "compute_s": "num", "recompute_s": "num", "bubble_s": "num", "exposed_comm_s": "num", "optimizer_s": "num",
    "shard_copy_s": "num", "forward_layers_s": "num", "per_tier": "obj", "per_axis": "obj",
    "?offload_exposed_s": "num",
}
MEMORY = {
    "per_gpu_bytes": "num", "capacity_bytes": "num", "fits": "bool", "weights_bytes": "num",
    "gradients_bytes": "num", "optimizer_bytes": "num", "activations_bytes": "num", "overhead_bytes": "num",
    "?host_bytes": "num", "?host_capacity_bytes": "num",
}
ESTIMATE_RESULT = {
    "file": "str", "model": "str", "model_summary": "obj", "cluster": "str", "num_gpus": "int", "plan": "obj",
    "step_time_s": "num", "tokens_per_s": "num", "tokens_per_s_per_gpu": "num", "model_tflops_per_gpu": "num",
    "hardware_tflops_per_gpu": "num", "mfu": "num", "hfu": "num", "flops_note": "str",
    "interference_note": "str", "scaling_efficiency": "num", "num_microbatches": "num",
    "assumed": "list[str]", "memory": MEMORY, "breakdown": BREAKDOWN, "tiers": "obj", "warnings": "list",
    "?economics": "obj", "?stragglers": "obj",
}
ESTIMATE_ERROR = {"file": "str", "error": "str"}
ESTIMATE = {"results": [("anyof", ESTIMATE_RESULT, ESTIMATE_ERROR)]}

GPUS = {"asked": "int", "used": "int", "idle": "int", "unit": "str", "units_used": "int",
        "gpus_per_unit": "int", "summary": "str"}
PLAN = {
    "model": "str", "cluster": "str", "num_gpus": "int", "global_batch_size": "int", "seq_length": "int",
    "objective": "str",
    "plans": [{
        "tp": "int", "pp": "int", "dp": "int", "cp": "int", "ep": "int", "vpp": "int", "micro_batch_size": "int",
        "etp": "int", "sequence_parallel": "bool", "recompute": "str", "zero_stage": "int", "precision": "str",
        "order": "str", "tiers": "obj", "estimate": "obj", "?usd_per_million_tokens": "num?", "?goodput": "obj",
    }],
    "explanation": "str", "num_evaluated": "int", "num_feasible": "int", "space_size": "int", "notes": "list",
    "gpus": GPUS, "?economics": "obj", "?fabric": "obj",
    "?goodput": {"ranked_by": "str", "mtti_s": "num", "interruptions_per_day": "num", "assumed": "list[str]"},
}

SCALE = {
    "model": "str", "cluster": "str", "global_batch_size": "int", "seq_length": "int", "objective": "str",
    "points": [{
        "num_gpus": "int", "plan": "obj?", "tokens_per_s": "num?", "scaling_efficiency": "num?",
        "efficiency_vs_linear": "num?", "?gpus": "obj", "?goodput": "obj",
    }],
    "knee_num_gpus": "int?", "explanation": "str",
    "?goodput_knee_num_gpus": "int?", "?goodput_explanation": "str",
}

BANDWIDTH = {
    "model": "str", "cluster": "str", "num_gpus": "int", "plan": "obj", "fits": "bool", "step_time_s": "num",
    "compute_s": "num", "exposed_comm_s": "num", "tiers": "obj",
    "axes": [{
        "axis": "str", "degree": "int", "tier": "str", "tier_gbytes_per_s_per_gpu": "num",
        "bytes_per_gpu_per_step": "num", "exposed_s": "num", "share_of_step": "num",
        "floor_share_at_unlimited_bandwidth": "num", "bandwidth": "obj", "latency": "obj",
    }],
    "hidden_share": "num", "estimator_calls": "int", "notes": "list[str]", "plan_source": "str", "?trend": "obj",
}

GOODPUT = {
    "model": "str", "cluster": "str", "num_gpus": "int", "plan": "obj", "plan_source": "str",
    "step_time_s": "num", "tokens_per_s": "num", "mtti_s": "num", "interruptions_per_day": "num",
    "by_component": [{"component": "str", "count": "int", "rate_per_day": "num", "share": "num"}],
    "counted": "list[str]", "checkpoint_bytes_per_gpu": "num", "checkpoint_state_bytes": "num",
    "storage_bytes_per_s": "num", "checkpoint_write_s": "num", "checkpoint_blocking_s": "num",
    "checkpoint_drain_s": "num", "checkpoint_mode": "str", "restore_s": "num", "checkpoint_interval_s": "num",
    "checkpoint_interval_young_s": "num", "interval_source": "str", "restart_s": "num", "ettr": "num",
    "ettr_first_order": "num", "goodput_tokens_per_s": "num", "fault_domain": "obj",
    "goodput_tokens_per_s_per_provisioned_gpu": "num", "lost_time_per_day": "obj", "days": "num",
    "interruptions_in_days": "num",
    "?ettr_simulated": {"mean": "num", "p5": "num", "p95": "num", "runs": "int", "seed": "int?"},
    "assumed": "list[str]", "explanation": "list[str]", "gpus": "obj", "?economics": "obj",
}

DESIGN = {
    "model": "str", "num_gpus": "int", "global_batch_size": "int", "seq_length": "int", "precision": "str",
    "tokens": "num?", "budget_usd": "num?",
    "designs": [{
        "name": "str", "cluster": "str", "fabric": "str", "topology": "str", "gpus_priced": "int",
        "fits": "bool", "plan": "obj?", "step_time_s": "num?", "tokens_per_s": "num?", "capex_usd": "num?",
        "network_capex_usd": "num?", "network_share_of_capex": "num?", "power_w": "num?",
        "tokens_per_usd": "num?", "tokens_per_joule": "num?", "usd_per_million_tokens": "num?",
        "pareto": "bool", "within_budget": "bool",
    }],
    "pareto_front": "list[str]", "pareto_axes": "list[str]", "fastest_within_budget": "str?",
    "?right_size": "obj", "?restricted_space": "str", "notes": "list[str]", "?seeds_network_budget": "str",
}

DESIGN_DOMAINS = {
    "model": "str", "num_gpus": "int", "accelerator": "str", "optics": "str", "global_batch_size": "int",
    "seq_length": "int", "precision": "str",
    "rows": [{
        "domain": "str", "scale_up_domain": "int", "fabric": "str", "fits": "bool", "plan": "obj?",
        "step_time_s": "num?", "tokens_per_s": "num?", "ettr": "num?", "goodput_tokens_per_s": "num?",
        "capex_usd": "num?", "facility_w": "num?",
    }],
    "knee": "str?", "best_per_joule": "str?", "explanation": "str", "notes": "list[str]", "sources": "obj",
}

DESIGN_POWER = {
    "model": "str", "facility_budget_w": "num", "pue": "num", "it_budget_w": "num", "global_batch_size": "int",
    "seq_length": "int", "precision": "str",
    "rows": [{
        "design": "str", "cluster": "str", "optics": "str", "fabric": "str", "gpus": "int", "facility_w": "num",
        "capex_usd": "num", "fits": "bool", "plan": "obj?", "step_time_s": "num?", "tokens_per_s": "num?",
    }],
    "best": {"design": "str", "optics": "str", "gpus": "int", "tokens_per_s": "num", "step_time_s": "num"},
    "explanation": "str", "optics_sources": "obj", "notes": "list[str]",
}

TREND = {
    "model": "str", "num_gpus": "int", "global_batch_size": "int", "seq_length": "int", "precision": "str",
    "generations": [{
        "cluster": "str", "accelerator": "str", "scale_up_domain": "int", "peak_bf16_tflops": "num",
        "scale_out_gbytes_per_s": "num", "flops_per_scale_out_byte": "num", "fits": "bool", "plan": "obj?",
        "step_time_s": "num?", "compute_s": "num?", "exposed_comm_s": "num?", "comm_share": "num?",
        "tokens_per_s": "num?", "mfu": "num?",
    }],
    "summary": "obj", "notes": "list[str]",
}

DOCUMENTS = {
    # name: (command, what it holds, shape[, the key a list goes under])
    "estimate": ("estimate", "One training step per scenario file: a result (or the file's error) per file, "
                             "in the order given, under results.", ESTIMATE, "results"),
    "plan": ("plan", "The best parallel plans for a model on a cluster, ranked, with the GPU count used and "
                     "the economics of the best.", PLAN),
    "scale": ("scale", "The best plan at each GPU count of a range: throughput and scaling efficiency.", SCALE),
    "bandwidth": ("bandwidth", "The bandwidth each parallel axis needs on its tier: the rate that hides it, "
                               "costs 5% or 20% of the step.", BANDWIDTH),
    "goodput": ("goodput", "Failures, checkpoints and restarts: mean time to interruption, effective training "
                           "time ratio (ETTR) and goodput.", GOODPUT),
    "design": ("design", "Cluster designs compared on one job: plan, throughput, capex, power, tokens per $ "
                         "and per J.", DESIGN),
    "design-domains": ("design", "design --domain-sweep: the scale-up domain size against blast radius.",
                       DESIGN_DOMAINS),
    "design-power": ("design", "design --power: the best cluster a facility power budget powers.", DESIGN_POWER),
    "trend": ("trend", "The same job on each accelerator generation: when it becomes interconnect-bound.", TREND),
}


def goodput_document(g) -> dict[str, Any]:
    """The ``goodput --json`` body (:data:`GOODPUT`) of a :class:`tierwise.goodput.results.GoodputEstimate`
    (read by attribute: this layer sits below the model). An infinite MTTI or Young interval (no failures
    counted) is ``null``."""
    fm, ck = g.failure_model, g.checkpoint
    doc: dict[str, Any] = {
        "model": g.model, "cluster": g.cluster, "num_gpus": g.num_gpus,
        "plan": g.plan.as_dict(), "plan_source": g.plan_source,
        "step_time_s": g.step_time_s, "tokens_per_s": g.tokens_per_s,
        "mtti_s": fm.mtti_s if math.isfinite(fm.mtti_s) else None,
        "interruptions_per_day": fm.interruptions_per_day,
        "by_component": [{"component": r.component, "count": r.count, "rate_per_day": r.rate_per_day,
                          "share": r.share, "per": r.per, "kind": r.kind,
                          "rate_per_part_per_day": r.rate_per_part_per_day, "source": r.source}
                         for r in fm.components],
        "counted": fm.counted,
        "checkpoint_bytes_per_gpu": ck.bytes_per_gpu,
        "checkpoint_state_bytes": ck.state_bytes,
        "storage_bytes_per_s": ck.storage_bytes_per_s,
        "checkpoint_write_s": ck.write_s,
        "checkpoint_blocking_s": ck.blocking_s,
        "checkpoint_drain_s": ck.drain_s,
        "checkpoint_mode": g.checkpoint_mode,
        "restore_s": ck.restore_s,
        "checkpoint_interval_s": g.checkpoint_interval_s,
        "checkpoint_interval_young_s": g.young_interval_s if math.isfinite(g.young_interval_s) else None,
        "interval_source": g.interval_source,
        "restart_s": ck.restart_s,
        "ettr": g.ettr, "ettr_first_order": g.ettr_first_order,
        "goodput_tokens_per_s": g.goodput_tokens_per_s,
        "fault_domain": g.fault_domain,
        "goodput_tokens_per_s_per_provisioned_gpu": g.goodput_tokens_per_s_per_provisioned_gpu,
        "lost_time_per_day": asdict(g.lost_time_per_day),
        "days": g.days,
        "interruptions_in_days": fm.interruptions_per_day * g.days,
    }
    if g.time_to_train is not None:
        doc["time_to_train"] = g.time_to_train
    if g.ettr_simulated is not None:
        doc["ettr_simulated"] = asdict(g.ettr_simulated)
    doc["assumed"] = list(g.assumed)
    doc["explanation"] = list(g.explanation)
    return doc


PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch_size", "etp", "sequence_parallel", "recompute",
             "zero_stage", "zero3_gather", "precision", "order", "tp_comm_overlap", "ep_comm_overlap",
             "fused_elementwise", "fused_cross_entropy", "dp_shard", "first_stage_layers", "last_stage_layers")
"""The plan's fields each ``plans[...]`` entry of ``plan --json`` lists (before its tiers and estimate)."""


def plan_entry(ranked) -> dict[str, Any]:
    """One ``plans[...]`` entry of ``plan --json`` from a :class:`tierwise.planner.results.RankedPlan`: the
    degrees and switches, the tier of each axis, the full estimate (and the winner's ``recompute_why``)."""
    plan = ranked.plan
    entry: dict[str, Any] = {k: getattr(plan, k) for k in PLAN_KEYS}
    if plan.activation_offload_layers:  # only where the plan offloads (Plan.as_dict's convention)
        entry["activation_offload_layers"] = plan.activation_offload_layers
    entry["tiers"] = dict(ranked.tiers)
    entry["estimate"] = ranked.estimate
    if ranked.recompute_why is not None:
        entry["recompute_why"] = ranked.recompute_why
    return entry


def gpus_document(g) -> dict[str, Any]:
    """The ``gpus`` block (:data:`GPUS`) of a :class:`tierwise.planner.results.GpuUse`."""
    out = {"asked": g.asked, "used": g.used, "idle": g.idle, "unit": g.unit, "units_used": g.units_used,
           "gpus_per_unit": g.gpus_per_unit, "summary": g.summary}
    if g.note is not None:
        out["note"] = g.note
    return out


def _near_miss(m) -> dict[str, Any]:
    p = m.plan
    return {"plan": m.label, "tp": p.tp, "pp": p.pp, "dp": p.dp, "cp": p.cp, "ep": p.ep,
            "micro_batch_size": p.micro_batch_size, "recompute": p.recompute, "zero_stage": p.zero_stage,
            "memory_per_gpu_bytes": m.memory_per_gpu_bytes, "capacity_bytes": m.capacity_bytes}


def plan_document(answer) -> dict[str, Any]:
    """The ``plan --json`` body (:data:`PLAN`) of a :class:`tierwise.planner.results.PlanAnswer`."""
    a = answer
    doc: dict[str, Any] = {"model": a.model, "cluster": a.cluster, "num_gpus": a.num_gpus,
                           "global_batch_size": a.global_batch_size, "seq_length": a.seq_length,
                           "objective": a.objective}
    if a.framework:
        doc.update({"framework": a.framework, "assumed": list(a.assumed)})
    doc.update({"plans": [plan_entry(r) for r in a.plans], "explanation": "\n".join(a.explanation),
                "num_evaluated": a.num_evaluated, "num_feasible": a.num_feasible, "space_size": a.space_size,
                "notes": list(a.notes)})
    if a.infeasible is not None:
        doc["infeasible"] = [_near_miss(m) for m in a.infeasible]
    if a.gpus is not None:
        doc["gpus"] = gpus_document(a.gpus)
    return doc


def _scale_point(p) -> dict[str, Any]:
    if p.best is None:
        return {"num_gpus": p.num_gpus, "plan": None, "tokens_per_s": None, "scaling_efficiency": None,
                "efficiency_vs_linear": None, "reason": p.reason}
    e = p.best.estimate
    out = {"num_gpus": p.num_gpus, "plan": plan_entry(p.best), "tokens_per_s": e["tokens_per_s"],
           "scaling_efficiency": e["scaling_efficiency"], "efficiency_vs_linear": p.efficiency_vs_linear}
    if p.gpus is not None:
        out["gpus"] = gpus_document(p.gpus)
    return out


def scale_document(answer) -> dict[str, Any]:
    """The ``scale --json`` body (:data:`SCALE`) of a :class:`tierwise.planner.results.ScaleAnswer`."""
    a = answer
    return {"model": a.model, "cluster": a.cluster, "global_batch_size": a.global_batch_size,
            "seq_length": a.seq_length, "objective": a.objective, "precision": a.precision,
            "points": [_scale_point(p) for p in a.points], "knee_num_gpus": a.knee_num_gpus,
            "explanation": "\n".join(a.explanation)}


def with_goodput_ranking(doc: dict, ranking, top: int) -> dict:
    """``plan --json`` with a :class:`tierwise.goodput.results.GoodputRanking` (``None``: no plans, ``doc`` as it
    is): each plan's ``goodput`` block, the plans re-ordered by adjusted throughput (the first ``top``), and the
    top-level ``goodput`` block (:data:`PLAN`)."""
    if ranking is None:
        return doc
    for e, r in zip(doc["plans"], ranking.plans, strict=True):
        e["goodput"] = asdict(r)
    doc["plans"] = [doc["plans"][j] for j in ranking.order[:top]]
    doc["goodput"] = {"ranked_by": "tokens/s x ETTR x N / (N + spare GPUs at p99), over the planner's "
                                   f"{len(ranking.plans)} best plans by step time",
                      "mtti_s": ranking.mtti_s, "interruptions_per_day": ranking.interruptions_per_day,
                      "assumed": list(ranking.assumed)}
    return doc


def with_goodput_scaling(doc: dict, scaling) -> dict:
    """``scale --json`` with a :class:`tierwise.goodput.results.GoodputScaling`: each point's ``goodput`` block,
    the goodput knee and its sentence (:data:`SCALE`)."""
    for k, g in scaling.points.items():
        doc["points"][k]["goodput"] = asdict(g)
    knee = scaling.knee_num_gpus
    doc["goodput_knee_num_gpus"] = knee
    doc["goodput_explanation"] = (f"with failures counted, adding GPUs stops paying at {knee} GPUs (goodput per "
                                  "doubling < 1.5x)" if knee else
                                  "with failures counted, every doubling still buys at least 1.5x the goodput")
    return doc
