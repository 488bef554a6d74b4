"""Prefill, decode and KV transfer times, vectorized over TP / EP degrees and batch sizes (numpy arrays).

One model for ``serve`` (a batch of one) and ``serve-plan`` (thousands of candidates at once); there is no
scalar copy. All times are seconds on one model instance (``tp`` ranks; experts spread over ``ep`` of them).

Prefill of ``T`` tokens of context ``s`` (compute-bound roofline; Williams et al. 2009, CACM 52(4)):
``t = max(F_lin / (tp P eff_mm) + F_attn / (tp P_bf16 eff_att(s)), W / HBM) + t_TP + t_EP`` with ``F_lin =
2 N_active T`` (the weight GEMMs of :func:`tierwise.workload.flops.model_shape`), ``F_attn`` the causal
attention core (``attention_core_flops_per_token``), ``eff_att(s) = eff_att s / (s + s_half)`` (the training
model's sequence-length curve). TP: two all-reduces of ``T h`` BF16 activations per layer (Megatron-LM,
Shoeybi et al. 2019, sec. 3); EP: a dispatch and a combine all-to-all of ``T k h`` per MoE layer (GShard,
Lepikhin et al. 2020, sec. 2.2), each priced by :func:`tierwise.collectives.model.collective_cost` on the tiers
the group spans (:func:`tierwise.hierarchy.group_span`).

Decode step of ``B`` sequences with mean context ``c`` (memory-bound): ``t = max(W_read(B) / HBM', F_lin / (tp P eff_mm)) [+ loss x min(...)] + max(B c kv_gpu /
HBM', F_att / (tp P_bf16 eff_att)) + t_TP + t_EP + t_overhead`` (the GEMMs and the attention kernel run one
after the other, each on its own roofline; ``HBM' = HBM x eff_hbm``); weights are read once per step and shared by
the batch, the KV cache once per sequence (Pope et al. 2022, "Efficiently Scaling Transformer Inference",
sec. 2); MoE weights by the experts the batch touches (:func:`.kv.weight_bytes_read_per_step`). Collectives
are small messages, so their latency term dominates; the per-collective host launch is dropped (CUDA graphs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.collectives.model import collective_cost
from tierwise.hierarchy import group_span
from tierwise.serve.kv import kv_fraction_per_gpu, shape_of, weight_bytes_read_per_step
from tierwise.serve.params import ServingParameters
from tierwise.specs.cluster import Cluster
from tierwise.specs.compute import attention_efficiency_family, compute_profile, grouped_gemm_efficiency
from tierwise.specs.model import ModelSpec
from tierwise.specs.parameters import load_parameters
from tierwise.workload.flops import attention_core_flops_per_token

__all__ = ["linear_flops_per_token", "linear_time", "prefill_time", "decode_step_time", "comm_time", "peak_flops", "efficiencies",
           "Efficiencies"]


@dataclass(frozen=True)
class Efficiencies:
    """A part's serving efficiencies (:func:`efficiencies`)."""

    matmul: float
    """Fraction of the dense peak at the weight precision the weight GEMMs reach."""
    attention: float
    """Fraction of the dense BF16 peak the attention core reaches (at long sequences)."""
    hbm: float
    """Fraction of the datasheet HBM bandwidth the decode step's streaming reads reach."""


