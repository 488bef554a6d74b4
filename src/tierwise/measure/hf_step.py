"""``measure compute --hf-step MODEL``: one training step of a Hugging Face model measured, and the same step
predicted by the estimator with the compute profile just measured.

The model is a tierwise model (a catalog name or a model YAML, turned into the ``transformers`` config of the
nearest architecture by :func:`hf_config_for`, the reverse of :mod:`tierwise.specs.hf_config`) or a local
Hugging Face ``config.json`` (read by ``AutoConfig.from_pretrained(..., local_files_only=True)`` for the
model and by :func:`tierwise.specs.model.model_from_hf_config` for the estimate). Nothing is downloaded: the
weights are random (``AutoModelForCausalLM.from_config``).

The step is what the Hugging Face ``Trainer`` runs with ``bf16=True`` on one device: FP32 parameters under
``torch.autocast(bfloat16)`` (the GEMMs in BF16), the causal-LM loss over the model's own logits
(``labels=input_ids``), ``backward()``, then ``torch.optim.AdamW`` (fused on a GPU; the multi-tensor
``foreach`` path on the CPU) and ``zero_grad``. ``warmup`` untimed steps (the first allocates the AdamW
states), then ``steps`` timed one by one (CUDA synchronised around each); the median is reported.

The prediction is the estimator's step time (:func:`tierwise.estimate.estimate`) for a one-device plan: tp =
pp = dp = 1, micro and global batch = ``batch``, the same sequence length and layers, no recompute, BF16,
the attention kernel ``transformers`` ran (``sdpa``: PyTorch SDPA; ``eager``: the unfused core), eager
PyTorch elementwise kernels (``fused_elementwise: false``: Llama's eager RMSNorm, SwiGLU and rotary
embedding are what :func:`tierwise.workload.kernels.eager_extra_bytes` counts) and the unfused cross-entropy
(``fused_cross_entropy: false``: Hugging Face's loss upcasts the logits to FP32). The cluster is the
profile's (``--cluster``) with the ``compute:`` block just measured in force.

Before anything is allocated, the estimator's memory of that plan (weights, gradients, optimizer states and
activations, without its ``memory_overhead`` allowance for CUDA context and fragmentation) is checked against
the memory free on the device (``torch.cuda.mem_get_info``; on the CPU the available physical memory).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tierwise.errors import MeasureError, TierwiseError
from tierwise.estimate import estimate
from tierwise.measure.bench import require_torch
from tierwise.specs.cluster import cluster_from_mapping
from tierwise.specs.model import ModelSpec, load_model, model_from_hf_config
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import PlanBatch, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.units import format_bytes

__all__ = ["HFStep", "HFStepRun", "HF_ATTENTION", "HF_STEP_KERNEL", "CPU_NOTE", "require_transformers",
           "hf_config_for", "prepare_hf_step", "run_hf_step", "finish_hf_step"]

HF_STEP_KERNEL = "hf-train-step"
"""The ``kernel`` of the step's row among the measured rows (and in the profile's ``compute_rows``)."""

HF_ATTENTION = {"sdpa": "sdpa", "eager": "unfused"}
"""``transformers``' ``attn_implementation`` -> the plan's ``attention_kernel``: ``sdpa`` calls
``torch.nn.functional.scaled_dot_product_attention`` (priced as the SDPA family); ``eager`` materialises the
score matrix (two batched GEMMs and a softmax: the unfused core)."""

CPU_NOTE = ("measured on the CPU: the estimator prices the cluster's GPU with the CPU's measured rates, and its "
            "kernel laws (tiles, launch floors, attention) are a GPU's; this tests the plumbing, not the model")

CPU_SIZES = {"layers": 2, "seq": 64, "batch": 1}
"""The CPU path's default sizes (any of them given is used as given)."""
GPU_SIZES = {"seq": 2048, "batch": 1}


@dataclass(frozen=True, kw_only=True)
class HFStep:
    """What ``--hf-step`` runs: the model reference and the step's sizes (None: the device's default)."""

    model: str
    layers: int | None = None
    seq: int | None = None
    batch: int | None = None
    attention: str = "sdpa"
    steps: int = 5
    warmup: int = 2


