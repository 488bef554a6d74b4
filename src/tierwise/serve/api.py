"""One serving question: :class:`ServeConfig` (from flags or a scenario file) -> the ``serve --json`` document.

Stable JSON keys: ``output_tokens_per_s``, ``output_tokens_per_s_per_gpu``, ``ttft_s``, ``tpot_s``, ``batch``,
``kv_bytes_per_token``, ``kv_cache_bytes_per_gpu``, ``max_concurrency``, ``prefill_bound``, ``decode_bound``,
``kv_transfer_s``, ``kv_transfer_tier`` (null when aggregated), and ``assumed`` (every default the tool chose).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tierwise.documents.serving import compare_block, plan_document, serve_document
from tierwise.errors import ScenarioError, did_you_mean
from tierwise.limits import check_float, check_int
from tierwise.serve.cost import gpu_usd_per_s
from tierwise.serve.engine import SCENARIOS, Deployments, Workload, evaluate
from tierwise.serve.kv import (
    attention_dp,
    attention_kind,
    instance_gpus,
    kv_fraction_per_gpu,
    mha_equivalent,
    mtp_modules,
    mtp_weight_bytes_per_gpu,
    weight_bytes_per_gpu,
)
from tierwise.serve.params import ServingParameters, serving_parameters
from tierwise.serve.phases import accepted_per_step, decode_step_time
from tierwise.serve.plan import MAX_DISAGGREGATED_GPUS, REDUNDANT_CHOICES, ep_tier_name, serve_plan
from tierwise.serve.prefix import (
    DEFAULT_HOST_KV_GB,
    PREFIX_LOADS,
    PREFIX_TIERS,
    PrefixCache,
    host_prefix_tokens,
)
from tierwise.serve.result import (
    MtpSummary,
    PlanChoice,
    PlanSearch,
    PrefixSummary,
    ServeDeployment,
    ServeEstimate,
    ServePlan,
)
from tierwise.serve.transfer import KV_LINKS, pick_kv_link
from tierwise.specs.cluster import load_cluster
from tierwise.specs.engine import DEFAULT_ENGINE, engine_spec
from tierwise.specs.framework import ATTENTION_KERNELS
from tierwise.specs.model import load_model

__all__ = ["ServeConfig", "estimate_serving", "serve_estimate", "workload_of", "attention_variants", "plan_serving", "config_from_mapping", "compare_attention", "PRECISIONS",
           "KV_PRECISIONS"]

PRECISIONS = ("bf16", "fp8", "fp4")
KV_PRECISIONS = ("bf16", "fp8")
MAX_TOKENS = 10_000_000
MAX_RATE = 1e7


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """A serving deployment and its workload, as the user gave it (None = the tool chooses; see ``assumed``)."""

    model: Any
    cluster: Any
    num_gpus: int | None = None
    tp: int | None = None
    ep: int | None = None
    precision: str = "bf16"
    kv_precision: str | None = None
    input_len: int = 1024
    output_len: int = 256
    scenario: str = "offline"
    rate: float | None = None
    ttft_slo: float | None = None
    tpot_slo: float | None = None
    batch: int = 0
    """0 = auto."""
    batching: str = "inflight"
    kv_reservation: str = "paged"
    prefill_gpus: int | None = None
    decode_gpus: int | None = None
    prefill_tp: int | None = None
    decode_tp: int | None = None
    decode_ep: int | None = None
    prefill_ep: int | None = None
    """EP of a prefill instance (None: the decode EP, at most the prefill TP)."""
    redundant_experts: int | None = None
    """EPLB's redundant expert copies per MoE layer (:class:`~tierwise.serve.params.ServingParameters`); None:
    0 for ``serve``, searched by ``serve-plan`` (:data:`tierwise.serve.plan.REDUNDANT_CHOICES`)."""
    two_batch_overlap: bool = False
    """Two micro-batches per step, communication behind compute (:class:`~tierwise.serve.params.ServingParameters`)."""
    mtp: int = 0
    """Speculative tokens per decode step from the model's MTP modules (``--mtp N``; 0: off; serve-plan takes it as
    given, it does not search it)."""
    mtp_acceptance: float | None = None
    """Per-token acceptance of the MTP drafts (``--mtp-acceptance``; None: 0.85, DeepSeek-V3 report sec. 5.4.3,
    listed under ``assumed``)."""
    kv_link: str = "auto"
    decode_cluster: Any = None
    """Disaggregated: the decode pool's cluster (a catalog name or a mapping) when it differs from ``cluster``,
    the prefill pool's (``--decode-cluster``): its own accelerator; the KV crosses the scale-out network."""
    kv_streamed: bool = True
    beams: int = 1
    """Beam-search width (sequences decoded per request; one output counted)."""
    attention_kernel: str = "auto"
    """Attention kernel family the engine runs (``auto``: the accelerator generation's default)."""
    kv_cache_fraction: float | None = None
    """KV-cache memory fraction (None: 0.9, the vLLM and TensorRT-LLM default), of the whole ``kv_cache_of``."""
    kv_cache_of: str = "total"
    """``total`` (vLLM ``gpu_memory_utilization``: a fraction of HBM) or ``free`` (TensorRT-LLM
    ``kv_cache_free_gpu_mem_fraction``: a fraction of the HBM weights and activations leave)."""
    engine: str | None = None
    """Serving engine ``NAME[@VERSION]`` (:mod:`tierwise.specs.engine`; None: ``DEFAULT_ENGINE``, listed under
    ``assumed``): its host time per step."""
    max_batch: int | None = None
    """Scheduler cap on sequences per instance for ``batch`` auto (None: params ``max_batch``, TensorRT-LLM's
    default 2048; vLLM's ``max_num_seqs`` default is 256)."""
    prefix_hit_rate: float = 0.0
    """Share of each prompt whose KV is in the prefix cache (:mod:`tierwise.serve.prefix`)."""
    prefix_tier: str = "hbm"
    """Where prefix hits live: ``hbm`` or ``host`` (KV offloaded to host memory, loaded back on a hit)."""
    prefix_load: str = "layerwise"
    """How a host hit loads: ``layerwise`` (overlapped with the suffix's prefill) or ``whole`` (one bulk copy)."""
    host_kv_gb: float | None = None
    """Host memory per GPU for offloaded KV, GB (None: 5, LMCache's example; :mod:`tierwise.serve.prefix`)."""


