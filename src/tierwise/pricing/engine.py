"""A serving engine's host time per step, priced from what the engine does (:mod:`tierwise.specs.engine`).

For a step whose kernels take ``gpu_s`` on the GPU and that launches ``launches`` kernels:

* the GPU idles ``kernel_gap_s`` between two dependent kernels, graph or not (``ServingParameters.kernel_gap_s``);
* host work ``h = step_s + per_seq_s B + graph_replay_s`` (CUDA graphs) or ``step_s + per_seq_s B`` (eager);
* eager launches (``launches x eager_launch_s``) run ahead of the GPU (launches are asynchronous), so they add
  only what they outrun it by: ``max(0, launches x eager_launch_s - gpu_s)``;
* an engine that overlaps its host work with the GPU step (the next step is scheduled while this one runs)
  exposes ``max(0, h - gpu_s)``; one that does not exposes ``h`` (the step ends with the sampled tokens copied
  to the host, a synchronization: nothing of the next step can start before its host work).

The exposed host time is added to the step; nothing here is a kernel price (those are :mod:`.kernels`).
"""

from __future__ import annotations

import numpy as np

from tierwise.specs.engine import EngineSpec

__all__ = ["engine_host_time", "DENSE_LAYER_KERNELS", "MOE_LAYER_KERNELS"]



DENSE_LAYER_KERNELS = 11
"""Kernels a dense decoder layer launches in a serving engine (vLLM's ``LlamaDecoderLayer``: fused add-RMSNorm,
QKV GEMM, rotary embedding, KV-cache write, paged attention, output GEMM, fused add-RMSNorm, gate-up GEMM,
SiLU-and-mul, down GEMM, plus the residual add of the first layer), without the TP all-reduces (two more)."""
MOE_LAYER_KERNELS = 17
"""Kernels of a MoE layer: the dense layer's attention half (6), the router GEMM, top-k softmax, token
alignment (``moe_align_block_size``), two grouped expert GEMMs, the activation, the weighted sum of the
experts' outputs, the norms (vLLM's ``fused_moe``)."""


def engine_host_time(engine: EngineSpec, *, gpu_s, batch, launches, kernel_gap_s: float) -> np.ndarray:
    """Seconds a step spends beyond its kernels' GPU time ``gpu_s`` (module docstring): the GPU idle between its
    ``launches`` kernels (``kernel_gap_s`` each) and the host time of ``engine`` it exposes for ``batch``
    running sequences."""
    gpu = np.asarray(gpu_s, dtype=float)
    host = engine.step_s + engine.per_seq_s * np.asarray(batch, dtype=float)
    if engine.cuda_graphs:
        host = host + engine.graph_replay_s
        ahead = 0.0
    else:
        ahead = np.maximum(np.asarray(launches, dtype=float) * engine.eager_launch_s - gpu, 0.0)
    gaps = np.asarray(launches, dtype=float) * kernel_gap_s
    exposed = np.maximum(host - gpu - gaps, 0.0) if engine.overlap else host
    return gaps + exposed + ahead + 0.0 * gpu
