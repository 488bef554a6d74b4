"""Scenario files for ``tierwise estimate``: model + cluster + number of GPUs + plan, and the JSON result.

::

    model: llama3.1-70b          # catalog name | inline mapping | path to a Hugging Face config.json
    cluster: dgx-h100            # catalog name | mapping (``base:`` + overrides) | path to a cluster YAML
    num_gpus: 1024
    plan: {tp: 8, pp: 4, global_batch_size: 1024, seq_length: 8192, recompute: selective}
    framework: megatron          # optional: megatron | nemo | torchtitan | llm-foundry | deepspeed

``framework`` sets that framework's defaults for the switches the plan does not state
(:mod:`tierwise.specs.framework`). A recompute the plan does not state is inferred as the framework's recipes
choose it: the cheapest (none < selective < full) that fits memory (:func:`infer_settings`). A plan that
does not fit memory is still estimated: ``memory.fits`` is false and ``warnings`` says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tierwise.errors import ScenarioError, TierwiseError
from tierwise.estimate.interleave import interleaving_options, interleaving_warning
from tierwise.estimate.step import AXES, TIERS, estimate
from tierwise.files import path_exists, require_document
from tierwise.parallel.ep import check_node_limit
from tierwise.pricing.kernels import resolved_attention_kernel
from tierwise.specs import catalog
from tierwise.specs._mapping import check_keys, get_int, require_mapping
from tierwise.specs.cluster import Cluster, load_cluster
from tierwise.specs.framework import check_framework
from tierwise.specs.model import ModelSpec, load_model
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import RECOMPUTE_COST_ORDER, Plan, PlanBatch, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.units import format_bytes
from tierwise.workload.flops import model_shape

__all__ = ["Scenario", "load_scenario", "scenario_from_mapping", "estimate_scenario", "result_dict", "infer_settings",
           "axis_group_ranks", "axis_group_label", "model_summary", "interference_note"]

_KEYS = ("model", "cluster", "num_gpus", "plan", "name", "framework")


@dataclass(frozen=True)
class Scenario:
    model: ModelSpec
    cluster: Cluster
    num_gpus: int
    plan: Plan
    name: str = ""


def _relative_to(ref: Any, base_dir: Path | None) -> Any:
    """A file path in a scenario is relative to the scenario's folder (when that file exists there)."""
    if base_dir is None or not isinstance(ref, str) or not (ref.endswith((".json", ".yaml", ".yml")) or "/" in ref):
        return ref
    candidate = base_dir / ref
    return str(candidate) if path_exists(candidate) else ref


def scenario_from_mapping(data: Mapping[str, Any], *, origin: str = "scenario", base_dir: Path | None = None,
                          framework: str | None = None, parameters: Parameters | None = None) -> Scenario:
    """A scenario from its mapping; ``framework`` (the CLI's ``--framework``) is used when the file names
    none, and must agree with it when it does. The cluster is loaded under ``parameters`` (None:
    :func:`~tierwise.specs.cluster.load_cluster`'s, the run's)."""
    data = require_mapping(data, origin)
    check_keys(data, _KEYS, origin, required=("model", "cluster", "num_gpus", "plan"))
    model_ref = _relative_to(data["model"], base_dir)
    cluster_ref = _relative_to(data["cluster"], base_dir)
    model = load_model(model_ref)
    cluster = load_cluster(cluster_ref, parameters=parameters)
    num_gpus = get_int(data, "num_gpus", origin)
    if "framework" in data:
        own = check_framework(data["framework"], origin)
        if framework is not None and check_framework(framework, "--framework") != own:
            raise ScenarioError(f"--framework {framework} and framework={own!r} in {origin} disagree; give one")
        framework = own
    elif framework is not None:
        framework = check_framework(framework, "--framework")
    plan = plan_from_mapping(data["plan"], num_gpus=num_gpus, origin=f"{origin}: plan", num_layers=model.num_layers,
                             framework=framework, generation=cluster.accelerator.generation,
                             moe=model.moe is not None)
    validate_plan_batch(model, [plan])
    check_node_limit(model, cluster, PlanBatch.from_plans([plan]))
    return Scenario(model=model, cluster=cluster, num_gpus=num_gpus, plan=plan, name=str(data.get("name", "")))


