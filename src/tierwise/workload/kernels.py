"""Kernel records of one transformer layer that are not weight GEMMs: the bytes its elementwise (memory-bound)
kernels move, per layer and per token of one rank.

The weight GEMMs are :class:`tierwise.workload.flops.Gemm` records and the attention core's FLOPs come from
:func:`tierwise.workload.flops.attention_core_flops_per_token`; :mod:`tierwise.pricing.kernels` prices all
three. Every byte count here is per forward pass; the training model charges the backward as twice the
forward's memory-bound work (the "3 x forward" of :mod:`tierwise.estimate.step`).

Sources of the counts:

* fused kernels (Transformer Engine / Megatron-Core fused RMSNorm, SwiGLU, rotary embedding, bias-dropout-add):
  ``elementwise_bytes_per_h`` per hidden element (norms, residual adds, dropout) and
  ``elementwise_bytes_per_f[_gated]`` per MLP element: global parameters fitted on the calibration set
  (catalog/parameters.yaml, docs/validation.md);
* MoE token permute and unpermute (Megatron-Core ``moe_utils.permute`` / ``unpermute``): the permute reads each
  token's ``h`` and writes ``top_k`` copies, the unpermute reads the ``top_k`` expert outputs and writes their
  probability-weighted sum: ``2 (1 + top_k) h`` bf16 elements, ``4 (1 + top_k) h`` bytes per token;
* FP8 input casts: each activation input of a layer's GEMMs is read in bf16 and written in fp8 (3 bytes per
  element) with its amax (Micikevicius et al. 2022, "FP8 Formats for Deep Learning", sec. 4; Transformer Engine
  casts per GEMM): ``h`` for QKV and the MLP up-projection, the attention output for the output projection and
  ``f`` for the MLP down-projection;
* eager PyTorch (:func:`eager_extra_bytes`), counted from the reference implementations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tierwise.specs.model import ModelSpec
from tierwise.workload.flops import ModelShape

__all__ = ["ElementwiseBytes", "elementwise_bytes", "eager_extra_bytes"]


@dataclass(frozen=True)
class ElementwiseBytes:
    """HBM bytes of one layer's memory-bound kernels on one rank, one forward (arrays over plans)."""

    dense: np.ndarray
    """A dense layer: norms, residuals, activation (and FP8 casts, eager extras where the plan has them)."""
    moe: np.ndarray
    """A MoE layer: the same over the routed and shared experts, plus the token permute and unpermute."""
    permute: np.ndarray
    """Of ``moe``: the permute and unpermute alone (the MoE block's own GPU work beside its GEMMs)."""


def elementwise_bytes(model: ModelSpec, shape: ModelShape, cparams: Mapping, *, tokens, tp, etp, seq_shard,
                      expert_tokens, fp8, fused) -> ElementwiseBytes:
    """Bytes of one layer's elementwise kernels on one rank over ``tokens`` tokens (module docstring).

    ``seq_shard``: the rank's share of the hidden-size work (tp under sequence parallelism, else 1);
    ``expert_tokens``: tokens whose routed-expert work the rank runs; ``fp8``: inputs cast for FP8 GEMMs;
    ``fused``: fused elementwise kernels (False adds :func:`eager_extra_bytes`).
    """
    h = model.hidden_size
    f_dense = model.ffn_hidden_size
    f_bytes = cparams["elementwise_bytes_per_f_gated" if model.gated_mlp else "elementwise_bytes_per_f"]
    per_h = cparams["elementwise_bytes_per_h"] * h / seq_shard
    dense = tokens * (per_h + f_bytes * f_dense / tp)
    cast_b = cparams.get("fp8_cast_bytes_per_element", 3.0)
    q_in = model.q_channels if model.mla is None else model.num_attention_heads * shape.v_head_dim
    cast_dense = tokens * cast_b * (2 * h + (q_in + f_dense) / tp)
    e_share = expert_tokens / np.maximum(tokens, 1e-30)
    if model.moe is not None:
        f_moe = (model.moe.top_k * model.moe.ffn_hidden_size / etp * e_share
                 + model.moe.shared_experts * model.moe.shared_ffn_hidden_size / tp)
        permute = tokens / seq_shard * 4.0 * (1 + model.moe.top_k) * h
        moe = tokens * (per_h + f_bytes * f_moe) + permute
        cast_moe = tokens * cast_b * (2 * h + q_in / tp + model.moe.top_k * model.moe.ffn_hidden_size / etp * e_share)
    else:
        permute = moe = cast_moe = dense * 0
    dense = dense + np.where(fp8, cast_dense, 0.0)
    moe = moe + np.where(fp8, cast_moe, 0.0)
    if not np.all(fused):
        eager_dense, eager_moe = eager_extra_bytes(model, cparams, tokens=tokens, tp=tp, etp=etp,
                                                   seq_shard=seq_shard, expert_tokens=expert_tokens)
        dense = dense + np.where(fused, 0.0, eager_dense)
        moe = moe + np.where(fused, 0.0, eager_moe)
    return ElementwiseBytes(dense=dense, moe=moe, permute=permute)


def eager_extra_bytes(model: ModelSpec, cparams: Mapping, *, tokens, tp, etp, seq_shard, expert_tokens=None):
    """HBM bytes per layer forward that eager PyTorch moves on top of the fused kernels' count, for one rank:
    (dense layer, MoE layer).

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
    e_share = 1.0 if expert_tokens is None else expert_tokens / np.maximum(tokens, 1e-30)
    f_moe = (model.moe.top_k * model.moe.ffn_hidden_size / etp * e_share
             + model.moe.shared_experts * model.moe.shared_ffn_hidden_size / tp)
    return dense, tokens * (per_h * model.hidden_size / seq_shard + per_f * f_moe + rope / tp)