def _choice(value, name: str, options) -> str:
    if value not in options:
        raise ScenarioError(f"{name} {value!r}; use one of {', '.join(options)}")
    return value


def config_from_mapping(data: Mapping[str, Any], where: str) -> ServeConfig:
    """A scenario file's mapping (keys = :class:`ServeConfig` fields) -> :class:`ServeConfig`."""
    fields = [f.name for f in dataclasses.fields(ServeConfig)]
    for key in data:
        if key not in fields:

            raise ScenarioError(f"unknown key {str(key)[:60]!r} in {where}{did_you_mean(str(key)[:60], fields)}; "
                                f"valid keys: {', '.join(fields)}")
    for key in ("model", "cluster"):
        if key not in data:
            raise ScenarioError(f"{where} is missing {key}; add it (a catalog name or a mapping)")
    return ServeConfig(**dict(data))


def _check(cfg: ServeConfig) -> None:
    _choice(cfg.precision, "--precision", PRECISIONS)
    if cfg.kv_precision is not None:
        _choice(cfg.kv_precision, "--kv-precision", KV_PRECISIONS)

    _choice(cfg.scenario, "--scenario", SCENARIOS)
    _choice(cfg.kv_link, "--kv-link", KV_LINKS)
    _choice(cfg.batching, "--batching", ("inflight", "static"))
    _choice(cfg.kv_reservation, "--kv-reservation", ("paged", "full"))
    _choice(cfg.kv_cache_of, "--kv-cache-of", ("total", "free"))

    # "unfused" (Megatron-LM 2021-22's score-matrix attention, training only) has no serving pricing
    _choice(cfg.attention_kernel, "--attention-kernel", tuple(k for k in ATTENTION_KERNELS if k != "unfused"))
    if cfg.kv_cache_fraction is not None:
        check_float(cfg.kv_cache_fraction, "--kv-cache-fraction", minimum=0.0, min_open=True, maximum=1.0,
                    error=ScenarioError, hint=" (a fraction of HBM, or of the free HBM with --kv-cache-of free)")
    check_int(cfg.input_len, "--input-len", maximum=MAX_TOKENS, error=ScenarioError)
    check_int(cfg.output_len, "--output-len", maximum=MAX_TOKENS, error=ScenarioError)
    check_int(cfg.batch, "--batch", minimum=0, maximum=1_000_000, error=ScenarioError, hint=" (0 = auto)")
    check_int(cfg.beams, "--beams", maximum=64, error=ScenarioError)
    if cfg.max_batch is not None:
        check_int(cfg.max_batch, "--max-batch", maximum=1_000_000, error=ScenarioError)
    if cfg.rate is not None:
        check_float(cfg.rate, "--rate", minimum=0.0, min_open=True, maximum=MAX_RATE, error=ScenarioError,
                    hint=" (requests/s)")
    _check_prefix(cfg)
    for name, v in (("--ttft-slo", cfg.ttft_slo), ("--tpot-slo", cfg.tpot_slo)):
        if v is not None:
            check_float(v, name, minimum=0.0, min_open=True, maximum=1e5, error=ScenarioError, hint=" (seconds)")
    for name in ("num_gpus", "tp", "ep", "prefill_gpus", "decode_gpus", "prefill_tp", "decode_tp", "decode_ep",
                 "prefill_ep"):
        v = getattr(cfg, name)
        if v is not None:
            flag = "--gpus" if name == "num_gpus" else "--" + name.replace("_", "-")  # the CLI's name for num_gpus
            check_int(v, flag, error=ScenarioError)


