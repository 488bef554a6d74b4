"""Memory per GPU: weights, gradients, optimizer state under ZeRO, and activations tensor by tensor.

Vectorized over plans. The reference for activations is Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models" (arXiv:2205.05198), section 4: 34 s b h + 5 a s^2 b bytes per
layer for a GPT layer (bf16, dropout, 4h GeLU MLP), divided by t where tensor/sequence parallelism shards a
tensor. Here every stored tensor is listed so GQA, SwiGLU, MoE and flash attention change the right terms:

==========================  ==========================================  =======================
tensor (bf16 unless noted)  bytes per token                              sharded by
==========================  ==========================================  =======================
norm 1 input                2 h                                         t with SP, else none
QKV GEMM input              2 h                                         t with SP, else none
Q, K, V                     2 (a d + 2 k d)                             t
attention output            2 a d_v  (+ 4 a fp32 softmax statistics)    t
norm 2 input                2 h                                         t with SP, else none
MLP up input                2 h                                         t with SP, else none
MLP up output               2 f x (2 gated, 1 GeLU)                     t
activation output           2 f                                         t
==========================  ==========================================  =======================

Flash attention (Dao et al. 2022) stores no s x s matrix, so Korthikanti's 5 a s^2 b term vanishes; no
dropout masks are stored (modern LLM recipes train without dropout). An MoE layer stores its routed
tokens' expert inputs (full width) and outputs (1 / etp of the width) for ``top_k`` copies of each of the
``T etp / tp`` tokens its grouped GEMMs run (``T`` without sequence parallelism), plus its shared experts.
Full recompute stores only each layer's input (2 h per token, /t with SP). Selective recompute
(Korthikanti section 5) drops the attention core's stored tensors: with flash attention those are
already gone, so it saves nothing more here.

The first pipeline stage holds the activations of ``min(m, pp)`` micro-batches (1F1B; DualPipe ``pp + 1`` on
every rank: :func:`in_flight_microbatches`), times
``1 + (pp - 1) / (pp v)`` with ``v`` interleaved chunks (Korthikanti section 4.2.3); the last stage also
holds fp32 logits ``4 s b V / t`` and their gradient.
"""

from __future__ import annotations

import numpy as np

__all__ = ["activation_bytes_per_token_per_layer", "in_flight_microbatches"]


def activation_bytes_per_token_per_layer(model, shape, tp, etp, sp, recompute_code, moe_layer: bool,
                                         cache_bytes=2.0):
    """Stored activation bytes per token (of the rank's micro-batch) for one layer, array over plans.

    ``recompute_code``: 0 none, 1 selective, 2 full, 3 DeepSeek-V3's recipe (:func:`deepseek_bytes_per_token`,
    caching at ``cache_bytes`` per element: 1 under an FP8 plan).
    """
    h = model.hidden_size
    t = np.asarray(tp, dtype=float)
    seq_shard = np.where(sp, t, 1.0)
    a = model.num_attention_heads
    if model.mla is not None:
        qkv = a * (shape.qk_head_dim * 2 + shape.v_head_dim)
    else:
        qkv = model.q_channels + 2 * model.kv_channels
    attn = 2 * h / seq_shard * 2 + (2 * qkv + 2 * a * shape.v_head_dim + 4 * a) / t
    if moe_layer and model.moe is not None:
        e = model.moe
        up = (2 if model.gated_mlp else 1) * e.ffn_hidden_size
        # a rank's grouped GEMMs run T etp / tp of its T tokens with sequence parallelism (T without), top_k rows
        # each (estimate.step.expert_tokens_per_rank): each row stores its full-width input (2 h) and its
        # up-projection and activation outputs, 1 / etp of the expert width
        etp_ = np.asarray(etp, dtype=float)
        share = np.where(sp & (t > 1), etp_ / t, 1.0)
        routed = e.top_k * share * (2 * h + (2 * up + 2 * e.ffn_hidden_size) / etp_)
        shared_f = e.shared_experts * e.shared_ffn_hidden_size
        shared = (2 * (2 if model.gated_mlp else 1) * shared_f + 2 * shared_f) / t if shared_f else 0.0
        mlp = 2 * h / seq_shard * 2 + routed + shared + 4 * e.num_experts / seq_shard
    else:
        f = model.ffn_hidden_size
        up = (2 if model.gated_mlp else 1) * f
        mlp = 2 * h / seq_shard * 2 + (2 * up + 2 * f) / t
    full = 2 * h / seq_shard
    rc = np.asarray(recompute_code)
    lean = deepseek_bytes_per_token(model, t, np.asarray(etp, dtype=float), sp, moe_layer, cache_bytes)
    return np.select([rc == 2, rc == 3], [full, lean], attn + mlp)


