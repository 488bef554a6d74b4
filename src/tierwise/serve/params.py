"""The global parameters of the serving model: the training model's compute efficiencies (read through
:func:`tierwise.specs.parameters.load_parameters`, so serving follows any refit of them) and the few
serving-only values below, each with its source or its fit (docs/serving.md, "Parameters").

Nothing here is specific to one row, source or system of the serving set.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tierwise.specs.parameters import load_parameters

__all__ = ["ServingParameters", "serving_parameters", "BYTES_PER_PARAM", "KV_BYTES_PER_ELEMENT"]

BYTES_PER_PARAM = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625}
"""Weight bytes per parameter by weight precision. FP4 is NVFP4: a 4-bit E2M1 value plus one FP8 (E4M3)
scale per block of 16 values, 4.5 bits (NVIDIA, "Introducing NVFP4 for efficient and accurate low-precision
inference", 2025); FP8 per-tensor scales are negligible."""

KV_BYTES_PER_ELEMENT = {"bf16": 2.0, "fp8": 1.0}
"""KV-cache bytes per stored element (per-tensor FP8 scales are negligible)."""


@dataclass(frozen=True, kw_only=True)
class ServingParameters:
    """Global parameters of :mod:`tierwise.serve` (one value each, for every model and part)."""

    matmul_efficiency: float
    """Fraction of the dense peak the serving GEMMs reach (prefill and the decode step). Fitted on the serving
    set's throughput rows (0.6; docs/serving.md, "Parameters"); the training model's large-GEMM efficiency
    (issue 14: a measured per-accelerator fraction, e.g. H100 0.801, times the fitted global
    ``compute.matmul_residual``, read here as ``training_matmul_efficiency``) is a BF16 training figure, and
    serving runs FP8/FP4 GEMMs whose fraction of their (2x, 4x) peak is lower."""
    gemm_memory_overlap_loss: float = 0.0
    """How much of a weight GEMM's HBM read is not hidden behind its math in serving steps: the step's GEMM time
    is ``max(t_math, t_read) + loss x min(t_math, t_read)`` (0: the ideal max roofline; 1: the additive
    roofline, Williams et al. 2009). Fitted on the serving set's throughput rows (docs/serving.md)."""
    fp4_efficiency_ratio: float = 1.0
    """FP4 GEMMs reach this fraction of the efficiency FP8 GEMMs reach against their own (2x) peak (NVFP4's
    per-16-element block scales are applied in the MMA pipeline; the analogue of the training model's
    ``fp8_efficiency_ratio``). Fitted on the serving set's FP4 rows (docs/serving.md)."""
    training_matmul_efficiency: float = 0.0
    """The training model's global large-GEMM residual ``compute.matmul_residual`` (the factor on each
    accelerator's measured large-GEMM fraction, catalog/compute.yaml), reported beside the serving value."""
    attention_efficiency: float
    """Fraction of the BF16 dense peak the attention core reaches in prefill. The training value
    (``compute.attention_efficiency`` = 0.17) was fitted on FlashAttention-2-era training kernels with their
    backward pass; serving kernels (TensorRT-LLM FMHA, FlashAttention-3 forward) run the forward only:
    FlashAttention-3 reaches 0.75 of the H100 BF16 peak forward (Shah et al. 2024, arXiv 2407.08608, sec. 4.1,
    Fig. 4: 740 of 989 TFLOP/s at head dim 128); 0.5 is used (a forward between FA2's ~0.35 and FA3's)."""
    attention_half_seq_tokens: float
    """Sequence length at which attention reaches half its efficiency: ``compute.attention_half_seq_tokens``."""
    decode_hbm_efficiency: float
    """Fraction of the datasheet HBM bandwidth the decode step's weight and KV reads reach. Fitted on the
    serving set's throughput rows (docs/serving.md); the training model's ``memory_bound_efficiency`` (0.48)
    is for small elementwise kernels, not for long streaming GEMV/attention reads."""
    step_overhead_s: float
    """Per decode step software time not hidden behind the GPU (scheduler, sampling, launches between CUDA
    graphs). vLLM v0.5.3 spent 62% of a Llama-3-8B step outside GPU execution (vLLM blog, 2024-09-05: "only 38%
    of time in GPU execution"); fitted on the serving set's TPOT and throughput rows (docs/serving.md)."""
    memory_utilization: float = 0.9
    """Fraction of HBM the serving engine may use (vLLM ``gpu_memory_utilization`` default 0.9; TensorRT-LLM
    ``kv_cache_free_gpu_mem_fraction`` default 0.9)."""
    workspace_tokens: int = 8192
    """Tokens one engine step may hold (activation workspace): TensorRT-LLM's default ``max_num_tokens`` 8192."""
    max_batch: int = 2048
    """Largest batch the scheduler runs when ``--batch auto``: TensorRT-LLM's default ``max_batch_size``."""
    tcp_bytes_per_s_per_node: float = 38.8e9
    """KV transfer over TCP, per node (all its NICs): Mooncake Transfer Engine README, RDMA is 2.4x TCP on
    4 x 200 Gb/s (87 GB/s -> 36.3 GB/s) and 4.6x on 8 x 400 Gb/s (190 GB/s -> 41.3 GB/s); TCP is CPU-bound and
    barely grows with the NICs, so one per-node figure, the mean of the two, is used."""
    tcp_latency_s: float = 50e-6
    """Per-transfer TCP setup and kernel round trip (Linux loopback-free RTT on a datacenter LAN is tens of
    microseconds; the per-request KV transfer is dominated by bytes, not by this)."""
    cuda_graph_launch_s: float = 0.0
    """Launch cost of one collective inside a CUDA graph. The collective model's ``launch_overhead`` (15 us,
    a host-side NCCL enqueue) is removed from every per-layer collective of the decode step because serving
    engines capture the decode step in CUDA graphs (TensorRT-LLM, vLLM ``--enforce-eager`` off)."""


_OVERRIDES: dict[str, float] = {}
"""Values set by a fit in progress (``serve/validate.py`` fit helper); empty in normal use."""


def serving_parameters() -> ServingParameters:
    """The parameters in force: the training compute block (as the estimator reads it today) plus the
    serving values above."""
    compute = load_parameters().compute
    base = ServingParameters(
        matmul_efficiency=0.6,
        training_matmul_efficiency=float(compute["matmul_residual"]),
        attention_efficiency=0.5,
        attention_half_seq_tokens=float(compute.get("attention_half_seq_tokens", 240)),
        decode_hbm_efficiency=0.90,
        step_overhead_s=12.0e-3,
        fp4_efficiency_ratio=0.85,
        gemm_memory_overlap_loss=1.0,
    )
    return dataclasses.replace(base, **_OVERRIDES) if _OVERRIDES else base