def _check_prefix(cfg: ServeConfig) -> None:
    check_float(cfg.prefix_hit_rate, "--prefix-hit-rate", minimum=0.0, maximum=0.99, error=ScenarioError,
                hint=" (the share of each prompt found in the prefix cache)")
    _choice(cfg.prefix_tier, "--prefix-tier", PREFIX_TIERS)
    _choice(cfg.prefix_load, "--prefix-load", PREFIX_LOADS)
    if cfg.host_kv_gb is not None:
        check_float(cfg.host_kv_gb, "--host-kv-gb", minimum=0.0, min_open=True, maximum=1e5, error=ScenarioError,
                    hint=" (host memory per GPU for offloaded KV, GB)")
        if cfg.prefix_tier != "host":
            raise ScenarioError("--host-kv-gb sizes the host store of offloaded KV; add --prefix-tier host or drop it")
    if cfg.prefix_tier == "host" and cfg.prefix_hit_rate <= 0:
        raise ScenarioError("--prefix-tier host needs --prefix-hit-rate above 0 (the share of each prompt loaded "
                            "back from host memory)")


def _prefix_of(cfg: ServeConfig, assumed: list[str]) -> PrefixCache | None:
    if cfg.prefix_hit_rate <= 0:
        return None
    gb = cfg.host_kv_gb
    if cfg.prefix_tier == "host" and gb is None:
        gb = DEFAULT_HOST_KV_GB
        assumed.append(f"host_kv_gb {gb:g} per GPU (LMCache's CPU store in vLLM's offload example; --host-kv-gb)")
    return PrefixCache(hit_rate=float(cfg.prefix_hit_rate), tier=cfg.prefix_tier, load=cfg.prefix_load,
                       host_kv_gb=DEFAULT_HOST_KV_GB if gb is None else float(gb))


def _divides(a: int, b: int, what: str, of: str) -> None:
    if b % a:
        divs = [d for d in range(1, b + 1) if b % d == 0]
        raise ScenarioError(f"{what}={a} does not divide {of}={b}; use {what} in {{{', '.join(map(str, divs[:12]))}}}")


def _cross_cluster_link(link: str, decode_cluster, assumed: list[str]) -> str:
    """The KV link when the decode pool is on another cluster: the pools share no scale-up domain, so
    ``scale_up`` is refused and ``auto`` is ``scale_out`` (RDMA between the clusters' nodes)."""
    if decode_cluster is None:
        return link
    if link == "scale_up":
        raise ScenarioError(f"--kv-link scale_up: the decode pool is on another cluster ({decode_cluster.name}); "
                            "use scale_out, tcp or auto")
    if link == "auto":
        assumed.append("kv_link scale_out (the pools are on different clusters)")
        return "scale_out"
    return link


def _with_engine(params, engine: str | None, assumed: list[str]):
    """``params`` with the engine named (or the default, recorded in ``assumed``)."""

    if engine is None:
        assumed.append(f"engine {DEFAULT_ENGINE} (no engine stated: vLLM's V1 engine defaults; --engine NAME[@VERSION])")
        engine = DEFAULT_ENGINE
    elif not isinstance(engine, str):
        raise ScenarioError(f"engine {str(engine)[:40]!r} is not a name; use NAME or NAME@VERSION, e.g. vllm@0.6")
    return dataclasses.replace(params, engine=engine_spec(engine))