def load_scenario(path: str | Path, framework: str | None = None, *, parameters: Parameters | None = None) -> Scenario:
    """A scenario file (:func:`scenario_from_mapping`, its cluster loaded under ``parameters``)."""
    p = Path(path)
    data = require_document(catalog.load_yaml_file(p, what="scenario file"), f"scenario file {str(p)!r}",
                            "it needs the keys model, cluster, num_gpus and plan, one key: value per line",
                            error=ScenarioError)
    return scenario_from_mapping(data, origin=f"scenario {str(p)!r}", base_dir=p.parent, framework=framework,
                                 parameters=parameters)


def axis_group_ranks(plan: Any) -> dict[str, int]:
    """Ranks in each axis's communication group, counted as the estimator counts them.

    Gradients are reduced (and ZeRO shards gathered) over every rank holding the same weights: the dp x cp
    ranks, since context parallelism splits the sequence, not the weights (``estimate/step.py``
    ``_data_parallel``: ``dp_group = dp * cp``). ``plan`` is a :class:`Plan` or its ``as_dict()``.
    """
    get = plan.get if isinstance(plan, Mapping) else (lambda k: getattr(plan, k))
    tp, pp, cp, dp, ep = (int(get(k)) for k in ("tp", "pp", "cp", "dp", "ep"))
    return {"tp": tp, "cp": cp, "ep": ep, "pp": pp, "dp": dp * cp}


def axis_group_label(axis: str, plan: Any) -> str:
    """How the axis's group is counted, for labels: ``dp x cp`` for the DP group when cp > 1."""
    cp = int(plan.get("cp") if isinstance(plan, Mapping) else plan.cp)
    return "dp x cp" if axis == "dp" and cp > 1 else axis


def interference_note(cluster: Cluster | None, parameters: Parameters) -> str:
    """What a 'hidden' share rests on: ``overlap_interference``, fitted (``parameters``: catalog/parameters.yaml
    or the run's file) unless the cluster file gives its own."""

    own = dict(cluster.compute) if cluster is not None and cluster.compute else {}
    value = float(own.get("overlap_interference", parameters.compute.get("overlap_interference", 0.0)))
    where = "given by the cluster file" if "overlap_interference" in own else "fitted to published training runs"
    return (f"overlap is modelled, not measured: hidden communication is still charged {value:.0%} of its time, "
            f"the overlap_interference constant {where}")


def model_summary(model: ModelSpec) -> dict[str, Any]:
    """What a model file (catalog entry, YAML or Hugging Face ``config.json``) was parsed into."""

    shape = model_shape(model)
    total = float(shape.total_params)
    moe = model.moe
    active = total
    if moe is not None:
        active = total - shape.num_moe_layers * (moe.num_experts - moe.top_k) * shape.expert_params
    out: dict[str, Any] = {
        "name": model.name,
        "parameters": total,
        "active_parameters": float(active),
        "published_parameters": None if model.params_b is None else float(model.params_b) * 1e9,
        "layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "ffn_hidden_size": model.ffn_hidden_size,
        "attention_heads": model.num_attention_heads,
        "kv_heads": model.num_kv_heads,
        "head_dim": model.head_dim,
        "vocab_size": model.vocab_size,
        "tied_embeddings": model.tied_embeddings,
        "gated_mlp": model.gated_mlp,
        "attention": "mla" if model.mla is not None else ("mha" if model.num_kv_heads == model.num_attention_heads
                                                         else "gqa"),
        "experts": None if moe is None else moe.num_experts,
        "top_k": None if moe is None else moe.top_k,
        "shared_experts": None if moe is None else moe.shared_experts,
        "moe_layers": shape.num_moe_layers,
        "expert_ffn_hidden_size": None if moe is None else moe.ffn_hidden_size,
        "sliding_window": model.sliding_window,
        "sliding_window_layers": model.sliding_window_layers,
    }
    return out


