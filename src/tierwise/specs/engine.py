"""What each serving engine does on the host per step: the one place that knows it (the serving counterpart of
:mod:`tierwise.specs.framework`).

A serving deployment names its ``engine`` (``--engine NAME[@VERSION]``); :func:`engine_spec` gives the
engine's per-step host work, which :func:`tierwise.pricing.engine.engine_host_time` prices:

* **launches**: with CUDA graphs (captured decode batches) a step replays one graph, ``graph_replay_s``; eager
  engines launch every kernel of every layer from Python, ``eager_launch_s`` each (the host runs ahead of the
  GPU, so eager launches cost only where they outrun it);
* **scheduler and input preparation**: ``step_s`` per step plus ``per_seq_s`` per running sequence (batch
  assembly, block tables, sampling and output processing -- Python objects per sequence in vLLM < 0.8 and in
  TensorRT-LLM's PyTorch backend);
* **overlap**: engines that prepare step ``n+1`` while the GPU runs step ``n`` (vLLM V1 async scheduling,
  SGLang's overlap scheduler, TensorRT-LLM's executor) expose only the host time the GPU step does not cover.

Every value carries its source below; where a value is set by a serving-set row (docs/serving.md, "The engine
as a part") the row says so. No value is fitted per row: one value per engine version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tierwise.errors import ScenarioError
from tierwise.files import short_repr

__all__ = ["EngineSpec", "ENGINES", "DEFAULT_ENGINE", "engine_spec", "engine_names", "engine_for_software"]


@dataclass(frozen=True, kw_only=True)
class EngineSpec:
    """One engine version's host work per step (module docstring)."""

    name: str
    version: str
    cuda_graphs: bool
    """Decode steps replay a captured CUDA graph (one launch per step) instead of launching every kernel."""
    graph_replay_s: float = 20e-6
    """Host time of one ``cudaGraphLaunch`` of a whole decoder (tens of microseconds: NVIDIA, "Getting Started
    with CUDA Graphs", 2019, and PyTorch, "Accelerating PyTorch with CUDA Graphs", 2021)."""
    eager_launch_s: float = 10e-6
    """Host time per kernel launched from Python in eager mode: PyTorch's per-op dispatch plus the Python module
    call, about 10 us (H. He, "Making Deep Learning Go Brrrr From First Principles", 2022: eager PyTorch's
    overhead bounds it to ~10^5 ops/s)."""
    step_s: float
    """Serial host time per step: scheduling, input preparation, sampling set-up, output processing."""
    per_seq_s: float
    """Host time per running sequence per step."""
    overlap: bool
    """The host work of the next step runs while the GPU executes this one."""
    source: str

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"


_SPLITWISE = ("vLLM as profiled by Splitwise (Patel et al., ISCA 2024; splitwise-sim data/perf_model.csv, serving "
              "set S19), 2023: eager PyTorch, CUDA graphs came with vLLM PR #1926 (Dec 2023); a Python sampler "
              "and input preparation per sequence. per_seq_s 0.45 ms is S19's own batch slope (TPOT 37.0 -> 52.3 ms "
              "from batch 1 to 32 on Llama-2-70B TP2 H100, 36.1 -> 63.8 ms from 1 to 64 on BLOOM-176B TP8, less the "
              "GPU step's growth: 0.46 and 0.42 ms per sequence); step_s 9 ms its batch-1 intercept on Llama-2-70B "
              "(37.0 ms less the 26.4 ms GPU step and one sequence)")
_VLLM05 = ("vLLM v0.5.3 profile (vLLM blog, 2024-09-05, 'vLLM v0.6.0: 2.7x throughput improvement'): Llama-3-8B on "
           "one H100 spends only 38% of its time in GPU execution (HTTP API server 33%, scheduling and input "
           "preparation 29%); its light-load step is 13 ms (serving set S15), so 62% of 13 ms = 8.1 ms of host "
           "time per step, serial (no overlap); CUDA graphs on. per_seq_s 0.15 ms: Python SequenceGroup output "
           "processing and detokenization per sequence (the blog's reason for async output processing), the "
           "batch-256 slope of serving set S24 (vLLM ROCm, 405B: 1,846 tok/s at batch 256 against 36 at batch 1)")