def _resolve(cfg: ServeConfig, params: ServingParameters | None = None):
    """Load the specs, fill the defaults (recorded in ``assumed``), check the degrees. ``params``: the serving
    values to start from (None: :func:`serving_parameters`, the run's)."""

    _check(cfg)
    params = params if params is not None else serving_parameters()
    model, cluster = load_model(cfg.model), load_cluster(cfg.cluster, params.parameters)
    if cfg.max_batch is not None:
        params = dataclasses.replace(params, max_batch=cfg.max_batch)
    if cfg.attention_kernel != "auto":
        params = dataclasses.replace(params, attention_kernel=cfg.attention_kernel)
    params = dataclasses.replace(params, redundant_experts=_redundant(cfg, model),
                                 two_batch_overlap=bool(cfg.two_batch_overlap))
    assumed: list[str] = []
    params = _with_mtp(params, cfg, model, assumed)
    params = _with_engine(params, cfg.engine, assumed)
    kvp = cfg.kv_precision
    if kvp is None:
        kvp = "bf16" if cfg.precision == "bf16" else "fp8"
        assumed.append(f"kv_precision {kvp} (bf16 for bf16 weights, fp8 for fp8/fp4 weights)")
    cluster.accelerator.peak_flops_per_s(cfg.precision)  # a clear error for fp4 on a part without it
    if cfg.kv_cache_fraction is None:
        assumed.append(f"kv_cache_fraction {params.memory_utilization} of "
                       + ("total HBM (vLLM gpu_memory_utilization default)" if cfg.kv_cache_of == "total" else
                          "the HBM weights and activations leave (TensorRT-LLM kv_cache_free_gpu_mem_fraction "
                          "default)"))
    ttft, tpot = cfg.ttft_slo, cfg.tpot_slo
    if cfg.scenario == "server" and ttft is None and tpot is None:
        ttft, tpot = 2.0, 0.2
        assumed.append("SLOs p99 TTFT 2 s, TPOT 200 ms (MLPerf Inference Llama-2-70B Server)")
    if cfg.scenario == "interactive" and tpot is None:
        tpot = 0.04
        ttft = 0.45 if ttft is None else ttft
        assumed.append("SLOs p99 TTFT 450 ms, TPOT 40 ms (MLPerf Inference llama2-70b-interactive, "
                       "mlcommons/inference language/llama2-70b/README.md)")
    disagg = cfg.prefill_gpus is not None or cfg.decode_gpus is not None
    if disagg:
        dcl = None if cfg.decode_cluster is None else load_cluster(cfg.decode_cluster, params.parameters)
        pg, dg, ptp, dtp, dep, pep, link = _resolve_disagg(cfg, model, cluster, assumed, dcl)
    else:
        if cfg.decode_cluster is not None:
            raise ScenarioError("--decode-cluster is for disaggregated serving; add --prefill-gpus P --decode-gpus D")
        dcl = None
        pg, dg, ptp, dtp, dep, pep, link = _resolve_agg(cfg, model, cluster, assumed)
    if cfg.batch == 0:
        assumed.append(f"batch auto (the largest that fits the KV cache, at most {params.max_batch}, within the "
                       "TPOT SLO when one is set)")

    w = Workload(model=model, cluster=cluster, precision=cfg.precision, kv_precision=kvp, input_len=cfg.input_len,
                 output_len=cfg.output_len, scenario=cfg.scenario, rate=cfg.rate, ttft_slo_s=ttft, tpot_slo_s=tpot,
                 batching=cfg.batching, kv_streamed=cfg.kv_streamed, kv_reservation=cfg.kv_reservation,
                 beams=cfg.beams, kv_cache_fraction=cfg.kv_cache_fraction, kv_cache_of=cfg.kv_cache_of,
                 params=params, decode_cluster=dcl, prefix=_prefix_of(cfg, assumed))
    d = Deployments(disagg=np.array([disagg]), prefill_gpus=np.array([pg]), prefill_tp=np.array([ptp]),
                    decode_gpus=np.array([dg]), decode_tp=np.array([dtp]), decode_ep=np.array([dep]),
                    batch=np.array([cfg.batch]), kv_link=np.array([link], dtype=object),
                    prefill_ep=np.array([pep]))
    return w, d, assumed


def workload_of(cfg: ServeConfig):
    """(:class:`tierwise.serve.engine.Workload`, a one-entry :class:`tierwise.serve.engine.Deployments`, the
    defaults filled) of ``cfg``: what ``serve --simulate`` runs requests through."""
    return _resolve(cfg)


def _redundant(cfg: ServeConfig, model) -> int:
    """``--redundant-experts`` checked (a whole number >= 0, for a MoE model only); not given: 0."""
    if cfg.redundant_experts is None:
        return 0
    check_int(cfg.redundant_experts, "--redundant-experts", minimum=0, maximum=100_000, error=ScenarioError)
    if cfg.redundant_experts and model.moe is None:
        raise ScenarioError(f"--redundant-experts {cfg.redundant_experts} needs a mixture-of-experts model; "
                            f"{model.name} is dense")
    return int(cfg.redundant_experts)


MAX_MTP = 16
"""Largest ``--mtp`` taken: a sanity bound (engines run 1-4 speculative steps; ``E`` gains under 0.85^16 = 7% of a
token past 16 at the default acceptance)."""


