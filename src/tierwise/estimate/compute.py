"""The training step's compute: one layer's forward priced by :func:`tierwise.pricing.kernels.layer_forward` for
a plan's micro-batch, its backward, recompute and the MoE block's host launches, and the step's FLOPs."""

from __future__ import annotations

import numpy as np

from tierwise.parallel.ep import expert_tokens_per_rank, moe_host_extra_s, moe_imbalance
from tierwise.parallel.records import Derived, LayerCompute
from tierwise.pricing.kernels import (
    ComputeRates,
    LayerWork,
    attention_backward_factors,
    attention_kernel_rates,
    compute_parameters,
    compute_rates,
    layer_forward,
    lm_head_time,
)
from tierwise.specs.framework import ATTENTION_KERNELS as PLAN_KERNELS
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import PRECISION, PlanBatch, Recompute
from tierwise.workload.flops import ModelShape, attention_core_flops_per_token

__all__ = ["layer_compute", "plan_work", "plan_attention_kernels", "plan_attention_backward_factors",
           "plan_unfused_attention", "compute_params", "memory_bound_bytes_per_s", "step_flops"]


def plan_work(model, shape: ModelShape, rates: ComputeRates, plans: PlanBatch, P: Derived, cparams) -> LayerWork:
    """What one rank runs of one layer for one micro-batch of each plan (:class:`~tierwise.pricing.kernels.
    LayerWork`): ``b s / cp`` tokens, the sequence-parallel shard, the routed tokens and imbalance of
    :mod:`tierwise.parallel.ep`, the plan's precision and kernels."""
    is_fp8 = plans.precision == PRECISION.index("fp8")
    eff, overlap = plan_attention_kernels(plans, rates)
    return LayerWork(
        tokens=P.tokens, seq=P.s, seq_chunk=P.s / P.deg.cp, tp=P.deg.tp, etp=P.deg.etp, ep=P.deg.ep,
        seq_shard=np.where(P.sp, P.deg.tp, 1.0), expert_tokens=expert_tokens_per_rank(plans, P.tokens),
        imbalance=moe_imbalance(model, plans, cparams, P.tokens), fp8=is_fp8, fp4=np.zeros(P.n, dtype=bool), cast_inputs=is_fp8,
        attention_eff=eff, attention_overlap=overlap, unfused=plan_unfused_attention(plans),
        fused_elementwise=np.asarray(plans.fused_elementwise, dtype=bool),
        attention_backward_factor=plan_attention_backward_factors(plans, rates.generation),
    )


def layer_compute(model, shape: ModelShape, acc, plans: PlanBatch, P: Derived, cparams) -> LayerCompute:
    """Forward time of one layer (dense and MoE) on one rank for one micro-batch
    (:func:`tierwise.pricing.kernels.layer_forward`, the function a serving prefill is priced by), the extra
    of its attention backward, its recompute, the MoE block's host launches and the LM head with its loss."""
    rates = compute_rates(acc, cparams)
    rc = P.rc
    work = plan_work(model, shape, rates, plans, P, cparams)
    F = layer_forward(model, shape, rates, work)
    moe_host_extra = (moe_host_extra_s(plans, P, shape, F.moe_gemm + F.permute, cparams["torch_op_overhead"])
                      if model.moe is not None else np.zeros(P.n))
    fwd_dense, fwd_moe = F.dense, F.moe
    is_fp8 = work.fp8
    return LayerCompute(
        bf16_peak=rates.bf16_peak, plan_peak=np.where(is_fp8, rates.fp8_peak, rates.bf16_peak),
        hbm=rates.memory_bound, seq_shard=work.seq_shard, dense_lin_t=F.dense_gemm, core_t=F.attention,
        # the extra time of one layer's attention backward over the 2 x forward that "3 x forward" already counts
        attn_bwd_extra=F.attention_backward - 2.0 * F.attention, moe_host_extra=moe_host_extra,
        elem_dense=F.elementwise_dense, elem_moe=F.elementwise_moe, fwd_dense=fwd_dense, fwd_moe=fwd_moe,
        # recompute adds a forward: full = the whole layer, selective = the attention core, deepseek = the MLA
        # up-projections (their share of the layer's GEMM FLOPs at the layer's GEMM rate: upproj_share)
        rec_dense=np.select([rc == Recompute.FULL, rc == Recompute.SELECTIVE, rc == Recompute.DEEPSEEK],
                            [fwd_dense, F.attention, F.dense_gemm * upproj_share(shape, False)], 0.0),
        rec_moe=np.select([rc == Recompute.FULL, rc == Recompute.SELECTIVE, rc == Recompute.DEEPSEEK],
                          [fwd_moe, F.attention, F.moe_gemm * upproj_share(shape, True)], 0.0),
        logits_t=lm_head_time(model, rates, tokens=P.tokens, tp=P.deg.tp, peak=F.gemm_peak),
        # the loss over the logits (bytes per logit element, forward + backward): a fused cross-entropy kernel
        # writes fp32 logits, reads them for the softmax and writes the gradient (12 B); unfused (plan
        # fused_cross_entropy false) the fp32 copy and the separate max / exp / sum / divide passes move
        # ``cross_entropy_unfused_extra_bytes`` more (counted in catalog/parameters.yaml)
        logits_elem=P.tokens * model.vocab_size / P.deg.tp
        * (4 * 3 + np.where(plans.fused_cross_entropy, 0.0, cparams["cross_entropy_unfused_extra_bytes"]))
        / rates.memory_bound,
    )


