"""One training step of many parallel plans at once: compute roofline, pipeline bubble, communication, overlap.

:func:`estimate` takes one model, one cluster and a :class:`~tierwise.specs.plan.PlanBatch` (numpy struct of
arrays) and returns :class:`StepEstimates` (arrays). A single estimate is a batch of one; the planner calls
the same function on millions of plans. The composition, per pipeline stage ``p`` and micro-batch:

``t_mb(p) = fwd(p) + bwd(p) + recompute(p) + exposed TP + exposed EP + exposed CP + PP send/recv``

``step = (m + (pp - 1) / v) x max_p t_mb(p) + exposed DP + exposed parameter gathers + optimizer
+ unpaired EP``

with ``m`` micro-batches and ``v`` interleaved chunks: the 1F1B bubble is ``(pp - 1)`` micro-batch times,
divided by ``v`` when interleaved (Narayanan et al. 2021, section 2.2.2). The slowest stage sets the pace.
Of the bubble's micro-batch times, the pipeline send/recv is replaced by the fill and drain's own transfers,
each stage boundary on the tier it crosses (:func:`_pipeline_p2p`; identical for a pipeline inside one tier).
The traffic of TP, EP, CP and PP comes as records from :mod:`tierwise.workload.traffic`; this module prices
them on the tiers their groups cross (:func:`tierwise.hierarchy.group_span`, :func:`~tierwise.hierarchy.
group_hops`: a ring at its slowest hop, a pipeline per boundary) and applies overlap.

Overlap switches (named, visible in ``assumed``):

* DP gradient reduction (``overlap_grad_reduce``) hides behind the backward of the *last* micro-batch
  only (with gradient accumulation earlier micro-batches have nothing to hide behind), except its last
  bucket (Megatron-Core DDP; PyTorch DDP, Li et al. VLDB 2020, section 3.2.3);
* the distributed optimizer's parameter all-gather (``overlap_param_gather``) hides behind the first
  micro-batch's forward; ZeRO-3 gathers are prefetched one layer ahead behind each micro-batch's compute
  (FSDP, Zhao et al. VLDB 2023, section 3.3), except the first layer's;
* TP communication is exposed unless ``tp_comm_overlap`` (then it hides behind the layer's GEMMs);
* CP ring attention overlaps with attention compute; PP send/recv is exposed;
* EP all-to-all is exposed unless ``ep_comm_overlap`` (Megatron-Core's combined 1F1B): then a micro-batch's
  dispatch and combine hide behind the adjacent micro-batch's compute, and only the step's first forward and
  last backward, which have no partner (``unpaired EP``: one micro-batch's all-to-all), stay exposed; the
  next micro-batch's activations are alive one micro-batch earlier (one more held in memory).

Compute roofline: GEMMs at ``peak x eff(M, N, K)`` plus the un-hidden part of their HBM traffic (an additive
roofline, so a part's own FLOP:byte ratio sets how much skinny GEMMs after TP splitting lose), FP8 GEMMs at
the FP8 peak plus their input casts as memory-bound traffic; the attention core (flash attention) at
``attention_efficiency`` of the BF16 peak forward and ``attention_backward_ratio`` of that backward, both times
``s / (s + attention_half_seq_tokens)`` for a rank's sequence chunk of ``s`` tokens;
elementwise kernels and the optimizer at ``memory_bound_efficiency`` of HBM bandwidth (with eager PyTorch,
``fused_elementwise`` false, RMSNorm, SwiGLU and rotary embedding move more bytes: ``_eager_extra_bytes``; an
unfused cross-entropy, ``fused_cross_entropy`` false, several passes over the logits). ZeRO-3/FSDP
collectives are issued per layer, and each micro-batch pays the implementation's buffer passes over the
unsharded parameters (gradient concatenate, cast and divide, gather copy-out: ``_shard_copy_bytes``) at the
memory-bound rate; hidden communication still costs ``overlap_interference`` of its time.
All parameters are global fractions in ``catalog/parameters.yaml`` (``compute:``), fitted by
``tierwise validate --fit`` (docs/validation.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields

import numpy as np

from tierwise.collectives.model import collective_cost as _collective_cost
from tierwise.hierarchy import TIER_ORDER, GroupHops, GroupSpan, group_hops, group_span, pair_span
from tierwise.specs.cluster import Cluster
from tierwise.specs.compute import (
    ATTENTION_KERNELS,
    attention_efficiency_family,
    attention_kernel_overlap,
    compute_profile,
    default_attention_kernel,
    grouped_gemm_efficiency,
    moe_expert_launches,
    moe_kernels_per_layer,
)
from tierwise.specs.framework import GRAD_REDUCE_DTYPES, ZERO2_SYNC
from tierwise.specs.model import ModelSpec
from tierwise.specs.parameters import load_parameters
from tierwise.specs.plan import PRECISION, ZERO3_GATHER, PlanBatch, Recompute, stage_layout
from tierwise.units import parse_bytes
from tierwise.workload.flops import (
    Gemm,
    ModelShape,
    attention_core_flops_per_token,
    attention_scores_per_token,
    model_shape,
)
from tierwise.workload.memory import activation_bytes_per_token_per_layer, in_flight_microbatches
from tierwise.workload.traffic import axis_strides, layer_traffic

__all__ = ["estimate", "StepEstimates", "AXES", "TIERS", "memory_bound_bytes_per_s", "resolved_attention_kernel"]

AXES = ("tp", "cp", "ep", "pp", "dp")
TIERS = TIER_ORDER


@dataclass
class StepEstimates:
    """Arrays (one entry per plan) of everything an estimate reports."""

    step_time_s: np.ndarray
    tokens_per_s: np.ndarray
    tokens_per_s_per_gpu: np.ndarray
    model_flops_per_step: np.ndarray
    hardware_flops_per_step: np.ndarray
    model_tflops_per_gpu: np.ndarray
    hardware_tflops_per_gpu: np.ndarray
    mfu: np.ndarray
    hfu: np.ndarray
    scaling_efficiency: np.ndarray
    compute_s: np.ndarray
    recompute_s: np.ndarray
    bubble_s: np.ndarray
    exposed_comm_s: np.ndarray
    optimizer_s: np.ndarray
    shard_copy_s: np.ndarray
    """ZeRO-3/FSDP buffer passes outside the collectives (gradient concatenate, cast and divide; gather copy-out)."""
    memory: dict[str, np.ndarray]
    axis_bytes: dict[str, np.ndarray]
    axis_time_s: dict[str, np.ndarray]
    axis_exposed_s: dict[str, np.ndarray]
    axis_tier: dict[str, np.ndarray]
    num_microbatches: np.ndarray
    peak_flops_per_s: np.ndarray
    notes: list[str] = field(default_factory=list)
    attention_s: np.ndarray | None = None
    """Of ``compute_s``: the attention core (flash-attention forward and backward) of the slowest stage."""
    memory_bound_s: np.ndarray | None = None
    """Of ``compute_s``: elementwise (memory-bound) kernels of the slowest stage."""

    def __len__(self) -> int:
        return int(self.step_time_s.shape[0])

    def per_tier(self, i: int) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for axis in AXES:
            tier = TIERS[int(self.axis_tier[axis][i])]
            if self.axis_bytes[axis][i] <= 0:
                continue
            slot = out.setdefault(tier, {"bytes": 0.0, "time_s": 0.0, "exposed_s": 0.0})
            slot["bytes"] += float(self.axis_bytes[axis][i])
            slot["time_s"] += float(self.axis_time_s[axis][i])
            slot["exposed_s"] += float(self.axis_exposed_s[axis][i])
        return out


# --- the estimator's intermediate results, one frozen record per step of _estimate (arrays over plans) ---

@dataclass(frozen=True)
class Derived:
    """Plan arrays as floats and what follows from them directly (:func:`_derive`)."""

    n: int
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    dp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    vpp: np.ndarray
    b: np.ndarray
    """Micro-batch size (sequences)."""
    s: np.ndarray
    """Sequence length (tokens)."""
    num_gpus: np.ndarray
    m: np.ndarray
    """Micro-batches per pipeline per step."""
    tokens: np.ndarray
    """Tokens of one micro-batch on one rank (``b s / cp``)."""
    sp: np.ndarray
    """Sequence parallelism in effect (bool)."""
    rc: np.ndarray
    """Recompute code (:class:`~tierwise.specs.plan.Recompute`)."""


@dataclass(frozen=True)
class LayerCompute:
    """Seconds of one layer on one rank for one micro-batch (:func:`_layer_compute`)."""

    bf16_peak: float
    plan_peak: np.ndarray
    hbm: float
    """Achievable HBM bytes/s (``memory_bound_efficiency`` of the datasheet)."""
    seq_shard: np.ndarray
    dense_lin_t: np.ndarray
    core_t: np.ndarray
    attn_bwd_extra: np.ndarray
    elem_dense: np.ndarray
    elem_moe: np.ndarray
    fwd_dense: np.ndarray
    fwd_moe: np.ndarray
    rec_dense: np.ndarray
    rec_moe: np.ndarray
    logits_t: np.ndarray
    logits_elem: np.ndarray
    moe_host_extra: np.ndarray | float = 0.0
    """Per MoE layer and micro-batch: CPU launch time beyond the MoE block's GPU time (forward + backward)."""


@dataclass(frozen=True)
class StageCompute:
    """Per (first, last, middle) stage: layers, MoE layers, forward and recompute seconds per micro-batch."""

    layers: tuple
    moe: tuple
    fwd: tuple
    rec: tuple
    mid_exists: np.ndarray


@dataclass(frozen=True)
class LayerComm:
    """Priced traffic records (:func:`_layer_comm`): per layer for TP, EP, CP; per micro-batch for PP."""

    tp_span: GroupSpan
    tp_layer_t: np.ndarray
    tp_layer_bytes: np.ndarray
    tp_layer_exposed: np.ndarray
    tp_moe_layer_t: np.ndarray
    """A MoE layer's TP time: the attention block's pair over tp, the MoE block's over the expert-TP group
    (``layer_traffic`` ``tp_moe``: none with etp = 1); equal to ``tp_layer_t`` for a dense model."""
    tp_moe_layer_bytes: np.ndarray
    tp_moe_layer_exposed: np.ndarray
    ep_span: GroupSpan
    ep_layer_t: np.ndarray
    ep_layer_bytes: np.ndarray
    ep_layer_exposed: np.ndarray
    cp_tier: np.ndarray
    cp_layer_t: np.ndarray
    cp_layer_exposed: np.ndarray
    cp_layer_bytes: np.ndarray
    pp_tier: np.ndarray
    pp_t: np.ndarray
    """Steady-state send/recv seconds per micro-batch of the slowest stage (:func:`_pipeline_p2p`)."""
    pp_fill: np.ndarray
    """Send/recv seconds of the fill and drain (:func:`_pipeline_p2p`)."""
    pp_bytes_mb: np.ndarray


@dataclass(frozen=True)
class Pipeline:
    """The slowest stage's micro-batch time and parts, and the bubble (:func:`_pipeline`)."""

    t_mb: np.ndarray
    slow: np.ndarray
    """Index of the slowest stage: 0 first, 1 last, 2 middle."""
    bubble: np.ndarray
    fwd: np.ndarray
    rec: np.ndarray
    comm: np.ndarray
    layers: np.ndarray
    moe_layers: np.ndarray


@dataclass(frozen=True)
class DataParallel:
    """Gradient reduction, parameter gathers and the optimizer of the slowest stage (:func:`_data_parallel`)."""

    time: np.ndarray
    exposed: np.ndarray
    bytes: np.ndarray
    tier: np.ndarray
    optimizer_s: np.ndarray
    shard_copy_s: np.ndarray
    stage_params: list
    """(dense, expert) parameters per GPU of the (first, last, middle) stage."""
    dp_group: np.ndarray
    edp: np.ndarray
    shard: np.ndarray
    hsdp: np.ndarray


_COMM_MEMO: dict | None = None