@dataclass(kw_only=True)
class HFStepRun:
    """A prepared step: the model both ways, the plan, the memory estimate; ``samples`` fill as steps are timed
    (so Ctrl-C keeps them)."""

    step: HFStep
    spec: ModelSpec
    config: Any
    plan: Any
    seq: int
    batch: int
    memory: dict[str, float]
    samples: list[float] = field(default_factory=list)
    info: dict = field(default_factory=dict)


def require_transformers():
    """``transformers`` (the ``hf`` extra), made offline first; one line naming the install when missing."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the Hub: configs are local, weights random
    try:
        import transformers
    except ImportError:
        raise MeasureError("measure compute --hf-step needs transformers; install it with "
                           "pip install 'tierwise[hf]'") from None
    transformers.logging.set_verbosity_error()
    return transformers


# ---------------------------------------------------------------------------------------------------------
# ModelSpec -> transformers config (the reverse of tierwise.specs.hf_config's readers)


def _attention_keys(spec: ModelSpec, positions: int) -> dict[str, Any]:
    return {"vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size, "num_hidden_layers": spec.num_layers,
            "num_attention_heads": spec.num_attention_heads, "num_key_value_heads": spec.num_kv_heads,
            "tie_word_embeddings": spec.tied_embeddings, "max_position_embeddings": positions}


def _llama_like(spec: ModelSpec, positions: int) -> tuple[str, str, dict[str, Any]]:
    keys = {**_attention_keys(spec, positions), "intermediate_size": spec.ffn_hidden_size, "head_dim": spec.head_dim}
    moe = spec.moe
    if spec.sliding_window:
        if spec.sliding_window_layers != spec.num_layers:
            raise MeasureError(f"--hf-step {spec.name}: sliding windows on {spec.sliding_window_layers} of "
                               f"{spec.num_layers} layers; pass its config.json instead")
        keys["sliding_window"] = spec.sliding_window  # Mistral and Mixtral: a window on every layer
    if spec.mla is not None:
        keys.update(intermediate_size=spec.ffn_hidden_size, moe_intermediate_size=moe.ffn_hidden_size,
                    n_routed_experts=moe.num_experts, num_experts_per_tok=moe.top_k,
                    n_shared_experts=moe.shared_experts, first_k_dense_replace=moe.first_dense_layers,
                    n_group=moe.n_group, topk_group=moe.topk_group or moe.n_group,
                    q_lora_rank=spec.mla.q_lora_rank, kv_lora_rank=spec.mla.kv_lora_rank,
                    qk_nope_head_dim=spec.mla.qk_nope_head_dim, qk_rope_head_dim=spec.mla.qk_rope_head_dim,
                    v_head_dim=spec.mla.v_head_dim, head_dim=spec.mla.qk_rope_head_dim)
        return "deepseek_v3", "DeepseekV3ForCausalLM", keys
    if moe is not None:
        if moe.shared_experts or moe.first_dense_layers or moe.layer_freq != 1:
            raise MeasureError(f"--hf-step {spec.name}: no Hugging Face architecture here has its MoE layout "
                               "(shared experts or dense layers without MLA); pass its config.json instead")
        keys.update(intermediate_size=moe.ffn_hidden_size, num_local_experts=moe.num_experts,
                    num_experts_per_tok=moe.top_k)
        return "mixtral", "MixtralForCausalLM", keys
    if spec.sliding_window:
        return "mistral", "MistralForCausalLM", keys
    return "llama", "LlamaForCausalLM", keys


def _mha_only(spec: ModelSpec, arch: str) -> None:
    if spec.num_kv_heads != spec.num_attention_heads or spec.head_dim * spec.num_attention_heads != spec.hidden_size:
        raise MeasureError(f"--hf-step {spec.name}: {arch} has multi-head attention with head_dim = hidden / heads; "
                           f"this model has {spec.num_kv_heads} KV heads of {spec.head_dim}; pass its config.json")


def _not_gated(spec: ModelSpec, positions: int) -> tuple[str, str, dict[str, Any]]:
    if not spec.rotary:  # GPT-2: LayerNorm, GELU MLP, learned positions, biases (Megatron GPT, MPT's nearest)
        _mha_only(spec, "GPT-2")
        return "gpt2", "GPT2LMHeadModel", {
            "vocab_size": spec.vocab_size, "n_embd": spec.hidden_size, "n_layer": spec.num_layers,
            "n_head": spec.num_attention_heads, "n_inner": spec.ffn_hidden_size, "n_positions": positions,
            "tie_word_embeddings": spec.tied_embeddings, "bos_token_id": 0, "eos_token_id": 0}
    if spec.bias:  # GPT-NeoX: LayerNorm, rotary, GELU MLP, biases
        _mha_only(spec, "GPT-NeoX")
        return "gpt_neox", "GPTNeoXForCausalLM", {**_attention_keys(spec, positions), "intermediate_size": spec.ffn_hidden_size,
                                                  "rotary_pct": 1.0}
    # Nemotron: LayerNorm1p, rotary, squared-ReLU MLP, no biases
    return "nemotron", "NemotronForCausalLM", {**_attention_keys(spec, positions), "intermediate_size": spec.ffn_hidden_size,
                                               "head_dim": spec.head_dim}


def hf_config_for(spec: ModelSpec, positions: int = 4096):
    """The ``transformers`` config of the architecture nearest to ``spec``: gated MLP -> Llama (Mistral with
    a sliding window on every layer, Mixtral for a plain MoE, DeepSeek-V3 with MLA); GELU MLP without rotary ->
    GPT-2, with rotary and biases -> GPT-NeoX, else Nemotron. What ``spec`` does not name takes the config
    class's default (the norm's epsilon, the rotary base); ``positions`` is the longest sequence (GPT-2's learned
    position table has that many rows). A shape none of these has is one line."""
    transformers = require_transformers()
    model_type, arch, keys = _llama_like(spec, positions) if spec.gated_mlp else _not_gated(spec, positions)
    keys = {"pad_token_id": None, "bos_token_id": None, "eos_token_id": None, **keys}  # ids within any vocabulary
    try:
        config = transformers.AutoConfig.for_model(model_type, **keys)
    except (ValueError, KeyError) as exc:  # an older transformers without this architecture
        raise MeasureError(f"--hf-step {spec.name}: transformers {transformers.__version__} has no {arch} "
                           f"({str(exc)[:120]}); upgrade it or pass a config.json it reads") from None
    config.architectures = [arch]
    return config


# ---------------------------------------------------------------------------------------------------------
# the model both ways, shrunk to --hf-layers


def _is_config_json(ref: str) -> Path | None:
    path = Path(ref)
    if path.is_dir():
        return path / "config.json"
    return path if ref.endswith(".json") else None


def _shrink(spec: ModelSpec, config, layers: int) -> ModelSpec:
    """Keep the first ``layers`` layers of the transformers config (its per-layer lists cut to them) and of the
    tierwise model: the sliding-window layers among them (counted in the config's ``layer_types`` where it has
    one, else the window is on every layer), no MoE when every layer kept is a leading dense one."""
    config.num_hidden_layers = layers
    types = getattr(config, "layer_types", None)
    if isinstance(types, list):
        config.layer_types = types[:layers]
    if isinstance(getattr(config, "mlp_only_layers", None), list):
        config.mlp_only_layers = [i for i in config.mlp_only_layers if i < layers]
    sliding = 0
    if spec.sliding_window:
        sliding = (sum(1 for t in config.layer_types if t == "sliding_attention") if isinstance(types, list)
                   else min(spec.sliding_window_layers, layers))
    moe = spec.moe
    if moe is not None and moe.first_dense_layers >= layers:
        moe = None
    return replace(spec, num_layers=layers, moe=moe, params_b=None, sliding_window_layers=sliding,
                   sliding_window=spec.sliding_window if sliding else None)


def _resolve(step: HFStep, layers: int | None, seq: int) -> tuple[ModelSpec, Any]:
    """(the tierwise model the estimator prices, the transformers config the step builds), both with ``layers``."""
    transformers = require_transformers()
    path = _is_config_json(step.model)
    if path is not None:
        spec = model_from_hf_config(path)
        try:
            config = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise MeasureError(f"--hf-step {step.model}: transformers {transformers.__version__} cannot read it "
                               f"({first[:200]})") from None
    else:
        spec = load_model(step.model)
        config = hf_config_for(spec, positions=seq)
    table = getattr(config, "n_positions", None) if config.model_type == "gpt2" else None
    if table is not None and seq > table:  # learned positions: a longer sequence has no row to read
        raise MeasureError(f"--hf-seq {seq}: {step.model} learns {table} positions; use --hf-seq {table} or less")
    if layers is not None:
        if layers > spec.num_layers:
            raise MeasureError(f"--hf-layers {layers}: {spec.name} has {spec.num_layers} layers; use at most that")
        spec = _shrink(spec, config, layers)
    return (replace(spec, mtp_layers=0) if spec.mtp_layers else spec), config  # transformers builds no MTP


# ---------------------------------------------------------------------------------------------------------
# the plan, the memory check, the prediction


def step_plan(spec: ModelSpec, cluster, attention: str, seq: int, batch: int):
    """The one-device plan of the step (module docstring)."""
    plan = plan_from_mapping({"tp": 1, "pp": 1, "cp": 1, "ep": 1, "micro_batch_size": batch,
                              "global_batch_size": batch, "seq_length": seq, "recompute": "none",
                              "precision": "bf16", "attention_kernel": HF_ATTENTION[attention],
                              "fused_elementwise": False, "fused_cross_entropy": False},
                             num_gpus=1, origin="--hf-step plan", num_layers=spec.num_layers,
                             generation=cluster.accelerator.generation, moe=spec.moe is not None)
    validate_plan_batch(spec, [plan])
    return plan


def _free_bytes(torch, device: str) -> float:
    """Memory free for the step: the GPU's free bytes, or the CPU's available physical memory."""
    if device == "cuda":
        return float(torch.cuda.mem_get_info()[0])
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # no sysconf figure here: nothing to refuse on
        return float("inf")


def _memory(spec: ModelSpec, cluster, plan, parameters: Parameters) -> dict[str, float]:
    mem = estimate(spec, cluster, PlanBatch.from_plans([plan]), parameters=parameters).memory
    out = {k: float(mem[k][0]) for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes")}
    out["total_bytes"] = float(mem["per_gpu_bytes"][0] - mem["overhead_bytes"][0])
    return out


def prepare_hf_step(step: HFStep, cluster_keys: dict, label: str, device: str, *,
                    parameters: Parameters | None = None) -> HFStepRun:
    """The step checked before anything is measured or allocated: transformers there, the model read both
    ways, the plan valid, the estimated memory within what the device has free (else one line with it).
    ``parameters``: the memory estimate's (None, this being ``measure compute --hf-step``'s entry point:
    :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    torch = require_torch()
    if step.attention not in HF_ATTENTION:
        raise MeasureError(f"--hf-attention {step.attention}: use {' or '.join(HF_ATTENTION)}")
    cpu = device == "cpu"
    layers = step.layers if step.layers is not None else (CPU_SIZES["layers"] if cpu else None)
    seq = step.seq or (CPU_SIZES if cpu else GPU_SIZES)["seq"]
    batch = step.batch or (CPU_SIZES if cpu else GPU_SIZES)["batch"]
    try:
        spec, config = _resolve(step, layers, seq)
        cluster = cluster_from_mapping(cluster_keys, name=label, origin=f"--cluster {label}", parameters=parameters)
        plan = step_plan(spec, cluster, step.attention, seq, batch)
    except MeasureError:
        raise
    except TierwiseError as exc:
        raise MeasureError(f"--hf-step {step.model}: {exc}") from None
    memory = _memory(spec, cluster, plan, parameters)
    free = _free_bytes(torch, device)
    if memory["total_bytes"] > free:
        raise MeasureError(
            f"--hf-step {spec.name} ({spec.num_layers} layers, batch {batch} x seq {seq}) needs about "
            f"{format_bytes(memory['total_bytes'])} (tierwise's memory model: {format_bytes(memory['weights_bytes'])} "
            f"weights, {format_bytes(memory['gradients_bytes'])} gradients, {format_bytes(memory['optimizer_bytes'])} "
            f"optimizer, {format_bytes(memory['activations_bytes'])} activations) and {device} has "
            f"{format_bytes(free)} free; shrink it with --hf-layers, --hf-seq or --hf-batch")
    return HFStepRun(step=step, spec=spec, config=config, plan=plan, seq=seq, batch=batch, memory=memory)


