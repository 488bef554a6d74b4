"""KV cache and weights in serving: bytes per token, per GPU, and how many sequences fit.

KV bytes per token (one copy, all layers, no tensor-parallel replication; inference-notes.md section 2):

* MHA / GQA: ``2 L n_kv d_h b`` -- K and V of every KV head in every layer (Ainslie et al. 2023 for GQA);
* MLA (DeepSeek-V2 arXiv 2405.04434 sec. 2.1.2, V3 arXiv 2412.19437 sec. 2.1.1): one compressed latent of
  ``kv_lora_rank`` plus the decoupled RoPE key of ``qk_rope_head_dim`` per layer, shared by K, V and all
  heads, no factor 2: ``L (c + d_r) b``.

>>> from tierwise.specs.model import load_model
>>> kv_bytes_per_token(load_model("llama3.1-70b"), "bf16"), kv_bytes_per_token(load_model("deepseek-v3"), "bf16")
(327680.0, 70272.0)
"""

from __future__ import annotations

import functools

import numpy as np

from tierwise.serve.params import BYTES_PER_PARAM, KV_BYTES_PER_ELEMENT, ServingParameters
from tierwise.specs.model import ModelSpec
from tierwise.workload.flops import ModelShape, model_shape

__all__ = ["kv_bytes_per_token", "kv_fraction_per_gpu", "weight_bytes_per_gpu", "workspace_bytes_per_gpu",
           "attention_kind", "mha_equivalent", "shape_of", "instance_gpus", "attention_dp", "expert_tp",
           "experts_per_rank", "mtp_modules", "mtp_weight_bytes_per_gpu",
           "mtp_kv_factor"]


def instance_gpus(tp, ep):
    """GPUs of one serving instance with attention TP ``tp`` and expert parallelism ``ep``.

    Two layouts (DeepSeek-V3 report sec. 3.4: attention TP x DP with "EP32" prefill and "EP320" decode; vLLM /
    TensorRT-LLM's expert-TP layout): ``ep <= tp`` folds the experts into the TP ranks (``ep`` ranks each hold
    ``E / ep`` experts split ``tp / ep`` ways; ``tp`` GPUs); ``ep > tp`` spreads them over ``ep`` GPUs at full
    width while attention runs ``ep / tp`` data-parallel groups of ``tp`` ranks (``ep`` GPUs)."""
    return np.maximum(np.asarray(tp), np.asarray(ep))


def attention_dp(tp, ep):
    """Data-parallel attention groups of an instance (:func:`instance_gpus`): ``ep / tp`` when ``ep > tp``, else 1."""
    tp, ep = np.asarray(tp, dtype=float), np.asarray(ep, dtype=float)
    return np.maximum(ep / tp, 1.0)


def expert_tp(tp, ep):
    """Ranks one routed expert is split over: ``tp / ep`` (experts folded into TP), 1 when ``ep >= tp``."""
    tp, ep = np.asarray(tp, dtype=float), np.asarray(ep, dtype=float)
    return np.maximum(tp / ep, 1.0)


def experts_per_rank(num_experts: int, ep, redundant: int = 0):
    """Expert slots one EP rank holds: ``ceil((E + R) / ep)`` (an uneven split pads the last ranks, as EPLB's
    redundant-expert placement does: DeepSeek-V3 report sec. 3.4.1, "each GPU hosts ... one redundant
    expert")."""
    return np.ceil((num_experts + redundant) / np.asarray(ep, dtype=float) - 1e-9)



@functools.lru_cache(maxsize=256)
def shape_of(model: ModelSpec) -> ModelShape:
    """:func:`tierwise.workload.flops.model_shape` of ``model``, kept for the process (the planner's bisections
    ask for the same model's shape thousands of times; specs are frozen and hashed by their content)."""
    return model_shape(model)


def attention_kind(model: ModelSpec) -> str:
    """``mla``, ``mha`` (one KV head per query head) or ``gqa`` (fewer KV heads; MQA is GQA with one)."""
    if model.mla is not None:
        return "mla"
    return "mha" if model.num_kv_heads == model.num_attention_heads else "gqa"


def kv_bytes_per_token(model: ModelSpec, kv_precision: str) -> float:
    """One copy of the KV cache for one token, all layers (module docstring for the formulas)."""
    b = KV_BYTES_PER_ELEMENT[kv_precision]
    if model.mla is not None:
        return float(model.num_layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * b)
    return float(2 * model.num_layers * model.num_kv_heads * model.head_dim * b)


