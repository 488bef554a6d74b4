"""The typed records serving prices with and returns (issue 27, "results are typed records"): what a step is
priced for (:class:`ServingSetup`), a prefill (:class:`PrefillCost`), a decode step and its MTP draft forwards
(:class:`DecodeStep`, :class:`MtpDraft`), a decode step per output token (:class:`DecodeToken`) and every
scenario's figures over an array of deployments (:class:`ServeResults`).

The fields are numpy arrays broadcast over the candidates the caller priced (``serve``: one; ``serve-plan``:
thousands) or, after :meth:`ServeResults.at`, numpy scalars of one deployment. ``documents/serving.py`` turns
them into the ``serve`` and ``serve-plan`` JSON documents; nothing here is priced, only carried.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from tierwise.serve.params import ServingParameters
from tierwise.specs.cluster import Cluster
from tierwise.specs.model import ModelSpec

__all__ = ["ServingSetup", "PrefillCost", "MtpDraft", "DecodeStep", "DecodeToken", "ServeResults"]


@dataclass(frozen=True)
class ServingSetup:
    """What a serving step is priced for: the model on one cluster's accelerators at a weight ``precision``
    (bf16, fp8 or fp4), the serving parameters in force (engine, attention kernel, MTP, EPLB, two-batch overlap)
    and the KV-cache bytes per token (:func:`tierwise.serve.kv.kv_bytes_per_token` at the KV precision; read by
    the decode step's attention)."""

    model: ModelSpec
    cluster: Cluster
    precision: str
    params: ServingParameters
    kv_bytes_token: float = 0.0


@dataclass(frozen=True, eq=False)
class PrefillCost:
    """One prefill step (:func:`tierwise.serve.phases.prefill_time`), seconds on one instance.

    ``layers_s`` the transformer layers (what a training micro-batch's forward of the same tokens costs),
    ``head_s`` the LM head at each prompt's last position, ``compute_s`` their sum, ``memory_s`` the weights
    read once (for reference), ``comm_s`` the TP / EP collectives, ``host_s`` the engine's host time,
    ``total_s`` the step. With a prefix cache (:func:`tierwise.serve.prefix.prefix_prefill`): ``load_s`` the
    host-to-device load of the cached prefix, ``load_exposed_s`` what of it the step exposes and ``saved_s``
    the prefill the hit spares (zeros without one)."""

    layers_s: Any
    head_s: Any
    compute_s: Any
    memory_s: Any
    comm_s: Any
    host_s: Any
    total_s: Any
    load_s: Any = 0.0
    load_exposed_s: Any = 0.0
    saved_s: Any = 0.0

    @property
    def gpu_s(self):
        """The step's GPU time: ``total_s`` less the engine's host time (and any exposed load)."""
        return self.total_s - self.host_s

    def replace(self, **changes) -> PrefillCost:
        """This cost with ``changes`` (field names) applied."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, eq=False)
class MtpDraft:
    """The ``params.mtp`` draft forwards of one decode step (:func:`tierwise.serve.phases.mtp_draft_time`):
    their GPU seconds, FLOPs, bytes read (MTP weights and the module's KV) and kernel launches; zeros without
    MTP."""

    gpu_s: Any = 0.0
    flops: Any = 0.0
    bytes: Any = 0.0
    launches: Any = 0.0


@dataclass(frozen=True, eq=False)
class DecodeStep:
    """One decode step on one instance (:func:`tierwise.serve.phases.decode_step_time`): ``memory_s`` (weights
    and KV cache read once at the datasheet rate), ``compute_s`` (the math alone), ``comm_s``, ``overhead_s``
    (the engine's host time exposed), ``total_s`` (the step), ``mtp_s`` (the MTP draft forwards' GPU seconds,
    in ``total_s``) and ``bound`` (``memory`` or ``compute``)."""

    memory_s: Any
    compute_s: Any
    comm_s: Any
    overhead_s: Any
    total_s: Any
    mtp_s: Any
    bound: Any


@dataclass(frozen=True, eq=False)
class DecodeToken:
    """A decode step per output token of each sequence (:func:`tierwise.serve.phases.decode_token_time`):
    ``step`` the step, ``tokens_per_step`` ``E`` (1 without MTP) and ``total_s`` the step over ``E``."""

    step: DecodeStep
    total_s: Any
    tokens_per_step: Any

    @property
    def bound(self):
        """The step's bound (``memory`` or ``compute``)."""
        return self.step.bound


@dataclass(frozen=True, eq=False, kw_only=True)
class ServeResults:
    """Every deployment's figures under one workload (:func:`tierwise.serve.engine.evaluate`), one array entry
    per candidate; the fields are the ``serve`` document's keys of the same names (and ``serve-plan``'s rows)."""

    output_tokens_per_s: Any
    output_tokens_per_s_per_gpu: Any
    ttft_s: Any
    tpot_s: Any
    ttft_p99_s: Any
    tpot_p99_s: Any
    batch: Any
    kv_cache_bytes_per_gpu: Any
    max_concurrency: Any
    fits: Any
    meets_slo: Any
    prefill_bound: Any
    decode_bound: Any
    kv_transfer_s: Any
    kv_transfer_exposed_s: Any
    kv_transfer_tier: Any
    kv_bandwidth_needed_per_prefill_node_bytes_per_s: Any
    kv_link_bytes_per_s_per_gpu: Any
    num_gpus: Any

    def columns(self) -> dict[str, Any]:
        """The fields by name, in declaration order (the document's order)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def at(self, i: int) -> ServeResults:
        """Deployment ``i``'s figures (numpy scalars)."""
        return ServeResults(**{k: v[i] for k, v in self.columns().items()})

    def where(self, mask, other: ServeResults) -> ServeResults:
        """This record where ``mask`` holds, ``other`` elsewhere, field by field."""
        mine = self.columns()
        return ServeResults(**{k: np.where(mask, mine[k], v) for k, v in other.columns().items()})