def _assumed_kernel(plan: Plan, scenario: Scenario | None) -> list[str]:
    """The attention kernel family the estimate priced when the plan left it to the accelerator (``auto``) or
    names a kernel priced as another family (``flash3``, ``triton``): the resolved family, said once."""
    if scenario is None or plan.attention_kernel not in ("auto", "flash3", "triton"):
        return []

    gen = scenario.cluster.accelerator.generation
    kind = resolved_attention_kernel(plan.attention_kernel, gen)
    why = (f"the {gen or 'unknown'} generation's default, compute.yaml default_attention_kernel"
           if plan.attention_kernel == "auto" else f"{plan.attention_kernel} is priced as the {kind} family")
    return [f"attention kernel priced as {kind} ({why})"]


def _assumed_numerics(plan: Plan, scenario: Scenario | None, parameters: Parameters) -> list[str]:
    """Numeric conventions the estimate assumes that no plan key states: the gradient reduction's dtype
    (``grad_bytes`` of ``parameters``, or the cluster file's), where gradients are reduced at all."""

    params = {**parameters.compute, **(dict(scenario.cluster.compute) if scenario is not None
                                       and scenario.cluster.compute else {})}
    gb = float(params.get("grad_bytes", 4))
    expert_dp = plan.tp * plan.cp * plan.dp // max(plan.etp * plan.ep, 1)
    if plan.dp * plan.cp <= 1 and expert_dp <= 1:
        return []
    if plan.grad_reduce_dtype != "fp32":
        return []  # the plan's grad_reduce_dtype (stated, or in assumed) says it
    dtype = {4.0: "fp32", 2.0: "bf16", 1.0: "fp8"}.get(gb, f"{gb:g}-byte")
    return [f"gradient reduction in {dtype} (grad_bytes={gb:g}: Megatron-Core and FSDP reduce bf16 training's "
            "gradients in fp32)"]


def _assumed_moe(plan: Plan, scenario: Scenario | None) -> list[str]:
    """Node-limited routing in force (:func:`tierwise.parallel.ep.node_limit`) and what DeepSeek-V3's memory
    recipe (``recompute: deepseek``) includes beyond the priced recompute and caching."""
    if scenario is None or scenario.model.moe is None:
        return []
    out = []
    moe = scenario.model.moe
    if plan.ep > 1 and plan.moe_dispatcher == "deepep" and (plan.moe_node_limit or moe.topk_group < moe.n_group):
        src = ("plan moe_node_limit" if plan.moe_node_limit
               else f"the model's topk_group={moe.topk_group} of n_group={moe.n_group}")
        out.append(f"node-limited routing: a token's experts on at most M nodes ({src}; DeepEP sends one IB copy "
                   "per node and forwards over NVLink)")
    if plan.recompute == "deepseek":
        out.append("recompute=deepseek: RMSNorm and MLA up-projections recomputed, MoE / SwiGLU / attention-output "
                   "activations cached in " + ("FP8" if plan.precision == "fp8" else "BF16")
                   + "; the parameters' EMA kept in host memory (no GPU bytes, sec. 3.2.3)")
    return out


def _assumed_mtp(scenario: Scenario | None) -> list[str]:
    """The MTP modules the estimate trains (:attr:`tierwise.specs.model.ModelSpec.mtp_layers`)."""
    out = []
    if scenario is not None and scenario.model.mtp_layers:
        out.append(f"MTP: {scenario.model.mtp_layers} module(s) trained (the model's mtp_layers, config "
                   "num_nextn_predict_layers; arXiv:2412.19437 sec. 2.2), each one more transformer block, a "
                   "2h -> h projection and one more pass of the shared output head and loss, on the stage that holds "
                   "the output head (sec. 3.2.3: with the embedding on DualPipe's rank 0)")
    return out