def kv_fraction_per_gpu(model: ModelSpec, tp) -> np.ndarray:
    """Share of one token's KV cache each rank of a TP group of ``tp`` holds.

    GQA / MHA: the KV heads are split over the ranks, ``1 / tp``, until ``tp`` exceeds the KV heads; then each
    rank holds one head, replicated (``1 / n_kv``; inference-notes.md section 2). MLA: the latent is shared by
    all heads, so every TP rank holds the whole of it (fraction 1); this is why DeepSeek deployments run
    attention data-parallel (DeepSeek-V3 sec. 3.4.1) -- tierwise models the TP layout.
    """
    tp = np.asarray(tp, dtype=float)
    if model.mla is not None:
        return np.ones_like(tp)
    return np.maximum(1.0 / tp, 1.0 / model.num_kv_heads)


def _split(gemms, tp):
    """Parameters of the non-expert ``gemms`` on one rank: column- and row-parallel ones over ``tp``."""
    return sum((g.params / tp if g.split != "none" else g.params + 0 * tp) for g in gemms if not g.expert)


def _local_params(shape: ModelShape, tp, ep, redundant: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(non-expert layer params, all routed-expert params, embedding + head params) on one rank.

    Column- and row-parallel GEMMs are divided by ``tp``, replicated ones (MLA down-projections, the router)
    are not. Routed experts: ``ep`` ranks each hold ``E / ep`` experts, each split ``tp / ep`` ways (expert TP x
    EP = TP, the vLLM / TensorRT-LLM MoE layout), so every rank holds ``E P_e / tp``; with ``ep > tp``
    (:func:`instance_gpus`) each rank holds ``ceil(E / ep)`` whole experts (:func:`experts_per_rank`).
    Embedding and LM head are vocabulary-parallel (Megatron-LM, Shoeybi et al. 2019 sec. 3).
    """
    tp = np.asarray(tp, dtype=float)
    ep = np.asarray(ep, dtype=float)

    def split(gemms):
        return _split(gemms, tp)

    attn = split(shape.attention_gemms) + shape.norm_params
    layers = shape.num_layers * attn + shape.num_dense_layers * split(shape.dense_mlp_gemms)
    experts = 0.0 * tp
    if shape.num_moe_layers:
        layers = layers + shape.num_moe_layers * split(shape.moe_gemms)
        experts = (shape.num_moe_layers * experts_per_rank(shape.num_experts, ep, redundant) * shape.expert_params
                   / expert_tp(tp, ep))
    emb = (shape.embedding_params + shape.lm_head_params) / tp
    return layers, experts, emb


def weight_bytes_per_gpu(model: ModelSpec, precision: str, tp, ep, redundant: int = 0, *, mtp: int = 0) -> np.ndarray:
    """Weight bytes one rank holds: layers at the weight precision, embedding and LM head in BF16 (FP8 and
    FP4 checkpoints keep them in 16 bits: NVIDIA ModelOpt quantizes the linear layers only); ``redundant``
    EPLB expert copies per MoE layer (:func:`experts_per_rank`); with ``mtp`` speculative tokens, the MTP modules
    the engine runs (:func:`mtp_modules`, :func:`mtp_weight_bytes_per_gpu`)."""
    layers, experts, emb = _local_params(shape_of(model), tp, ep, redundant)
    out = (layers + experts) * BYTES_PER_PARAM[precision] + emb * 2.0
    if mtp:
        out = out + mtp_weight_bytes_per_gpu(model, precision, tp, ep, redundant, modules=mtp_modules(model, mtp))
    return out


def mtp_modules(model: ModelSpec, mtp: int) -> int:
    """MTP modules an engine holds for ``mtp`` speculative tokens: one per token up to the model's
    ``mtp_layers``; more tokens chain the last module (SGLang runs DeepSeek-V3's one module for
    ``--speculative-num-steps 2`` in its DeepSeek-V3 NextN launch example; vLLM's ``num_speculative_tokens`` sets
    the speculative depth of ``method: mtp`` independently of the model's MTP layers, vLLM docs "MTP")."""
    return min(int(mtp), int(model.mtp_layers))


def mtp_kv_factor(model: ModelSpec, mtp: int) -> float:
    """KV bytes per token with the MTP modules' caches over the main model's: each module is one attention layer
    with its own cache of the sequence (DeepSeek-V3 sec. 2.2: its block attends over the prefix like the main
    model's layers), ``1 + modules / L``; 1 without MTP."""
    return 1.0 + mtp_modules(model, mtp) / model.num_layers if mtp else 1.0


def mtp_weight_bytes_per_gpu(model: ModelSpec, precision: str, tp, ep, redundant: int = 0, *,
                             modules: int = 1) -> np.ndarray:
    """Weight bytes of ``modules`` MTP modules on one rank of a serving instance (DeepSeek-V3 report,
    arXiv:2412.19437 sec. 2.2: per module a transformer block of the model's last layer's kind, two RMSNorms and
    the projection ``M_k`` of ``2h x h``, ``mtp_other_params``; embedding and output head shared with the main
    model, so not counted again). Split as the model's own layers are (:func:`_local_params`), the projection
    over TP as training's footprint splits it (:func:`tierwise.estimate.footprint._mtp_bytes`); every rank of the
    instance holds its share, since every rank holds its share of the head."""
    shape = shape_of(model)
    tp = np.asarray(tp, dtype=float)
    ep = np.asarray(ep, dtype=float)
    block = _split(shape.attention_gemms, tp) + shape.norm_params + shape.mtp_other_params / tp
    if shape.mtp_moe and shape.num_moe_layers:
        block = block + _split(shape.moe_gemms, tp) + (
            experts_per_rank(shape.num_experts, ep, redundant) * shape.expert_params / expert_tp(tp, ep))
    else:
        block = block + _split(shape.dense_mlp_gemms, tp)
    return float(modules) * block * BYTES_PER_PARAM[precision]


def weight_bytes_read_per_step(model: ModelSpec, precision: str, tp, ep, batch, redundant: int = 0) -> np.ndarray:
    """Weight bytes one rank reads in a decode step of ``batch`` sequences.

    Dense weights are read once per step, shared by the batch. A MoE layer's routed experts are read only if a
    token of the batch picked them: with ``B`` tokens each choosing ``k`` of ``E`` experts (uniform, balanced
    routing), the expected number of distinct experts touched is ``E (1 - (1 - k/E)^B)`` (the occupancy
    expectation of B draws without replacement of k from E per draw; Feller, vol. 1, sec. II.11).
    """
    shape = shape_of(model)
    layers, experts, emb = _local_params(shape, tp, ep, redundant)
    b = BYTES_PER_PARAM[precision]
    batch = np.asarray(batch, dtype=float)
    if shape.num_moe_layers:
        k, e = shape.top_k, shape.num_experts
        touched = 1.0 - (1.0 - k / e) ** np.maximum(batch, 1.0)
        experts = experts * touched
    # the LM head is read every step (the logits of every sequence); the embedding is a gather of B rows
    head = shape.lm_head_params if shape.lm_head_params else shape.embedding_params
    return (layers + experts) * b + head / np.asarray(tp, dtype=float) * 2.0


def workspace_bytes_per_gpu(model: ModelSpec, tp, params: ServingParameters) -> np.ndarray:
    """Activation workspace one rank reserves: ``workspace_tokens`` tokens of a layer's largest live tensors
    (input and residual ``2h``, the QKV output and the MLP's gated intermediate split by TP, BF16), plus the
    FP32 logits of ``max_batch`` sequences (vocabulary-parallel). A derivation from the layer's tensors, the
    same ones ``workload/memory.py`` counts for training's forward."""
    tp = np.asarray(tp, dtype=float)
    h, f = model.hidden_size, (model.moe.ffn_hidden_size if model.moe and not model.num_dense_layers
                               else model.ffn_hidden_size)
    per_token = 2.0 * (2 * h + (model.q_channels + 2 * model.kv_channels) / tp + 2 * f / tp)
    return params.workspace_tokens * per_token + params.max_batch * model.vocab_size / tp * 4.0


def mha_equivalent(model: ModelSpec) -> ModelSpec:
    """The same model with one KV head per query head and no MLA (what GQA and MLA save against)."""
    import dataclasses

    if model.mla is not None:
        # DeepSeek without MLA: K of qk_nope + rope, V of v_head_dim per head (inference-notes.md section 2);
        # stored as head_dim = (K + V) / 2 so that 2 L a d_h b counts K and V
        kv = model.mla.qk_head_dim + model.mla.v_head_dim
        return dataclasses.replace(model, name=model.name + "-mha", mla=None, num_kv_heads=model.num_attention_heads,
                                   head_dim=kv // 2)
    return dataclasses.replace(model, name=model.name + "-mha", num_kv_heads=model.num_attention_heads)