def _with_mtp(params, cfg: ServeConfig, model, assumed: list[str]):
    """``params`` with ``--mtp`` and ``--mtp-acceptance`` checked: a model with MTP modules only (``mtp_layers``,
    its config's ``num_nextn_predict_layers``); ``N`` above them chains the last module, the rule of SGLang
    (``--speculative-num-steps`` over DeepSeek-V3's one NextN module) and vLLM (``num_speculative_tokens``), said
    under ``assumed``; the acceptance in [0, 1], 0.85 when not given (DeepSeek-V3 report sec. 5.4.3)."""
    check_int(cfg.mtp, "--mtp", minimum=0, maximum=MAX_MTP, error=ScenarioError,
              hint=" (speculative tokens per decode step; 0 = off)")
    n = int(cfg.mtp)
    if n == 0:
        if cfg.mtp_acceptance is not None:
            raise ScenarioError(f"--mtp-acceptance {cfg.mtp_acceptance} applies to MTP speculative decoding; add "
                                "--mtp N or drop it")
        return params
    if not model.mtp_layers:
        raise ScenarioError(f"--mtp {n}: {model.name} has no MTP module (mtp_layers 0, its config's "
                            "num_nextn_predict_layers); drop --mtp or use a model with MTP layers, e.g. deepseek-v3")
    p = cfg.mtp_acceptance
    if p is None:
        p = params.mtp_acceptance
        assumed.append(f"mtp_acceptance {p} per speculative token (DeepSeek-V3 report sec. 5.4.3: 85-90% for the "
                       "second token; i.i.d. per token; --mtp-acceptance)")
    check_float(p, "--mtp-acceptance", minimum=0.0, maximum=1.0, error=ScenarioError,
                hint=" (probability a drafted token is accepted)")
    if n > model.mtp_layers:
        assumed.append(f"mtp {n} chains the model's {model.mtp_layers} MTP module(s) (SGLang --speculative-num-steps, "
                       "vLLM num_speculative_tokens), at the same acceptance per token")
    return dataclasses.replace(params, mtp=n, mtp_acceptance=float(p))


def _check_ep_layout(model, tp: int, ep: int, gpus: int, ep_flag: str, tp_flag: str, gpus_flag: str,
                     redundant: int = 0) -> None:
    """The instance layouts :func:`tierwise.serve.kv.instance_gpus` prices, one line per violation: EP folded
    into TP (``ep`` divides ``tp``) or spread over ``ep`` GPUs with attention data-parallel (``tp`` divides
    ``ep``); the instance divides the pool; EP at most the routed plus ``redundant`` experts (no rank without
    an expert)."""
    if model.moe is None and ep > 1:
        raise ScenarioError(f"{ep_flag} {ep} needs a mixture-of-experts model; {model.name} is dense (use {ep_flag} 1)")
    if ep <= tp:
        _divides(ep, tp, ep_flag, tp_flag)
    elif ep % tp:
        raise ScenarioError(f"{ep_flag}={ep} is wider than {tp_flag}={tp} but not a multiple of it: attention runs "
                            f"{ep_flag} / {tp_flag} data-parallel groups; use {tp_flag} dividing {ep}")
    inst = max(tp, ep)
    if inst > gpus:
        raise ScenarioError(f"{ep_flag}={ep} is larger than the {gpus} GPUs of {gpus_flag} (an instance cannot span more); "
                            f"use {ep_flag} <= {gpus}")
    _divides(inst, gpus, tp_flag if ep <= tp else ep_flag, gpus_flag)
    slots = model.moe.num_experts + redundant if model.moe is not None else 0
    if model.moe is not None and ep > slots:
        raise ScenarioError(f"{ep_flag}={ep} is wider than the {model.moe.num_experts} routed + {redundant} redundant "
                            f"experts of {model.name} (a rank would hold none); use {ep_flag} <= {slots} or more "
                            "--redundant-experts")


def _resolve_agg(cfg: ServeConfig, model, cluster, assumed: list[str]):
    """The same tuple as :func:`_resolve_disagg` for one aggregated pool (both pools are the pool)."""
    gpus = cfg.num_gpus
    if gpus is None:
        raise ScenarioError("give --gpus N (aggregated) or --prefill-gpus P --decode-gpus D (disaggregated)")
    ep = cfg.ep or 1
    tp = cfg.tp
    if tp is None and ep > 1 and model.moe is not None:
        tp = 1
        assumed.append("tp 1 (attention data-parallel over the --ep GPUs: DeepSeek-V3 sec. 3.4)")
    if tp is None:
        tp = _smallest_tp(model, cluster, cfg.precision, gpus)
        assumed.append(f"tp {tp} (the smallest power of two that holds the weights)")
    _check_ep_layout(model, tp, ep, gpus, "--ep", "--tp", "--gpus", cfg.redundant_experts or 0)
    return gpus, gpus, tp, tp, ep, ep, None