def infer_settings(model: ModelSpec, cluster: Cluster, plan: Plan, *,
                   parameters: Parameters | None = None) -> tuple[Plan, str]:
    """The plan with the settings it leaves to the tool (``plan.inferred``) chosen as the frameworks' recipes
    choose them, and the ``assumed`` line saying so ("" when nothing was inferred).

    Recompute: the cheapest granularity that fits memory, none < selective < full (Megatron-Core / NeMo
    recipes turn recompute on only when a configuration does not fit; Korthikanti et al. 2022, section 5:
    selective first, full when it is not enough); full when none fits. For an MLA model DeepSeek-V3's own recipe
    (``deepseek``: RMSNorm and MLA up-projection recompute, FP8 activation caching, sec. 3.2.3 / 3.3.4) is tried
    before full. For NeMo / Megatron-Bridge (framework ``nemo``) without pipeline parallelism, no recompute with
    the fewest layers' activations offloaded to the host that fit (:func:`_offload_candidates`) comes before any
    recompute: its performance recipes recompute nothing and offload instead (Megatron-Bridge
    ``llama3_70b`` GB300 BF16 preset: Megatron-FSDP with ``cpu_offloading_num_layers=30``). One estimator call
    on the candidates (priced under ``parameters``: :func:`~tierwise.estimate.step.estimate`'s).
    """
    if "recompute" not in plan.inferred:
        return plan, ""
    if plan.activation_offload_layers:
        return (plan.replace(recompute="none", inferred=()),
                "recompute=none (Megatron-Core's activation offload runs only without recompute)")
    order = [rc for rc in RECOMPUTE_COST_ORDER if rc != "deepseek" or model.mla is not None]
    offload = _offload_candidates(model, cluster, plan)
    candidates = ([plan.replace(recompute="none")] + [plan.replace(recompute="none", activation_offload_layers=k)
                                                        for k in offload]
                  + [plan.replace(recompute=rc) for rc in order[1:]])
    labels = ["none"] + [f"none with activation_offload_layers={k}" for k in offload] + order[1:]
    fits = estimate(model, cluster, PlanBatch.from_plans(candidates), parameters=parameters).memory["fits"]
    pick = next((i for i, ok in enumerate(fits) if ok), len(candidates) - 1)
    names = " < ".join(order) if not offload else " < ".join(["none", "none with activation offload", *order[1:]])
    why = (f"the cheapest that fits memory ({names}), as the frameworks' recipes choose"
           if fits[pick] else f"none of {' / '.join(order)} fits memory; the most memory-saving")
    chosen = candidates[pick]
    if chosen.activation_offload_layers:
        why += (f"; {plan.framework} recipes offload activations to the host over "
                f"{cluster.accelerator.host_link_name or 'the host link'} rather than recompute")
    return chosen.replace(inferred=()), f"recompute={labels[pick]} ({why})"


def _offload_candidates(model: ModelSpec, cluster: Cluster, plan: Plan) -> list[int]:
    """Activation-offload layer counts the recompute inference tries for a NeMo / Megatron-Bridge plan (1 to
    num_layers - 1, Megatron-Core's range), none where offload cannot run: another framework, pipeline
    parallelism (Megatron-Core refuses it), a stated offload or a cluster without a host-link figure."""
    if (plan.framework != "nemo" or plan.pp > 1 or plan.activation_offload_layers
            or cluster.host_bytes_per_s <= 0 or model.num_layers < 2):
        return []
    return list(range(1, model.num_layers))


def _memory_warnings(mem: dict[str, Any], cluster: Cluster) -> list[str]:
    """One line per memory the plan exceeds (HBM on the fullest stage; host DRAM under activation offload), and
    one when offloaded activations cannot be checked against the host's memory."""
    out = []
    if mem["per_gpu_bytes"] > mem["capacity_bytes"]:
        out.append(f"memory: {format_bytes(mem['per_gpu_bytes'])} per GPU on the fullest stage exceeds "
                   f"{format_bytes(mem['capacity_bytes'])}; the plan is estimated as given (fits: false)")
    host, cap = mem.get("host_bytes", 0.0), mem.get("host_capacity_bytes", 0.0)
    if host > 0 and cap > 0 and host > cap:
        out.append(f"host memory: the offloaded activations take {format_bytes(host)} per GPU, over the "
                   f"{format_bytes(cap)} of host DRAM per GPU; the plan is estimated as given (fits: false); "
                   "offload fewer layers or set host_memory in the cluster file")
    elif host > 0 and cap <= 0:
        out.append(f"host memory: the offloaded activations take {format_bytes(host)} per GPU; cluster "
                   f"{cluster.name} gives no host memory to check them against (set host_memory in the cluster file)")
    return out