def upproj_flops_per_token(shape: ModelShape) -> float:
    """FLOPs per token of one layer's MLA up-projections (``q_up``, ``kv_up``: what DeepSeek-V3 recomputes,
    arXiv:2412.19437 sec. 3.2.3); 0 without MLA."""
    return sum(g.flops_per_token for g in shape.attention_gemms if g.name in ("q_up", "kv_up"))


def upproj_share(shape: ModelShape, moe_layer: bool) -> float:
    """The MLA up-projections' share of a dense (or MoE, routed experts ``top_k`` times) layer's GEMM FLOPs."""
    mlp = (sum(g.flops_per_token * (shape.top_k if g.expert else 1) for g in shape.moe_gemms) if moe_layer
           else sum(g.flops_per_token for g in shape.dense_mlp_gemms))
    total = sum(g.flops_per_token for g in shape.attention_gemms) + mlp
    return upproj_flops_per_token(shape) / total if total else 0.0


def mtp_flops_per_token(model, shape: ModelShape, seq) -> np.ndarray:
    """Forward FLOPs per token of the MTP modules (arXiv:2412.19437 sec. 2.2): per module one transformer block
    of the model's last layer's kind (its GEMMs and attention core), the projection ``M_k`` (``2 x 2h x h``) and
    the shared output head once more (``2 h V``). They are training compute the step runs, so the model FLOPs
    count them; 0 without MTP."""
    if not shape.mtp_layers:
        return np.zeros_like(np.asarray(seq, dtype=float))
    attention = sum(g.flops_per_token for g in shape.attention_gemms)
    mlp = (sum(g.flops_per_token * (shape.top_k if g.expert else 1) for g in shape.moe_gemms) if shape.mtp_moe
           else sum(g.flops_per_token for g in shape.dense_mlp_gemms))
    h = model.hidden_size
    return shape.mtp_layers * (attention + mlp + attention_core_flops_per_token(model, shape, seq, causal_halving=True)
                               + 2.0 * 2 * h * h + 2.0 * h * model.vocab_size)


def _plan_kernel_names(plans: PlanBatch) -> tuple[list[str], np.ndarray]:
    """(distinct kernel names, index of each plan's) of the plans' ``attention_kernel``; ``auto`` for all where
    the batch has no such field."""
    raw = getattr(plans, "attention_kernel", None)
    if raw is None:
        return ["auto"], np.zeros(len(plans), dtype=np.int64)
    codes, inverse = np.unique(np.asarray(raw), return_inverse=True)
    return [PLAN_KERNELS[int(c)] if 0 <= int(c) < len(PLAN_KERNELS) else "auto" for c in codes], inverse


