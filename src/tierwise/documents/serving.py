"""The serving and validation documents: serve, serve-plan, validate and validate --serving.

Shapes are written in the notation of :mod:`tierwise.documents._spec`. Keys other tools read keep their
names (issue 32): ``serve``'s ``output_tokens_per_s``, ``ttft_s``, ``tpot_s`` and ``phases.*``.
"""

from __future__ import annotations

__all__ = ["DOCUMENTS"]

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