def efficiencies(cluster: Cluster, precision: str, params: ServingParameters) -> Efficiencies:
    """The serving efficiencies of ``cluster``'s accelerator, from the training model's per-accelerator compute
    profile (:func:`tierwise.specs.compute.compute_profile`, catalog/compute.yaml) and its global residuals.

    * GEMMs: ``gemm_bf16_fraction x clock_factor x matmul_residual`` -- exactly the training model's
      large-GEMM efficiency (:func:`tierwise.pricing.kernels.per_accelerator`), or the cluster's own
      ``compute: matmul_efficiency_max`` (a ``measure gemm`` figure) in place of the catalog fraction; FP8
      weights at ``fp8_efficiency_ratio`` of it, FP4 at ``fp4_efficiency_ratio`` of FP8's.
    * Attention: the fitted forward efficiency of the kernel family the engine runs (``params.attention_kernel``;
      ``auto``: the generation's default, :func:`tierwise.specs.compute.default_attention_kernel`), at the
      sustained clock.
    * HBM: the measured streaming fraction (or the cluster's ``compute: memory_bound_efficiency``) times
      ``hbm_residual``.
    """
    key = (id(cluster), cluster.name, precision, params, id(load_parameters()))
    hit = _EFFICIENCIES.get(key)
    if hit is not None and hit[0] is cluster:
        return hit[1]
    acc = cluster.accelerator
    prof = compute_profile(acc)
    own = getattr(cluster, "compute", None) or {}
    gemm = float(own.get("matmul_efficiency_max", prof.gemm_fraction * prof.clock_factor)) * params.matmul_residual
    if precision in ("fp8", "fp4"):
        gemm *= params.fp8_efficiency_ratio
    from tierwise.pricing.kernels import resolved_attention_kernel

    family = attention_efficiency_family(resolved_attention_kernel(params.attention_kernel, acc.generation))
    att = getattr(params, f"attention_efficiency_{family}", params.attention_efficiency_flash2) * prof.clock_factor
    hbm = float(own.get("memory_bound_efficiency", prof.hbm_fraction)) * params.hbm_residual
    out = Efficiencies(matmul=min(gemm, 1.0), attention=min(att, 1.0), hbm=min(hbm, 1.0))
    if len(_EFFICIENCIES) > 256:
        _EFFICIENCIES.clear()
    _EFFICIENCIES[key] = (cluster, out)
    return out


_EFFICIENCIES: dict = {}
"""Computed efficiencies by (cluster, precision, parameters), kept for the process (the bisections ask for the
same few hundreds of times)."""


def peak_flops(cluster: Cluster, precision: str, params: ServingParameters | None = None) -> float:
    """Dense peak FLOP/s of the part at the weight precision (FP4 weights run FP4 GEMMs on Blackwell), scaled
    for FP4 by ``fp4_efficiency_ratio`` (the GEMM efficiency is applied on top by the callers)."""
    peak = cluster.accelerator.peak_flops_per_s(precision)
    if precision == "fp4" and params is not None:
        peak *= params.fp4_efficiency_ratio
    return peak


def linear_flops_per_token(model: ModelSpec) -> float:
    """Forward FLOPs of the weight GEMMs per token (``2 x active parameters``; ``top_k`` routed experts, the
    shared experts and the router on MoE layers; the LM head once per token)."""
    s = shape_of(model)
    attn = sum(g.flops_per_token for g in s.attention_gemms)
    dense = sum(g.flops_per_token for g in s.dense_mlp_gemms)
    moe = sum(g.flops_per_token * (s.top_k if g.expert else 1) for g in s.moe_gemms)
    return s.num_layers * attn + s.num_dense_layers * dense + s.num_moe_layers * moe + 2.0 * s.lm_head_params


def linear_time(model: ModelSpec, cluster: Cluster, precision: str, tp, ep, tokens, params: ServingParameters
                ) -> np.ndarray:
    """Seconds of the weight GEMMs' math over ``tokens`` tokens on one instance (``tp`` ranks, experts over ``ep``).

    Dense GEMMs: ``F / (tp P eff_mm)``. Routed experts run as one grouped GEMM per projection over the rank's
    ``E / ep`` experts, each split ``tp / ep`` ways, with ``T k / E`` rows per expert (balanced routing): the
    training model's tile- and wave-quantization efficiency
    (:func:`tierwise.specs.compute.grouped_gemm_efficiency`) multiplies ``eff_mm``, and across ``ep > 1`` ranks
    the busiest one sets the pace (the training fit's ``moe_load_imbalance``, read through
    :func:`load_parameters`).
    """
    shape = shape_of(model)
    tp = np.asarray(tp, dtype=float)
    tokens = np.asarray(tokens, dtype=float)
    eff = efficiencies(cluster, precision, params).matmul
    peak = peak_flops(cluster, precision, params)
    if shape.num_moe_layers == 0:
        return linear_flops_per_token(model) * tokens / (tp * peak * eff)
    ep = np.asarray(ep, dtype=float)
    k_top, experts = shape.top_k, shape.num_experts
    expert_flops = sum(g.flops_per_token for g in shape.moe_gemms if g.expert) * k_top * shape.num_moe_layers
    dense_t = (linear_flops_per_token(model) - expert_flops) * tokens / (tp * peak * eff)
    etp = tp / ep
    rows = tokens * k_top / experts
    sms = compute_profile(cluster.accelerator).sms
    imbalance = np.where(ep > 1, float(load_parameters().compute.get("moe_load_imbalance", 1.0)), 1.0)
    expert_t = 0.0
    for g in shape.moe_gemms:
        if not g.expert:
            continue
        n = g.out_features / (etp if g.split == "out" else 1)
        k = g.in_features / (etp if g.split == "in" else 1)
        geff = grouped_gemm_efficiency(rows, n, k, experts / ep, sms)
        expert_t = expert_t + g.flops_per_token * k_top * shape.num_moe_layers * tokens / (tp * peak * eff * geff)
    return dense_t + expert_t * imbalance


