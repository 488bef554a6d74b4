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

    matmul_residual: float
    """What serving GEMMs reach of each accelerator's measured large-GEMM fraction: the training model's fitted
    global ``compute.matmul_residual`` (issue 14), read through :func:`load_parameters`, so serving and training
    share one GEMM model. A part's absolute efficiency is ``gemm_bf16_fraction x clock_factor x
    matmul_residual`` (catalog/compute.yaml measured fractions: H100 0.801, H200 0.830, B200 0.776, MI300X
    0.598 of the dense peak; :func:`tierwise.serve.phases.efficiencies`), applied to the dense peak at the
    weight precision (FP8 GEMMs at the training model's ``fp8_efficiency_ratio``)."""
    fp8_efficiency_ratio: float = 1.0
    """FP8 GEMMs reach this fraction of the BF16 efficiency against their own (2x) peak: the training model's
    ``compute.fp8_efficiency_ratio`` (held at 1 there)."""
    gemm_memory_overlap_loss: float = 0.0
    """How much of a weight GEMM's HBM read is not hidden behind its math in serving steps: the step's GEMM time
    is ``max(t_math, t_read) + loss x min(t_math, t_read)`` (0: the ideal max roofline; 1: the additive
    roofline, Williams et al. 2009). Fitted on the serving set's throughput rows (docs/serving.md)."""
    fp4_efficiency_ratio: float = 1.0
    """FP4 GEMMs reach this fraction of the efficiency FP8 GEMMs reach against their own (2x) peak (NVFP4's
    per-16-element block scales are applied in the MMA pipeline; the analogue of the training model's
    ``fp8_efficiency_ratio``). Fitted on the serving set's FP4 rows (docs/serving.md)."""
    attention_efficiency_flash2: float
    """Forward attention-core efficiency against the BF16 dense peak of the FlashAttention-2 family (PyTorch
    SDPA, ROCm kernels): the training model's fitted ``compute.attention_efficiency_flash2`` (its backward is
    priced apart there by ``attention_backward_ratio``, so the value is a forward one)."""
    attention_efficiency_cudnn: float
    """The same for the cuDNN / FlashAttention-3 family (TensorRT-LLM and FlashInfer FMHA on Hopper and
    Blackwell): the training model's ``compute.attention_efficiency_cudnn``. The family a part runs is
    compute.yaml's ``default_attention_kernel`` of its generation (ampere: flash2; hopper and blackwell:
    cudnn; any other: sdpa, which runs at the flash2 value)."""
    attention_half_seq_tokens: float
    """Sequence length at which attention reaches half its efficiency: ``compute.attention_half_seq_tokens``."""
    hbm_residual: float
    """What the decode step's long weight and KV reads reach of each accelerator's measured streaming HBM
    fraction (catalog/compute.yaml ``hbm_fraction``: H100 0.922 of the datasheet, a device-to-device copy;
    parts without their own measurement use it too). Fitted on the serving set's throughput rows
    (docs/serving.md); the training model's ``memory_bound_residual`` (0.47) is for its small elementwise
    kernels, not for streaming GEMV reads."""
    step_overhead_s: float
    """Per decode step software time not hidden behind the GPU (scheduler, sampling, launches between CUDA
    graphs). vLLM v0.5.3 spent 62% of a Llama-3-8B step outside GPU execution (vLLM blog, 2024-09-05: "only 38%
    of time in GPU execution"); fitted on the serving set's TPOT and throughput rows (docs/serving.md)."""
    attention_kernel: str = "auto"
    """The attention kernel family the engine runs (a deployment setting carried here as ``max_batch`` is;
    ``--attention-kernel``): ``auto`` is the generation's default (catalog/compute.yaml), ``flash2`` for
    engines on FlashAttention-2 (vLLM's CUDA ``FLASH_ATTN`` backend, vllm-flash-attn, through v0.6)."""
    memory_utilization: float = 0.9
    """Default KV-cache memory fraction (``--kv-cache-fraction``): vLLM's ``gpu_memory_utilization`` and
    TensorRT-LLM's ``kv_cache_free_gpu_mem_fraction`` both default to 0.9, of different wholes
    (``--kv-cache-of``: total HBM for vLLM, the HBM left after weights and activations for TensorRT-LLM)."""
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
        matmul_residual=float(compute["matmul_residual"]),
        fp8_efficiency_ratio=float(compute.get("fp8_efficiency_ratio", 1.0)),
        attention_efficiency_flash2=float(compute["attention_efficiency_flash2"]),
        attention_efficiency_cudnn=float(compute["attention_efficiency_cudnn"]),
        attention_half_seq_tokens=float(compute.get("attention_half_seq_tokens", 240)),
        hbm_residual=0.85,
        step_overhead_s=12.0e-3,
        fp4_efficiency_ratio=0.85,
        gemm_memory_overlap_loss=0.75,
    )
    return dataclasses.replace(base, **_OVERRIDES) if _OVERRIDES else base
