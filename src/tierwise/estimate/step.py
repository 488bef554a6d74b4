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
each stage boundary on the tier it crosses (:func:`pipeline_p2p`; identical for a pipeline inside one tier).
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
unsharded parameters (gradient concatenate, cast and divide, gather copy-out: ``shard_copy_bytes``) at the
memory-bound rate; hidden communication still costs ``overlap_interference`` of its time.
All parameters are global fractions in ``catalog/parameters.yaml`` (``compute:``), fitted by
``tierwise validate --fit`` (docs/validation.md).

Where each part is priced: one layer's forward by :func:`tierwise.pricing.kernels.layer_forward` (the function a
serving prefill is priced by too) through :func:`tierwise.estimate.compute.layer_compute`; each axis's traffic and
overlap rule in its module of :mod:`tierwise.parallel` (``tp``, ``cp``, ``ep``, ``pp``, ``dp``); memory in
:mod:`tierwise.estimate.footprint`. This module only composes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import numpy as np

from tierwise.estimate.compute import compute_params, layer_compute, step_flops
from tierwise.estimate.footprint import layer_activation_bytes, memory_footprint
from tierwise.hierarchy import TIER_ORDER
from tierwise.parallel.cp import cp_layer_comm
from tierwise.parallel.dp import data_parallel
from tierwise.parallel.ep import ep_layer_comm
from tierwise.parallel.offload import Offload, activation_offload
from tierwise.parallel.pp import pipeline, pp_comm, stage_compute
from tierwise.parallel.records import Derived, LayerComm, LayerCompute, derive
from tierwise.parallel.tp import tp_layer_comm
from tierwise.specs.cluster import Cluster
from tierwise.specs.framework import GRAD_REDUCE_DTYPES
from tierwise.specs.model import ModelSpec
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import PlanBatch
from tierwise.workload.flops import ModelShape, model_shape
from tierwise.workload.traffic import axis_strides, layer_traffic

__all__ = ["estimate", "StepEstimates", "AXES", "TIERS"]

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
    """Model FLOP/s per GPU over the dense peak of the plan's matmul precision (fp8 plans: the fp8 peak)."""
    mfu_bf16: np.ndarray
    """The same over the bf16 dense peak, whatever the plan's precision: comparable with published bf16 MFU
    (MFU is defined against one peak, PaLM, Chowdhery et al. 2022, App. B; an fp8 run's figure against its
    fp8 peak is half of what the same throughput reads against bf16 on H100)."""
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
    forward_layers_s: np.ndarray | None = None
    """One micro-batch's forward through all the model's transformer layers on one rank (its tp / cp shard; no
    embedding, LM head or loss, no host launches): :func:`tierwise.pricing.kernels.layer_forward` times the
    layers, what a serving prefill of the same tokens costs (``serve`` ``phases.prefill_layers_s``)."""
    offload_exposed_s: np.ndarray | None = None
    """Exposed seconds of the activation offload to the host (plan ``activation_offload_layers``)."""
    offload_host_bytes: np.ndarray | None = None
    """Bytes the activation offload copies to the host per step (each way: the same bytes come back for the
    backward), per GPU on the slowest stage."""
    parameters: Parameters | None = field(default=None, repr=False, compare=False)
    """The model's parameters the figures were priced under (:func:`estimate`'s ``parameters``): what a report
    of them quotes (``overlap_interference``, ``grad_bytes``) is read from here, not loaded again."""

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
             params: Mapping[str, float] | None = None, parameters: Parameters | None = None) -> StepEstimates:
    """Estimate one training step for every plan in ``plans`` (see the module docstring).

    ``params`` overrides entries of the ``compute:`` parameters (the validation fit and cross-validation
    evaluate candidate values this way). ``parameters``: the model's parameters (:mod:`tierwise.specs.
    parameters`), passed down to every pricing function; None (this being a public entry point) is
    :func:`~tierwise.specs.parameters.load_parameters`: the shipped ``catalog/parameters.yaml``, or the file
    ``$TIERWISE_PARAMETERS`` names.
    """
    parameters = parameters if parameters is not None else load_parameters()
    if len(plans) > CHUNK:
        return _concat([_estimate(model, cluster, plans.select(slice(i, i + CHUNK)), params, parameters)
                        for i in range(0, len(plans), CHUNK)])
    return _estimate(model, cluster, plans, params, parameters)


