"""The training step's intermediate results, one frozen record per stage of :func:`tierwise.estimate.step.estimate`
(arrays over plans), shared by the per-axis modules of :mod:`tierwise.parallel`."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from tierwise.hierarchy import GroupSpan
from tierwise.specs.plan import DUAL_SCHEDULES, PlanBatch
from tierwise.specs.plan_groups import Degrees


@dataclass(frozen=True)
class Derived:
    """Plan arrays as floats and what follows from them directly (:func:`derive`)."""

    n: int
    deg: Degrees
    """The plans' degrees (:class:`~tierwise.specs.plan_groups.Degrees`) as float arrays: ``P.deg.tp``."""
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
    dual: np.ndarray
    """0: a Megatron-Core schedule (1F1B, interleaved); 1: DualPipe; 2: DualPipeV (:data:`~tierwise.specs.plan.
    SCHEDULES`)."""


@dataclass(frozen=True)
class LayerCompute:
    """Seconds of one layer on one rank for one micro-batch (:func:`layer_compute`)."""

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
    """Steady-state send/recv seconds per micro-batch of the slowest stage (:func:`pipeline_p2p`)."""
    pp_fill: np.ndarray
    """Send/recv seconds of the fill and drain (:func:`pipeline_p2p`)."""
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
    """Gradient reduction, parameter gathers and the optimizer of the slowest stage (:func:`data_parallel`)."""

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


@dataclass(frozen=True)
class DpGroups:
    """The groups data-parallel traffic runs on (:func:`dp_groups`)."""

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


def derive(plans: PlanBatch) -> Derived:
    """The plan arrays the model reads, as floats, and what follows from them directly."""
    deg = Degrees(**{name: getattr(plans, name).astype(float) for name in _DEGREES})
    b, s = plans.micro_batch_size.astype(float), plans.seq_length.astype(float)
    return Derived(
        n=len(plans), deg=deg, b=b, s=s, num_gpus=deg.tp * deg.pp * deg.cp * deg.dp,
        m=plans.global_batch_size / (b * deg.dp),  # micro-batches per pipeline per step
        tokens=b * s / deg.cp,  # tokens of one micro-batch on one rank
        sp=plans.sequence_parallel & (plans.tp > 1), rc=plans.recompute.astype(int),
        dual=_dual_code(plans),
    )


_DEGREES = tuple(f.name for f in fields(Degrees))


def _dual_code(plans: PlanBatch) -> np.ndarray:
    """0 / 1 (DualPipe) / 2 (DualPipeV) per plan (:data:`~tierwise.specs.plan.DUAL_SCHEDULES`)."""
    raw = getattr(plans, "schedule", None)
    if raw is None:
        return np.zeros(len(plans), dtype=int)
    raw = np.asarray(raw)
    return np.select([raw == DUAL_SCHEDULES[0], raw == DUAL_SCHEDULES[1]], [1, 2], 0)