def _resolve_disagg(cfg: ServeConfig, model, cluster, assumed: list[str], dcl=None):
    """(prefill GPUs, decode GPUs, prefill TP, decode TP, decode EP, prefill EP, KV link) of a disaggregated
    deployment, defaults recorded in ``assumed``; ``dcl``: the decode pool's own cluster, if any."""
    if cfg.prefill_gpus is None or cfg.decode_gpus is None:
        raise ScenarioError("disaggregated serving needs both --prefill-gpus and --decode-gpus")
    pg, dg = cfg.prefill_gpus, cfg.decode_gpus
    dep = cfg.decode_ep or cfg.ep or 1
    pep = cfg.prefill_ep
    moe = model.moe is not None
    ptp, dtp = cfg.prefill_tp or cfg.tp, cfg.decode_tp or cfg.tp
    if dtp is None and dep > 1 and moe:
        dtp = 1
        assumed.append("decode_tp 1 (attention data-parallel over the --decode-ep GPUs: DeepSeek-V3 sec. 3.4)")
    if ptp is None and pep is not None and pep > 1 and moe:
        ptp = 1
        assumed.append("prefill_tp 1 (attention data-parallel over the --prefill-ep GPUs)")
    if ptp is None:
        ptp = _smallest_tp(model, cluster, cfg.precision, pg)
        assumed.append(f"prefill_tp {ptp} (the smallest that holds the weights)")
    if dtp is None:
        dtp = _smallest_tp(model, dcl or cluster, cfg.precision, dg)
        assumed.append(f"decode_tp {dtp} (the smallest that holds the weights)")
    if pep is None:
        pep = min(dep, ptp)
    _check_ep_layout(model, ptp, pep, pg, "--prefill-ep", "--prefill-tp", "--prefill-gpus", cfg.redundant_experts or 0)
    _check_ep_layout(model, dtp, dep, dg, "--decode-ep", "--decode-tp", "--decode-gpus", cfg.redundant_experts or 0)
    if cfg.num_gpus is not None and cfg.num_gpus != pg + dg:
        raise ScenarioError(f"--gpus {cfg.num_gpus} is not --prefill-gpus {pg} + --decode-gpus {dg}; "
                            "drop --gpus or make them add up")
    link = _cross_cluster_link(cfg.kv_link, dcl, assumed)
    if link == "scale_up" and pg + dg > cluster.scale_up_domain:
        raise ScenarioError(f"--kv-link scale_up: the pools ({pg} + {dg} GPUs) do not fit one scale-up domain of "
                            f"{cluster.scale_up_domain} on {cluster.name}; use scale_out, host or tcp, or "
                            "smaller pools")
    if link == "auto":

        link = str(pick_kv_link(cluster, pg, dg))
        assumed.append(f"kv_link {link} (pools on consecutive GPUs: "
                       f"{'one' if link == 'scale_up' else 'more than one'} scale-up domain)")
    return pg, dg, ptp, dtp, dep, pep, link


def _smallest_tp(model, cluster, precision: str, gpus: int) -> int:

    tp = 1
    while tp <= gpus:
        if gpus % tp == 0 and weight_bytes_per_gpu(model, precision, tp, 1) < 0.8 * cluster.accelerator.hbm_capacity_bytes:
            return tp
        tp *= 2
    return max(t for t in range(1, gpus + 1) if gpus % t == 0 and (t & (t - 1)) == 0)


def estimate_serving(cfg: ServeConfig, *, params: ServingParameters | None = None) -> ServeEstimate:
    """One deployment served (:class:`~tierwise.serve.result.ServeEstimate`): ``cfg`` resolved, its scenario
    evaluated (:func:`tierwise.serve.engine.evaluate`), the single prefill and the decode step at the batch served
    priced (:mod:`tierwise.serve.phases`)."""

    w, d, assumed = _resolve(cfg, params)
    r = evaluate(w, d).at(0)
    dep = _deployment(d)
    pf = w.prefill(dep.prefill_tp, dep.prefill_ep)
    step = decode_step_time(w.decode_side().setup, dep.decode_tp, dep.decode_ep, r.batch * w.beams, w.mean_context)
    return ServeEstimate(
        workload=w, deployment=dep, results=r, prefill=pf, decode=step, ep_tier=_ep_tier(w, dep.decode_ep),
        attention=attention_kind(w.model),
        kv_bytes_per_token_per_gpu=float(w.kv_bytes_per_token * kv_fraction_per_gpu(w.model, dep.decode_tp)),
        weight_bytes_per_gpu=float(weight_bytes_per_gpu(w.model, w.precision, dep.decode_tp, dep.decode_ep,
                                                        w.params.redundant_experts, mtp=w.params.mtp)),
        mtp=_mtp_summary(w, dep.decode_tp, dep.decode_ep) if w.params.mtp else None,
        prefix=(None if w.prefix is None else
                _prefix_summary(w, dep.prefill_tp, dep.decode_tp, float(r.kv_cache_bytes_per_gpu),
                                float(r.output_tokens_per_s) / float(r.num_gpus))),
        assumed=tuple(assumed))


def serve_estimate(cfg: ServeConfig) -> dict:
    """The ``serve --json`` document for one deployment (module docstring for the stable keys):
    :func:`estimate_serving`'s record through :func:`tierwise.documents.serving.serve_document`."""
    return serve_document(estimate_serving(cfg))


