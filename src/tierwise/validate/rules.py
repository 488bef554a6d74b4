"""FLOP-counting rules of the calibration sources, and the conversion of each source's metric to tokens/s/GPU.

Sources count FLOPs differently (training-runs-notes.md, "Sources ... and how each counts FLOPs"), so a
published TFLOP/s or MFU is only comparable after it is turned back into what was measured: tokens per second
per GPU, by the source's own rule. Each rule below is the per-token FLOP count ``F_tok`` the source divides
by; ``tokens/s/GPU = TFLOP/s x 1e12 / F_tok`` (or ``MFU x peak / F_tok``). Symbols: ``L`` layers, ``h`` hidden
size, ``s`` sequence length, ``V`` vocabulary, ``a`` heads, ``g`` kv heads (query groups), ``f`` MLP width.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Rule", "RULES", "rule_for", "tokens_per_gpu_from_tflops", "narayanan_eq3_flops_per_token",
           "palm_model_flops_per_token", "palm_selective_hw_flops_per_token", "megatron_core_r08_flops_per_token",
           "llmfoundry_flops_per_token"]


def narayanan_eq3_flops_per_token(L: int, h: int, s: int, V: int) -> float:
    """Narayanan et al. 2021 (arXiv:2104.04473) section 5.1, Eq. 3, divided by ``B s`` tokens.

    ``F = 96 B s L h^2 (1 + s / 6h + V / 16 L h)``: GEMMs only, forward + backward + the recompute forward
    (4 forward passes: 24 B s L h^2 per pass for the four h x h-equivalent GEMMs of a 4h-MLP layer, plus
    4 B s^2 L h for attention), and 6 B s h V for the logits (not recomputed).
    """
    return 96.0 * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h))


def palm_model_flops_per_token(L: int, h: int, s: int, V: int) -> float:
    """Korthikanti et al. 2022 (arXiv:2205.05198) Appendix A, model FLOPs (no recompute) per token.

    ``72 B s L h^2 (1 + s / 6h + V / 12 L h)``: Eq. 3 with three passes instead of four (MFU as in
    Chowdhery et al. 2022, PaLM, Appendix B).
    """
    return 72.0 * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * L * h))


def palm_selective_hw_flops_per_token(L: int, h: int, s: int, V: int) -> float:
    """Korthikanti et al. 2022 Appendix A, hardware FLOPs with selective recompute, per token.

    Selective recompute redoes the attention core's forward (``2 B s^2 h`` per layer: scores and values),
    so the ``s / 6h`` term doubles: ``72 B s L h^2 (1 + s / 3h + V / 12 L h)``.
    """
    return 72.0 * L * h * h * (1.0 + s / (3.0 * h) + V / (12.0 * L * h))


def megatron_core_r08_flops_per_token(L: int, h: int, s: int, V: int, a: int, g: int, f: int, *,
                                      gated: bool = False, head_dim: int | None = None) -> float:
    """Megatron-Core r0.8.0 ``num_floating_point_operations`` (training.py) per token.

    ``12 L h^2 [(1 + g/a + s/h) q/h + f/h x glu + V / (2 L h)]`` with ``q = a x head_dim`` (the query
    projection width), ``glu = 3/2`` for a gated MLP, else 1; the attention ``s^2`` term is not halved for
    the causal mask; no recompute (model FLOPs).
    """
    q = a * (head_dim or h // a)
    glu = 1.5 if gated else 1.0
    return 12.0 * L * h * h * ((1.0 + g / a + s / h) * q / h + f / h * glu + V / (2.0 * L * h))


def llmfoundry_flops_per_token(params: float, L: int, h: int, s: int) -> float:
    """llm-foundry ``scripts/train/benchmarking/collect_results.py``: ``6 N + 12 L h s`` per token.

    Six FLOPs per parameter (forward + backward) plus full (not causally halved) attention; norms and
    activations excluded; ``N`` the published parameter count.
    """
    return 6.0 * params + 12.0 * L * h * s


@dataclass(frozen=True)
class Rule:
    """How one source counts FLOPs, as shown in each validation row."""

    key: str
    label: str
    pinned: bool
    """Whether the formula is known, so that TFLOP/s or MFU can be turned back into tokens/s."""
    includes_recompute: bool


RULES = {
    "narayanan-eq3": Rule("narayanan-eq3", "Narayanan 2021 Eq. 3 (GEMMs, includes recompute)", True, True),
    "palm-mfu": Rule("palm-mfu", "Korthikanti 2022 App. A model FLOPs (PaLM MFU, no recompute)", True, False),
    "mcore-r0.8": Rule("mcore-r0.8", "Megatron-Core r0.8 (model FLOPs, full s^2 attention)", True, False),
    "llmfoundry": Rule("llmfoundry", "llm-foundry 6N + 12 L h s (full attention)", True, False),
    "nemo": Rule("nemo", "NeMo 'Model TFLOP/sec/GPU' (formula not restated: unpinned)", False, False),
    "measured": Rule("measured", "tokens/s measured (no FLOP rule)", True, False),
    "unknown": Rule("unknown", "FLOP rule not recognized (unpinned)", False, False),
}


def rule_for(flops_counting: str) -> Rule:
    """The rule a ``flops_counting`` text names (matched on the formula or tool it quotes)."""
    text = flops_counting.lower()
    if "eq.3" in text or "eq. 3" in text or "96*b*s*L*h^2" in text:
        return RULES["narayanan-eq3"]
    if "chowdhery" in text or "72*b*s*L*h^2" in text:
        return RULES["palm-mfu"]
    if "megatron-core r0.8" in text or "num_floating_point_operations" in text:
        return RULES["mcore-r0.8"]
    if "collect_results.py" in text or "6*n_params" in text:
        return RULES["llmfoundry"]
    if "nemo" in text:
        return RULES["nemo"]
    if "tps/gpu measured" in text or "measured tps" in text or text.strip() in ("measured", "tokens/s measured"):
        return RULES["measured"]
    return RULES["unknown"]


def tokens_per_gpu_from_tflops(tflops_per_gpu: float, flops_per_token: float) -> float:
    """tokens/s per GPU = achieved FLOP/s per GPU / FLOPs per token (of the same rule)."""
    return tflops_per_gpu * 1e12 / flops_per_token