def _attn_flops_per_token(model: ModelSpec, context) -> np.ndarray:
    """Attention core FLOPs per token over all layers at average context ``context`` (no causal halving:
    the caller passes the average keys a query sees)."""
    s = shape_of(model)
    return attention_core_flops_per_token(model, s, np.maximum(np.asarray(context, dtype=float), 1.0),
                                          causal_halving=False) * model.num_layers


_CURVES: dict = {}
_GRID_TOKENS = 2.0 ** np.arange(0, 24.25, 0.25)
"""Token counts at which each collective's time is tabulated: 1 to 2^24, four points per octave."""


def _curve(cluster: Cluster, kind: str, group: int, bytes_per_token: float) -> np.ndarray:
    """Time of ``kind`` over ``group`` consecutive ranks at every :data:`_GRID_TOKENS` (one vectorized
    :func:`collective_cost` call per geometry, kept for the process: the planner's bisections query the same
    few geometries hundreds of times)."""
    key = (id(cluster), cluster.name, kind, group, bytes_per_token, id(load_parameters()))
    if key not in _CURVES:
        size = _GRID_TOKENS * bytes_per_token
        span = group_span(cluster, np.full(size.shape, group), 1)
        _CURVES[key] = collective_cost(kind, size, span, cluster).time_s
    return _CURVES[key]


def _collective(cluster: Cluster, kind: str, group, tokens, bytes_per_token: float) -> np.ndarray:
    """Seconds of ``kind`` over groups of ``group`` ranks moving ``tokens x bytes_per_token`` bytes, read off the
    tabulated curve (linear between grid points: the collective model is a minimum of affine lines in the size,
    so the chord of a quarter octave is within a fraction of a percent of it)."""
    out = np.zeros(np.shape(tokens))
    for g in np.unique(group):
        if g <= 1:
            continue
        sel = group == g
        out = np.where(sel, np.interp(tokens, _GRID_TOKENS, _curve(cluster, kind, int(g), bytes_per_token)), out)
    return out


def comm_time(model: ModelSpec, cluster: Cluster, tp, ep, tokens, weight_precision: str) -> np.ndarray:
    """TP all-reduces and EP all-to-alls of one forward over ``tokens`` tokens on one instance (seconds).

    Group placement: TP ranks are consecutive GPUs (stride 1), EP ranks too (EP folds into the TP ranks).
    The collective model's host launch overhead is removed per call (CUDA graphs; params docstring)."""
    tp = np.asarray(tp, dtype=np.int64)
    ep = np.asarray(ep, dtype=np.int64)
    tokens = np.asarray(tokens, dtype=float)
    tp, ep, tokens = np.broadcast_arrays(tp, ep, tokens)
    launch = load_parameters().collectives["launch_overhead"]
    h = model.hidden_size
    out = np.zeros(tp.shape)
    if np.any(tp > 1):
        ar = _collective(cluster, "all-reduce", tp, tokens, h * 2.0)
        ar = np.where(tp > 1, np.maximum(ar - launch, 0.0), 0.0)
        # one after attention, one after the MLP (or the MoE combine) per layer
        out = out + 2.0 * model.num_layers * ar
    if model.moe is not None and np.any(ep > 1):
        dispatch_b = 1.0 if weight_precision in ("fp8", "fp4") else 2.0  # FP8 dispatch with FP8 weights
        k = model.moe.top_k
        a2a_d = _collective(cluster, "all-to-all", ep, tokens, k * h * dispatch_b)
        a2a_c = _collective(cluster, "all-to-all", ep, tokens, k * h * 2.0)
        a2a = np.where(ep > 1, np.maximum(a2a_d - launch, 0) + np.maximum(a2a_c - launch, 0), 0.0)
        out = out + model.num_moe_layers * a2a
    return out