def plan_attention_backward_factors(plans: PlanBatch, generation: str) -> np.ndarray:
    """Each plan's attention kernel family's backward factor on ``generation``
    (:func:`tierwise.pricing.kernels.attention_backward_factors`)."""
    return attention_backward_factors(*_plan_kernel_names(plans), generation)


def plan_attention_kernels(plans: PlanBatch, rates: ComputeRates):
    """(matmul efficiency, overlap) arrays of each plan's attention kernel family: the plan's
    ``attention_kernel`` (codes into :data:`tierwise.specs.framework.ATTENTION_KERNELS`) through
    :func:`tierwise.pricing.kernels.attention_kernel_rates`; a batch without the field uses the accelerator
    generation's default (``auto``)."""
    raw = getattr(plans, "attention_kernel", None)
    if raw is None:
        return attention_kernel_rates(["auto"], np.zeros(len(plans), dtype=np.int64), rates)
    codes, inverse = np.unique(np.asarray(raw), return_inverse=True)
    names = [PLAN_KERNELS[int(c)] if 0 <= int(c) < len(PLAN_KERNELS) else "auto" for c in codes]
    return attention_kernel_rates(names, inverse, rates)


def plan_unfused_attention(plans: PlanBatch) -> np.ndarray:
    """Which plans run the unfused attention core (plan ``attention_kernel`` ``unfused``), as a bool array."""
    raw = getattr(plans, "attention_kernel", None)
    if raw is None or "unfused" not in PLAN_KERNELS:
        return np.zeros(len(plans), dtype=bool)
    return np.asarray(raw) == PLAN_KERNELS.index("unfused")


def compute_params(parameters: Parameters | None = None) -> dict:
    """The ``compute:`` section of ``parameters`` as the mapping the pricing functions take. None (a test's or
    a public entry point's shorthand, never the pricing core's: tests/test_parameters_are_arguments.py) is
    :func:`tierwise.specs.parameters.load_parameters`: the catalog, or the file ``$TIERWISE_PARAMETERS`` names."""
    return compute_parameters(parameters if parameters is not None else load_parameters())


def memory_bound_bytes_per_s(acc, cparams=None, *, parameters: Parameters | None = None) -> float:
    """Achievable HBM bytes/s of memory-bound kernels on ``acc``: datasheet x measured streaming fraction (or a
    given ``memory_bound_efficiency``) x the fitted ``memory_bound_residual``
    (:func:`tierwise.pricing.kernels.per_accelerator`) under ``parameters`` (None: :func:`compute_params`'s)."""
    return compute_rates(acc, {**compute_params(parameters), **(cparams or {})}).memory_bound


def step_flops(model, shape: ModelShape, plans: PlanBatch, P):
    """Model FLOPs (3 x forward, causal attention halved, no recompute) and hardware FLOPs (with it) per step."""
    tokens_step = plans.global_batch_size * P.s
    model_core = attention_core_flops_per_token(model, shape, P.s, causal_halving=True)
    attention = sum(g.flops_per_token for g in shape.attention_gemms)
    fwd_flops_token = (shape.num_dense_layers * (attention + sum(g.flops_per_token for g in shape.dense_mlp_gemms))
                       + shape.num_moe_layers * (attention + sum(g.flops_per_token * (shape.top_k if g.expert else 1)
                                                                 for g in shape.moe_gemms))
                       + model.num_layers * model_core + 2.0 * model.hidden_size * model.vocab_size)
    fwd_flops_token = fwd_flops_token + mtp_flops_per_token(model, shape, P.s)
    model_flops = 3 * fwd_flops_token * tokens_step
    rec_flops_token = np.select([P.rc == Recompute.FULL, P.rc == Recompute.SELECTIVE, P.rc == Recompute.DEEPSEEK],
                                [fwd_flops_token - 2.0 * model.hidden_size * model.vocab_size,
                                 model.num_layers * model_core, model.num_layers * upproj_flops_per_token(shape)],
                                0.0)
    return model_flops, model_flops + rec_flops_token * tokens_step
