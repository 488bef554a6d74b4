"""One roofline per kernel family, shared by the training step and the serving phases.

A part's rates (:class:`ComputeRates`) come from its datasheet, its microbenchmarked fractions
(catalog/compute.yaml through :func:`tierwise.specs.compute.compute_profile`) and the global fitted
residuals of the ``compute:`` parameters, which arrive as an argument. Every kernel family is priced by one
function here:

* **weight GEMMs** (:func:`gemm_time`): ``t = max(F / (peak x eff), B / HBM) + w x B / HBM``, an additive
  roofline (Williams et al. 2009, CACM 52(4)) whose ``w`` (``matmul_memory_weight``) is the fraction of the
  operand traffic ``B`` that the MMA pipeline does not hide; routed experts as one grouped GEMM
  (:func:`tierwise.specs.compute.grouped_gemm_efficiency`);
* **the attention core** (:func:`attention_time`): the two GEMMs at the kernel family's efficiency times the
  sequence-length curve ``s / (s + s_half)``, and one exp2 per score on the special-function unit, overlapped
  (FA3 / cuDNN class) or not (FA2 / SDPA); its backward recomputes the scores; a cache it reads (decode) is its
  memory side, on the GEMMs' roofline;
* **elementwise kernels** (:func:`elementwise_time`): bytes (:mod:`tierwise.workload.kernels`) at the
  memory-bound rate;
* **the LM head** (:func:`lm_head_time`): a GEMM whose logits traffic the loss (training) or the sampler
  (serving) counts, so only its weight read is its memory side.

:func:`layer_forward` composes them into one layer's forward on one rank: a training micro-batch and a serving
prefill of the same tokens are this same function's answer (the pricing-core issue's rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tierwise.specs.compute import (
    ATTENTION_KERNELS,
    attention_backward_generation_factor,
    attention_efficiency_family,
    attention_generation_factor,
    attention_kernel_overlap,
    check_kernel_generation,
    compute_profile,
    default_attention_kernel,
    grouped_gemm_efficiency,
)
from tierwise.specs.model import ModelSpec
from tierwise.specs.parameters import Parameters
from tierwise.workload.flops import (
    Gemm,
    ModelShape,
    attention_core_flops_per_token,
    attention_scores_per_token,
)
from tierwise.workload.kernels import elementwise_bytes

__all__ = ["ComputeRates", "compute_parameters", "compute_rates", "per_accelerator", "gemm_time", "gemm_peak",
           "attention_time", "attention_kernel_rates", "attention_backward_factors", "resolved_attention_kernel",
           "elementwise_time",
           "lm_head_time", "LayerWork", "LayerForward", "layer_gemms", "layer_forward", "overlapped",
           "unfused_attention_times", "BYTES_PER_ELEMENT", "ATTENTION_BACKWARD_FLOPS"]

BYTES_PER_ELEMENT = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625}
"""GEMM operand bytes per element by precision. FP4 is NVFP4: a 4-bit E2M1 value plus one FP8 (E4M3) scale per
block of 16 values, 4.5 bits (NVIDIA, "Introducing NVFP4 for efficient and accurate low-precision inference",
2025); FP8 per-tensor scales are negligible."""


ATTENTION_BACKWARD_FLOPS = 2.5
"""Backward FLOPs of a fused attention core over its forward's: the forward runs two GEMMs per tile (``S = Q K^T``,
``O = P V``), the backward five (it recomputes ``S = Q K^T``, then ``dV = P^T dO``, ``dP = dO V^T``,
``dQ = dS K``, ``dK = dS^T Q``), each of the same size: 5 / 2 = 2.5 (Dao 2023, FlashAttention-2,
arXiv:2307.08691, sec. 3.1.2 and the benchmarks of sec. 4.1, which count the backward as 2.5x the forward)."""


def compute_parameters(parameters: Parameters) -> dict:
    """The ``compute:`` block of ``parameters`` as a plain mapping of values (its ``source`` and ``fit`` notes
    dropped): what every pricing function takes as ``cparams``."""
    return {k: v for k, v in parameters.compute.items() if k not in ("source", "fit")}


def per_accelerator(cparams: Mapping, prof) -> dict:
    """``cparams`` with the absolute large-GEMM and memory-bound efficiencies of one accelerator.

    ``matmul_efficiency_max`` = the accelerator's measured large-GEMM fraction (compute.yaml, times its
    sustained-clock factor under a power cap), or the cluster's own ``measure gemm`` figure where its
    ``compute:`` block (or an explicit parameter) gives one, times the global fitted ``matmul_residual``
    (what training GEMMs reach of a microbenchmark's best shape). ``memory_bound_efficiency`` = the
    measured streaming HBM fraction, or the cluster's ``measure hbm`` figure, times ``memory_bound_residual``.
    """
    out = dict(cparams)
    gemm = cparams.get("matmul_efficiency_max", prof.gemm_fraction * prof.clock_factor)
    out["matmul_efficiency_max"] = gemm * cparams.get("matmul_residual", 1.0)
    out["memory_bound_efficiency"] = (cparams.get("memory_bound_efficiency", prof.hbm_fraction)
                                      * cparams.get("memory_bound_residual", 1.0))
    return out


@dataclass(frozen=True)
class ComputeRates:
    """What the kernel rooflines need of one accelerator under one parameter set (:func:`compute_rates`)."""

    bf16_peak: float
    """Dense BF16 FLOP/s (datasheet)."""
    fp8_peak: float
    """Dense FP8 FLOP/s (the BF16 peak on a part without FP8)."""
    fp4_peak: float
    """Dense FP4 FLOP/s (the FP8 peak on a part without FP4)."""
    hbm: float
    """Datasheet HBM bytes/s: the GEMM roofline's memory side."""
    memory_bound: float
    """Bytes/s the small elementwise kernels reach: datasheet x ``memory_bound_efficiency``."""
    streaming: float
    """Bytes/s of long streaming passes: datasheet x the measured device-to-device copy fraction."""
    sms: int
    clock_factor: float
    exp2_per_s: float
    generation: str
    params: Mapping
    """The parameters with this part's absolute efficiencies (:func:`per_accelerator`)."""


def compute_rates(acc, cparams: Mapping) -> ComputeRates:
    """:class:`ComputeRates` of accelerator ``acc`` under the ``compute:`` parameters ``cparams`` (global fit,
    a cluster's measured ``compute:`` block and explicit overrides, already merged by the caller)."""
    prof = compute_profile(acc)
    p = per_accelerator(cparams, prof)
    bf16 = acc.peak_flops_per_s("bf16")
    fp8 = acc.peak_dense_flops_per_s.get("fp8", bf16)
    return ComputeRates(
        bf16_peak=bf16, fp8_peak=fp8, fp4_peak=acc.peak_dense_flops_per_s.get("fp4", fp8),
        hbm=acc.hbm_bytes_per_s, memory_bound=acc.hbm_bytes_per_s * p["memory_bound_efficiency"],
        streaming=acc.hbm_bytes_per_s * prof.hbm_fraction, sms=prof.sms, clock_factor=prof.clock_factor,
        exp2_per_s=prof.exp2_per_s, generation=acc.generation, params=p,
    )


def gemm_peak(rates: ComputeRates, fp8, fp4=False):
    """(peak FLOP/s, operand bytes per element) of the weight GEMMs at each plan's precision: BF16 at the BF16
    peak; FP8 at the FP8 peak times ``fp8_efficiency_ratio`` (FP8 GEMMs reach that share of BF16's efficiency
    against their own peak); FP4 (NVFP4) at the FP4 peak times that and ``fp4_efficiency_ratio`` (its block
    scales are applied in the MMA pipeline)."""
    p = rates.params
    r8 = p.get("fp8_efficiency_ratio", 1.0)
    fp4 = np.asarray(fp4, dtype=bool)
    peak = np.where(fp4, rates.fp4_peak * r8 * p.get("fp4_efficiency_ratio", 1.0),
                    np.where(fp8, rates.fp8_peak * r8, rates.bf16_peak))
    in_bytes = np.where(fp4, BYTES_PER_ELEMENT["fp4"], np.where(fp8, BYTES_PER_ELEMENT["fp8"], 2.0))
    return peak, in_bytes


def gemm_time(gemm: Gemm, tokens, tp, etp, peak, cparams: Mapping, *, experts_per_rank=None, top_k=1,
              hbm=None, in_bytes=2.0, sms=0, imbalance=1.0, touched=None):
    """Seconds and FLOPs of one forward GEMM over ``tokens`` tokens on one rank (arrays).

    ``t = max(2 M N K / (peak x eff(M, N, K)), bytes / HBM) + w x bytes / HBM`` with
    ``eff = max / (1 + d0/M + d0/N + d0/K)``
    (tile and wave quantization: a dimension near the tile size wastes part of each tile) and
    ``bytes = in_bytes (M K + K N) + 2 M N`` (operands read once, bf16 output written once). ``w``
    (``matmul_memory_weight``) is the fraction of that traffic time the MMA pipeline does not hide: an
    additive roofline (Williams et al. 2009, CACM 52(4)), so the part's own FLOP:byte ratio from its
    datasheet sets how much a skinny GEMM loses (H100: 295 FLOP/B vs A100: 156 FLOP/B), and a decode step's
    weight read runs at ``HBM / (1 + w)``.

    A routed-expert GEMM runs as one grouped GEMM over the rank's experts: its efficiency is further
    multiplied by :func:`tierwise.specs.compute.grouped_gemm_efficiency` (tile quantization of the rows per
    expert and of the expert width, wave quantization over ``sms``), and its time by ``imbalance`` (the busiest
    rank's tokens over the mean: the EP ranks meet at the combine all-to-all). ``touched``: expert weights the
    rank actually reads (a decode step of few tokens reads only the experts its tokens picked); default all
    ``experts_per_rank``.
    """
    split = np.where(gemm.expert, etp, tp) if gemm.split != "none" else 1
    split = np.asarray(split, dtype=float)
    n = gemm.out_features / (split if gemm.split == "out" else 1)
    k = gemm.in_features / (split if gemm.split == "in" else 1)
    if gemm.expert:
        # balanced routing: each of the rank's local experts sees tokens x top_k / experts_per_rank rows
        rows = tokens * top_k / experts_per_rank
        total_tokens = tokens * top_k
        copies = experts_per_rank
    else:
        rows = tokens
        total_tokens = tokens
        copies = 1.0
    d0, emax = cparams["matmul_half_dim"], cparams["matmul_efficiency_max"]
    eff = emax / (1 + d0 / np.maximum(rows, 1) + d0 / n + d0 / k)
    flops = 2.0 * n * k * total_tokens
    if gemm.expert:
        eff = eff * grouped_gemm_efficiency(rows, n, k, experts_per_rank, sms)
    t = flops / (peak * eff)
    if gemm.expert:
        t = t * imbalance
    if hbm is not None:
        weights = copies if touched is None else touched
        traffic = copies * (in_bytes * rows * k + 2.0 * rows * n) + weights * in_bytes * k * n
        memory_t = traffic / hbm
        # the roofline's floor: no GEMM finishes before its operands have crossed HBM once at the
        # datasheet rate (small-M expert GEMMs and decode-like shapes are memory-bound)
        t = np.maximum(t, memory_t) + cparams.get("matmul_memory_weight", 0.0) * memory_t
    return t, flops


def overlapped(t_mm, t_exp, overlap):
    """Matmul and exponential time of an attention kernel: ``max + (1 - overlap) x min`` (1: the max, FA3 /
    cuDNN class; 0: the sum, FA2 / SDPA: compute.yaml attention_kernels)."""
    return np.maximum(t_mm, t_exp) + (1.0 - overlap) * np.minimum(t_mm, t_exp)


_KERNEL_FAMILY = {"flash3": "cudnn", "triton": "flash2"}
"""Kernel names priced as another family: FlashAttention-3 is of the cuDNN fused-attention class
(warp-specialised, softmax overlapped with the GEMMs; Shah et al. 2024 sec. 3), Triton flash attention has
FlashAttention-2's structure (compute.yaml attention_kernels; docs/compute.md: why it has no efficiency of its
own yet)."""


def resolved_attention_kernel(name: str, generation: str) -> str:
    """The kernel family ``name`` is priced as on ``generation``: ``auto`` (or a name the compute model does
    not know) is the generation's default (:func:`tierwise.specs.compute.default_attention_kernel`),
    ``flash3`` / ``triton`` their families (:data:`_KERNEL_FAMILY`). A kernel named on a generation it does not
    run on (FlashAttention-3 off Hopper) is a :class:`~tierwise.errors.SpecError`
    (:func:`tierwise.specs.compute.check_kernel_generation`)."""
    check_kernel_generation(name, generation)
    name = _KERNEL_FAMILY.get(name, name)
    return name if name in ATTENTION_KERNELS else default_attention_kernel(generation)


def attention_kernel_rates(kernels: list[str], inverse, rates: ComputeRates):
    """(matmul efficiency, overlap) arrays of attention kernels named ``kernels[inverse]``: each family's
    global ``attention_efficiency_<family>`` (one fitted value per family, the Hopper value) times the family's
    measured generation ratio (:func:`tierwise.specs.compute.attention_generation_factor`: FlashAttention-2 and
    SDPA's flash backend 2.1x on Ampere and 0.55x on Blackwell, cuDNN 1.13x and 0.96x; compute.yaml
    ``forward_fraction``, docs/compute.md), and its exp2 overlap; the few distinct names are resolved once, so a batch stays vectorized."""
    kinds = [resolved_attention_kernel(k, rates.generation) for k in kernels]
    eff = np.array([rates.params[f"attention_efficiency_{attention_efficiency_family(k)}"]
                    * attention_generation_factor(k, rates.generation) for k in kinds])
    overlap = np.array([attention_kernel_overlap(k, rates.generation) for k in kinds])
    return eff[inverse], overlap[inverse]


def attention_backward_factors(kernels: list[str], inverse, generation: str) -> np.ndarray:
    """Per-generation factors on the backward of attention kernels named ``kernels[inverse]``: the fitted
    ``attention_backward_ratio`` is the Hopper value, a family's backward on ``generation`` runs at it times
    :func:`tierwise.specs.compute.attention_backward_generation_factor` (the backward-over-forward rate of one
    benchmark run there against the same on Hopper: cuDNN 0.966 and FlashAttention-2 / SDPA 0.847 on Blackwell,
    1 without a measurement; compute.yaml ``backward_rate``, docs/compute.md). Only the backward: the forward's
    factor is :func:`attention_kernel_rates`'."""
    kinds = [resolved_attention_kernel(k, generation) for k in kernels]
    return np.array([attention_backward_generation_factor(k, generation) for k in kinds])[inverse]


def attention_time(core_flops, shape: ModelShape, rates: ComputeRates, *, seq_len, eff, overlap, kv_bytes=None,
                   backward_factor=1.0):
    """(forward, backward) seconds of a fused attention core doing ``core_flops`` on one rank.

    The two forward GEMMs (QK^T, PV) at the kernel family's matmul efficiency ``eff`` times
    ``s / (s + attention_half_seq_tokens)`` for key sequences of ``seq_len`` (fewer key tiles per query tile
    to amortize each tile's setup and softmax rescaling over; s_half from measured FA2/FA3 throughput) and
    the sustained clock, and one exp2 per unmasked score on the special-function unit (the core FLOPs over
    ``2 (d_qk + d_v)`` per score, :func:`tierwise.workload.flops.attention_scores_per_token`): FA3/cuDNN-class
    kernels overlap the two (max), FA2/SDPA run them one after the other (sum) (docs/compute.md). The
    backward recomputes the scores (one more exp2 per score) and runs five GEMMs to the forward's two
    (:data:`ATTENTION_BACKWARD_FLOPS`: 2.5x the forward's FLOPs) at ``attention_backward_ratio`` of the forward's
    efficiency per FLOP (one fitted global, the Hopper value) times ``backward_factor``, the kernel family's
    generation factor on the backward alone (:func:`attention_backward_factors`). ``kv_bytes``: a KV cache the
    kernel streams from HBM (decode), its memory side on the GEMMs' roofline (:func:`gemm_time`).
    """
    p = rates.params
    seq_eff = seq_len / (seq_len + p["attention_half_seq_tokens"])
    mm_eff = eff * seq_eff * rates.clock_factor
    t_exp = core_flops / (2.0 * (shape.qk_head_dim + shape.v_head_dim)) / rates.exp2_per_s
    fwd = overlapped(core_flops / (rates.bf16_peak * mm_eff), t_exp, overlap)
    bwd_eff = mm_eff * p["attention_backward_ratio"] * backward_factor
    bwd = overlapped(ATTENTION_BACKWARD_FLOPS * core_flops / (rates.bf16_peak * bwd_eff), t_exp, overlap)
    if kv_bytes is not None:
        memory_t = kv_bytes / rates.hbm
        fwd = np.maximum(fwd, memory_t) + p.get("matmul_memory_weight", 0.0) * memory_t
    return fwd, bwd


UNFUSED_SCORE_BYTES_FORWARD = 13.0
"""HBM bytes per attention score of the unfused (pre-FlashAttention) Megatron-LM attention core, forward.

Megatron-LM 2021-22 ``megatron/model/transformer.py`` ``ParallelAttention`` (``CoreAttention`` from mid 2022)
materializes the ``b x a/t x s x s`` score tensor in fp16/bf16 (Korthikanti et al. 2022, arXiv:2205.05198,
section 4.1: the attention core stores ``5 a s^2 b`` bytes, softmax output 2, dropout mask 1, dropout output 2):
``torch.baddbmm`` writes the scores (2 B), ``FusedScaleMaskSoftmax`` (the fused upper-triangular masked
softmax kernel) reads and writes them (4 B), ``attention_dropout`` reads them and writes its output and a
one-byte mask (5 B), and ``torch.bmm`` with V reads the dropout output (2 B): 13 B per score."""

UNFUSED_SCORE_BYTES_BACKWARD = 19.0
"""HBM bytes per score of the same core's backward: the bmm with V writes the probabilities' gradient (2 B) and
reads the dropout output for V's gradient (2 B); the dropout backward reads the gradient and the mask and
writes (5 B); the softmax backward reads the gradient and the softmax output and writes (6 B); the baddbmm's
two gradient GEMMs (Q and K) read the scores' gradient (4 B): 19 B."""


def unfused_attention_times(model: ModelSpec, shape: ModelShape, rates: ComputeRates, *, tokens, seq, tp):
    """Forward and backward seconds of one layer's unfused attention core on one rank.

    Before FlashAttention (Dao et al. 2022; Megatron-LM took ``--use-flash-attn`` in 2023), Megatron-LM's
    attention core computed every score of the ``s x s`` matrix (the causal mask is applied inside the softmax,
    so no FLOPs are saved) with two batched cuBLAS GEMMs (``baddbmm`` QK^T, ``bmm`` with V) and ran the scale,
    mask, softmax and dropout as memory-bound kernels over the score tensor: forward
    :data:`UNFUSED_SCORE_BYTES_FORWARD` and backward :data:`UNFUSED_SCORE_BYTES_BACKWARD` bytes per score at
    the accelerator's measured streaming rate (each pass streams a tensor of hundreds of MB, unlike the small
    elementwise kernels the fitted ``memory_bound_residual`` also covers), the GEMMs (``2 (d_qk + d_v)`` FLOPs
    per score forward, twice that backward) at ``matmul_efficiency_max`` of the BF16 peak (as the logits GEMM).
    The softmax's exponentials run inside the memory-bound softmax kernel. Selective recompute repeats exactly
    this forward (Korthikanti et al. 2022, section 4.3), which the paper measures at 1.3 ms per layer of its
    22B model (Table 4: backward 13.2 ms with selective recompute against 11.9 ms without).
    """
    scores = tokens * attention_scores_per_token(model, shape, seq, causal_halving=False) / tp
    gemm_f = 2.0 * (shape.qk_head_dim + shape.v_head_dim) * scores
    rate = rates.bf16_peak * rates.params["matmul_efficiency_max"]
    return (gemm_f / rate + UNFUSED_SCORE_BYTES_FORWARD * scores / rates.streaming,
            2.0 * gemm_f / rate + UNFUSED_SCORE_BYTES_BACKWARD * scores / rates.streaming)


def elementwise_time(bytes_, rates: ComputeRates):
    """Seconds of memory-bound kernels moving ``bytes_`` at the part's memory-bound rate (datasheet x measured
    streaming fraction x the fitted ``memory_bound_residual``, :func:`per_accelerator`)."""
    return bytes_ / rates.memory_bound


def lm_head_time(model: ModelSpec, rates: ComputeRates, *, tokens, tp, peak):
    """Seconds of the LM head GEMM (``2 h V`` FLOPs per token, vocabulary split over ``tp``) on one rank: its
    math at the large-GEMM efficiency, with the BF16 weight read as its memory side (:func:`gemm_time`'s
    roofline; the logits it writes are counted by the loss in training and by the sampler in serving)."""
    p = rates.params
    flops = 2.0 * model.hidden_size * model.vocab_size / tp * tokens
    memory_t = 2.0 * model.hidden_size * model.vocab_size / tp / rates.hbm
    return (np.maximum(flops / (peak * p["matmul_efficiency_max"]), memory_t)
            + p.get("matmul_memory_weight", 0.0) * memory_t)


@dataclass(frozen=True)
class LayerWork:
    """What one rank runs of one layer's forward (arrays over plans or candidates): the same record for a
    training micro-batch and a serving prefill or decode step."""

    tokens: np.ndarray
    """Tokens through the layer's GEMMs on the rank."""
    seq: np.ndarray
    """Sequence length the attention's FLOPs are counted at (causal: keys per query average half)."""
    seq_chunk: np.ndarray
    """Keys per query tile the attention kernel streams (``seq / cp``): its efficiency curve's length."""
    tp: np.ndarray
    etp: np.ndarray
    ep: np.ndarray
    seq_shard: np.ndarray
    """The rank's share of hidden-size elementwise work: tp under sequence parallelism, else 1."""
    expert_tokens: np.ndarray
    """Tokens whose routed-expert work the rank runs (before ``top_k``)."""
    imbalance: np.ndarray
    """The busiest EP rank's routed tokens over the mean."""
    fp8: np.ndarray
    """FP8 (or FP4) GEMMs."""
    fp4: np.ndarray
    cast_inputs: np.ndarray
    """Each low-precision GEMM's activation input cast by a kernel of its own (Transformer Engine, per GEMM);
    False where the cast is fused into the kernel that writes the input (serving engines' fused
    norm-and-quantize and activation-and-quantize kernels)."""
    attention_eff: np.ndarray
    attention_overlap: np.ndarray
    unfused: np.ndarray
    """The unfused (pre-FlashAttention) attention core."""
    fused_elementwise: np.ndarray
    attention_backward_factor: np.ndarray | float = 1.0
    """The attention kernel family's generation factor on its backward (:func:`attention_backward_factors`)."""


@dataclass(frozen=True)
class LayerForward:
    """Forward seconds of one layer on one rank, by kernel family (arrays)."""

    dense_gemm: np.ndarray
    moe_gemm: np.ndarray
    attention: np.ndarray
    attention_backward: np.ndarray
    elementwise_dense: np.ndarray
    elementwise_moe: np.ndarray
    permute: np.ndarray
    """Of ``elementwise_moe``: the token permute and unpermute."""
    gemm_peak: np.ndarray

    @property
    def dense(self) -> np.ndarray:
        """A dense layer's forward."""
        return self.dense_gemm + self.attention + self.elementwise_dense

    @property
    def moe(self) -> np.ndarray:
        """A MoE layer's forward."""
        return self.moe_gemm + self.attention + self.elementwise_moe


def layer_gemms(model: ModelSpec, shape: ModelShape, rates: ComputeRates, work: LayerWork, moe_layer: bool, *,
                touched_fraction=None):
    """Forward seconds and FLOPs of the weight GEMMs of one layer on one rank (routed experts over
    ``work.expert_tokens`` tokens). ``touched_fraction``: the share of the rank's experts whose weights are
    read (decode; default all)."""
    peak, in_bytes = gemm_peak(rates, work.fp8, work.fp4)
    tp, etp, ep, tokens = work.tp, work.etp, work.ep, work.tokens
    cp_ = rates.params
    lin_t = np.zeros(np.shape(tokens))
    lin_f = np.zeros(np.shape(tokens))
    gemms = list(shape.attention_gemms)
    if moe_layer:
        experts_per_rank = shape.num_experts / ep
        touched = None if touched_fraction is None else experts_per_rank * touched_fraction
        for g in shape.moe_gemms:
            t, f = gemm_time(g, work.expert_tokens if g.expert else tokens, tp, etp, peak, cp_,
                             experts_per_rank=experts_per_rank, top_k=shape.top_k, hbm=rates.hbm,
                             in_bytes=in_bytes, sms=rates.sms, imbalance=work.imbalance, touched=touched)
            lin_t, lin_f = lin_t + t, lin_f + f
    else:
        gemms += list(shape.dense_mlp_gemms)
    for g in gemms:
        t, f = gemm_time(g, tokens, tp, etp, peak, cp_, hbm=rates.hbm, in_bytes=in_bytes)
        lin_t, lin_f = lin_t + t, lin_f + f
    return lin_t, lin_f


def layer_forward(model: ModelSpec, shape: ModelShape, rates: ComputeRates, work: LayerWork) -> LayerForward:
    """Forward time of one layer (dense and MoE) on one rank: weight GEMMs, the causal attention core over
    ``work.seq`` and the elementwise kernels (module docstring). A training micro-batch of ``b x s`` tokens and
    a serving prefill of the same tokens on the same part and kernels get the same answer from here."""
    peak, _ = gemm_peak(rates, work.fp8, work.fp4)
    dense_t, _ = layer_gemms(model, shape, rates, work, False)
    moe_t = layer_gemms(model, shape, rates, work, True)[0] if model.moe is not None else dense_t * 0
    core_f = attention_core_flops_per_token(model, shape, work.seq, causal_halving=True) * work.tokens / work.tp
    fwd, bwd = attention_time(core_f, shape, rates, seq_len=work.seq_chunk, eff=work.attention_eff,
                              overlap=work.attention_overlap, backward_factor=work.attention_backward_factor)
    if np.any(work.unfused):
        u_fwd, u_bwd = unfused_attention_times(model, shape, rates, tokens=work.tokens, seq=work.seq, tp=work.tp)
        fwd, bwd = np.where(work.unfused, u_fwd, fwd), np.where(work.unfused, u_bwd, bwd)
    eb = elementwise_bytes(model, shape, rates.params, tokens=work.tokens, tp=work.tp, etp=work.etp,
                           seq_shard=work.seq_shard, expert_tokens=work.expert_tokens, fp8=work.cast_inputs,
                           fused=work.fused_elementwise)
    return LayerForward(
        dense_gemm=dense_t, moe_gemm=moe_t, attention=fwd, attention_backward=bwd,
        elementwise_dense=elementwise_time(eb.dense, rates), elementwise_moe=elementwise_time(eb.moe, rates),
        permute=elementwise_time(eb.permute, rates), gemm_peak=peak,
    )