def prefill_time(model: ModelSpec, cluster: Cluster, precision: str, tp, ep, input_len,
                 params: ServingParameters, num_requests=1.0) -> dict[str, np.ndarray]:
    """Prefill of ``num_requests`` prompts of ``input_len`` tokens on one instance: times and what bounds it.

    Returns ``compute_s``, ``memory_s`` (the weights read once), ``comm_s`` and ``total_s`` (module docstring).
    """
    tp = np.asarray(tp, dtype=float)
    n = np.asarray(num_requests, dtype=float)
    s = np.asarray(input_len, dtype=float)
    tokens = n * s
    bf16 = cluster.accelerator.peak_flops_per_s("bf16")
    eff = efficiencies(cluster, precision, params)
    lin = linear_time(model, cluster, precision, tp, ep, tokens, params)
    # causal: a query at position i sees i keys, s/2 on average
    eff_att = eff.attention * s / (s + params.attention_half_seq_tokens)
    att = _attn_flops_per_token(model, s / 2.0) * tokens / (tp * bf16 * eff_att)
    compute = lin + att
    from tierwise.serve.kv import weight_bytes_per_gpu

    memory = weight_bytes_per_gpu(model, precision, tp, ep) / (cluster.accelerator.hbm_bytes_per_s * eff.hbm)
    comm = comm_time(model, cluster, tp.astype(np.int64), ep, tokens, precision)
    total = np.maximum(compute, memory) + params.gemm_memory_overlap_loss * np.minimum(compute, memory) + comm
    return {"compute_s": compute + 0 * total, "memory_s": memory + 0 * total, "comm_s": comm + 0 * total,
            "total_s": total}


def decode_step_time(model: ModelSpec, cluster: Cluster, precision: str, kv_bytes_token: float, tp, ep, batch,
                     context, params: ServingParameters, prefill_tokens=0.0, prefill_context=0.0
                     ) -> dict[str, np.ndarray]:
    """One decode step of ``batch`` sequences at mean context ``context`` on one instance.

    ``prefill_tokens`` (with their mean context ``prefill_context``) are prompt tokens mixed into the same step
    (chunked prefill, Agrawal et al. 2024 "Sarathi-Serve", sec. 4): they add compute and communication but
    share the step's single read of the weights. Returns ``memory_s``, ``compute_s``, ``comm_s``,
    ``overhead_s``, ``total_s`` and ``bound`` (``memory`` or ``compute``).
    """
    tp = np.asarray(tp, dtype=float)
    batch = np.asarray(batch, dtype=float)
    ctx = np.asarray(context, dtype=float)
    pt = np.asarray(prefill_tokens, dtype=float)
    acc = cluster.accelerator
    eff = efficiencies(cluster, precision, params)
    hbm = acc.hbm_bytes_per_s * eff.hbm
    kv_gpu = kv_bytes_token * kv_fraction_per_gpu(model, tp)
    w_read = weight_bytes_read_per_step(model, precision, tp, ep, batch + pt)
    kv_read = batch * ctx * kv_gpu
    memory = (w_read + kv_read) / hbm
    bf16 = acc.peak_flops_per_s("bf16")
    lin = linear_time(model, cluster, precision, tp, ep, batch + pt, params)
    att_decode = _attn_flops_per_token(model, ctx) * batch / (tp * bf16 * eff.attention)
    pc = np.maximum(np.asarray(prefill_context, dtype=float), 1.0)
    eff_pf = eff.attention * pc / (pc + params.attention_half_seq_tokens)
    att_prefill = _attn_flops_per_token(model, pc / 2.0) * pt / (tp * bf16 * eff_pf)
    compute = lin + att_decode + att_prefill
    # the GEMMs and the attention kernel run one after the other: each is its own roofline
    gemm_t = np.maximum(w_read / hbm, lin) + params.gemm_memory_overlap_loss * np.minimum(w_read / hbm, lin)
    attn_t = np.maximum(kv_read / hbm, att_decode) + att_prefill
    comm = comm_time(model, cluster, tp.astype(np.int64), ep, batch + pt, precision)
    overhead = params.step_overhead_s + 0 * memory
    total = gemm_t + attn_t + comm + overhead
    bound = np.where(memory >= compute, "memory", "compute")
    return {"memory_s": memory + 0 * total, "compute_s": compute + 0 * total, "comm_s": comm + 0 * total,
            "overhead_s": overhead + 0 * total, "total_s": total, "bound": bound}