_VLLM06 = ("vLLM v0.6.0 (same blog): the API server moves to its own process and output processing overlaps the "
           "next step (async output processing, on by default), so the 33% of the API server leaves the step and "
           "scheduling stays serial (multi-step scheduling is off by default: num_scheduler_steps=1): 29% of 13 ms "
           "= 3.8 ms per step; per-sequence Python work as v0.5 (0.15 ms)")
_VLLM08 = ("vLLM V1 engine (default from v0.8.0; vLLM blog 2025-01-27 'vLLM V1'): scheduler in its own busy-loop "
           "process, persistent batch (only diffs of the input tensors are sent per step), piecewise CUDA graphs: "
           "the blog reports up to 1.7x the throughput of V0 and near-zero CPU overhead; taken as 1 ms serial per "
           "step plus 10 us per sequence (the persistent batch's per-request bookkeeping), no overlap until async "
           "scheduling")
_VLLM011 = ("vLLM with async scheduling (--async-scheduling, v0.10-v0.11, vLLM docs 'Optimization and Tuning'): "
            "the scheduler prepares step n+1 while the GPU runs step n; host work as V1")
_SGLANG = ("SGLang v0.4 overlap ('zero-overhead') batch scheduler, on by default (LMSYS blog 2024-12-04, 'SGLang "
           "v0.4: Zero-Overhead Batch Scheduler'): CPU scheduling of the next batch runs while the GPU executes the "
           "current one, so the Nsight profile shows no GPU idle between batches; CUDA graphs for decode; "
           "host work per step taken as V1's (1 ms + 10 us per sequence), hidden while the GPU step is longer")
_TRTLLM = ("TensorRT-LLM C++ runtime of 2024 (MLPerf v4.0/v4.1, S25): batch manager in C++ with in-flight batching "
           "(TensorRT-LLM docs 'The Batch Manager'), CUDA graphs for decode; its executor loop schedules, enqueues "
           "the engine and waits for the sampled tokens in turn (the overlap scheduler came with the PyTorch "
           "backend, 2025), so its host work is serial but small: about 1 ms per step plus 4 us per sequence "
           "(per-request LlmRequest bookkeeping in C++)")
_TRTLLM1 = ("TensorRT-LLM v1.0 PyTorch backend (serving set S05's engine): the overlap scheduler is on by default "
            "(TensorRT-LLM docs, 'Overlap Scheduler': disable_overlap_scheduler False), CUDA graphs for decode; "
            "Python scheduling and sampling per request, taken as 2 ms per step plus 4 us per sequence")
_LMDEPLOY = ("LMDeploy TurboMind (C++ engine, persistent batch, CUDA graphs for decode; LMDeploy docs "
             "'TurboMind'), no overlap of the request loop with the GPU step; host work per step taken as 1 ms plus "
             "10 us per sequence")