def _estimate(model: ModelSpec, cluster: Cluster, plans: PlanBatch,
              params: Mapping[str, float] | None, parameters: Parameters) -> StepEstimates:
    """The step model for one chunk of plans, as a list of named steps (module docstring)."""
    # a cluster file's measured compute parameters (tierwise calibrate of `measure gemm`) override the global
    # fit for that cluster; explicit ``params`` (the validation fit) override both
    cparams = {**compute_params(parameters), **cluster.compute, **(params or {})}
    if "grad_bytes_lever" not in cparams and np.any(plans.grad_reduce_dtype != GRAD_REDUCE_DTYPES.index("fp32")):
        # gradients reduced (and held) in bf16 (plan grad_reduce_dtype): 2 bytes each, not grad_bytes; the
        # --reduce-dtype lever (estimate/levers.py), a what-if over the plan's dtype, takes precedence
        cparams["grad_bytes"] = np.where(plans.grad_reduce_dtype == GRAD_REDUCE_DTYPES.index("bf16"), 2.0,
                                         cparams["grad_bytes"])
    shape = model_shape(model)
    P = derive(plans)
    C = layer_compute(model, shape, cluster.accelerator, plans, P, cparams)
    S = stage_compute(model, plans, P, C)
    strides = axis_strides(plans)
    X = layer_comm(model, shape, cluster, plans, P, C, strides, cparams, parameters=parameters)
    pipe = pipeline(P, C, S, X)
    D = data_parallel(model, shape, cluster, plans, P=P, S=S, pipe=pipe, strides=strides, cparams=cparams, hbm=C.hbm,
                      parameters=parameters)
    # combined 1F1B has no partner for the step's first forward and last backward: one micro-batch's expert
    # all-to-all stays exposed in full
    # (DualPipe's first and last chunks are in its bubble formula instead)
    ep_unpaired = np.where(plans.ep_comm_overlap & (P.dual == 0),
                           pipe.moe_layers * (X.ep_layer_t - X.ep_layer_exposed), 0.0)
    offload = _offload(model, shape, cluster, plans, P, C, pipe, parameters=parameters)
    offload_exposed = P.m * offload.exposed_s
    step = P.m * pipe.t_mb + pipe.bubble + D.exposed + D.optimizer_s + D.shard_copy_s + ep_unpaired + offload_exposed
    model_flops, hw_flops = step_flops(model, shape, plans, P)
    tflops = model_flops / (step * P.num_gpus)
    hw_tflops = hw_flops / (step * P.num_gpus)
    tokens_step = plans.global_batch_size * P.s
    m, layers_slow, moe_slow = P.m, pipe.layers, pipe.moe_layers
    compute_useful = m * (3 * pipe.fwd + layers_slow * C.attn_bwd_extra + moe_slow * C.moe_host_extra)
    memory_bound_s = m * 3 * ((layers_slow - moe_slow) * C.elem_dense + moe_slow * C.elem_moe
                              + np.where((pipe.slow == 1) | (P.deg.pp == 1), C.logits_elem / 3, 0.0))
    memory = memory_footprint(model, shape, cluster, plans, P, S, D, cparams, offloaded_per_mb=offload.bytes_per_mb)
    axis_bytes, axis_time, axis_exposed, axis_tier = _per_axis(plans, X, D, pipe, m, ep_unpaired, P.dual > 0)
    return StepEstimates(
        step_time_s=step, tokens_per_s=tokens_step / step, tokens_per_s_per_gpu=tokens_step / step / P.num_gpus,
        model_flops_per_step=model_flops, hardware_flops_per_step=hw_flops,
        model_tflops_per_gpu=tflops / 1e12, hardware_tflops_per_gpu=hw_tflops / 1e12,
        mfu=tflops / C.plan_peak, mfu_bf16=tflops / C.bf16_peak, hfu=hw_tflops / C.plan_peak,
        scaling_efficiency=compute_useful / step,
        compute_s=compute_useful, recompute_s=m * pipe.rec, bubble_s=pipe.bubble,
        exposed_comm_s=m * pipe.comm + D.exposed + ep_unpaired, optimizer_s=D.optimizer_s,
        shard_copy_s=D.shard_copy_s, memory=memory,
        axis_bytes=axis_bytes, axis_time_s=axis_time, axis_exposed_s=axis_exposed, axis_tier=axis_tier,
        num_microbatches=m, peak_flops_per_s=C.plan_peak,
        attention_s=m * layers_slow * (3 * C.core_t + C.attn_bwd_extra), memory_bound_s=memory_bound_s,
        forward_layers_s=shape.num_dense_layers * C.fwd_dense + shape.num_moe_layers * C.fwd_moe,
        offload_exposed_s=offload_exposed, offload_host_bytes=P.m * offload.bytes_per_mb, parameters=parameters,
    )