# ---------------------------------------------------------------------------------------------------------
# the measurement


def _build(torch, transformers, run: HFStepRun, device: str):
    torch.manual_seed(0)
    try:
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(run.config, attn_implementation=run.step.attention)
    except (ValueError, ImportError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MeasureError(f"--hf-step {run.step.model} with --hf-attention {run.step.attention}: "
                           f"{first[:200]}") from None
    model.train()
    return model


def _timed_steps(torch, run: HFStepRun, device: str, model, opt, ids) -> None:
    """``warmup`` untimed steps (at least one: it allocates the AdamW states), then ``steps`` timed into
    ``run.samples`` one by one."""

    def one() -> None:
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(max(1, run.step.warmup)):
        one()
    for _ in range(run.step.steps):
        sync()
        start = time.perf_counter()
        one()
        sync()
        run.samples.append(time.perf_counter() - start)


def run_hf_step(run: HFStepRun, device: str) -> None:
    """Build the model (random weights) on ``device`` and time its training steps into ``run.samples``
    (module docstring); ``run.info`` says what ran."""
    torch, transformers = require_torch(), require_transformers()
    model = _build(torch, transformers, run, device)
    params = [p for p in model.parameters() if p.requires_grad]
    fused = device == "cuda"
    try:
        opt = torch.optim.AdamW(params, lr=1e-4, fused=fused, foreach=not fused)
    except (RuntimeError, TypeError):  # a GPU torch has no fused kernel for: the multi-tensor path
        fused, opt = False, torch.optim.AdamW(params, lr=1e-4, foreach=True)
    ids = torch.randint(0, run.spec.vocab_size, (run.batch, run.seq), device=device)
    run.info = {"architecture": type(model).__name__, "transformers": str(transformers.__version__),
                "attention": str(model.config._attn_implementation), "optimizer": "fused" if fused else "foreach",
                "params": int(sum(p.numel() for p in params))}
    try:
        _timed_steps(torch, run, device, model, opt, ids)
    finally:
        model = opt = params = ids = None  # the GPU's memory back before the profile is written
        if device == "cuda":
            torch.cuda.empty_cache()


def finish_hf_step(run: HFStepRun, cluster_keys: dict, label: str, compute: dict[str, float], device_name: str,
                   *, cpu: bool, parameters: Parameters, interrupted: bool = False) -> tuple[dict, dict] | None:
    """(the ``hf_step`` block of the document, the step's row for ``compute_rows``): the median measured step
    beside the estimator's, priced on the cluster with the measured ``compute`` block in force; None when no
    step was timed (interrupted first)."""
    if not run.samples:
        return None
    cluster = cluster_from_mapping({**cluster_keys, "compute": compute} if compute else cluster_keys, name=label,
                                   origin=f"--cluster {label} with the measured compute block",
                                   parameters=parameters)
    est = estimate(run.spec, cluster, PlanBatch.from_plans([run.plan]), parameters=parameters)
    measured = statistics.median(run.samples)
    predicted = float(est.step_time_s[0])
    flops = float(est.model_flops_per_step[0])
    block = {"model": run.spec.name, **run.info, "layers": run.spec.num_layers, "seq": run.seq, "batch": run.batch,
             "attention_kernel": HF_ATTENTION[run.step.attention], "precision": "bf16 autocast, fp32 weights",
             "steps_timed": len(run.samples), "samples_s": list(run.samples), "measured_s": measured,
             "predicted_s": predicted, "ratio": predicted / measured,
             "predicted": {"compute_s": float(est.compute_s[0]), "attention_s": float(est.attention_s[0]),
                           "memory_bound_s": float(est.memory_bound_s[0]), "optimizer_s": float(est.optimizer_s[0])},
             "model_flops": flops, "memory_estimate": run.memory, "note": CPU_NOTE if cpu else "",
             "interrupted": interrupted}
    row = {"kernel": HF_STEP_KERNEL, "shape": f"{run.batch}x{run.seq}, {run.spec.num_layers} layers",
           "dtype": "bf16", "time_s": measured, "flops": flops, "bytes": 0.0, "flops_per_s": flops / measured,
           "bytes_per_s": None, "model": run.spec.name, "attention": HF_ATTENTION[run.step.attention],
           "predicted_s": predicted, "device": device_name}
    return block, row