def _comm(kind, size, span, cluster):
    """:func:`tierwise.collectives.model.collective_cost`, memoized inside :func:`comm_memo` blocks.

    Communication costs do not depend on the ``compute:`` parameters, so a fit that re-estimates the same
    plans many times with new compute parameters reuses them (a pure speed-up: same results).
    """
    if _COMM_MEMO is None:
        return _collective_cost(kind, size, span, cluster)
    size_arr = np.asarray(size, dtype=float)
    key = (kind, id(cluster), cluster.name, size_arr.tobytes(), size_arr.shape,
           *(np.asarray(getattr(span, f)).tobytes() for f in span.__dataclass_fields__))
    if key not in _COMM_MEMO:
        _COMM_MEMO[key] = _collective_cost(kind, size, span, cluster)
    return _COMM_MEMO[key]


def _memo(key, make):
    """``make()``, memoized under ``key()`` inside :func:`comm_memo` blocks (placement does not depend on the
    ``compute:`` parameters either); outside them the key is never built."""
    if _COMM_MEMO is None:
        return make()
    k = key()
    if k not in _COMM_MEMO:
        _COMM_MEMO[k] = make()
    return _COMM_MEMO[k]


def _arrays_key(*arrays):
    return tuple(x for a in arrays if a is not None for x in (np.asarray(a).tobytes(), np.asarray(a).shape))


def _span(cluster, size, stride, outer_size=None, outer_stride=None):
    """:func:`tierwise.hierarchy.group_span`, memoized like :func:`_comm` inside :func:`comm_memo` blocks."""
    return _memo(lambda: ("span", id(cluster), cluster.name, outer_size is None,
                          *_arrays_key(size, stride, outer_size, outer_stride)),
                 lambda: group_span(cluster, size, stride, outer_size, outer_stride))


def _hops(cluster, size, stride, *, ring: bool) -> GroupHops:
    """:func:`tierwise.hierarchy.group_hops`, memoized like :func:`_span`."""
    return _memo(lambda: ("hops", ring, id(cluster), cluster.name, *_arrays_key(size, stride)),
                 lambda: group_hops(cluster, size, stride, ring=ring))


def _hop_times(cluster, msg_bytes, hops: GroupHops) -> list[np.ndarray | None]:
    """Seconds of one send/recv of ``msg_bytes`` across a hop of each class of ``hops`` (None for a class no
    group of the batch uses): the transfer priced on the tier that hop crosses."""
    out = []
    for k in range(len(hops.classes)):
        if np.any(hops.hops[k] > 0):
            # one geometry per class: a span of one element, broadcast against the message sizes
            span = pair_span(cluster, [k])
            out.append(np.broadcast_to(_comm("send-recv", msg_bytes, span, cluster).time_s, hops.slowest.shape))
        else:
            out.append(None)
    return out


def _pick(index, per_class: list[np.ndarray | None]) -> np.ndarray:
    """The entry of ``per_class`` at each element's class ``index`` (0 where the index is -1: one rank)."""
    out = np.zeros(np.shape(index))
    for k, values in enumerate(per_class):
        if values is not None:
            out = np.where(index == k, values, out)
    return out


@contextmanager
def comm_memo():
    """Memoize communication costs for the duration of the block (see :func:`_comm`)."""
    global _COMM_MEMO
    outer = _COMM_MEMO
    _COMM_MEMO = {} if outer is None else outer
    try:
        yield
    finally:
        _COMM_MEMO = outer


def _compute_params():
    p = load_parameters().compute
    return {k: v for k, v in p.items() if k not in ("source", "fit")}


def moe_imbalance(plans: PlanBatch, cparams) -> np.ndarray:
    """The busiest EP rank's routed tokens over the mean, per plan: ``moe_load_imbalance`` for a trained
    (dropless) router over ``ep > 1`` ranks; 1 when the router is forced to balance (plan ``moe_force_balance``:
    Megatron-Core ``--moe-router-force-load-balancing``, NeMo Automodel's fake balanced gate) and when one rank
    holds every expert (``ep = 1``: its grouped GEMMs run all ``tokens x top_k`` rows however they are spread).
    Every rank waits for the busiest at the combine all-to-all, so it scales the routed-expert GEMMs and the
    dispatch / combine (the busiest rank receives and returns that many tokens)."""
    force = getattr(plans, "moe_force_balance", None)
    force = np.zeros(len(plans), bool) if force is None else np.asarray(force, bool)
    return np.where(force | (plans.ep <= 1), 1.0, float(cparams.get("moe_load_imbalance", 1.0)))