def estimate_scenario(scenario: Scenario, *, parameters: Parameters | None = None) -> dict[str, Any]:
    """Estimate one scenario and return the ``estimate --json`` document, priced under ``parameters`` (None,
    this being a command's entry point: :func:`~tierwise.specs.parameters.load_parameters`).

    A plan that does not fit memory is estimated all the same (published runs are evidence about the memory
    model too): ``memory.fits`` is false and ``warnings`` carries one line naming the figures."""
    from dataclasses import replace

    parameters = parameters if parameters is not None else load_parameters()
    plan, note = infer_settings(scenario.model, scenario.cluster, scenario.plan, parameters=parameters)
    if note:
        plan = plan.replace(assumed=(*plan.assumed, note))
        scenario = replace(scenario, plan=plan)
    result = estimate(scenario.model, scenario.cluster, PlanBatch.from_plans([scenario.plan]), parameters=parameters)
    doc = result_dict(result, 0, scenario.plan, scenario)
    if scenario.model.mtp_layers:
        doc["breakdown"]["mtp"] = mtp_share(scenario, result)
    doc["warnings"] = _memory_warnings(doc["memory"], scenario.cluster)
    step, bubble = float(result.step_time_s[0]), float(result.bubble_s[0])
    block = interleaving_options(scenario.model, scenario.cluster, scenario.plan, step, bubble, parameters=parameters)
    if block is not None:  # a bubble over 15% of the step: what interleaving would give (issue 32)
        doc["interleaving"] = block
        doc["warnings"].append(interleaving_warning(block, scenario.plan, step))
    # what the model reference (catalog name, YAML, config.json) was parsed into, right after its name
    out: dict[str, Any] = {}
    for key, value in doc.items():
        out[key] = value
        if key == "model":
            out["model_summary"] = model_summary(scenario.model)
        elif key == "flops_note":
            out["interference_note"] = interference_note(scenario.cluster, result.parameters)
    return out


def mtp_share(scenario: Scenario, result) -> dict[str, Any]:
    """The MTP modules' share of an estimate (``breakdown.mtp``): their bytes on the GPU that holds them (the
    last stage, DualPipe's rank 0: :func:`tierwise.estimate.footprint.memory_footprint`), and what they add to
    the step, the fullest GPU's bytes and the model FLOPs, against the same plan without them."""
    base = estimate(replace(scenario.model, mtp_layers=0), scenario.cluster, PlanBatch.from_plans([scenario.plan]),
                    parameters=result.parameters)
    return {"modules": scenario.model.mtp_layers,
            "stage_bytes": float(result.memory["mtp_bytes"][0]),
            "step_s": float(result.step_time_s[0] - base.step_time_s[0]),
            "per_gpu_bytes": float(result.memory["per_gpu_bytes"][0] - base.memory["per_gpu_bytes"][0]),
            "model_flops": float(result.model_flops_per_step[0] - base.model_flops_per_step[0])}


def _per_axis(result, i: int, plan: Plan) -> dict[str, dict[str, Any]]:
    """Each parallel axis's group, bytes, time, exposed time and tier for plan ``i`` (``breakdown.per_axis``)."""
    ranks = axis_group_ranks(plan)
    return {axis: {"ranks": ranks.get(axis, 1), "group": axis_group_label(axis, plan),
                   "bytes": float(result.axis_bytes[axis][i]), "time_s": float(result.axis_time_s[axis][i]),
                   "exposed_s": float(result.axis_exposed_s[axis][i]),
                   "tier": TIERS[int(result.axis_tier[axis][i])]}
            for axis in AXES}


