"""FLOPs and parameters of a decoder-only transformer, per token, per layer, and per GEMM.

Counting convention: one multiply-add is 2 FLOPs; a (M x K) @ (K x N) GEMM costs ``2 M N K``. Backward is
twice the forward (gradient w.r.t. inputs and w.r.t. weights), the standard 6N rule of Kaplan et al. 2020
(section 2.1) and of Narayanan et al. 2021 (section 5.1, eq. 3) once attention is added.

Per token and per layer, forward (``h`` hidden, ``a`` query heads, ``k`` kv heads, ``d`` head width,
``f`` MLP width, ``s`` context length, ``V`` vocabulary):

* QKV projection ``2 h (a d + 2 k d)`` (grouped-query attention shrinks K and V, Ainslie et al. 2023);
  multi-head latent attention (DeepSeek-V2 section 2.1, V3 section 2.1.1) instead costs
  ``2 [h q_r + q_r a (d_n + d_r) + h (c + d_r) + c a (d_n + d_v)]`` for its down- and up-projections;
* attention scores ``2 s a d_qk`` and attention-weighted values ``2 s a d_v``; a causal mask lets
  flash-attention kernels skip the upper triangle, halving both (named ``causal_halving``; Megatron-Core
  r0.8 and llm-foundry do not halve, newer Megatron and torchtitan do: training-runs-notes.md);
  sliding-window layers see ``min(s, window)`` keys (``w (1 - w/2s)`` on average under the causal mask);
* output projection ``2 a d_v h``;
* MLP ``2 h f x 3`` gated (SwiGLU: gate, up, down; Shazeer 2020) or ``x 2`` (GeLU);
  MoE: ``top_k`` routed experts plus the shared experts, each ``2 h f_e x (3 or 2)``, and the router
  ``2 h E`` (Fedus et al. 2022; DeepSeek-V3 section 2.1.2);
* logits ``2 h V`` once per token (last stage).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.specs.model import ModelSpec

__all__ = ["Gemm", "ModelShape", "model_shape", "attention_core_flops_per_token", "attention_scores_per_token",
           "decode_attention_flops_per_token"]


@dataclass(frozen=True)
class Gemm:
    """One weight GEMM of a layer: ``out_features x in_features``; ``split`` says which dim TP divides."""

    name: str
    out_features: int
    in_features: int
    split: str
    """``out`` (column-parallel), ``in`` (row-parallel) or ``none`` (replicated)."""
    expert: bool = False
    """A routed-expert GEMM: divided by etp instead of tp, and applied to top_k tokens per token."""

    @property
    def flops_per_token(self) -> float:
        return 2.0 * self.out_features * self.in_features

    @property
    def params(self) -> int:
        return self.out_features * self.in_features


@dataclass(frozen=True)
class ModelShape:
    """Per-layer GEMMs and parameter counts of a model (plan-independent)."""

    attention_gemms: tuple[Gemm, ...]
    dense_mlp_gemms: tuple[Gemm, ...]
    moe_gemms: tuple[Gemm, ...]
    """Routed expert GEMMs for ONE expert (apply top_k per token), then shared experts and the router."""
    num_dense_layers: int
    num_moe_layers: int
    attention_params: int
    dense_mlp_params: int
    expert_params: int
    """Parameters of one routed expert."""
    moe_other_params: int
    """Shared experts and router of one MoE layer."""
    norm_params: int
    embedding_params: int
    lm_head_params: int
    qk_head_dim: int
    v_head_dim: int
    kv_bytes_channels: int
    """K plus V channels per token that context parallelism passes around its ring."""

    @property
    def total_params(self) -> float:
        moe = self.num_moe_layers
        experts = 0 if moe == 0 else self.num_experts
        return (self.num_layers * (self.attention_params + self.norm_params)
                + self.num_dense_layers * self.dense_mlp_params
                + moe * (experts * self.expert_params + self.moe_other_params)
                + self.embedding_params + self.lm_head_params)

    @property
    def num_layers(self) -> int:
        return self.num_dense_layers + self.num_moe_layers

    num_experts: int = 0
    top_k: int = 0
    mtp_layers: int = 0
    """Multi-token-prediction modules (:attr:`tierwise.specs.model.ModelSpec.mtp_layers`), not in the counts above."""
    mtp_moe: bool = False
    """Whether an MTP module's transformer block is a MoE block (the model's last layer's kind: DeepSeek-V3's
    ``model.layers.61`` has "structure identical to the Main Model hidden layers", README_WEIGHTS.md)."""
    mtp_other_params: int = 0
    """One MTP module's parameters beyond its block: the projection ``M_k`` (``2h x h``, arXiv:2412.19437 sec.
    2.2) and its two RMSNorms (``enorm``, ``hnorm``); the embedding and output head are shared."""


def _attention_gemms(m: ModelSpec) -> tuple[Gemm, ...]:
    h = m.hidden_size
    if m.mla is not None:
        mla = m.mla
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        a = m.num_attention_heads
        gemms = []
        if mla.q_lora_rank:
            gemms += [Gemm("q_down", mla.q_lora_rank, h, "none"), Gemm("q_up", a * qk, mla.q_lora_rank, "out")]
        else:
            gemms += [Gemm("q_proj", a * qk, h, "out")]
        gemms += [
            Gemm("kv_down", mla.kv_lora_rank + mla.qk_rope_head_dim, h, "none"),
            Gemm("kv_up", a * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank, "out"),
            Gemm("attn_out", h, a * mla.v_head_dim, "in"),
        ]
        return tuple(gemms)
    return (
        Gemm("qkv", m.q_channels + 2 * m.kv_channels, h, "out"),
        Gemm("attn_out", h, m.q_channels, "in"),
    )


def _mlp_gemms(h: int, f: int, gated: bool, expert: bool, prefix: str) -> tuple[Gemm, ...]:
    up = 2 * f if gated else f
    return (Gemm(f"{prefix}_up", up, h, "out", expert), Gemm(f"{prefix}_down", h, f, "in", expert))


def model_shape(m: ModelSpec) -> ModelShape:
    """GEMMs and parameter counts of ``m`` (norms: two RMS/LayerNorm weight vectors of ``h`` per layer)."""
    h = m.hidden_size
    attn = _attention_gemms(m)
    dense = _mlp_gemms(h, m.ffn_hidden_size, m.gated_mlp, False, "mlp")
    moe_gemms: tuple[Gemm, ...] = ()
    expert_params = moe_other = 0
    num_experts = top_k = 0
    if m.moe is not None:
        e = m.moe
        routed = _mlp_gemms(h, e.ffn_hidden_size, m.gated_mlp, True, "expert")
        shared = ()
        if e.shared_experts:
            shared = _mlp_gemms(h, e.shared_experts * e.shared_ffn_hidden_size, m.gated_mlp, False, "shared")
        router = (Gemm("router", e.num_experts, h, "none"),)
        moe_gemms = routed + shared + router
        expert_params = sum(g.params for g in routed)
        moe_other = sum(g.params for g in shared + router)
        num_experts, top_k = e.num_experts, e.top_k
    if m.mla is not None:
        qk, v = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim, m.mla.v_head_dim
        kv_channels = m.num_attention_heads * (qk + v)
    else:
        qk = v = m.head_dim
        kv_channels = 2 * m.kv_channels
    emb = m.vocab_size * h
    return ModelShape(
        attention_gemms=attn, dense_mlp_gemms=dense, moe_gemms=moe_gemms,
        num_dense_layers=m.num_dense_layers, num_moe_layers=m.num_moe_layers,
        attention_params=sum(g.params for g in attn), dense_mlp_params=sum(g.params for g in dense),
        expert_params=expert_params, moe_other_params=moe_other, norm_params=2 * h,
        embedding_params=emb, lm_head_params=0 if m.tied_embeddings else emb,
        qk_head_dim=qk, v_head_dim=v, kv_bytes_channels=kv_channels,
        num_experts=num_experts, top_k=top_k, mtp_layers=m.mtp_layers,
        mtp_moe=bool(m.moe_layer_mask[-1]), mtp_other_params=2 * h * h + 2 * h,
    )


def attention_core_flops_per_token(m: ModelSpec, shape: ModelShape, seq_length, causal_halving: bool = True):
    """Forward FLOPs of scores and weighted values per token, averaged over layers (array over plans).

    ``2 s a (d_qk + d_v)`` per token per layer, halved under a causal mask when ``causal_halving``;
    sliding-window layers see ``min(s, window)`` keys.
    """
    s = np.asarray(seq_length, dtype=float)
    a = m.num_attention_heads
    per_ctx = 2.0 * a * (shape.qk_head_dim + shape.v_head_dim)
    full_layers = m.num_layers - m.sliding_window_layers
    w = np.minimum(s, m.sliding_window or 0) if m.sliding_window_layers else np.zeros_like(s)
    if causal_halving:
        # query i sees i keys (full) or min(i, w) keys (window): averages s/2 and w (1 - w / 2s)
        full_ctx, window_ctx = s / 2, w * (1 - w / (2 * s))
    else:
        full_ctx, window_ctx = s, w
    ctx = (full_layers * full_ctx + m.sliding_window_layers * window_ctx) / m.num_layers
    return per_ctx * ctx


def decode_attention_flops_per_token(m: ModelSpec, shape: ModelShape, context):
    """Attention-core FLOPs of one decoded token over ``context`` cached keys, averaged over layers.

    MLA decodes with the absorbed matrices (DeepSeek-V2, arXiv:2405.04434 sec. 2.1.2: "W_UK can be absorbed into
    W_Q, and W_UV can be absorbed into W_O ... we even do not need to compute keys and values out for
    attention"): each head scores its query against the cached latent and rotary key, ``d_c + d_r`` wide, and
    weights the latent, ``d_c`` wide, so ``2 a (2 d_c + d_r)`` FLOPs per cached token instead of
    ``2 a (d_qk + d_v)`` over decompressed keys and values. The absorbed ``W_UK`` / ``W_UV`` products per new
    token cost what the ``kv_up`` GEMM does (``2 a d_c (d_nope + d_v)``), so the weight GEMMs stay as priced.
    Other attentions: :func:`attention_core_flops_per_token` over the full context.
    """
    if m.mla is None:
        return attention_core_flops_per_token(m, shape, context, causal_halving=False)
    c = np.asarray(context, dtype=float)
    return 2.0 * m.num_attention_heads * (2 * m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * c


def attention_scores_per_token(m: ModelSpec, shape: ModelShape, seq_length, causal_halving: bool = True):
    """Unmasked attention scores per token, averaged over layers (array over plans): ``a x ctx``.

    Each score costs ``2 (d_qk + d_v)`` FLOPs of the forward's two GEMMs (QK^T and PV) and one exponential of
    the softmax (an ``exp2`` on the special-function unit after folding ``log2 e`` into the scale:
    FlashAttention-2, Dao 2023, sec. 3.1; FA3, Shah et al. 2024, sec. 3), so this is
    :func:`attention_core_flops_per_token` over ``2 (d_qk + d_v)``, with the same causal and sliding-window
    context.
    """
    per_score = 2.0 * (shape.qk_head_dim + shape.v_head_dim)
    return attention_core_flops_per_token(m, shape, seq_length, causal_halving) / per_score
