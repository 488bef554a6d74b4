"""The options of ``serve`` and ``serve-plan``, one module-level declaration each (as :mod:`tierwise.cli._plan_options`),
so that the commands' signatures stay a few lines; the help texts are the commands' ``--help``."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._plan_options import JsonOpt  # noqa: F401  (one --json option for every command)

# options serve and serve-plan share
ScenarioFileArg = Annotated[str | None, typer.Argument(help="scenario YAML (keys as the flags)")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="catalog model name")]
ClusterOpt = Annotated[str | None, typer.Option("--cluster", help="catalog cluster name")]
PrecisionOpt = Annotated[str | None, typer.Option("--precision", help="bf16, fp8 or fp4 weights")]
KvPrecisionOpt = Annotated[str | None, typer.Option("--kv-precision", help="bf16 or fp8 KV cache")]
InputLenOpt = Annotated[int | None, typer.Option("--input-len", help="prompt tokens")]
OutputLenOpt = Annotated[int | None, typer.Option("--output-len", help="generated tokens")]
ScenarioOpt = Annotated[str | None, typer.Option("--scenario", help="offline, server or interactive")]
RateOpt = Annotated[float | None, typer.Option("--rate", help="server arrivals, requests/s")]
TtftSloOpt = Annotated[float | None, typer.Option("--ttft-slo", help="p99 TTFT bound, seconds")]
TpotSloOpt = Annotated[float | None, typer.Option("--tpot-slo", help="p99 TPOT bound, seconds")]
KvLinkOpt = Annotated[str | None, typer.Option("--kv-link", help="auto, scale_up, scale_out, host or tcp")]
EngineOpt = Annotated[str | None, typer.Option("--engine", help="serving engine NAME[@VERSION]: vllm, sglang, trtllm, "
                                                                "lmdeploy (default vllm@0.8)")]
MtpOpt = Annotated[int | None, typer.Option(
    "--mtp", help="speculative tokens per decode step from the model's MTP module(s) (default 0: off)")]
MtpAcceptanceOpt = Annotated[float | None, typer.Option(
    "--mtp-acceptance", help="--mtp: probability a drafted token is accepted (default 0.85, DeepSeek-V3 report "
                             "sec. 5.4.3)")]

# serve: the deployment
GpusOpt = Annotated[int | None, typer.Option("--gpus", help="GPUs (aggregated)")]
TpOpt = Annotated[int | None, typer.Option("--tp", help="tensor-parallel degree")]
EpOpt = Annotated[int | None, typer.Option("--ep", help="expert-parallel degree: divides tp, or wider (up to "
                                                        "the instance, attention data-parallel)")]
BatchOpt = Annotated[str | None, typer.Option("--batch", help="sequences per instance, or auto")]
BatchingOpt = Annotated[str | None, typer.Option("--batching", help="inflight or static")]
BeamsOpt = Annotated[int | None, typer.Option("--beams", help="beam-search width (default 1)")]
MaxBatchOpt = Annotated[int | None, typer.Option("--max-batch", help="scheduler cap for --batch auto "
                                                                     "(default 2048)")]
KvReservationOpt = Annotated[str | None, typer.Option("--kv-reservation", help="paged or full")]
KvCacheFractionOpt = Annotated[float | None, typer.Option(
    "--kv-cache-fraction", help="memory fraction for the KV cache (default 0.9)")]
KvCacheOfOpt = Annotated[str | None, typer.Option(
    "--kv-cache-of", help="total (vLLM gpu_memory_utilization) or free (TensorRT-LLM "
                          "kv_cache_free_gpu_mem_fraction)")]
AttentionKernelOpt = Annotated[str | None, typer.Option(
    "--attention-kernel", help="attention kernel family the engine runs: auto (the part's default), "
                               "flash2, sdpa, cudnn, flash3, triton")]

# serve: disaggregated pools, EP
PrefillGpusOpt = Annotated[int | None, typer.Option("--prefill-gpus", help="disaggregated: prefill pool")]
DecodeGpusOpt = Annotated[int | None, typer.Option("--decode-gpus", help="disaggregated: decode pool")]
PrefillTpOpt = Annotated[int | None, typer.Option("--prefill-tp", help="TP of a prefill instance")]
DecodeTpOpt = Annotated[int | None, typer.Option("--decode-tp", help="TP of a decode instance")]
DecodeEpOpt = Annotated[int | None, typer.Option("--decode-ep", help="EP of a decode instance (wider than "
                                                                     "--decode-tp: attention data-parallel)")]
DecodeClusterOpt = Annotated[str | None, typer.Option(
    "--decode-cluster", help="disaggregated: the decode pool's cluster when it differs (its own "
                             "accelerator)")]
PrefillEpOpt = Annotated[int | None, typer.Option("--prefill-ep", help="EP of a prefill instance")]
RedundantOpt = Annotated[int | None, typer.Option(
    "--redundant-experts", help="EPLB redundant expert copies per MoE layer (their weights; EP up to "
                                "routed + redundant)")]
TwoBatchOpt = Annotated[bool, typer.Option(
    "--two-batch-overlap", help="two micro-batches per step: the all-to-all behind the other's "
                                "compute")]
KvWholeOpt = Annotated[bool, typer.Option("--kv-whole", help="send the KV cache after prefill, not layer by "
                                                             "layer")]

# serve --simulate
SimulateOpt = Annotated[bool, typer.Option("--simulate", help="run requests through an iteration-level "
                                           "event loop (tails, goodput, queue over time)")]
ArrivalsOpt = Annotated[str | None, typer.Option("--arrivals", help="--simulate: poisson (default) or gamma "
                                                 "(bursty)")]
CvOpt = Annotated[float | None, typer.Option("--cv", help="--simulate --arrivals gamma: inter-arrival "
                                             "coefficient of variation (default 4)")]
TraceOpt = Annotated[str | None, typer.Option("--trace", help="--simulate: CSV/JSONL trace (arrival time, "
                                              "prompt and output lengths)")]
RequestsOpt = Annotated[int | None, typer.Option("--requests", help="--simulate: requests generated "
                                                 "(default 10,000)")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="--simulate: random seed (default 0)")]
TokenBudgetOpt = Annotated[int | None, typer.Option("--token-budget", help="--simulate: tokens per "
                                                    "iteration (default 8192)")]
PreemptionOpt = Annotated[str | None, typer.Option("--preemption", help="--simulate: recompute (default) or "
                                                   "swap (KV to host memory)")]
SIM_OPTIONS = ("arrivals", "cv", "trace", "requests", "seed", "token_budget", "preemption")
"""The ``serve`` options that are settings of ``--simulate`` (:class:`tierwise.serve.simulate.SimRequest`)."""

# serve: the prefix cache, the outputs
PrefixHitRateOpt = Annotated[float | None, typer.Option("--prefix-hit-rate", help="share of each prompt "
                                                        "in the prefix cache")]
PrefixTierOpt = Annotated[str | None, typer.Option("--prefix-tier", help="where prefix-cache hits live: hbm "
                                                   "(default) or host (KV offload)")]
PrefixLoadOpt = Annotated[str | None, typer.Option("--prefix-load", help="host hits load layerwise "
                                                   "(default, behind the prefill) or whole")]
HostKvGbOpt = Annotated[float | None, typer.Option("--host-kv-gb", help="host memory per GPU for "
                                                   "offloaded KV, GB (default 5)")]
CompareAttentionOpt = Annotated[bool, typer.Option("--compare-attention",
                                                   help="the model's attention beside its MHA equivalent")]
HtmlOpt = Annotated[str | None, typer.Option("--html", help="write a self-contained HTML page here")]

# serve-plan
PlanGpusOpt = Annotated[int | None, typer.Option("--gpus", help="GPUs to split")]
PlanDecodeClusterOpt = Annotated[str | None, typer.Option(
    "--decode-cluster", help="plan the decode pool on this cluster (or on each of a comma-separated list) "
                             "and the prefill pool on --cluster")]
MaxTpOpt = Annotated[int, typer.Option("--max-tp", help="largest TP degree searched")]
ModesOpt = Annotated[str, typer.Option("--modes", help="both, aggregated or disaggregated")]
TopOpt = Annotated[int, typer.Option("--top", help="deployments listed")]