ENGINES: dict[tuple[str, str], EngineSpec] = {
    ("vllm", "0.2"): EngineSpec(name="vllm", version="0.2", cuda_graphs=False, step_s=9e-3, per_seq_s=0.45e-3,
                                overlap=False, source=_SPLITWISE),
    ("vllm", "0.5"): EngineSpec(name="vllm", version="0.5", cuda_graphs=True, step_s=8.1e-3, per_seq_s=0.15e-3,
                                overlap=False, source=_VLLM05),
    ("vllm", "0.6"): EngineSpec(name="vllm", version="0.6", cuda_graphs=True, step_s=3.8e-3, per_seq_s=20e-6,
                                overlap=False, source=_VLLM06),
    ("vllm", "0.8"): EngineSpec(name="vllm", version="0.8", cuda_graphs=True, step_s=1e-3, per_seq_s=10e-6,
                                overlap=False, source=_VLLM08),
    ("vllm", "0.11"): EngineSpec(name="vllm", version="0.11", cuda_graphs=True, step_s=1e-3, per_seq_s=10e-6,
                                 overlap=True, source=_VLLM011),
    ("sglang", "0.4"): EngineSpec(name="sglang", version="0.4", cuda_graphs=True, step_s=1e-3, per_seq_s=10e-6,
                                  overlap=True, source=_SGLANG),
    ("trtllm", "0.12"): EngineSpec(name="trtllm", version="0.12", cuda_graphs=True, step_s=1e-3, per_seq_s=4e-6,
                                   overlap=False, source=_TRTLLM),
    ("trtllm", "1.0"): EngineSpec(name="trtllm", version="1.0", cuda_graphs=True, step_s=2e-3, per_seq_s=4e-6,
                                  overlap=True, source=_TRTLLM1),
    ("lmdeploy", "0.6"): EngineSpec(name="lmdeploy", version="0.6", cuda_graphs=True, step_s=1e-3, per_seq_s=10e-6,
                                    overlap=False, source=_LMDEPLOY),
}
"""The catalog: (name, version) -> its host work (sources in each entry's ``source``)."""

LATEST = {"vllm": "0.11", "sglang": "0.4", "trtllm": "1.0", "lmdeploy": "0.6"}
"""The version a bare engine name means."""
DEFAULT_ENGINE = "vllm@0.8"
"""The engine assumed when none is stated (listed under ``assumed``): vLLM, the most deployed open engine, at its
V1 engine's defaults (no async scheduling)."""


def engine_names() -> list[str]:
    """Every ``name@version`` the catalog knows."""
    return [f"{n}@{v}" for n, v in ENGINES]


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v))


def engine_spec(text: str) -> EngineSpec:
    """``NAME`` (its latest version) or ``NAME@VERSION`` -> the catalog entry. A version the catalog does not
    list exactly is the latest catalog version at or below it (``vllm@0.6.3`` -> ``vllm@0.6``); one below every
    catalog version, or an unknown name, is refused with one line listing those known."""
    raw = str(text).strip().lower()
    name, _, version = raw.partition("@")
    name = {"tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm"}.get(name, name)
    if name not in LATEST:
        raise ScenarioError(f"--engine {short_repr(text)} is not a known engine; use one of {', '.join(engine_names())}")
    if not version:
        return ENGINES[(name, LATEST[name])]
    version = version.lstrip("v")
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        raise ScenarioError(f"--engine {short_repr(text)}: version {short_repr(version)} is not a version number; "
                            f"use one of {', '.join(engine_names())}")
    have = sorted((v for n, v in ENGINES if n == name), key=_version_key)
    below = [v for v in have if _version_key(v) <= _version_key(version)]
    if not below:
        raise ScenarioError(f"--engine {short_repr(text)}: no catalog entry at or below {version}; use one of "
                            f"{', '.join(engine_names())}")
    return ENGINES[(name, below[-1])]


_SOFTWARE = (("splitwise", "vllm@0.2"), ("tensorrt-llm v1.0", "trtllm@1.0"), ("tensorrt-llm", "trtllm@0.12"),
             ("trtllm", "trtllm@0.12"), ("vllm-based (rocm)", "vllm@0.6"), ("vllm (rocm)", "vllm@0.5"),
             ("vllm v0.5", "vllm@0.5"), ("vllm", "vllm@0.5"), ("sglang", "sglang@0.4"), ("lmdeploy", "lmdeploy@0.6"))
"""A serving row's software column -> its engine (first match): S19 is the Splitwise profile, S05 TensorRT-LLM's
v1.0-era PyTorch backend, MLPerf v4.0/v4.1 and S25 (2024) the C++ runtime, S24 and AMD's MLPerf v4.1 entries
vLLM on ROCm of mid/late 2024 (v0.6), S15 the v0.5.3 profile of the vLLM v0.6.0 blog."""


def engine_for_software(text: str) -> str | None:
    """The catalog engine a serving row's ``software`` column names (None when it names none)."""
    low = text.lower()
    for key, name in _SOFTWARE:
        if key in low:
            return name
    return None