def _mtp_summary(w, dtp: int, dep: int) -> MtpSummary:
    """MTP as served (``serve --json`` ``mtp``, present with ``--mtp``): speculative tokens, modules held,
    acceptance, expected tokens per step (:func:`tierwise.serve.phases.accepted_per_step`) and the MTP weights
    per GPU."""
    p = w.params
    modules = mtp_modules(w.model, p.mtp)
    return MtpSummary(tokens=p.mtp, modules=modules, acceptance=p.mtp_acceptance,
                      accepted_per_step=accepted_per_step(p),
                      weight_bytes_per_gpu=float(mtp_weight_bytes_per_gpu(w.model, w.precision, dtp, dep,
                                                                          p.redundant_experts, modules=modules)))


def _prefix_summary(w, ptp: int, dtp: int, cache_bytes: float, tokens_per_s_per_gpu: float) -> PrefixSummary:
    """The prefix cache as served (``serve --json`` ``prefix_cache``; :mod:`tierwise.serve.prefix`)."""
    p = w.prefix
    per_tok = w.kv_bytes_per_token * float(kv_fraction_per_gpu(w.model, dtp))
    host = p.tier == "host"
    hbm_tokens = cache_bytes / per_tok if per_tok else 0.0
    store = float(host_prefix_tokens(w.model, w.kv_bytes_per_token, ptp, p.host_kv_gb)) if host else None
    requests = tokens_per_s_per_gpu / w.output_len  # requests/s per GPU of the deployment
    return PrefixSummary(
        hit_rate=p.hit_rate, tier=p.tier, load=p.load if host else None,
        cached_tokens_per_request=float(np.floor(p.hit_rate * w.input_len)),
        host_kv_gb_per_gpu=p.host_kv_gb if host else None, host_prefix_tokens_per_gpu=store,
        hbm_cache_tokens_per_gpu=hbm_tokens,
        host_capacity_gain=(store / hbm_tokens if host and hbm_tokens > 0 else None),
        # each prompt's new KV saved to host (device-to-host), behind the decode steps on a copy engine
        offload_bytes_per_s_per_gpu=(requests * (w.input_len - np.floor(p.hit_rate * w.input_len))
                                     * w.kv_bytes_per_token if host else None))


