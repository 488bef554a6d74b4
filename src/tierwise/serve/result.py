"""One serving deployment's answer as a typed record (:class:`ServeEstimate`), what
:func:`tierwise.serve.api.estimate_serving` returns and :func:`tierwise.documents.serving.serve_document` turns
into the ``serve --json`` document (issue 27: typed results, finished into JSON by ``documents/``).

Every figure here is priced elsewhere (:mod:`tierwise.serve.engine`, :mod:`tierwise.serve.phases`,
:mod:`tierwise.serve.kv`, :mod:`tierwise.serve.prefix`); these records only carry them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tierwise.serve.engine import Workload
from tierwise.serve.records import DecodeStep, PrefillCost, ServeResults

__all__ = ["ServeDeployment", "MtpSummary", "PrefixSummary", "ServeEstimate", "PlanChoice", "PlanSearch", "ServePlan"]


@dataclass(frozen=True, kw_only=True)
class ServeDeployment:
    """The degrees of one deployment: each pool's GPUs, TP and EP (aggregated: the one pool is both), the
    decode instance's attention data-parallel groups and the number of (aggregated) instances."""

    disaggregated: bool
    prefill_gpus: int
    prefill_tp: int
    prefill_ep: int
    decode_gpus: int
    decode_tp: int
    decode_ep: int
    attention_dp: int
    instances: int


@dataclass(frozen=True, kw_only=True)
class MtpSummary:
    """MTP speculative decoding as served: speculative ``tokens`` per step, the model's ``modules`` that run them,
    the per-token ``acceptance``, the expected tokens per step (:func:`tierwise.serve.phases.accepted_per_step`)
    and the MTP modules' weights per GPU (:func:`tierwise.serve.kv.mtp_weight_bytes_per_gpu`)."""

    tokens: int
    modules: int
    acceptance: float
    accepted_per_step: float
    weight_bytes_per_gpu: float


@dataclass(frozen=True, kw_only=True)
class PrefixSummary:
    """The prefix cache as served (:mod:`tierwise.serve.prefix`): the hit rate, the tier hits live on, how a
    host hit loads (None for HBM), the cached tokens of a request, the host store per GPU (GB and tokens; None
    for HBM), the HBM cache in tokens per GPU, what the host store adds to it (None for HBM) and the rate each
    GPU's new KV is saved to host (None for HBM). The prefill it spares and the load are in
    :attr:`ServeEstimate.prefill`."""

    hit_rate: float
    tier: str
    load: str | None
    cached_tokens_per_request: float
    host_kv_gb_per_gpu: float | None
    host_prefix_tokens_per_gpu: float | None
    hbm_cache_tokens_per_gpu: float
    host_capacity_gain: float | None
    offload_bytes_per_s_per_gpu: float | None


@dataclass(frozen=True, kw_only=True, eq=False)
class ServeEstimate:
    """One deployment served (``serve``): the ``workload`` as resolved (model, clusters, lengths, scenario, SLOs,
    parameters), its ``deployment``, the scenario's figures (``results``, numpy scalars of
    :class:`~tierwise.serve.records.ServeResults`), the single prefill that sets TTFT and the decode step at the
    batch served (``prefill``, ``decode``: per step, not per token), the tier the decode EP group spans, the
    model's attention kind, KV bytes per token per GPU, weights per GPU, the MTP and prefix-cache summaries
    (None when off) and every default the tool chose (``assumed``)."""

    workload: Workload
    deployment: ServeDeployment
    results: ServeResults
    prefill: PrefillCost
    decode: DecodeStep
    ep_tier: str | None
    attention: str
    kv_bytes_per_token_per_gpu: float
    weight_bytes_per_gpu: float
    mtp: MtpSummary | None
    prefix: PrefixSummary | None
    assumed: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, eq=False)
class PlanChoice:
    """One deployment ``serve-plan`` ranks: its pools' degrees (the prefill pool's None when aggregated), the
    decode instance's attention data-parallel groups and the tier its EP group spans, its figures (``results``,
    plain Python scalars of :class:`~tierwise.serve.records.ServeResults`), the EPLB redundant experts it was
    searched with and, for a pair of pools on two clusters, the decode pool's cluster, each pool's GPU price per
    hour and the cost per million output tokens (:mod:`tierwise.serve.cost`)."""

    disaggregated: bool
    prefill_gpus: int | None
    prefill_tp: int | None
    prefill_ep: int | None
    decode_gpus: int
    decode_tp: int
    decode_ep: int
    decode_attention_dp: int
    decode_ep_tier: str | None
    results: ServeResults
    redundant_experts: int
    decode_cluster: str | None = None
    prefill_usd_per_hour: float | None = None
    decode_usd_per_hour: float | None = None
    usd_per_million_output_tokens: float | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class PlanSearch:
    """What the search found (:func:`tierwise.serve.plan.serve_plan`): the candidates priced, how many are
    feasible, the ``best`` first, and one line each on the winner's EP (None for a dense model or none feasible)
    and on its EPLB choice (None unless several redundant-expert counts were searched)."""

    candidates: int
    feasible: int
    best: tuple[PlanChoice, ...]
    why_ep: str | None
    why_redundant: str | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class ServePlan:
    """``serve-plan``'s answer (:func:`tierwise.serve.api.plan_serving`): the ``workload`` searched for, the GPUs
    split, the search (``search``) and its wall time (``search_s``), and every default the tool chose."""

    workload: Workload
    num_gpus: int
    search: PlanSearch
    search_s: float
    assumed: tuple[str, ...]