def deepseek_bytes_per_token(model, t, etp, sp, moe_layer: bool, cache_bytes=2.0):
    """Stored bytes per token of one layer under DeepSeek-V3's recipe (arXiv:2412.19437 sec. 3.2.3, 3.3.4).

    Kept in bf16: each norm's input (2 h twice; the RMSNorm output is recomputed, so the GEMM inputs after it are
    not kept), and with MLA the compressed latents the up-projections are recomputed from (``2 (q_lora_rank +
    kv_lora_rank + qk_rope_head_dim)``, replicated over TP) instead of Q, K, V; without MLA, Q, K, V as usual.
    Cached at ``c`` bytes (1 under FP8: "we cache the activations in FP8"): the input of the linear after
    attention (``c a d_v / t``), the routed tokens' expert inputs (the FP8-dispatched MoE input, ``c h`` per
    ``top_k`` row) and the SwiGLU inputs (``c 2 f``; its output is recomputed). Softmax statistics and router
    probabilities as in the table above.
    """
    h, a = model.hidden_size, model.num_attention_heads
    seq_shard = np.where(sp, t, 1.0)
    c = np.asarray(cache_bytes, dtype=float)
    if model.mla is not None:
        m = model.mla
        qkv = 2.0 * ((m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim)
        v_dim = m.v_head_dim
    else:
        qkv = 2.0 * (model.q_channels + 2 * model.kv_channels) / t
        v_dim = model.head_dim
    attn = 2 * h / seq_shard + qkv + (c * a * v_dim + 4 * a) / t
    gate = 2 if model.gated_mlp else 1
    if moe_layer and model.moe is not None:
        e = model.moe
        share = np.where(sp & (t > 1), etp / t, 1.0)
        routed = e.top_k * share * (c * h + c * gate * e.ffn_hidden_size / etp)
        shared = c * gate * e.shared_experts * e.shared_ffn_hidden_size / t
        mlp = 2 * h / seq_shard + routed + shared + 4 * e.num_experts / seq_shard
    else:
        mlp = 2 * h / seq_shard + c * gate * model.ffn_hidden_size / t
    return attn + mlp


def in_flight_microbatches(num_microbatches, pp, vpp, dual=0):
    """Micro-batches whose activations the first stage holds at its peak (1F1B / interleaved), in units of one
    rank's stage for one micro-batch.

    DualPipe (``dual`` 1) holds ``PP + 1`` on every rank and DualPipeV (2) ``PP + 1`` half-size stages on ``PP / 2``
    ranks, ``pp + 1/2`` in a rank's units for ``pp`` ranks (DeepSeek-V3 report sec. 3.2.1 Table 2; DualPipe
    README, "Activation Per Device")."""
    m = np.asarray(num_microbatches, dtype=float)
    pp = np.asarray(pp, dtype=float)
    vpp = np.asarray(vpp, dtype=float)
    dual = np.asarray(dual)
    held = np.minimum(m, pp) * np.where(vpp > 1, 1 + (pp - 1) / (pp * vpp), 1.0)
    return np.select([dual == 1, dual == 2], [pp + 1.0, pp + 0.5], held)