def _deployment(d) -> ServeDeployment:
    """The degrees of the one deployment of ``d`` (:class:`~tierwise.serve.result.ServeDeployment`)."""

    dtp, dep = int(d.decode_tp[0]), int(d.decode_ep[0])
    return ServeDeployment(disaggregated=bool(d.disagg[0]), prefill_gpus=int(d.prefill_gpus[0]),
                           prefill_tp=int(d.prefill_tp[0]), prefill_ep=int(d.prefill_ep[0]),
                           decode_gpus=int(d.decode_gpus[0]), decode_tp=dtp, decode_ep=dep,
                           attention_dp=int(attention_dp(dtp, dep)),
                           instances=int(d.decode_gpus[0]) // int(instance_gpus(dtp, dep)))


def _ep_tier(w, ep: int) -> str | None:
    """The tier the decode EP group spans (:func:`tierwise.serve.plan.ep_tier_name`)."""

    return ep_tier_name(w.cluster, ep)


def attention_variants(cfg: ServeConfig) -> list[ServeEstimate]:
    """The same deployment with the model's own attention and with its MHA equivalent (and, for an MLA model,
    with GQA of 8 KV heads), one :class:`~tierwise.serve.result.ServeEstimate` each (an MHA model: itself only)."""

    model = load_model(cfg.model)
    variants = [model, mha_equivalent(model)]
    if model.mla is not None:
        variants.insert(1, dataclasses.replace(mha_equivalent(model), name=model.name + "-gqa8", num_kv_heads=8))
    elif attention_kind(model) == "mha":
        variants = [model]
    return [estimate_serving(dataclasses.replace(cfg, model=m)) for m in variants]


def compare_attention(cfg: ServeConfig) -> dict:
    """:func:`attention_variants` side by side (KV bytes per token, per request, max concurrency, throughput):
    the ``compare_attention`` block of ``serve --compare-attention`` (:func:`tierwise.documents.serving.compare_block`)."""
    return compare_block(attention_variants(cfg))


def _plan_pairs(w, cfg: ServeConfig, *, max_tp: int, top: int, modes: str, assumed: list[str]) -> PlanSearch:
    """serve-plan over heterogeneous P/D pairs: the prefill pool on ``cfg.cluster``, the decode pool on each
    cluster of ``cfg.decode_cluster`` (a name or comma-separated names), every split searched for each, the
    best of all pairs ranked together (each choice names its ``decode_cluster``). No ``why_ep``: the EP line of
    :func:`tierwise.serve.plan.serve_plan` prices the decode step on the prefill pool's cluster."""

    if modes == "aggregated":
        raise ScenarioError("--decode-cluster plans disaggregated pools; drop --modes aggregated")
    if cfg.kv_link == "scale_up":
        raise ScenarioError("--kv-link scale_up: pools on two clusters share no scale-up domain; use scale_out, tcp "
                            "or auto")
    link = "scale_out" if cfg.kv_link == "auto" else cfg.kv_link
    names = cfg.decode_cluster if not isinstance(cfg.decode_cluster, str) else \
        [n.strip() for n in cfg.decode_cluster.split(",") if n.strip()]
    assumed.append(f"disaggregated only, kv_link {link} (prefill on {w.cluster.name}, decode on "
                   f"{', '.join(str(n) for n in names)})")
    best, total, feasible = [], 0, 0
    usd_p, basis = gpu_usd_per_s(w.cluster)
    prices = {w.cluster.name: basis}
    for name in names:
        dcl = load_cluster(name, w.params.parameters)  # the run's record, as the prefill pool's cluster
        r = serve_plan(dataclasses.replace(w, decode_cluster=dcl), cfg.num_gpus, max_tp=max_tp, kv_link=link,
                       top=top, modes="disaggregated")
        total, feasible = total + r.candidates, feasible + r.feasible
        usd_d, prices[dcl.name] = gpu_usd_per_s(dcl)
        best += [_pair_cost(b, dcl.name, usd_p, usd_d) for b in r.best]
    best.sort(key=lambda b: -b.results.output_tokens_per_s_per_gpu)
    assumed += [f"GPU cost (serve/cost.py) {basis}" for basis in prices.values()]
    return PlanSearch(candidates=total, feasible=feasible, best=tuple(best[:top]), why_ep=None)


def _pair_cost(b: PlanChoice, decode_cluster: str, usd_prefill: float, usd_decode: float) -> PlanChoice:
    """A P/D pair with its decode pool on ``decode_cluster`` and its cost: each pool's GPUs at its own cluster's
    price per GPU-second (:mod:`tierwise.serve.cost`), per million output tokens."""
    usd_s = b.prefill_gpus * usd_prefill + b.decode_gpus * usd_decode
    tok = b.results.output_tokens_per_s
    return dataclasses.replace(b, decode_cluster=decode_cluster, prefill_usd_per_hour=usd_prefill * 3600,
                               decode_usd_per_hour=usd_decode * 3600,
                               usd_per_million_output_tokens=usd_s / tok * 1e6 if tok > 0 else None)


def serve_plan_document(cfg: ServeConfig, *, max_tp: int = 8, modes: str = "both", top: int = 10) -> dict:
    """The ``serve-plan --json`` document: :func:`plan_serving`'s record through
    :func:`tierwise.documents.serving.plan_document`."""
    return plan_document(plan_serving(cfg, max_tp=max_tp, modes=modes, top=top))


def plan_serving(cfg: ServeConfig, *, max_tp: int = 8, modes: str = "both", top: int = 10) -> ServePlan:
    """The best deployments of ``cfg.num_gpus`` GPUs under the SLOs (:class:`~tierwise.serve.result.ServePlan`):
    every prefill/decode split, TP and EP per pool and batch searched (:func:`tierwise.serve.plan.serve_plan`),
    or with ``cfg.decode_cluster`` the pairs of pools on two clusters."""

    if cfg.num_gpus is None:
        raise ScenarioError("serve-plan needs --gpus N (the GPUs to split between prefill and decode)")
    _choice(modes, "--modes", ("both", "aggregated", "disaggregated"))
    if modes == "aggregated":
        check_int(cfg.num_gpus, "--gpus", error=ScenarioError)
    else:  # the bound of the split's search (serve/plan.py), so that the bound suggested is accepted
        check_int(cfg.num_gpus, "--gpus", maximum=MAX_DISAGGREGATED_GPUS, error=ScenarioError,
                  hint=f" with --modes {modes} (the prefill/decode split's search; --modes aggregated takes more)")
    check_int(max_tp, "--max-tp", maximum=1024, error=ScenarioError)
    check_int(top, "--top", maximum=1000, error=ScenarioError)
    _choice(modes, "--modes", ("both", "aggregated", "disaggregated"))
    w, _, assumed = _resolve(dataclasses.replace(cfg, tp=1, ep=1, prefill_gpus=None, decode_gpus=None,
                                                 decode_cluster=None))
    assumed = [a for a in assumed if not a.startswith("tp ")]
    if w.params.mtp:
        assumed.append(f"mtp {w.params.mtp} as given (--mtp; not searched)")
    start = time.perf_counter()
    if cfg.decode_cluster is None:
        search = serve_plan(w, cfg.num_gpus, max_tp=max_tp, kv_link=cfg.kv_link, top=top, modes=modes,
                            redundant=REDUNDANT_CHOICES if cfg.redundant_experts is None else None)
    else:
        search = _plan_pairs(w, cfg, max_tp=max_tp, top=top, modes=modes, assumed=assumed)
    return ServePlan(workload=w, num_gpus=cfg.num_gpus, search=search, search_s=time.perf_counter() - start,
                     assumed=tuple(assumed))
