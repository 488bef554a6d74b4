"""The global parameters of the serving model: the few serving-only values below, each with its source or its
fit (docs/serving.md, "Parameters"). Every kernel is priced by :mod:`tierwise.pricing.kernels` with the training
model's ``compute:`` parameters, so serving follows any refit of them.

Nothing here is specific to one row, source or system of the serving set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tierwise.errors import SpecError
from tierwise.specs.engine import DEFAULT_ENGINE, EngineSpec, engine_spec
from tierwise.specs.parameters import Parameters, load_parameters

__all__ = ["ServingParameters", "serving_parameters", "model_parameters", "BYTES_PER_PARAM", "KV_BYTES_PER_ELEMENT"]

BYTES_PER_PARAM = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625}
"""Weight bytes per parameter by weight precision. FP4 is NVFP4: a 4-bit E2M1 value plus one FP8 (E4M3)
scale per block of 16 values, 4.5 bits (NVIDIA, "Introducing NVFP4 for efficient and accurate low-precision
inference", 2025); FP8 per-tensor scales are negligible."""

KV_BYTES_PER_ELEMENT = {"bf16": 2.0, "fp8": 1.0}
"""KV-cache bytes per stored element (per-tensor FP8 scales are negligible)."""


@dataclass(frozen=True, kw_only=True)
class ServingParameters:
    """Global parameters of :mod:`tierwise.serve` (one value each, for every model and part)."""

    fp4_efficiency_ratio: float = 0.7
    """FP4 GEMMs reach this fraction of the efficiency FP8 GEMMs reach against their own (2x) peak (NVFP4's
    per-16-element block scales are applied in the MMA pipeline; the analogue of the training model's
    ``fp8_efficiency_ratio``), passed to :func:`tierwise.pricing.kernels.gemm_peak`. Fitted on the serving set's
    rows with the engine model (issue 31, docs/serving.md): 0.7, the grid's lowest (1 before the engine model, whose
    8 ms per step had slowed these large-batch rows)."""
    engine: EngineSpec = field(default_factory=lambda: engine_spec(DEFAULT_ENGINE))
    """The serving engine whose host time each step carries (:mod:`tierwise.specs.engine`, priced by
    :func:`tierwise.pricing.engine.engine_host_time`; ``--engine``). Until issue 31 one fitted constant,
    ``step_overhead_s`` 8 ms, stood for every engine, version and batch."""
    kernel_gap_s: float = 2e-6
    """GPU idle between two dependent kernels of a step, CUDA graph or not: the next kernel's launch latency on
    the device plus the previous one's tail and the next one's ramp (a few microseconds: NVIDIA, "Getting Started
    with CUDA Graphs", 2019; the gap Programmatic Dependent Launch exists to hide, CUDA Programming Guide,
    "Programmatic Dependent Launch and Synchronization"). Fitted on the serving set within that physical range
    (docs/serving.md, ``tools/fit_serving.py``): 2 us."""
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
    two_batch_overlap: bool = False
    """A deployment switch (``--two-batch-overlap``): each step runs two micro-batches, the attention and MoE
    compute of one overlapping the other's dispatch and combine (DeepSeek-V3 report sec. 3.4.1 / 3.4.2; DeepEP
    README, "two-micro-batch overlapping"), so a step costs ``max(layers, communication)`` instead of their sum."""
    redundant_experts: int = 0
    """A deployment switch (``--redundant-experts``): EPLB's extra expert copies per MoE layer, spread over the EP
    ranks (DeepSeek-V3 report sec. 3.4.1: 32 redundant experts for prefill, each GPU of the 320-GPU decode
    deployment one expert, redundant and shared included). They cost their weights (``ceil((E + R) / ep)``
    slots per rank) and allow EP up to ``E + R``; the load they even out is not modelled (the training fit's
    ``moe_load_imbalance`` stays)."""
    mtp: int = 0
    """A deployment switch (``--mtp N``): speculative tokens per decode step drafted by the model's MTP modules
    (DeepSeek-V3 report, arXiv:2412.19437 sec. 2.2 and 5.4.3) and verified by the next step's target forward
    (:func:`tierwise.serve.phases.decode_step_time`). 0: off. ``N`` above the model's ``mtp_layers`` chains the
    last module, as SGLang (``--speculative-num-steps``) and vLLM (``num_speculative_tokens``) run DeepSeek's one
    module (:func:`tierwise.serve.kv.mtp_modules`)."""
    mtp_acceptance: float = 0.85
    """Probability a speculative token is accepted given the ones before it were (``--mtp-acceptance``), taken
    i.i.d. per token (:func:`tierwise.serve.phases.accepted_per_step`). An input, not a fit: DeepSeek-V3 report
    sec. 5.4.3, "the acceptance rate of the second token prediction ranges between 85% and 90% across various
    generation topics"; 0.85, the low end."""
    tcp_bytes_per_s_per_node: float = 38.8e9
    """KV transfer over TCP, per node (all its NICs): Mooncake Transfer Engine README, RDMA is 2.4x TCP on
    4 x 200 Gb/s (87 GB/s -> 36.3 GB/s) and 4.6x on 8 x 400 Gb/s (190 GB/s -> 41.3 GB/s); TCP is CPU-bound and
    barely grows with the NICs, so one per-node figure, the mean of the two, is used."""
    tcp_latency_s: float = 50e-6
    """Per-transfer TCP setup and kernel round trip (Linux loopback-free RTT on a datacenter LAN is tens of
    microseconds; the per-request KV transfer is dominated by bytes, not by this)."""
    parameters: Parameters | None = field(default=None, compare=False, repr=False)
    """The performance model's parameters (:mod:`tierwise.specs.parameters`: ``compute:`` prices every kernel,
    ``collectives:`` every collective), carried here so that every serving function takes them as an argument;
    :func:`serving_parameters` fills them in."""


def serving_parameters(parameters: Parameters | None = None) -> ServingParameters:
    """The serving values in force, carrying ``parameters`` (the kernels themselves are priced with the
    training model's ``compute:`` parameters, :func:`tierwise.serve.phases.serving_rates`). None: the run's,
    :func:`~tierwise.specs.parameters.load_parameters` (the serving entry points call this once)."""
    return ServingParameters(fp4_efficiency_ratio=0.7,
                             parameters=parameters if parameters is not None else load_parameters())


def model_parameters(params: ServingParameters) -> Parameters:
    """The performance model's parameters ``params`` carries (:func:`serving_parameters` fills them in)."""
    if params.parameters is None:
        raise SpecError("these serving parameters carry no model parameters; build them with "
                        "tierwise.serve.params.serving_parameters(parameters)")
    return params.parameters