def _offload(model, shape: ModelShape, cluster, plans: PlanBatch, P: Derived, C: LayerCompute, pipe, *,
             parameters: Parameters) -> Offload:
    """Bytes and exposed seconds per micro-batch of the activation offload (plan ``activation_offload_layers``;
    :func:`tierwise.parallel.offload.activation_offload`) on the slowest stage: each offloaded layer's copy
    against one layer's forward and backward (twice the forward plus the attention backward's extra; offload
    runs without recompute), dense and MoE layers averaged."""
    if not np.any(plans.activation_offload_layers > 0):
        return Offload(bytes_per_mb=np.zeros(P.n), time_s=np.zeros(P.n), exposed_s=np.zeros(P.n))
    layers = np.maximum(pipe.layers, 1)
    dense_act, moe_act = layer_activation_bytes(model, shape, plans, P)
    act = ((pipe.layers - pipe.moe_layers) * dense_act + pipe.moe_layers * moe_act) / layers * P.tokens
    fwd = ((pipe.layers - pipe.moe_layers) * C.fwd_dense + pipe.moe_layers * C.fwd_moe) / layers
    bwd = 2.0 * fwd + C.attn_bwd_extra
    return activation_offload(cluster, plans, pipe.layers, fwd, bwd, act, parameters=parameters)


def _per_axis(plans: PlanBatch, X: LayerComm, D, pipe, m, ep_unpaired, dual):
    """(bytes, seconds, exposed seconds, tier) of each axis over the step, from the slowest stage's layers: dense
    layers pay the TP pair over tp, MoE layers the MoE block's over the expert-TP group; EP only on MoE layers."""
    layers, moe = pipe.layers, pipe.moe_layers
    axis_bytes = {
        "tp": np.where(plans.tp > 1, (X.tp_layer_bytes * (layers - moe) + X.tp_moe_layer_bytes * moe) * m, 0.0),
        "cp": np.where(plans.cp > 1, X.cp_layer_bytes * layers * m, 0.0),
        "ep": np.where(plans.ep > 1, X.ep_layer_bytes * moe * m, 0.0),
        "pp": X.pp_bytes_mb * m,
        "dp": D.bytes,
    }
    axis_time = {"tp": (X.tp_layer_t * (layers - moe) + X.tp_moe_layer_t * moe) * m,
                 "cp": X.cp_layer_t * layers * m, "ep": X.ep_layer_t * moe * m, "pp": X.pp_t * m, "dp": D.time}
    axis_exposed = {"tp": (X.tp_layer_exposed * (layers - moe) + X.tp_moe_layer_exposed * moe) * m,
                    "cp": X.cp_layer_exposed * layers * m,
                    "ep": X.ep_layer_exposed * moe * m + ep_unpaired,
                    "pp": np.where(dual, 0.0, X.pp_t) * m, "dp": D.exposed}
    axis_tier = {"tp": X.tp_span.tier, "cp": X.cp_tier, "ep": X.ep_span.tier, "pp": X.pp_tier, "dp": D.tier}
    return axis_bytes, axis_time, axis_exposed, axis_tier


def layer_comm(model, shape: ModelShape, cluster, plans: PlanBatch, P: Derived, C: LayerCompute, strides,
               cparams, *, parameters: Parameters) -> LayerComm:
    """TP, EP and CP traffic of one layer and PP traffic of one micro-batch: time, exposed time, bytes.

    The traffic is :func:`tierwise.workload.traffic.layer_traffic`'s records (kinds, bytes, groups, counts per
    phase); each axis's module of :mod:`tierwise.parallel` prices them on the tiers their groups cross and
    applies its overlap rule.
    """
    interference = cparams.get("overlap_interference", 0.0)
    traffic = layer_traffic(model, shape, plans, strides)
    tp = tp_layer_comm(model, cluster, plans, P, C, traffic, strides, interference, parameters=parameters)
    ep_span, ep_t, ep_bytes, ep_exposed = ep_layer_comm(model, cluster, plans, P, C, traffic, strides, cparams,
                                                        parameters=parameters)
    cp_tier, cp_t, cp_exposed, cp_bytes = cp_layer_comm(cluster, plans, P, C, traffic, strides, interference,
                                                        parameters=parameters)
    pp_tier, pp_t, pp_fill, pp_bytes = pp_comm(model, cluster, plans, P, traffic, strides, tp.span,
                                               parameters=parameters)
    return LayerComm(
        tp_span=tp.span, tp_layer_t=tp.t, tp_layer_bytes=tp.bytes, tp_layer_exposed=tp.exposed,
        tp_moe_layer_t=tp.moe_t, tp_moe_layer_bytes=tp.moe_bytes, tp_moe_layer_exposed=tp.moe_exposed,
        ep_span=ep_span, ep_layer_t=ep_t, ep_layer_bytes=ep_bytes, ep_layer_exposed=ep_exposed,
        cp_tier=cp_tier, cp_layer_t=cp_t, cp_layer_exposed=cp_exposed, cp_layer_bytes=cp_bytes,
        pp_tier=pp_tier, pp_t=pp_t, pp_fill=pp_fill, pp_bytes_mb=pp_bytes,
    )
