"""The serving and validation documents: serve, serve-plan, validate and validate --serving.

Shapes are written in the notation of :mod:`tierwise.documents._spec`. Keys other tools read keep their
names (issue 32): ``serve``'s ``output_tokens_per_s``, ``ttft_s``, ``tpot_s`` and ``phases.*``.

:func:`serve_document` turns the typed record of one deployment (:class:`tierwise.serve.result.ServeEstimate`)
into the ``serve`` document, :func:`compare_block` a list of them into ``serve --compare-attention``'s block and
:func:`plan_document` a :class:`tierwise.serve.result.ServePlan` into the ``serve-plan`` document (issue 27:
typed results, finished into JSON here). This layer sits below ``serve`` (it imports nothing of it):
the records are read by their attributes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DOCUMENTS", "serve_document", "compare_block", "plan_document", "plan_row"]

PHASES = {
    "prefill_s": "num", "prefill_compute_s": "num", "prefill_layers_s": "num", "prefill_head_s": "num",
    "prefill_comm_s": "num", "prefill_host_s": "num", "decode_step_s": "num", "decode_memory_s": "num",
    "decode_compute_s": "num", "decode_comm_s": "num", "decode_overhead_s": "num",
}
SLO = {"ttft_s": "num?", "tpot_s": "num?"}
SERVE = {
    "model": "str", "cluster": "str", "decode_cluster": "str?", "mode": "str", "scenario": "str",
    "precision": "str", "kv_precision": "str", "input_len": "int", "output_len": "int", "num_gpus": "int",
    "deployment": {"?tp": "int", "?ep": "int", "?attention_dp": "int", "?instances": "int", "?prefill_gpus": "int",
                   "?prefill_tp": "int", "?prefill_ep": "int", "?decode_gpus": "int", "?decode_tp": "int",
                   "?decode_ep": "int"},
    "ep_tier": "str?", "output_tokens_per_s": "num", "output_tokens_per_s_per_gpu": "num", "ttft_s": "num",
    "tpot_s": "num", "ttft_p99_s": "num?", "tpot_p99_s": "num?", "batch": "num", "kv_bytes_per_token": "num",
    "kv_bytes_per_request": "num", "kv_bytes_per_token_per_gpu": "num", "attention": "str",
    "kv_cache_bytes_per_gpu": "num", "weight_bytes_per_gpu": "num", "redundant_experts": "int",
    "two_batch_overlap": "bool", "max_concurrency": "int", "fits": "bool", "meets_slo": "bool", "slo": SLO,
    "rate": "num?", "prefill_bound": "str", "decode_bound": "str", "kv_transfer_s": "num",
    "kv_transfer_exposed_s": "num", "kv_transfer_tier": "str?", "kv_transfer_streamed": "bool?",
    "kv_bandwidth_needed_per_prefill_node_bytes_per_s": "num", "kv_link_bytes_per_s_per_gpu": "num?",
    "phases": PHASES, "engine": "str", "assumed": "list[str]",
    "?mtp": {"tokens": "int", "modules": "int", "acceptance": "num", "accepted_per_step": "num", "step_s": "num",
             "draft_s": "num", "weight_bytes_per_gpu": "num"},
}

SERVE_PLAN = {
    "model": "str", "cluster": "str", "num_gpus": "int", "scenario": "str", "precision": "str",
    "kv_precision": "str", "input_len": "int", "output_len": "int", "slo": SLO, "?search_s": "num",
    "candidates": "int", "feasible": "int",
    "best": [{
        "mode": "str", "prefill_gpus": "int?", "prefill_tp": "int?", "prefill_ep": "int?", "decode_gpus": "int",
        "decode_tp": "int", "decode_ep": "int", "output_tokens_per_s": "num", "output_tokens_per_s_per_gpu": "num",
        "ttft_s": "num", "tpot_s": "num", "batch": "num", "fits": "bool", "meets_slo": "bool", "num_gpus": "num",
    }],
    "why_ep": "str?", "assumed": "list[str]",
}

ERROR_SUMMARY = "obj"
VALIDATE = {
    "dataset": "str", "parameters": "obj", "compute_fallbacks": "list[obj]",
    "summary": {"rows": "int", "used": "int", "scored": "int", "skipped": "list", "overall": "obj",
                "median_of_source_medians": "num?", "per_source": "obj", "memory_does_not_fit": "list[str]"},
    "rows": [{
        "row_id": "str", "source_id": "str", "model": "str", "hardware": "str", "cluster": "str",
        "num_gpus": "int", "plan": "str", "confidence": "str", "scored": "bool", "metric": "str",
        "skipped": "str?", "?measured_tokens_per_s_per_gpu": "num?", "?predicted_tokens_per_s_per_gpu": "num?",
        "?error_pct": "num?", "?fits": "bool", "?step_time_s": "num?",
    }],
    "worst_rows": "list[obj]",
}

VALIDATE_SERVING = {
    "dataset": "str", "parameters": "obj", "engine": "str",
    "summary": {"small_batch_latency": "obj", "throughput": "obj", "latency": "obj", "per_source": "obj",
                "rows": "int", "used": "int", "skipped": "list"},
    "rows": [{
        "row_id": "str", "source_id": "str", "model": "str", "hardware": "str", "num_gpus": "str",
        "scenario": "str", "metric": "str", "confidence": "str", "skipped": "str?", "scored": "bool",
        "?measured": "num?", "?predicted": "num?", "?error_pct": "num?",
    }],
}

DOCUMENTS = {
    "serve": ("serve", "One serving deployment: throughput, time to first token (TTFT), time per output token "
                       "(TPOT) and the prefill and decode phases.", SERVE),
    "serve-plan": ("serve-plan", "The best serving deployments (colocated or prefill/decode split) for a GPU "
                                 "budget and a latency target.", SERVE_PLAN),
    "validate": ("validate", "Predicted against measured training throughput, per published run.", VALIDATE),
    "validate-serving": ("validate", "validate --serving: predicted against measured serving throughput and "
                                     "latency, per published run.", VALIDATE_SERVING),
}


def serve_document(est: Any) -> dict:
    """The ``serve`` document (:data:`SERVE`) of one :class:`tierwise.serve.result.ServeEstimate`: figures as
    plain floats, ints, bools and strings; ``mtp`` with ``--mtp``, ``prefix_cache`` with a prefix cache."""
    w, dep, r = est.workload, est.deployment, est.results
    disagg = dep.disaggregated
    kvb = w.kv_bytes_per_token
    doc = {
        "model": w.model.name, "cluster": w.cluster.name,
        "decode_cluster": None if w.decode_cluster is None else w.decode_cluster.name,
        "mode": "disaggregated" if disagg else "aggregated",
        "scenario": w.scenario, "precision": w.precision, "kv_precision": w.kv_precision,
        "input_len": w.input_len, "output_len": w.output_len, "num_gpus": int(r.num_gpus),
        "deployment": _deployment(dep), "ep_tier": est.ep_tier,
        "output_tokens_per_s": float(r.output_tokens_per_s),
        "output_tokens_per_s_per_gpu": float(r.output_tokens_per_s_per_gpu),
        "ttft_s": float(r.ttft_s), "tpot_s": float(r.tpot_s),
        "ttft_p99_s": float(r.ttft_p99_s), "tpot_p99_s": float(r.tpot_p99_s), "batch": float(r.batch),
        "kv_bytes_per_token": kvb, "kv_bytes_per_request": kvb * w.input_len,
        "kv_bytes_per_token_per_gpu": est.kv_bytes_per_token_per_gpu, "attention": est.attention,
        "kv_cache_bytes_per_gpu": float(r.kv_cache_bytes_per_gpu), "weight_bytes_per_gpu": est.weight_bytes_per_gpu,
        "redundant_experts": w.params.redundant_experts, "two_batch_overlap": w.params.two_batch_overlap,
        "max_concurrency": int(r.max_concurrency), "fits": bool(r.fits), "meets_slo": bool(r.meets_slo),
        "slo": {"ttft_s": w.ttft_slo_s, "tpot_s": w.tpot_slo_s}, "rate": w.rate,
        "prefill_bound": str(r.prefill_bound), "decode_bound": str(r.decode_bound),
        "kv_transfer_s": float(r.kv_transfer_s), "kv_transfer_exposed_s": float(r.kv_transfer_exposed_s),
        "kv_transfer_tier": None if not disagg else str(r.kv_transfer_tier),
        "kv_transfer_streamed": w.kv_streamed if disagg else None,
        "kv_bandwidth_needed_per_prefill_node_bytes_per_s": float(r.kv_bandwidth_needed_per_prefill_node_bytes_per_s),
        "kv_link_bytes_per_s_per_gpu": float(r.kv_link_bytes_per_s_per_gpu) if disagg else None,
        "phases": _phases(est.prefill, est.decode), "engine": w.params.engine.label, "assumed": list(est.assumed),
    }
    if est.mtp is not None:
        doc["mtp"] = _mtp(est.mtp, est.decode)
    if est.prefix is not None:
        doc["prefix_cache"] = _prefix(est.prefix, est.prefill)
    return doc


def _deployment(dep: Any) -> dict:
    """The ``deployment`` block: degrees per pool (disaggregated), or TP, EP, attention DP and instances."""
    if dep.disaggregated:
        return {"prefill_gpus": dep.prefill_gpus, "prefill_tp": dep.prefill_tp, "prefill_ep": dep.prefill_ep,
                "decode_gpus": dep.decode_gpus, "decode_tp": dep.decode_tp, "decode_ep": dep.decode_ep}
    return {"tp": dep.decode_tp, "ep": dep.decode_ep, "attention_dp": dep.attention_dp, "instances": dep.instances}


def _phases(pf: Any, step: Any) -> dict:
    """The ``phases`` block (:data:`PHASES`) of a :class:`tierwise.serve.records.PrefillCost` and a
    :class:`tierwise.serve.records.DecodeStep`."""
    return {
        "prefill_s": float(pf.total_s), "prefill_compute_s": float(pf.compute_s),
        "prefill_layers_s": float(pf.layers_s), "prefill_head_s": float(pf.head_s),
        "prefill_comm_s": float(pf.comm_s), "prefill_host_s": float(pf.host_s),
        "decode_step_s": float(step.total_s), "decode_memory_s": float(step.memory_s),
        "decode_compute_s": float(step.compute_s), "decode_comm_s": float(step.comm_s),
        "decode_overhead_s": float(step.overhead_s),
    }


def _mtp(m: Any, step: Any) -> dict:
    """The ``mtp`` block of a :class:`tierwise.serve.result.MtpSummary` and the decode step it runs in."""
    return {"tokens": m.tokens, "modules": m.modules, "acceptance": m.acceptance,
            "accepted_per_step": m.accepted_per_step, "step_s": float(step.total_s), "draft_s": float(step.mtp_s),
            "weight_bytes_per_gpu": m.weight_bytes_per_gpu}


def _prefix(p: Any, pf: Any) -> dict:
    """The ``prefix_cache`` block of a :class:`tierwise.serve.result.PrefixSummary` and the prefill it spares."""
    return {"hit_rate": p.hit_rate, "tier": p.tier, "load": p.load,
            "cached_tokens_per_request": p.cached_tokens_per_request,
            "saved_prefill_s": float(pf.saved_s), "load_s": float(pf.load_s),
            "load_exposed_s": float(pf.load_exposed_s), "host_kv_gb_per_gpu": p.host_kv_gb_per_gpu,
            "host_prefix_tokens_per_gpu": p.host_prefix_tokens_per_gpu,
            "hbm_cache_tokens_per_gpu": p.hbm_cache_tokens_per_gpu, "host_capacity_gain": p.host_capacity_gain,
            "offload_bytes_per_s_per_gpu": p.offload_bytes_per_s_per_gpu}


COMPARED = ("kv_bytes_per_token", "kv_bytes_per_request", "kv_bytes_per_token_per_gpu", "kv_cache_bytes_per_gpu",
            "max_concurrency", "batch", "output_tokens_per_s_per_gpu", "tpot_s", "kv_transfer_s", "kv_transfer_tier")
"""The ``serve`` keys ``serve --compare-attention`` sets side by side."""


def compare_block(estimates: list) -> dict:
    """``serve --compare-attention``'s block: one row per :class:`tierwise.serve.result.ServeEstimate` (the same
    deployment with another attention), its model, attention kind, KV heads and the :data:`COMPARED` keys."""
    rows = []
    for est in estimates:
        doc = serve_document(est)
        m = est.workload.model
        rows.append({"model": m.name, "attention": est.attention, "kv_heads": m.num_kv_heads,
                     **{k: doc[k] for k in COMPARED}})
    return {"compare_attention": rows}


def plan_document(plan: Any) -> dict:
    """The ``serve-plan`` document (:data:`SERVE_PLAN`) of a :class:`tierwise.serve.result.ServePlan`: the
    workload, the search's counts, the ranked deployments (:func:`plan_row`), the EP line and, when several
    redundant-expert counts were searched, the EPLB line."""
    w, search = plan.workload, plan.search
    doc = {"model": w.model.name, "cluster": w.cluster.name, "num_gpus": plan.num_gpus, "scenario": w.scenario,
           "precision": w.precision, "kv_precision": w.kv_precision, "input_len": w.input_len,
           "output_len": w.output_len, "slo": {"ttft_s": w.ttft_slo_s, "tpot_s": w.tpot_slo_s},
           "search_s": plan.search_s, "candidates": search.candidates, "feasible": search.feasible,
           "best": [plan_row(c) for c in search.best], "why_ep": search.why_ep}
    if search.why_redundant is not None:
        doc["why_redundant"] = search.why_redundant
    doc["assumed"] = list(plan.assumed)
    return doc


def plan_row(choice: Any) -> dict:
    """One ``serve-plan`` row of a :class:`tierwise.serve.result.PlanChoice`: the degrees, the figures (the
    ``serve`` document's keys), the redundant experts and, for a pair of pools on two clusters, the decode
    pool's cluster and the cost."""
    row = {"mode": "disaggregated" if choice.disaggregated else "aggregated",
           "prefill_gpus": choice.prefill_gpus, "prefill_tp": choice.prefill_tp, "prefill_ep": choice.prefill_ep,
           "decode_gpus": choice.decode_gpus, "decode_tp": choice.decode_tp, "decode_ep": choice.decode_ep,
           "decode_attention_dp": choice.decode_attention_dp, "decode_ep_tier": choice.decode_ep_tier,
           **choice.results.columns(), "redundant_experts": choice.redundant_experts}
    if choice.decode_cluster is not None:
        row.update(decode_cluster=choice.decode_cluster,
                   gpu_usd_per_hour={"prefill": choice.prefill_usd_per_hour, "decode": choice.decode_usd_per_hour},
                   usd_per_million_output_tokens=choice.usd_per_million_output_tokens)
    return row