def _gemm_time(gemm: Gemm, tokens, tp, etp, peak, cp_params, experts_per_rank=None, top_k=1, *,
               hbm_bytes_per_s=None, in_bytes=2.0, sms=0, imbalance=1.0):
    """Seconds and FLOPs of one forward GEMM over ``tokens`` tokens on one rank (arrays).

    ``t = max(2 M N K / (peak x eff(M, N, K)), bytes / HBM) + w x bytes / HBM`` with
    ``eff = max / (1 + d0/M + d0/N + d0/K)``
    (tile and wave quantization: a dimension near the tile size wastes part of each tile) and
    ``bytes = in_bytes (M K + K N) + 2 M N`` (operands read once, bf16 output written once). ``w``
    (``matmul_memory_weight``) is the fraction of that traffic time the MMA pipeline does not hide: an
    additive roofline (Williams et al. 2009, CACM 52(4)), so the part's own FLOP:byte ratio from its
    datasheet sets how much a skinny GEMM loses (H100: 295 FLOP/B vs A100: 156 FLOP/B).

    A routed-expert GEMM runs as one grouped GEMM over the rank's experts: its efficiency is further
    multiplied by :func:`tierwise.specs.compute.grouped_gemm_efficiency` (tile quantization of the rows per
    expert and of the expert width, wave quantization over ``sms``), and its time by ``imbalance``
    (:func:`moe_imbalance`: the busiest rank's tokens over the mean; the EP ranks meet at the combine
    all-to-all, so the busiest sets the pace).
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
    d0, emax = cp_params["matmul_half_dim"], cp_params["matmul_efficiency_max"]
    eff = emax / (1 + d0 / np.maximum(rows, 1) + d0 / n + d0 / k)
    flops = 2.0 * n * k * total_tokens
    if gemm.expert:
        eff = eff * grouped_gemm_efficiency(rows, n, k, experts_per_rank, sms)
    t = flops / (peak * eff)
    if gemm.expert:
        t = t * imbalance
    if hbm_bytes_per_s is not None:
        traffic = copies * (in_bytes * (rows * k + k * n) + 2.0 * rows * n)
        memory_t = traffic / hbm_bytes_per_s
        # the roofline's floor: no GEMM finishes before its operands have crossed HBM once at the
        # datasheet rate (small-M expert GEMMs and decode-like shapes are memory-bound)
        t = np.maximum(t, memory_t) + cp_params.get("matmul_memory_weight", 0.0) * memory_t
    return t, flops


def _stage_layers(model: ModelSpec, plans: PlanBatch):
    """(first, middle, last) layer counts and their MoE layer counts per plan; middle is the fullest middle
    stage (:func:`tierwise.specs.plan.stage_layout`: explicit layout, Megatron-Core's first/last and
    embedding/loss accounting, else the (most) even split), so the slowest stage is the one priced.

    MoE layers: the first stage's are the model's first ``first`` layers', the last stage's its last ``last``
    layers'; the fullest middle stage holds its share of the middle range's MoE layers, rounded up.
    """
    L = model.num_layers
    first, last, mid, _ = stage_layout(L, plans)
    pp = plans.pp
    n_mid = np.maximum(pp - 2, 0)
    last = np.where(pp == 1, first, last)
    first, last, mid = first.astype(float), last.astype(float), np.where(n_mid > 0, mid, 0).astype(float)
    if model.moe is None:
        none = np.zeros(first.shape)
        return (first, mid, last), (none, none, none)
    cum = np.concatenate([[0], np.cumsum(np.array(model.moe_layer_mask, dtype=float))])
    moe_first = cum[np.clip(first, 0, L).astype(int)]
    moe_last = np.where(pp == 1, moe_first, cum[L] - cum[np.clip(L - last, 0, L).astype(int)])
    mid_range = np.maximum(L - first - last, 1)
    moe_in_mid = np.maximum(cum[L] - moe_first - np.where(pp == 1, 0.0, moe_last), 0.0)
    moe_mid = np.where(n_mid > 0, np.minimum(mid, np.ceil(mid * moe_in_mid / mid_range - 1e-9)), 0.0)
    return (first, mid, last), (moe_first, moe_mid, moe_last)


def expert_tokens_per_rank(plans: PlanBatch, tokens):
    """Tokens whose routed-expert work one rank runs per micro-batch (before ``top_k``): ``T etp / tp`` with
    sequence parallelism, ``T`` without.

    Megatron-Core's MoE layer receives the sequence-parallel shard, ``[S/TP, B, H]`` (token_dispatcher.py: "we
    use the following notation ... num_local_tokens: S/TP*B"; MoE with tp > 1 requires sequence parallelism,
    arguments.py "When using MoE and tensor parallelism, sequence parallelism must be used"); each rank routes
    its own ``T / tp`` tokens, the all-to-all over the EP group returns as many on average, and with expert
    tensor parallelism the dispatcher then all-gathers them over the ``etp`` expert-TP ranks
    (``permute -> A2A(EP) -> AG(TP)``, MoEAlltoAllTokenDispatcher), each of which holds ``1 / etp`` of every
    local expert's width. So a rank's grouped GEMMs run ``T etp / tp`` tokens (``x top_k`` rows) on experts
    ``f / etp`` wide: ``T top_k f / tp`` per rank whatever ``etp`` is. With ``etp = tp`` (Megatron-Core's default)
    that is ``T`` rows at ``f / tp``; with NeMo's and the MoE Model Zoo's ``etp = 1`` under ``tp = 2`` it is ``T / 2``
    rows at the full width, not ``T`` (half the expert work per rank).
    """
    tp, etp = plans.tp.astype(float), plans.etp.astype(float)
    sp = plans.sequence_parallel & (plans.tp > 1)
    return np.where(sp, tokens * etp / tp, tokens)


def _layer_times(model, shape: ModelShape, plans: PlanBatch, tokens, peak, cparams, moe_layer: bool,
                 hbm_bytes_per_s=None, in_bytes=2.0, sms=0):
    """Forward seconds and FLOPs of the weight GEMMs of one layer on one rank (routed experts over
    :func:`expert_tokens_per_rank` tokens)."""
    tp, etp, ep = plans.tp.astype(float), plans.etp.astype(float), plans.ep.astype(float)
    lin_t = np.zeros(len(plans))
    lin_f = np.zeros(len(plans))
    gemms = list(shape.attention_gemms)
    if moe_layer:
        experts_per_rank = shape.num_experts / ep
        e_tokens = expert_tokens_per_rank(plans, tokens)
        for g in shape.moe_gemms:
            t, f = _gemm_time(g, e_tokens if g.expert else tokens, tp, etp, peak, cparams, experts_per_rank,
                              shape.top_k, hbm_bytes_per_s=hbm_bytes_per_s, in_bytes=in_bytes, sms=sms,
                              imbalance=moe_imbalance(plans, cparams))
            lin_t, lin_f = lin_t + t, lin_f + f
    else:
        gemms += list(shape.dense_mlp_gemms)
    for g in gemms:
        t, f = _gemm_time(g, tokens, tp, etp, peak, cparams, hbm_bytes_per_s=hbm_bytes_per_s, in_bytes=in_bytes)
        lin_t, lin_f = lin_t + t, lin_f + f
    return lin_t, lin_f


CHUNK = 131072
"""Plans estimated together: large batches run in chunks of this many, so that the model's few hundred
temporary arrays stay bounded (about 1 MiB each) instead of growing with the batch."""


def _concat(parts: list[StepEstimates]) -> StepEstimates:
    def join(values):
        if isinstance(values[0], dict):
            return {k: np.concatenate([v[k] for v in values]) for k in values[0]}
        if isinstance(values[0], np.ndarray):
            return np.concatenate(values)
        return values[0]

    return StepEstimates(**{f.name: join([getattr(p, f.name) for p in parts]) for f in fields(StepEstimates)})


def estimate(model: ModelSpec, cluster: Cluster, plans: PlanBatch, *,
             params: Mapping[str, float] | None = None) -> StepEstimates:
    """Estimate one training step for every plan in ``plans`` (see the module docstring).

    ``params`` overrides entries of the ``compute:`` parameters (the validation fit and cross-validation
    evaluate candidate values this way); by default the shipped ``catalog/parameters.yaml`` values are used.
    """
    if len(plans) > CHUNK:
        return _concat([_estimate(model, cluster, plans.select(slice(i, i + CHUNK)), params)
                        for i in range(0, len(plans), CHUNK)])
    return _estimate(model, cluster, plans, params)


def _estimate(model: ModelSpec, cluster: Cluster, plans: PlanBatch,
              params: Mapping[str, float] | None) -> StepEstimates:
    """The step model for one chunk of plans, as a list of named steps (module docstring)."""
    # a cluster file's measured compute parameters (tierwise calibrate of `measure gemm`) override the global
    # fit for that cluster; explicit ``params`` (the validation fit) override both
    cparams = {**_compute_params(), **cluster.compute, **(params or {})}
    if "grad_bytes_lever" not in cparams and np.any(plans.grad_reduce_dtype != GRAD_REDUCE_DTYPES.index("fp32")):
        # gradients reduced (and held) in bf16 (plan grad_reduce_dtype): 2 bytes each, not grad_bytes; the
        # --reduce-dtype lever (estimate/levers.py), a what-if over the plan's dtype, takes precedence
        cparams["grad_bytes"] = np.where(plans.grad_reduce_dtype == GRAD_REDUCE_DTYPES.index("bf16"), 2.0,
                                         cparams["grad_bytes"])
    shape = model_shape(model)
    P = _derive(plans)
    C = _layer_compute(model, shape, cluster.accelerator, plans, P, cparams)
    S = _stage_compute(model, plans, P, C)
    strides = axis_strides(plans)
    X = _layer_comm(model, shape, cluster, plans, P, C, strides, cparams)
    pipe = _pipeline(P, C, S, X)
    D = _data_parallel(model, shape, cluster, plans, P, S, pipe, strides, cparams, C.hbm)
    # combined 1F1B has no partner for the step's first forward and last backward: one micro-batch's expert
    # all-to-all stays exposed in full
    ep_unpaired = np.where(plans.ep_comm_overlap, pipe.moe_layers * (X.ep_layer_t - X.ep_layer_exposed), 0.0)
    step = P.m * pipe.t_mb + pipe.bubble + D.exposed + D.optimizer_s + D.shard_copy_s + ep_unpaired
    model_flops, hw_flops = _flops(model, shape, plans, P)
    tflops = model_flops / (step * P.num_gpus)
    hw_tflops = hw_flops / (step * P.num_gpus)
    tokens_step = plans.global_batch_size * P.s
    m, layers_slow, moe_slow = P.m, pipe.layers, pipe.moe_layers
    compute_useful = m * (3 * pipe.fwd + layers_slow * C.attn_bwd_extra + moe_slow * C.moe_host_extra)
    memory_bound_s = m * 3 * ((layers_slow - moe_slow) * C.elem_dense + moe_slow * C.elem_moe
                              + np.where((pipe.slow == 1) | (P.pp == 1), C.logits_elem / 3, 0.0))
    memory = _memory(model, shape, cluster, plans, P, S, D, cparams)
    axis_bytes = {
        "tp": np.where(plans.tp > 1, (X.tp_layer_bytes * (layers_slow - moe_slow) + X.tp_moe_layer_bytes * moe_slow)
                       * m, 0.0),
        "cp": np.where(plans.cp > 1, X.cp_layer_bytes * layers_slow * m, 0.0),
        "ep": np.where(plans.ep > 1, X.ep_layer_bytes * moe_slow * m, 0.0),
        "pp": X.pp_bytes_mb * m,
        "dp": D.bytes,
    }
    axis_time = {"tp": (X.tp_layer_t * (layers_slow - moe_slow) + X.tp_moe_layer_t * moe_slow) * m,
                 "cp": X.cp_layer_t * layers_slow * m, "ep": X.ep_layer_t * moe_slow * m, "pp": X.pp_t * m,
                 "dp": D.time}
    axis_exposed = {"tp": (X.tp_layer_exposed * (layers_slow - moe_slow) + X.tp_moe_layer_exposed * moe_slow) * m,
                    "cp": X.cp_layer_exposed * layers_slow * m,
                    "ep": X.ep_layer_exposed * moe_slow * m + ep_unpaired, "pp": X.pp_t * m, "dp": D.exposed}
    axis_tier = {"tp": X.tp_span.tier, "cp": X.cp_tier, "ep": X.ep_span.tier, "pp": X.pp_tier,
                 "dp": D.tier}
    return StepEstimates(
        step_time_s=step, tokens_per_s=tokens_step / step, tokens_per_s_per_gpu=tokens_step / step / P.num_gpus,
        model_flops_per_step=model_flops, hardware_flops_per_step=hw_flops,
        model_tflops_per_gpu=tflops / 1e12, hardware_tflops_per_gpu=hw_tflops / 1e12,
        mfu=tflops / C.plan_peak, hfu=hw_tflops / C.plan_peak, scaling_efficiency=compute_useful / step,
        compute_s=compute_useful, recompute_s=m * pipe.rec, bubble_s=pipe.bubble,
        exposed_comm_s=m * pipe.comm + D.exposed + ep_unpaired, optimizer_s=D.optimizer_s,
        shard_copy_s=D.shard_copy_s, memory=memory,
        axis_bytes=axis_bytes, axis_time_s=axis_time, axis_exposed_s=axis_exposed, axis_tier=axis_tier,
        num_microbatches=m, peak_flops_per_s=C.plan_peak,
        attention_s=m * layers_slow * (3 * C.core_t + C.attn_bwd_extra), memory_bound_s=memory_bound_s,
    )


def _derive(plans: PlanBatch) -> Derived:
    """The plan arrays the model reads, as floats, and what follows from them directly."""
    tp, pp, cp, dp = (plans.tp.astype(float), plans.pp.astype(float), plans.cp.astype(float),
                      plans.dp.astype(float))
    b, s = plans.micro_batch_size.astype(float), plans.seq_length.astype(float)
    return Derived(
        n=len(plans), tp=tp, pp=pp, cp=cp, dp=dp, ep=plans.ep.astype(float), etp=plans.etp.astype(float),
        vpp=plans.vpp.astype(float), b=b, s=s, num_gpus=tp * pp * cp * dp,
        m=plans.global_batch_size / (b * dp),  # micro-batches per pipeline per step
        tokens=b * s / cp,  # tokens of one micro-batch on one rank
        sp=plans.sequence_parallel & (plans.tp > 1), rc=plans.recompute.astype(int),
    )


def _layer_compute(model, shape: ModelShape, acc, plans: PlanBatch, P: Derived, cparams) -> LayerCompute:
    """Forward time of one layer (dense and MoE) on one rank for one micro-batch, and its recompute."""
    tp, etp, tokens, rc = P.tp, P.etp, P.tokens, P.rc
    prof = compute_profile(acc)
    cparams = _per_accelerator(cparams, prof)
    bf16_peak = acc.peak_flops_per_s("bf16")
    fp8_peak = acc.peak_dense_flops_per_s.get("fp8", bf16_peak)
    is_fp8 = plans.precision == PRECISION.index("fp8")
    gemm_peak = np.where(is_fp8, fp8_peak * cparams["fp8_efficiency_ratio"], bf16_peak)
    hbm_raw = acc.hbm_bytes_per_s
    in_bytes = np.where(is_fp8, 1.0, 2.0)
    dense_lin_t, _ = _layer_times(model, shape, plans, tokens, gemm_peak, cparams, False, hbm_raw, in_bytes)
    moe_lin_t = (_layer_times(model, shape, plans, tokens, gemm_peak, cparams, True, hbm_raw, in_bytes, prof.sms)[0]
                 if model.moe is not None else dense_lin_t * 0)
    core_f = attention_core_flops_per_token(model, shape, P.s, causal_halving=True) * tokens / tp
    # flash attention loses efficiency on short sequences (fewer key tiles per query tile to amortize each
    # tile's setup and softmax rescaling over): eff(s) = eff x s / (s + s_half), s the tokens per rank's
    # sequence chunk; s_half from measured FA2/FA3 throughput (catalog/parameters.yaml)
    s_chunk = P.s / P.cp
    seq_eff = s_chunk / (s_chunk + cparams["attention_half_seq_tokens"])
    # attention's own roofline (docs/compute.md): the two forward GEMMs (QK^T, PV) at the kernel family's
    # matmul efficiency, and one exp2 per unmasked score on the special-function unit (SMs x clock x 16);
    # FA3/cuDNN-class kernels overlap the two (max), FA2/SDPA run them one after the other (sum). The
    # backward recomputes P (one more exp2 per score) and runs its GEMMs at attention_backward_ratio of the
    # forward's efficiency; recompute (full or selective) repeats the forward, exponentials included.
    kernel_eff, overlap = _attention_kernels(plans, acc.generation, cparams)
    mm_eff = kernel_eff * seq_eff * prof.clock_factor
    # unmasked scores of the rank: the core FLOPs over 2 (d_qk + d_v) per score (flops.attention_scores_per_token)
    t_exp = core_f / (2.0 * (shape.qk_head_dim + shape.v_head_dim)) / prof.exp2_per_s
    core_t = _overlapped(core_f / (bf16_peak * mm_eff), t_exp, overlap)
    bwd_t = _overlapped(2.0 * core_f / (bf16_peak * mm_eff * cparams["attention_backward_ratio"]), t_exp, overlap)
    unfused = _unfused_attention(plans, acc.generation)
    if np.any(unfused):
        # the score passes stream hundreds of MB each: the accelerator's measured streaming HBM fraction (its
        # device-to-device copy), not the fitted residual that also carries the small elementwise kernels' losses
        u_core, u_bwd = _unfused_core_times(model, shape, P, bf16_peak, cparams,
                                            acc.hbm_bytes_per_s * prof.hbm_fraction)
        core_t, bwd_t = np.where(unfused, u_core, core_t), np.where(unfused, u_bwd, bwd_t)
    # the extra time of one layer's attention backward over the 2 x forward that "3 x forward" already counts
    attn_bwd_extra = bwd_t - 2.0 * core_t
    hbm = acc.hbm_bytes_per_s * cparams["memory_bound_efficiency"]
    moe_host_extra = np.zeros(P.n)
    seq_shard = np.where(P.sp, tp, 1.0)
    f_dense = model.ffn_hidden_size
    f_bytes = cparams["elementwise_bytes_per_f_gated" if model.gated_mlp else "elementwise_bytes_per_f"]
    elem_dense = tokens * (cparams["elementwise_bytes_per_h"] * model.hidden_size / seq_shard
                           + f_bytes * f_dense / tp) / hbm
    if model.moe is not None:
        # the routed experts' activation runs over expert_tokens_per_rank tokens x top_k rows of f / etp
        e_share = expert_tokens_per_rank(plans, tokens) / np.maximum(tokens, 1e-30)
        f_moe = (model.moe.top_k * model.moe.ffn_hidden_size / etp * e_share
                 + model.moe.shared_experts * model.moe.shared_ffn_hidden_size / tp)
        elem_moe = tokens * (cparams["elementwise_bytes_per_h"] * model.hidden_size / seq_shard + f_bytes * f_moe) / hbm
        # token permute and unpermute (Megatron-Core moe_utils permute / unpermute): the permute reads each
        # token's h and writes top_k copies, the unpermute reads the top_k expert outputs and writes their
        # probability-weighted sum: 2 x (1 + top_k) h bf16 elements = 4 (1 + top_k) h bytes per token forward
        permute = tokens / seq_shard * 4.0 * (1 + model.moe.top_k) * model.hidden_size / hbm
        elem_moe = elem_moe + permute
        # host side: the dispatcher copies the tokens-per-expert counts to the host to size the all-to-all, so
        # the CPU cannot run ahead of the GPU into the MoE block; its kernels then start at the CPU's launch
        # pace, and the block costs max(GPU time, launches x torch_op_overhead), forward and backward. The
        # launches: the dispatcher's kernels, and per local expert its GEMMs (TE GroupedLinear issues one
        # cuBLASLt call per expert) and backward gradient bookkeeping (compute.yaml moe_expert_launches), so
        # few EP ranks over many experts at a small micro-batch are host-bound
        kf, kb = _dispatcher_kernels(plans)
        ef, eb = moe_expert_launches()
        local_experts = shape.num_experts / np.maximum(P.ep, 1)
        # plan moe_grouped_gemm: one launch per local expert, or one kernel per GEMM (fc1, fc2 forward; their
        # dgrad and wgrad backward) whatever the experts (torch._grouped_mm, a CUTLASS grouped kernel)
        per_expert = _per_expert_gemms(plans)
        kf = kf + np.where(per_expert, ef * local_experts, 2.0)
        kb = kb + np.where(per_expert, eb * local_experts, 4.0)
        op = cparams["torch_op_overhead"]
        gpu_moe = moe_lin_t + permute
        moe_host_extra = np.maximum(kf * op - gpu_moe, 0.0) + np.maximum(kb * op - 2.0 * gpu_moe, 0.0)
    else:
        elem_moe = elem_dense * 0
    # FP8 GEMMs need their inputs cast: each activation input of a layer's GEMMs is read in bf16 and written
    # in fp8 (3 bytes per element) before the GEMM, with its amax (Micikevicius et al. 2022, FP8 Formats
    # for Deep Learning, section 4; Transformer Engine casts per GEMM). Inputs per token: h for QKV and for
    # the MLP up-projection (/tp with SP gathered first, so per rank h), q for the output projection and f
    # for the MLP down-projection (both /tp); the backward casts the output gradients likewise (counted by
    # the 3 x forward of memory-bound work).
    cast_b = cparams.get("fp8_cast_bytes_per_element", 3.0)
    q_in = model.q_channels if model.mla is None else model.num_attention_heads * shape.v_head_dim
    cast_dense = tokens * cast_b * (2 * model.hidden_size + (q_in + f_dense) / tp) / hbm
    cast_moe = (tokens * cast_b * (2 * model.hidden_size + q_in / tp
                                   + (model.moe.top_k * model.moe.ffn_hidden_size / etp
                                      * expert_tokens_per_rank(plans, tokens) / np.maximum(tokens, 1e-30)
                                      if model.moe else 0.0)) / hbm)
    elem_dense = elem_dense + np.where(is_fp8, cast_dense, 0.0)
    elem_moe = elem_moe + np.where(is_fp8, cast_moe, 0.0)
    # eager PyTorch (fused_elementwise false) runs each elementwise op as its own kernel(s); skipped when no
    # plan of the batch is eager (the planner's batches never are unless asked)
    if not np.all(plans.fused_elementwise):
        eager_dense, eager_moe = _eager_extra_bytes(model, tokens, tp, etp, seq_shard, cparams,
                                                    expert_tokens_per_rank(plans, tokens))
        elem_dense = elem_dense + np.where(plans.fused_elementwise, 0.0, eager_dense / hbm)
        elem_moe = elem_moe + np.where(plans.fused_elementwise, 0.0, eager_moe / hbm)
    fwd_dense = dense_lin_t + core_t + elem_dense
    fwd_moe = moe_lin_t + core_t + elem_moe
    return LayerCompute(
        bf16_peak=bf16_peak, plan_peak=np.where(is_fp8, fp8_peak, bf16_peak), hbm=hbm, seq_shard=seq_shard,
        dense_lin_t=dense_lin_t, core_t=core_t, attn_bwd_extra=attn_bwd_extra, moe_host_extra=moe_host_extra,
        elem_dense=elem_dense, elem_moe=elem_moe, fwd_dense=fwd_dense, fwd_moe=fwd_moe,
        # recompute adds a forward: full = the whole layer, selective = the attention core
        rec_dense=np.select([rc == Recompute.FULL, rc == Recompute.SELECTIVE], [fwd_dense, core_t], 0.0),
        rec_moe=np.select([rc == Recompute.FULL, rc == Recompute.SELECTIVE], [fwd_moe, core_t], 0.0),
        logits_t=2.0 * model.hidden_size * model.vocab_size / tp * tokens / (gemm_peak * cparams["matmul_efficiency_max"]),
        # the loss over the logits (bytes per logit element, forward + backward): a fused cross-entropy kernel
        # writes fp32 logits, reads them for the softmax and writes the gradient (12 B); unfused (plan
        # fused_cross_entropy false) the fp32 copy and the separate max / exp / sum / divide passes move
        # ``cross_entropy_unfused_extra_bytes`` more (counted in catalog/parameters.yaml)
        logits_elem=tokens * model.vocab_size / tp
        * (4 * 3 + np.where(plans.fused_cross_entropy, 0.0, cparams["cross_entropy_unfused_extra_bytes"])) / hbm,
    )


def _deepep_node_dedup(model, plans: PlanBatch, span):
    """Fraction of the EP all-to-all's bytes a DeepEP dispatcher moves (1 for the other dispatchers).

    The all-to-all record counts one copy per routed expert (``top_k`` per token), as Megatron-Core's
    all-to-all dispatcher sends them (it permutes the tokens by expert, then exchanges the expert-sorted copies).
    DeepEP sends a token once to each *unit* that holds at least one of its experts and expands it to the
    unit's experts on arrival (the combine reduces them there before sending one result back):

    * inside one scale-up domain the unit is the rank: the normal kernels' layout is ``is_token_in_rank:
      [num_tokens, num_ranks] ... whether a token be sent to a rank`` (DeepEP deep_ep/buffer.py
      ``get_dispatch_layout``), and Megatron-Core's flex dispatcher permutes the received tokens to the local
      experts afterwards (token_dispatcher.py MoEFlexTokenDispatcher);
    * across domains the unit is the domain: a token crosses RDMA once per domain and is forwarded over NVLink
      inside it (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.2.2: "each token ... first transmitted via IB to
      the GPUs with the same in-node index on its target nodes ... then forwarded via NVLink"; DeepEP README,
      "normal kernels ... NVLink and RDMA forwarding").

    Derivation: with ``E`` experts spread evenly over ``u`` units and ``k`` experts drawn without replacement per
    token (uniform routing), a token reaches a given other unit with probability ``1 - C(E - E/u, k) / C(E, k)``,
    so it is sent ``(u - 1) (1 - C(E - E/u, k) / C(E, k))`` times against ``k (u - 1) / u`` copies without
    deduplication; the ratio scales the priced all-to-all (whose time the scale-out tier sets once the group
    leaves a domain; the NVLink forwarding runs at the scale-up rate beside it and is not added). Units are the
    ``ep`` ranks inside a domain, the ``num_domains`` domains otherwise.
    """
    from tierwise.specs.framework import MOE_DISPATCHERS

    raw = getattr(plans, "moe_dispatcher", None)
    if raw is None or model.moe is None:
        return np.ones(len(plans))
    domains = np.asarray(span.num_domains, dtype=float)
    u = np.where(domains > 1, domains, plans.ep.astype(float))
    deepep = (np.asarray(raw) == MOE_DISPATCHERS.index("deepep")) & (u > 1)
    if not np.any(deepep):
        return np.ones(len(plans))
    E, k = float(model.moe.num_experts), int(model.moe.top_k)
    u = np.maximum(u, 1.0)
    miss = np.ones(len(plans))
    for i in range(k):  # C(E - E/u, k) / C(E, k) = prod_i (E - E/u - i) / (E - i)
        miss = miss * np.clip((E - E / u - i) / (E - i), 0.0, None)
    distinct = (u - 1.0) * (1.0 - miss)
    copies = k * (u - 1.0) / u
    return np.where(deepep, np.minimum(distinct / np.maximum(copies, 1e-12), 1.0), 1.0)


def _per_expert_gemms(plans: PlanBatch) -> np.ndarray:
    """Whether each plan launches its expert GEMMs one per local expert (plan ``moe_grouped_gemm``
    ``per-expert``; a batch without the field: yes, Megatron-Core's Transformer Engine path)."""
    from tierwise.specs.framework import MOE_GROUPED_GEMMS

    raw = getattr(plans, "moe_grouped_gemm", None)
    if raw is None:
        return np.ones(len(plans), dtype=bool)
    return np.asarray(raw) == MOE_GROUPED_GEMMS.index("per-expert")


def _dispatcher_kernels(plans: PlanBatch):
    """(forward, backward) kernels per MoE layer of each plan's ``moe_dispatcher`` (compute.yaml
    moe_dispatchers, :func:`tierwise.specs.compute.moe_kernels_per_layer`); a batch without the field: all-to-all."""
    from tierwise.specs.framework import MOE_DISPATCHERS

    raw = getattr(plans, "moe_dispatcher", None)
    if raw is None:
        kf, kb = moe_kernels_per_layer("alltoall")
        return np.full(len(plans), float(kf)), np.full(len(plans), float(kb))
    table = np.array([moe_kernels_per_layer(d) for d in MOE_DISPATCHERS], dtype=float)
    return table[np.asarray(raw, dtype=np.int64), 0], table[np.asarray(raw, dtype=np.int64), 1]


def _per_accelerator(cparams, prof):
    """``cparams`` with the absolute large-GEMM and memory-bound efficiencies of this accelerator.

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


def memory_bound_bytes_per_s(acc, cparams=None) -> float:
    """Achievable HBM bytes/s of memory-bound kernels on ``acc``: datasheet x measured streaming fraction (or a
    given ``memory_bound_efficiency``) x the fitted ``memory_bound_residual`` (:func:`_per_accelerator`)."""
    cp_ = _per_accelerator({**_compute_params(), **(cparams or {})}, compute_profile(acc))
    return acc.hbm_bytes_per_s * cp_["memory_bound_efficiency"]


def _overlapped(t_mm, t_exp, overlap):
    """Matmul and exponential time of an attention kernel: ``max + (1 - overlap) x min`` (1: the max, FA3 /
    cuDNN class; 0: the sum, FA2 / SDPA: compute.yaml attention_kernels)."""
    return np.maximum(t_mm, t_exp) + (1.0 - overlap) * np.minimum(t_mm, t_exp)


_KERNEL_FAMILY = {"flash3": "cudnn", "triton": "flash2"}
"""Plan kernel names priced as another family: FlashAttention-3 is of the cuDNN fused-attention class
(warp-specialised, softmax overlapped with the GEMMs; Shah et al. 2024 sec. 3), Triton flash attention has
FlashAttention-2's structure (compute.yaml attention_kernels)."""


def resolved_attention_kernel(name: str, generation: str) -> str:
    """The kernel family a plan's ``attention_kernel`` is priced as on ``generation``: ``auto`` (or a name the
    compute model does not know) is the generation's default (:func:`tierwise.specs.compute.
    default_attention_kernel`), ``flash3`` / ``triton`` their families (:data:`_KERNEL_FAMILY`)."""
    name = _KERNEL_FAMILY.get(name, name)
    return name if name in ATTENTION_KERNELS else default_attention_kernel(generation)


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


def _unfused_attention(plans: PlanBatch, generation: str) -> np.ndarray:
    """Which plans run the unfused attention core (plan ``attention_kernel`` ``unfused``), as a bool array."""
    from tierwise.specs.framework import ATTENTION_KERNELS as PLAN_KERNELS

    raw = getattr(plans, "attention_kernel", None)
    if raw is None or "unfused" not in PLAN_KERNELS:
        return np.zeros(len(plans), dtype=bool)
    return np.asarray(raw) == PLAN_KERNELS.index("unfused")


def _unfused_core_times(model, shape: ModelShape, P: Derived, bf16_peak, cparams, hbm):
    """Forward and backward seconds of one layer's unfused attention core on one rank (one micro-batch).

    Before FlashAttention (Dao et al. 2022; Megatron-LM took ``--use-flash-attn`` in 2023), Megatron-LM's
    attention core computed every score of the ``s x s`` matrix (the causal mask is applied inside the softmax,
    so no FLOPs are saved) with two batched cuBLAS GEMMs (``baddbmm`` QK^T, ``bmm`` with V) and ran the scale,
    mask, softmax and dropout as memory-bound kernels over the score tensor: forward
    :data:`UNFUSED_SCORE_BYTES_FORWARD` and backward :data:`UNFUSED_SCORE_BYTES_BACKWARD` bytes per score at
    ``hbm`` (the caller passes the accelerator's measured streaming fraction: each pass streams a tensor of
    hundreds of MB, unlike the small elementwise kernels the fitted ``memory_bound_residual`` also covers), the GEMMs (``2 (d_qk + d_v)`` FLOPs per score forward, twice that backward) at
    ``matmul_efficiency_max`` of the BF16 peak (as the logits GEMM). The softmax's exponentials run inside the
    memory-bound softmax kernel. Selective recompute repeats exactly this forward (Korthikanti et al. 2022,
    section 4.3: QK^T, softmax, softmax dropout and attention over V), which the paper measures at 1.3 ms per
    layer of its 22B model (Table 4: backward 13.2 ms with selective recompute against 11.9 ms without).
    """
    scores = P.tokens * attention_scores_per_token(model, shape, P.s, causal_halving=False) / P.tp
    gemm_f = 2.0 * (shape.qk_head_dim + shape.v_head_dim) * scores
    rate = bf16_peak * cparams["matmul_efficiency_max"]
    return (gemm_f / rate + UNFUSED_SCORE_BYTES_FORWARD * scores / hbm,
            2.0 * gemm_f / rate + UNFUSED_SCORE_BYTES_BACKWARD * scores / hbm)


def _attention_kernels(plans: PlanBatch, generation: str, cparams):
    """(matmul efficiency, overlap) arrays of each plan's attention kernel family.

    The family is the plan's ``attention_kernel`` (codes into :data:`tierwise.specs.framework.ATTENTION_KERNELS`)
    through :func:`resolved_attention_kernel`; a batch without the field uses the accelerator generation's
    default. Each family's efficiency is the global ``attention_efficiency_<family>`` (one fitted value per
    family); the few distinct codes are resolved once, so the batch stays vectorized.
    """
    from tierwise.specs.framework import ATTENTION_KERNELS as PLAN_KERNELS

    n = len(plans)
    raw = getattr(plans, "attention_kernel", None)
    if raw is None:
        kinds, inverse = [default_attention_kernel(generation)], np.zeros(n, dtype=np.int64)
    else:
        codes, inverse = np.unique(np.asarray(raw), return_inverse=True)
        kinds = [resolved_attention_kernel(PLAN_KERNELS[int(c)] if 0 <= int(c) < len(PLAN_KERNELS) else "auto",
                                           generation) for c in codes]
    eff = np.array([cparams[f"attention_efficiency_{attention_efficiency_family(k)}"] for k in kinds])[inverse]
    overlap = np.array([attention_kernel_overlap(k, generation) for k in kinds])[inverse]
    return eff, overlap


def _eager_extra_bytes(model: ModelSpec, tokens, tp, etp, seq_shard, cparams, e_tokens=None):
    """HBM bytes per layer forward that eager PyTorch moves on top of the fused kernels' count, for one rank.

    Counted from the reference implementations (Llama's ``RMSNorm``: ``x.float()``, ``pow``, ``mean``, ``x *
    rsqrt``, ``type_as``, ``* weight`` = 36 bytes per bf16 element against 4 fused; SwiGLU ``silu(a) * b``:
    silu read+write then a 3-operand multiply = 10 bytes per f element against 6 fused; rotary embedding on
    q and k: upcast, complex multiply, downcast = 20 bytes per channel against 4 fused). LayerNorm and GELU
    are single native kernels either way, so models with them (GPT, MPT) pay nothing extra here.
    """
    rms = model.norm == "rmsnorm"
    per_h = cparams["eager_rmsnorm_extra_bytes"] * 2 * rms  # two norms per layer
    per_f = cparams["eager_swiglu_extra_bytes"] if model.gated_mlp else 0.0
    rope = cparams["eager_rope_extra_bytes"] * (model.q_channels + model.kv_channels) * model.rotary
    dense = tokens * (per_h * model.hidden_size / seq_shard + per_f * model.ffn_hidden_size / tp + rope / tp)
    if model.moe is None:
        return dense, dense * 0
    e_share = 1.0 if e_tokens is None else e_tokens / np.maximum(tokens, 1e-30)
    f_moe = (model.moe.top_k * model.moe.ffn_hidden_size / etp * e_share
             + model.moe.shared_experts * model.moe.shared_ffn_hidden_size / tp)
    return dense, tokens * (per_h * model.hidden_size / seq_shard + per_f * f_moe + rope / tp)


def _stage_compute(model, plans: PlanBatch, P: Derived, C: LayerCompute) -> StageCompute:
    """Layers, MoE layers, forward and recompute time per micro-batch of the (first, last, middle) stages."""
    (l_first, l_mid, l_last), (e_first, e_mid, e_last) = _stage_layers(model, plans)
    n = P.n

    def stage(layers, moe_layers, last):
        dense_layers = layers - moe_layers
        fwd = dense_layers * C.fwd_dense + moe_layers * C.fwd_moe + np.where(last, C.logits_t + C.logits_elem / 3, 0.0)
        return fwd, dense_layers * C.rec_dense + moe_layers * C.rec_moe

    stages = (stage(l_first, e_first, P.pp == 1), stage(l_last, e_last, np.ones(n, bool)),
              stage(l_mid, e_mid, np.zeros(n, bool)))
    return StageCompute(layers=(l_first, l_last, l_mid), moe=(e_first, e_last, e_mid),
                           fwd=tuple(st[0] for st in stages), rec=tuple(st[1] for st in stages),
                           mid_exists=P.pp > 2)


def _price(records, span, cluster, n):
    """Seconds and ring-equivalent bytes per rank of the collective ``records`` of one axis (all on one
    group ``span``), per layer or micro-batch (each record's calls over every phase), and the seconds of one
    call of each record; a kind no plan of the batch uses is not priced."""
    time, bytes_, one_call = np.zeros(n), np.zeros(n), []
    for r in records:
        if not np.any(r.calls > 0):
            one_call.append(np.zeros(n))
            continue
        cost = _comm(r.kind, r.bytes, span, cluster)
        time = time + r.calls * cost.time_s
        bytes_ = bytes_ + r.calls * cost.bytes_per_rank
        one_call.append(cost.time_s)
    return time, bytes_, one_call


def _layer_comm(model, shape: ModelShape, cluster, plans: PlanBatch, P: Derived, C: LayerCompute, strides,
                cparams) -> LayerComm:
    """TP, EP and CP traffic of one layer and PP traffic of one micro-batch: time, exposed time, bytes.

    The traffic is :func:`tierwise.workload.traffic.layer_traffic`'s records (kinds, bytes, groups, counts per
    phase); this prices them on the tiers their groups cross and applies the overlap switches.
    """
    n = P.n
    interference = cparams.get("overlap_interference", 0.0)
    traffic = layer_traffic(model, shape, plans, strides)
    # TP (and SP): all-gathers and reduce-scatters, or all-reduces, of every layer's forward, backward and
    # full-recompute forward; with tp_comm_overlap they hide behind the layer's GEMMs (3 x forward)
    tp_span = _span(cluster, plans.tp, strides["tp"])
    tp_layer_t, tp_layer_bytes, _ = _price(traffic["tp"], tp_span, cluster, n)

    def tp_exposed(t):
        hidden_ok = np.maximum(t - 3 * C.dense_lin_t, 0.0)
        return np.where(plans.tp_comm_overlap, hidden_ok + interference * (t - hidden_ok), t)

    tp_layer_exposed = tp_exposed(tp_layer_t)
    # a MoE layer (with SP): the MLP block's pair (half the SP records) runs over the expert-TP group instead
    if model.moe is not None and np.any(P.sp):
        etp_t, etp_bytes, _ = _price(traffic["tp_moe"], _span(cluster, plans.etp, strides["tp"]), cluster, n)
        tp_moe_layer_t = np.where(P.sp, 0.5 * tp_layer_t + etp_t, tp_layer_t)
        tp_moe_layer_bytes = np.where(P.sp, 0.5 * tp_layer_bytes + etp_bytes, tp_layer_bytes)
        tp_moe_layer_exposed = tp_exposed(tp_moe_layer_t)
    else:
        tp_moe_layer_t, tp_moe_layer_bytes, tp_moe_layer_exposed = tp_layer_t, tp_layer_bytes, tp_layer_exposed

    # expert parallel all-to-all: dispatch + combine, forward and backward (+ forward again under full recompute)
    ep_span = _span(cluster, plans.ep, P.etp.astype(np.int64))
    if traffic["ep"] and np.any(plans.ep > 1):
        ep_layer_t, ep_layer_bytes, (a2a,) = _price(traffic["ep"], ep_span, cluster, n)
        dedup = _deepep_node_dedup(model, plans, ep_span)
        ep_layer_t, ep_layer_bytes, a2a = ep_layer_t * dedup, ep_layer_bytes * dedup, a2a * dedup
        # the all-to-all ends when the busiest rank has received (dispatch) and returned (combine) its tokens
        imb = moe_imbalance(plans, cparams)
        ep_layer_t, a2a = ep_layer_t * imb, a2a * imb
        # combined 1F1B (Megatron-Core --overlap-moe-expert-parallel-comm, after DeepSeek-V3's DualPipe,
        # arXiv:2412.19437 section 3.2.1): a micro-batch's forward dispatch + combine run behind the adjacent
        # micro-batch's backward of the layer (2 x forward), its backward pair behind the adjacent forward; what
        # exceeds the partner's compute stays exposed, the hidden part pays overlap_interference like TP and CP
        # (full recompute is excluded by the plan rules)
        unhidden = np.maximum(2 * a2a - 2 * C.fwd_moe, 0) + np.maximum(2 * a2a - C.fwd_moe, 0)
        ep_layer_exposed = np.where(plans.ep_comm_overlap, unhidden + interference * (ep_layer_t - unhidden),
                                    ep_layer_t)
    else:
        ep_layer_t = ep_layer_bytes = ep_layer_exposed = np.zeros(n)

    # context parallel ring attention: every rank passes its K/V chunk to the next at once, so a pass lasts as
    # long as the ring's slowest hop (the wrap-around included): a ring that leaves a node anywhere runs every
    # pass at the scale-out rate. The forward's passes hide behind the attention core, the backward's behind
    # its two GEMMs' worth (2 x core)
    (ring,) = traffic["cp"]
    cp_hops = _hops(cluster, plans.cp, strides["cp"], ring=True)
    if np.any(plans.cp > 1):
        p2p = _pick(cp_hops.slowest, _hop_times(cluster, ring.bytes, cp_hops))
        cp_fwd = ring.counts["forward"] * p2p
        cp_layer_t = ring.calls * p2p
        cp_layer_exposed = np.maximum(cp_fwd - C.core_t, 0) + np.maximum(2 * cp_fwd - 2 * C.core_t, 0)
        # hidden ring-attention traffic still costs overlap_interference of its time, as TP's and DP's do
        cp_layer_exposed = cp_layer_exposed + interference * (cp_layer_t - cp_layer_exposed)
        cp_layer_bytes = ring.calls * ring.bytes
    else:
        cp_layer_t = cp_layer_exposed = cp_layer_bytes = np.zeros(n)

    # pipeline send/recv of one micro-batch's activations (scattered over tp with SP), fwd and bwd, per chunk
    (chain,) = traffic["pp"]
    pp_hops = _hops(cluster, plans.pp, strides["pp"], ring=False)
    pp_t, pp_fill = _pipeline_p2p(cluster, chain, pp_hops, P)
    # Megatron-LM 2021-22 --scatter-gather-tensors-in-pipeline (plan pp_scatter_gather; Narayanan et al. SC 2021
    # section 4.1): without sequence parallelism each TP rank sends 1/tp of the replicated activation (the
    # chain's bytes, workload/traffic.py) and the receiving stage rebuilds it with an all-gather over its TP group
    gather = plans.pp_scatter_gather & (plans.tp > 1) & ~P.sp & (plans.pp > 1)
    if np.any(gather):
        t_ag = _comm("all-gather", 2.0 * P.tokens * model.hidden_size, tp_span, cluster).time_s
        pp_t = pp_t + np.where(gather, chain.calls * t_ag, 0.0)
        pp_fill = pp_fill + np.where(gather, 2.0 * (P.pp - 1) * t_ag, 0.0)
    return LayerComm(
        tp_span=tp_span, tp_layer_t=tp_layer_t, tp_layer_bytes=tp_layer_bytes, tp_layer_exposed=tp_layer_exposed,
        tp_moe_layer_t=tp_moe_layer_t, tp_moe_layer_bytes=tp_moe_layer_bytes,
        tp_moe_layer_exposed=tp_moe_layer_exposed,
        ep_span=ep_span, ep_layer_t=ep_layer_t, ep_layer_bytes=ep_layer_bytes, ep_layer_exposed=ep_layer_exposed,
        cp_tier=cp_hops.tier, cp_layer_t=cp_layer_t, cp_layer_exposed=cp_layer_exposed, cp_layer_bytes=cp_layer_bytes,
        pp_tier=pp_hops.tier, pp_t=pp_t, pp_fill=pp_fill, pp_bytes_mb=chain.calls * chain.bytes,
    )


def _pipeline_p2p(cluster, chain, hops: GroupHops, P):
    """Pipeline send/recv per micro-batch of the slowest stage (``pp_t``) and in the fill and drain
    (``pp_fill``), each stage boundary priced on the tier it crosses.

    Derivation (Megatron-LM's 1F1B schedule, Narayanan et al. SC 2021 section 2.2; its p2p ops are blocking on
    the critical path, ``send_forward_recv_backward`` / ``send_backward_recv_forward``): in the steady state a
    stage ``p`` exchanges one micro-batch's activation and gradient across each of its two boundaries, so
    its slot holds ``c(p-1, p) + c(p, p+1)`` per chunk, ``v`` chunks when interleaved (the ``2 v c`` of a
    uniform pipeline; the first and last stages are charged as a middle one). The slowest stage sets the
    pace; with aligned blocks (:func:`tierwise.hierarchy.group_hops`) every boundary that leaves a node has
    on its other side a boundary of the group's fastest class, so the slowest stage pays ``c_slow + c_fast``
    (``2 c_slow`` when every boundary leaves a node; with interleaving the wrap from the last stage to the
    first is a boundary of the slowest class too). The fill and drain carry the first micro-batch's forward
    across each of the ``pp - 1`` boundaries once and the last one's backward back: ``2 sum_j c_j``, which
    replaces the ``(pp - 1) / v x 2 v c`` that the bubble term ``(pp - 1) / v x t_mb`` would charge. For a
    pipeline inside one tier both are the former uniform ``2 v c`` and ``2 (pp - 1) c``.
    """
    times = _hop_times(cluster, chain.bytes, hops)
    many = P.pp > 1
    # the chain's calls per micro-batch are 2 v (a forward and a backward transfer per chunk)
    pp_t = np.where(many, chain.calls / 2 * (_pick(hops.slowest, times) + _pick(hops.fastest, times)), 0.0)
    fill = sum(hops.hops[k] * t for k, t in enumerate(times) if t is not None)
    return pp_t, np.where(many, 2.0 * fill, 0.0)


def _pipeline(P: Derived, C: LayerCompute, S: StageCompute, X: LayerComm) -> Pipeline:
    """Per-micro-batch time of each stage; the slowest sets the pace; the bubble; the slowest stage's parts."""
    per_mb, comm_mb = [], []
    for fwd, rec, layers, moe_layers in zip(S.fwd, S.rec, S.layers, S.moe, strict=True):
        comm = ((layers - moe_layers) * X.tp_layer_exposed + moe_layers * X.tp_moe_layer_exposed
                + layers * X.cp_layer_exposed + moe_layers * X.ep_layer_exposed + X.pp_t)
        per_mb.append(3 * fwd + rec + layers * C.attn_bwd_extra + moe_layers * C.moe_host_extra + comm)
        comm_mb.append(comm)
    t_mb = np.maximum(per_mb[0], per_mb[1])
    t_mb = np.where(S.mid_exists, np.maximum(t_mb, per_mb[2]), t_mb)
    slow = np.where(per_mb[0] >= per_mb[1], 0, 1)
    slow = np.where(S.mid_exists & (per_mb[2] > np.maximum(per_mb[0], per_mb[1])), 2, slow)
    # the bubble: (pp - 1) / v micro-batch slots of the slowest stage without its steady-state send/recv, plus
    # the fill and drain's send/recv across every stage boundary on its own tier (_pipeline_p2p)
    return Pipeline(
        t_mb=t_mb, slow=slow, bubble=(P.pp - 1) / P.vpp * (t_mb - X.pp_t) + X.pp_fill,
        fwd=np.choose(slow, S.fwd), rec=np.choose(slow, S.rec), comm=np.choose(slow, comm_mb),
        layers=np.choose(slow, S.layers), moe_layers=np.choose(slow, S.moe),
    )


@dataclass(frozen=True)
class DpGroups:
    """The groups data-parallel traffic runs on (:func:`_dp_groups`)."""

    dp_group: np.ndarray
    """Ranks holding the same dense weights: dp x cp."""
    dp_span: GroupSpan
    edp: np.ndarray
    """Ranks holding the same experts: tp x cp x dp / (etp x ep)."""
    edp_span: GroupSpan
    shard: np.ndarray
    """HSDP shard group: dp_shard x cp ranks."""
    hsdp: np.ndarray
    shard_span: GroupSpan
    repl_span: GroupSpan


def _dp_groups(cluster, plans: PlanBatch, P: Derived, strides) -> DpGroups:
    """Where gradient reduction and parameter gathers run: the dp x cp group (one strided group in the default
    tp-cp-dp-pp order, a two-axis group when another axis sits between cp and dp), the expert-data-parallel
    group, and for HSDP the shard group and the replicas of each shard position."""
    dp_group = P.dp * P.cp
    edp = np.maximum(P.tp * P.cp * P.dp / (P.etp * P.ep), 1)
    shard = plans.dp_shard.astype(float) * P.cp
    return DpGroups(
        dp_group=dp_group, dp_span=_two_axis_span(cluster, plans.cp, strides["cp"], plans.dp, strides["dp"]),
        edp=edp, edp_span=_span(cluster, edp.astype(np.int64), (P.etp * P.ep).astype(np.int64)),
        shard=shard, hsdp=(plans.dp_shard < plans.dp) & (plans.zero_stage >= 1),
        shard_span=_two_axis_span(cluster, plans.cp, strides["cp"], plans.dp_shard, strides["dp"]),
        # HSDP replicas: the same shard position in each of the dp / dp_shard shard groups (cp is not in it)
        repl_span=_span(cluster, (dp_group / shard).astype(np.int64), strides["dp"] * plans.dp_shard.astype(np.int64)),
    )


class _NoCost:
    time_s = bytes_per_rank = 0.0


def _dp_costs(cluster, plans: PlanBatch, g: DpGroups, params, span_full, group, pieces, cparams, grad_factor=1.0):
    """(gradient seconds, gather seconds, bytes per rank) per step for ``params`` per GPU reduced over
    ``group`` ranks (``span_full``): ZeRO 0 all-reduces the gradients; ZeRO >= 1 reduce-scatters them and
    all-gathers the weights, over the shard group plus an all-reduce of the 1/shard gradients over the replicas
    under HSDP; each in ``pieces`` collectives (one per layer under ZeRO-3). A kind no plan of the batch uses
    is not priced (a planner batch often has none). ``grad_factor``: the gradient compression's bytes per
    uncompressed byte (:func:`_dp_levers`)."""
    zero, hsdp, shard = plans.zero_stage, g.hsdp, g.shard
    g_bytes = cparams["grad_bytes"] * params / pieces * grad_factor
    w_bytes = cparams["weight_bytes"] * params / pieces
    used = group > 1

    def maybe(needed, kind, size, span):
        return _comm(kind, size, span, cluster) if np.any(needed) else _NoCost

    ar = maybe(used & (zero == 0), "all-reduce", g_bytes, span_full)
    rs_full = maybe(used & (zero >= 1) & ~hsdp, "reduce-scatter", g_bytes, span_full)
    ag_full = maybe(used & (zero >= 1) & ~hsdp, "all-gather", w_bytes, span_full)
    rs_sh = maybe(used & hsdp, "reduce-scatter", g_bytes, g.shard_span)
    ag_sh = maybe(used & hsdp, "all-gather", w_bytes, g.shard_span)
    ar_rep = maybe(used & hsdp, "all-reduce", g_bytes / np.maximum(shard, 1), g.repl_span)
    rs = np.where(hsdp, rs_sh.time_s + ar_rep.time_s, rs_full.time_s)
    ag = np.where(hsdp, ag_sh.time_s, ag_full.time_s)
    grad_t = pieces * np.where(zero == 0, ar.time_s, rs)
    gather_t = pieces * np.where(zero == 0, 0.0, ag)
    bytes_ = pieces * np.where(zero == 0, ar.bytes_per_rank,
                               np.where(hsdp, rs_sh.bytes_per_rank + ar_rep.bytes_per_rank + ag_sh.bytes_per_rank,
                                        rs_full.bytes_per_rank + ag_full.bytes_per_rank))
    return (np.where(used, grad_t, 0.0), np.where(used, gather_t, 0.0), np.where(used, bytes_, 0.0))


def _dp_exposed(plans: PlanBatch, P: Derived, pipe: Pipeline, grad_t, gather_t, total_params_local, cparams):
    """(time, exposed) of the step's data-parallel traffic under the overlap switches (module docstring).

    ZeRO 0-2: one reduction per step behind the last micro-batch's backward except its last bucket, one gather
    behind the first forward. ZeRO-3: per micro-batch a gather (forward, and backward again when resharding)
    and a reduce-scatter, prefetched a layer ahead; the first layer's are exposed. The hidden part still costs
    ``overlap_interference`` of its time: NCCL kernels take SMs and HBM bandwidth from the GEMMs they overlap
    (Jangda et al. ASPLOS 2022 section 2; Rashidi et al. ISCA 2021).
    """
    m, z3 = P.m, plans.zero_stage == 3
    regather = np.where(plans.reshard_after_forward, 1.0, 0.0)
    bucket = np.maximum(cparams["bucket_params_min"], cparams["bucket_params_per_dp"] * P.dp)
    last_bucket = np.minimum(1.0, bucket / np.maximum(total_params_local, 1))
    bwd_last_mb = 2 * pipe.fwd + pipe.rec
    grad_exposed = np.where(plans.overlap_grad_reduce,
                            np.maximum(grad_t - bwd_last_mb, 0.0) + grad_t * last_bucket, grad_t)
    gather_exposed = np.where(plans.overlap_param_gather, np.maximum(gather_t - pipe.fwd, 0.0), gather_t)
    z3_per_mb = gather_t * (1 + regather) + grad_t
    per_layer = 1.0 / np.maximum(pipe.layers, 1)
    z3_exposed_mb = (np.maximum(gather_t - pipe.fwd, 0) + np.maximum(gather_t * regather + grad_t - bwd_last_mb, 0)
                     + (gather_t + grad_t) * per_layer)
    time = np.where(z3, z3_per_mb * m, grad_t + gather_t)
    exposed = np.where(z3, z3_exposed_mb * m, grad_exposed + gather_exposed)
    # ZeRO-2 under gradient accumulation (plan zero2_sync, tierwise.specs.framework.ZERO2_SYNC): DeepSpeed
    # reduce-scatters every micro-batch's gradients behind that micro-batch's backward (weights gathered once
    # per step); FSDP SHARD_GRAD_OP without no_sync also re-gathers the weights before every forward
    z2_reduce = (plans.zero_stage == 2) & (plans.zero2_sync != ZERO2_SYNC.index("per-step"))
    if np.any(z2_reduce):
        fsdp = plans.zero2_sync == ZERO2_SYNC.index("fsdp-per-microbatch")
        grad_mb_exposed = np.where(plans.overlap_grad_reduce,
                                   np.maximum(grad_t - bwd_last_mb, 0.0) + grad_t * last_bucket, grad_t)
        z2_time = m * grad_t + np.where(fsdp, m, 1.0) * gather_t
        z2_exposed = m * grad_mb_exposed + np.where(fsdp, m * np.maximum(gather_t - pipe.fwd, 0.0), gather_exposed)
        time = np.where(z2_reduce, z2_time, time)
        exposed = np.where(z2_reduce, z2_exposed, exposed)
    exposed = exposed + cparams.get("overlap_interference", 0.0) * np.maximum(time - exposed, 0.0)
    return time, exposed


def _data_parallel(model, shape: ModelShape, cluster, plans: PlanBatch, P: Derived, S: StageCompute,
                   pipe: Pipeline, strides, cparams, hbm) -> DataParallel:
    """Gradient reduction, parameter gathers (ZeRO 0-3, HSDP) and the optimizer step of the slowest stage."""
    n, tp, ep, etp, m = P.n, P.tp, P.ep, P.etp, P.m
    single = P.pp == 1
    stage_params = [_stage_params(shape, S.layers[0], S.moe[0], tp, ep, etp, np.ones(n, bool), single),
                    _stage_params(shape, S.layers[1], S.moe[1], tp, ep, etp, single, np.ones(n, bool)),
                    _stage_params(shape, S.layers[2], S.moe[2], tp, ep, etp, np.zeros(n, bool), np.zeros(n, bool))]
    dense_params = np.choose(pipe.slow, [sp_[0] for sp_ in stage_params])
    expert_params = np.choose(pipe.slow, [sp_[1] for sp_ in stage_params])
    gb, wb = cparams["grad_bytes"], cparams["weight_bytes"]
    g = _dp_groups(cluster, plans, P, strides)
    zero, hsdp, shard, dp_group, edp = plans.zero_stage, g.hsdp, g.shard, g.dp_group, g.edp
    # ZeRO-3 / FSDP gather and reduce-scatter one layer (one wrapped unit) at a time, so each step pays the
    # collective latency once per layer; ZeRO 0-2 reduce in large buckets (one collective per step here)
    pieces = np.where(zero == 3, np.maximum(pipe.layers, 1), 1.0)
    total_params_local = dense_params + expert_params
    factor, lever_s = _dp_levers(model, shape, cluster, P, cparams, total_params_local, hbm)
    d_grad, d_gather, d_bytes = _dp_costs(cluster, plans, g, dense_params, g.dp_span, dp_group, pieces, cparams,
                                          factor)
    if model.moe is not None:
        e_grad, e_gather, e_bytes = _dp_costs(cluster, plans, g, expert_params, g.edp_span, edp, pieces, cparams,
                                              factor)
    else:
        e_grad = e_gather = e_bytes = np.zeros(n)
    time, exposed = _dp_exposed(plans, P, pipe, d_grad + e_grad, d_gather + e_gather, total_params_local, cparams)
    time, exposed, sync_every = _dp_sync_levers(time, exposed, lever_s, dp_group, P, pipe, cparams)
    z3 = zero == 3
    regather = np.where(plans.reshard_after_forward, 1.0, 0.0)
    # ZeRO-3 with list-form collectives (zero3_gather = tensor-list, DeepSpeed ZeRO-3 of 2021): one
    # torch.distributed all_gather / reduce_scatter per parameter tensor, each with a list of one tensor per
    # rank, which PyTorch's ProcessGroupNCCL flattens and unflattens with one device copy per rank (pytorch
    # PR #57769 added _all_gather_base because "_all_gather_base saved copies in all_gather"; DeepSpeed PR
    # #4705: the list "will be flattened and unflattened, which will result in additional allocation of GPU
    # memory and D2D operations"). Per micro-batch and tensor: the forward gather, the backward re-gather and
    # the gradient reduce-scatter, each ``group`` copies. Every copy is one eager op the training process's
    # CPU thread launches (``torch_op_overhead`` each), and that thread does not run ahead of the GPU: the
    # parameter fetch synchronizes the device after its gathers (DeepSpeed partition_parameters.py, "guarantee
    # the communication to be completed"), so the launch time adds to the step, exposed, as DP time.
    # Expert tensors are counted on the dense group.
    tensors = ((pipe.layers - pipe.moe_layers) * _param_tensors_per_layer(model, shape, False)
               + pipe.moe_layers * _param_tensors_per_layer(model, shape, True))
    list_mode = z3 & (plans.zero3_gather == ZERO3_GATHER.index("tensor-list"))
    gather_group = np.where(hsdp, shard, dp_group)
    copies = np.where(list_mode & (gather_group > 1), m * tensors * (2 + regather) * gather_group, 0.0)
    cpu_launch_s = copies * cparams["torch_op_overhead"]
    time, exposed = time + cpu_launch_s, exposed + cpu_launch_s
    # DeepSpeed 2021 prefetches the next sub-module's parameters only while the gathered (live) parameters are
    # under stage3_max_live_parameters (_deepspeed_blocked_gather_fraction): a gather behind a matrix at least
    # that large is fetched when its module starts, so the part of it the prefetch model above hid is exposed
    blocked = np.where(list_mode & (gather_group > 1), _deepspeed_blocked_gather_fraction(shape, P.tp), 0.0)
    # (_dp_exposed already charged ``overlap_interference`` of that part as hidden: the rest is added)
    hidden_gather = np.minimum(d_gather + e_gather, pipe.fwd) * (1 + regather) * m
    exposed = exposed + blocked * hidden_gather * (1.0 - cparams.get("overlap_interference", 0.0))
    # ZeRO-3 buffer passes over the rank's unsharded parameters, every micro-batch (_shard_copy_bytes): streaming
    # kernels on the compute stream, or (FSDP1's cast and divide) on a side stream whose kernels wait for the
    # SMs the backward GEMMs fill, so they are charged in full, at the memory-bound rate
    copy_bytes = _shard_copy_bytes(plans.zero3_gather, wb, gb, regather)
    # FSDP ZeRO-2 (SHARD_GRAD_OP) without no_sync pays its implementation's passes every micro-batch too; its
    # weights are not resharded after the forward, so the backward does not gather (and copy) them again
    z2_fsdp = (zero == 2) & (plans.zero2_sync == ZERO2_SYNC.index("fsdp-per-microbatch"))
    copy_bytes = np.where(z2_fsdp, _shard_copy_bytes(plans.zero3_gather, wb, gb, 0.0), copy_bytes)
    shard_copy_s = np.where((z3 | z2_fsdp) & (gather_group > 1), m * total_params_local * copy_bytes / hbm, 0.0)
    # optimizer step (memory bound), sharded under ZeRO >= 1
    opt_params = np.where(zero >= 1, dense_params / np.maximum(np.where(hsdp, shard, dp_group), 1)
                          + expert_params / edp, total_params_local)
    return DataParallel(
        time=time, exposed=exposed,
        bytes=np.where(z3, (d_bytes + e_bytes) * m * np.where(plans.reshard_after_forward, 1.5, 1.0),
                       d_bytes + e_bytes) / sync_every,
        tier=np.maximum(g.dp_span.tier, np.where(edp > 1, g.edp_span.tier, 0)),
        optimizer_s=opt_params * cparams["optimizer_bytes_per_param"] / hbm, shard_copy_s=shard_copy_s,
        stage_params=stage_params, dp_group=dp_group, edp=edp, shard=shard, hsdp=hsdp,
    )


def _dp_levers(model, shape: ModelShape, cluster, P: Derived, cparams, local_params, hbm):
    """(bytes per uncompressed gradient byte, compression compute seconds per step) of the gradient
    compression levers (:mod:`tierwise.estimate.levers`: PowerSGD rank r, Vogels et al. 2019; 1-bit Adam, Tang
    et al. 2021). No lever: (1, 0)."""
    from tierwise.estimate.levers import powersgd_factor

    rank = float(cparams.get("dp_powersgd_rank", 0.0))
    if rank > 0:
        gemms = shape.attention_gemms + (shape.dense_mlp_gemms or shape.moe_gemms)
        factor = powersgd_factor(gemms, rank, P.tp)
        peak = cluster.accelerator.peak_flops_per_s("bf16")
        # 6 a b r FLOPs per matrix; about 5 fp32 passes over the gradient with error feedback
        return factor, np.maximum(6 * rank * local_params / peak, 20.0 * local_params / hbm)
    if cparams.get("dp_onebit", 0.0):
        # signs (1/8 byte) per element; error-compensated compression on worker and server: ~32 B/param of HBM
        return np.full(P.n, 0.125 / cparams["grad_bytes"]), 32.0 * local_params / hbm
    return 1.0, np.zeros(P.n)


def _dp_sync_levers(time, exposed, lever_s, dp_group, P: Derived, pipe: Pipeline, cparams):
    """DP (time, exposed, H) under the compression compute cost, local SGD / DiLoCo's outer sync every H steps
    (traffic / H, exposed: the outer step waits for it; Douillard et al. 2023) and asynchronous DP with
    staleness s (exposed less up to s steps of compute; Ho et al. 2013)."""
    used = dp_group > 1
    time = time + np.where(used, lever_s, 0.0)
    exposed = exposed + np.where(used, lever_s, 0.0)
    H = max(float(cparams.get("dp_sync_every", 1.0)), 1.0)
    if H > 1:
        time = time / H
        exposed = time
    s = float(cparams.get("dp_async_staleness", 0.0))
    if s > 0:
        exposed = np.maximum(exposed - s * P.m * pipe.t_mb, 0.0)
    return time, exposed, H


def _two_axis_span(cluster, a, stride_a, b, stride_b):
    """Span of the ranks of two axes together (``a`` ranks at ``stride_a`` times ``b`` at ``stride_b``: cp x
    dp, whose ranks hold the same weights). Adjacent in the placement order they form one strided group;
    with another axis between them (``cp-tp-dp-pp``) a two-axis group whose blocks hold the product of the
    two axes' members (:func:`tierwise.hierarchy.group_span`), not ``a x b`` consecutive ranks."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    stride_a, stride_b = np.asarray(stride_a, dtype=np.int64), np.asarray(stride_b, dtype=np.int64)
    if np.all(stride_b == stride_a * a):  # the default orders: b right outside a (also every a = 1 at b's stride)
        return _span(cluster, a * b, stride_a)
    a_inner = stride_a <= stride_b
    size_in, stride_in = np.where(a_inner, a, b), np.where(a_inner, stride_a, stride_b)
    size_out, stride_out = np.where(a_inner, b, a), np.where(a_inner, stride_b, stride_a)
    adjacent = (stride_out == stride_in * size_in) | (size_in == 1) | (size_out == 1)
    if np.all(adjacent):  # the default orders (cp and dp next to each other) and every plan without cp
        return _span(cluster, size_in * size_out, np.where(size_in == 1, stride_out, stride_in))
    return _span(cluster, np.where(adjacent, size_in * size_out, size_in),
                 np.where(size_in == 1, stride_out, stride_in),
                 np.where(adjacent, 1, size_out), np.where(adjacent, 1, stride_out))


def _shard_copy_bytes(mode, wb: float, gb: float, regather) -> np.ndarray:
    """HBM bytes per unsharded parameter per micro-batch that a ZeRO-3 implementation moves outside its
    collectives (``wb``/``gb``: bytes of a weight as gathered and of a gradient as reduced; ``regather``: 1
    when the backward gathers again). Passes over the 1/N shards are left out.

    * ``flat`` (PyTorch FSDP1, ``torch/distributed/fsdp/_runtime_utils.py`` and ``algorithms/_comm_hooks/
      default_hooks.py``): the parameters are ``split``/``view`` views of the flat buffer, so autograd's
      ``SplitWithSizesBackward`` concatenates their gradients into one flat gradient (read + write, ``2 wb``);
      ``_post_backward_hook`` casts it to the reduce dtype (``flat_param.grad.to(handle._reduce_dtype)``,
      ``wb + gb`` when the dtypes differ); the default ``reduce_scatter_hook`` divides it in place by the
      gradient pre-divide factor (``grad.div_``, > 1 for any world size >= 2: ``2 gb``). The all-gather writes
      into the flat buffer directly: no pass. bf16 weights, fp32 reduce: 4 + 6 + 8 = 18 bytes.
    * ``per-parameter`` (FSDP2, ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``): each
      all-gather is copied out of its staging buffer into the parameters (``split_with_sizes_copy``, ``2 wb``
      per gather: forward and, when resharding, backward); the gradients are copied and cast into the
      reduce-scatter input (``_chunk_cat``, ``wb + gb``); fp32/bf16 reductions use NCCL's average, no
      divide kernel (``_get_gradient_divide_factors``). 2 x 4 + 6 = 14 bytes.
    * ``tensor-list`` (DeepSpeed 2021): its per-rank copies are counted as launch time (``torch_op_overhead``),
      not here.
    * ``zero-copy`` (Megatron-FSDP): the parameters and gradients are views of the collectives' own buffers
      (megatron/core/distributed/fsdp/src/README.md, "Zero copy communication ... ParamAndGradBuffer"), and
      with ``--calculate-per-token-loss`` (its user guide's recommended setting) no gradient scaling pass: 0.
    """
    flat = 2.0 * wb + np.where(np.not_equal(gb, wb), wb + gb, 0.0) + 2.0 * gb
    per_param = 2.0 * wb * (1.0 + regather) + wb + gb
    return np.select([mode == ZERO3_GATHER.index("flat"), mode == ZERO3_GATHER.index("per-parameter")],
                     [flat, per_param], 0.0)


DEEPSPEED_MAX_LIVE_PARAMETERS = 1_000_000_000
"""DeepSpeed ZeRO-3's ``stage3_max_live_parameters`` default (deepspeed/runtime/zero/constants.py of 2021,
``ZERO_OPTIMIZATION_MAX_LIVE_PARAMETERS_DEFAULT = 1000000000``)."""


def _deepspeed_blocked_gather_fraction(shape: ModelShape, tp) -> np.ndarray:
    """Fraction of a dense layer's gathered weight elements whose gather DeepSpeed's 2021 ZeRO-3 cannot prefetch.

    DeepSpeed's ``PartitionedParameterCoordinator.prefetch_next_sub_modules`` (stage3.py, v0.3.x) prefetches
    the next sub-module's parameters only when ``total_available_parameter_numel <
    max_available_parameters_in_numel`` (``stage3_max_live_parameters``, 1e9 elements by default) and no
    prefetch is in flight; it is called right after ``fetch_sub_module`` made the current sub-module's
    parameters live. So while a weight matrix of at least 1e9 elements is live, the next one is not prefetched:
    it is gathered when its own module starts (``fetch_sub_module`` then ``_synchronize_communication``, which
    ends in ``torch.cuda.synchronize()``), exposed. Weights are visited in module order (QKV, output
    projection, MLP in, MLP out, then the next layer's QKV); norms and biases (under
    ``stage3_param_persistence_threshold``, 1e5 elements) stay gathered and do not count. TP-local sizes.
    """
    tp = np.asarray(tp, dtype=float)
    sizes = [g.params for g in (*shape.attention_gemms, *shape.dense_mlp_gemms)]
    if not sizes:
        return np.zeros_like(tp)
    total = float(sum(sizes))
    blocked = np.zeros_like(tp)
    for j, size in enumerate(sizes):
        before = sizes[j - 1]  # j = 0: the previous layer's last matrix
        blocked = blocked + np.where(before / tp >= DEEPSPEED_MAX_LIVE_PARAMETERS, size, 0.0)
    return blocked / total


def _param_tensors_per_layer(model: ModelSpec, shape: ModelShape, moe_layer: bool) -> int:
    """Parameter tensors of one layer as Megatron-style code holds them: one weight per GEMM (fused QKV, fused
    gate+up), two norm weights, and a bias beside each when ``model.bias``; an MoE layer has each expert's
    matrices, the shared experts' and the router in place of the dense MLP."""
    mlp = shape.moe_gemms if moe_layer else shape.dense_mlp_gemms
    weights = len(shape.attention_gemms) + 2
    if moe_layer and model.moe is not None:
        weights += (len(mlp) - 2) + 2 * model.moe.num_experts  # shared experts and router, plus routed experts
    else:
        weights += len(mlp)
    return weights * (2 if model.bias else 1)


def _flops(model, shape: ModelShape, plans: PlanBatch, P):
    """Model FLOPs (3 x forward, causal attention halved, no recompute) and hardware FLOPs (with it) per step."""
    tokens_step = plans.global_batch_size * P.s
    model_core = attention_core_flops_per_token(model, shape, P.s, causal_halving=True)
    attention = sum(g.flops_per_token for g in shape.attention_gemms)
    fwd_flops_token = (shape.num_dense_layers * (attention + sum(g.flops_per_token for g in shape.dense_mlp_gemms))
                       + shape.num_moe_layers * (attention + sum(g.flops_per_token * (shape.top_k if g.expert else 1)
                                                                 for g in shape.moe_gemms))
                       + model.num_layers * model_core + 2.0 * model.hidden_size * model.vocab_size)
    model_flops = 3 * fwd_flops_token * tokens_step
    rec_flops_token = np.select([P.rc == Recompute.FULL, P.rc == Recompute.SELECTIVE],
                                [fwd_flops_token - 2.0 * model.hidden_size * model.vocab_size,
                                 model.num_layers * model_core], 0.0)
    return model_flops, model_flops + rec_flops_token * tokens_step


def _stage_params(shape: ModelShape, layers, moe_layers, tp, ep, etp, first, last):
    """(dense, expert) parameters one GPU of a stage holds: its layers' weights split over tp (experts
    over ep x etp), plus the embedding on the first stage and the LM head on the last."""
    dense = (layers * (shape.attention_params + shape.norm_params) + (layers - moe_layers) * shape.dense_mlp_params
             + moe_layers * shape.moe_other_params + np.where(first, shape.embedding_params, 0.0)
             + np.where(last, shape.lm_head_params, 0.0)) / tp
    expert = moe_layers * shape.expert_params * shape.num_experts / (ep * etp)
    return dense, expert


def _memory(model, shape: ModelShape, cluster, plans: PlanBatch, P: Derived, S: StageCompute, D: DataParallel,
            cparams):
    """Bytes per GPU on the fullest stage (see :mod:`tierwise.workload.memory`).

    The first stage holds the embedding and the most in-flight activations, the last the LM head and the
    fp32 logits. When an uneven split gives the middle stages more layers than the first, the second stage
    (``pp - 1`` micro-batches in flight in 1F1B) is checked too. The breakdown is the fullest stage's.
    Reads tokens per micro-batch, sequence parallelism, recompute and micro-batches from ``P``, each stage's
    layers and MoE layers from ``S``, and parameters per GPU and the sharding groups from ``D``.
    """
    tokens, sp, rc, m = P.tokens, P.sp, P.rc, P.m
    dp_group, edp, shard, hsdp = D.dp_group, D.edp, D.shard, D.hsdp
    zero = plans.zero_stage
    tp, etp = plans.tp.astype(float), plans.etp.astype(float)
    dense_shard = np.where(hsdp, shard, dp_group)
    wb, gb, ob = cparams["weight_bytes"], cparams["grad_bytes"], cparams["optimizer_state_bytes"]
    fp8_extra = np.where(plans.precision == PRECISION.index("fp8"), 1.0, 0.0)

    def sharded(params, shard_deg, stage_min):
        return np.where(zero >= stage_min, params / np.maximum(shard_deg, 1), params)

    in_flight = in_flight_microbatches(m, plans.pp, plans.vpp)
    dense_act = activation_bytes_per_token_per_layer(model, shape, tp, etp, sp, rc, moe_layer=False)
    moe_act = (activation_bytes_per_token_per_layer(model, shape, tp, etp, sp, rc, moe_layer=True)
               if model.moe is not None else dense_act)
    overhead = parse_bytes(cparams["memory_overhead"])

    def stage(params, layers, moe_layers, last, in_flight=in_flight):
        dense_params, expert_params = params
        weights = (sharded(dense_params, dense_shard, 3) + sharded(expert_params, edp, 3)) * (wb + fp8_extra)
        grads = (sharded(dense_params, dense_shard, 2) + sharded(expert_params, edp, 2)) * gb
        optimizer = (sharded(dense_params, dense_shard, 1) + sharded(expert_params, edp, 1)) * ob
        # ZeRO-3 keeps the gathered weights of the layers in flight (prefetch: about two layers)
        gathered = np.where(zero == 3, 2 * (dense_params + expert_params) / np.maximum(layers, 1) * wb, 0.0)
        per_mb = ((layers - moe_layers) * dense_act + moe_layers * moe_act) * tokens
        logits = np.where(last, tokens * model.vocab_size / tp * (4 + 4 + 2), 0.0)
        held = np.where(last, np.minimum(m, 1.0), in_flight)
        # combined 1F1B runs the next micro-batch's forward before this one's backward frees its activations
        held = held + np.where(plans.ep_comm_overlap, 1.0, 0.0)
        activations = per_mb * held + logits
        total = weights + gathered + grads + optimizer + activations + overhead
        return total, weights + gathered, grads, optimizer, activations

    first = stage(D.stage_params[0], S.layers[0], S.moe[0], plans.pp == 1)
    last = stage(D.stage_params[1], S.layers[1], S.moe[1], np.ones(len(plans), bool))
    fullest = first[0] >= last[0]
    parts = [np.where(fullest, a, b) for a, b in zip(first, last, strict=True)]
    if np.any(S.mid_exists & (S.layers[2] > S.layers[0])):
        # an uneven split can give a middle stage more layers than the first: the second stage (the fullest
        # middle one in 1F1B, which holds pp - 1 micro-batches at its peak) is checked too
        held_mid = in_flight * np.minimum(m, np.maximum(plans.pp - 1, 1)) / np.maximum(np.minimum(m, plans.pp), 1)
        mid = stage(D.stage_params[2], S.layers[2], S.moe[2], np.zeros(len(plans), bool), held_mid)
        take = S.mid_exists & (mid[0] > parts[0])
        parts = [np.where(take, a, b) for a, b in zip(mid, parts, strict=True)]
    total, weights, grads, optimizer, activations = parts
    capacity = cluster.accelerator.hbm_capacity_bytes
    return {
        "per_gpu_bytes": total,
        "capacity_bytes": np.full(len(plans), capacity),
        "fits": total <= capacity,
        "weights_bytes": weights,
        "gradients_bytes": grads,
        "optimizer_bytes": optimizer,
        "activations_bytes": activations,
        "overhead_bytes": np.full(len(plans), overhead),
    }