def result_dict(result, i: int, plan: Plan, scenario: Scenario | None = None) -> dict[str, Any]:
    """The stable JSON document of plan ``i`` of a :class:`~tierwise.estimate.step.StepEstimates`."""

    mem = {k: (bool(v[i]) if k == "fits" else float(v[i])) for k, v in result.memory.items()
           if plan.activation_offload_layers or not k.startswith("host_")}  # host memory: only when offloading
    per_axis = _per_axis(result, i, plan)
    tiers = {axis: row["tier"] for axis, row in per_axis.items()}
    doc: dict[str, Any] = {}
    if scenario is not None:
        doc.update({"model": scenario.model.name, "cluster": scenario.cluster.name, "num_gpus": scenario.num_gpus})
    doc.update({
        "plan": plan.as_dict(),
        "step_time_s": float(result.step_time_s[i]),
        "tokens_per_s": float(result.tokens_per_s[i]),
        "tokens_per_s_per_gpu": float(result.tokens_per_s_per_gpu[i]),
        "model_tflops_per_gpu": float(result.model_tflops_per_gpu[i]),
        "hardware_tflops_per_gpu": float(result.hardware_tflops_per_gpu[i]),
        "mfu": float(result.mfu[i]),
        "mfu_bf16": float(result.mfu_bf16[i]),  # against the bf16 dense peak: comparable with published MFU
        "hfu": float(result.hfu[i]),
        "flops_note": ("model FLOPs count forward + backward (3 x forward) with causal attention halved and no "
                       "recompute; hardware FLOPs add recompute; both against the dense peak of the plan's "
                       f"matmul precision ({result.peak_flops_per_s[i] / 1e12:.0f} TFLOP/s)"),
        "scaling_efficiency": float(result.scaling_efficiency[i]),
        "num_microbatches": float(result.num_microbatches[i]),
        "assumed": (list(plan.assumed) + _assumed_kernel(plan, scenario) + _assumed_numerics(plan, scenario, result.parameters)
                    + _assumed_moe(plan, scenario) + _assumed_mtp(scenario)),
        "memory": mem,
        "breakdown": {
            "compute_s": float(result.compute_s[i]),
            "recompute_s": float(result.recompute_s[i]),
            "bubble_s": float(result.bubble_s[i]),
            "exposed_comm_s": float(result.exposed_comm_s[i]),
            "optimizer_s": float(result.optimizer_s[i]),
            "shard_copy_s": float(result.shard_copy_s[i]),
            "forward_layers_s": float(result.forward_layers_s[i]),
            "per_tier": result.per_tier(i),
            "per_axis": per_axis,
        },
        "tiers": tiers,
    })
    if plan.activation_offload_layers and result.offload_exposed_s is not None:
        # activation offload to the host (tierwise.parallel.offload): the copies' exposed part of the step
        doc["breakdown"]["offload_exposed_s"] = float(result.offload_exposed_s[i])
        if result.offload_host_bytes is not None:  # each way per step, per GPU
            doc["breakdown"]["offload_host_bytes"] = float(result.offload_host_bytes[i])
    if scenario is not None and scenario.cluster.compute:
        # measured on this cluster's accelerator (tierwise calibrate of `measure gemm`), in place of the global fit
        doc["cluster_compute"] = dict(scenario.cluster.compute)
    return doc


def safe_estimate(path: str, framework: str | None = None, *, parameters: Parameters | None = None) -> dict[str, Any]:
    """Estimate one file; a user error becomes ``{"file": .., "error": ..}`` (for multi-file runs). Priced
    under ``parameters`` (None, this being ``estimate``'s entry point for several files: :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    try:
        doc = estimate_scenario(load_scenario(path, framework, parameters=parameters), parameters=parameters)
    except TierwiseError as exc:
        return {"file": path, "error": str(exc)}
    doc = {"file": path, **doc}
    return doc
