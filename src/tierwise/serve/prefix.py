"""Prefix caching in the closed form, with the cached KV in HBM or offloaded to host memory (LMCache / Mooncake
Store style), priced on the host tier (issue 31, "KV beyond HBM").

A prompt of ``I`` tokens of which a share ``h`` (``--prefix-hit-rate``) is found in the prefix cache:

* **the suffix's prefill**: under causal attention the ``I - p`` new tokens (``p = h I``) do exactly the work of
  the whole prompt's forward less the prefix's own (every GEMM is per token; a suffix token attends to the
  prefix's keys as in the full prompt). Priced ``max(t(I) - t(p), t(I - p))``: the difference of the training
  model's own prefill prices (:func:`tierwise.serve.phases.prefill_time`, each length at its own GEMM
  efficiency), never below a fresh prompt of the suffix's length (its GEMMs and its weight read are a floor).
  The step's host time is the full prompt's (one step either way).
* **the load from host** (``--prefix-tier host``): ``p`` tokens of KV per rank's share
  (:func:`tierwise.serve.kv.kv_fraction_per_gpu`) host-to-device over the host tier (PCIe / C2C,
  :func:`tierwise.serve.transfer.kv_transfer_time` ``host``). Loaded layer by layer (vLLM's KV-connector
  ``wait_for_layer_load``: layer ``l``'s attention waits for layer ``l``'s KV while layer ``l+1``'s loads, the
  vLLM-Ascend "Layerwise KV Pool" and LMCache layerwise modes), so only
  ``max(t / L, t - t_suffix (L - 1) / L)`` is exposed (the layer-streaming rule of
  :func:`tierwise.serve.transfer.exposed_transfer`); ``--prefix-load whole`` loads it in one bulk copy before
  the forward starts (the mode without layerwise: all of it exposed). Prefixes in HBM load nothing.
* **what the host adds to the pool**: the prefix store holds ``host bytes / (B_kv per GPU per token)`` tokens per
  GPU beyond the HBM cache (LMCache's ``max_local_cpu_size`` per worker: ``--host-kv-gb``, default 5 GB as
  vLLM's LMCache CPU-offload example sets it); the hit rate that capacity buys depends on the traffic's reuse and
  is the user's to state. Saving each new prompt's KV to host (device-to-host) runs on a copy engine behind the
  decode steps and is not charged; its steady-state PCIe rate is reported.

Long prefixes favour the load (KV bytes per token over PCIe against ``2 N`` FLOPs per token of recompute: for
Llama-3.1-8B 131 KB at ~50 GB/s is ~2.6 us a token, recompute ~25 us a token on an H100); short ones recompute
(a short prompt's prefill is bound by reading the weights once, so the prefix's tokens cost almost nothing to
recompute while the load pays its latency and bytes). :func:`tests/serve/test_prefix.py` checks the crossover.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.serve.kv import kv_fraction_per_gpu
from tierwise.serve.phases import prefill_time
from tierwise.serve.records import PrefillCost, ServingSetup
from tierwise.serve.transfer import exposed_transfer, kv_transfer_time
from tierwise.specs.model import ModelSpec

__all__ = ["PREFIX_TIERS", "PREFIX_LOADS", "PrefixCache", "prefix_prefill", "host_prefix_tokens"]

PREFIX_TIERS = ("hbm", "host")
PREFIX_LOADS = ("layerwise", "whole")
DEFAULT_HOST_KV_GB = 5.0
"""LMCache CPU backend size per worker when none is stated: vLLM's ``examples/offline_inference/
cpu_offload_lmcache.py`` sets ``LMCACHE_MAX_LOCAL_CPU_SIZE`` 5.0 GB (Dynamo's and the vLLM production stack's
examples use 20 GB)."""


@dataclass(frozen=True)
class PrefixCache:
    """The prefix cache a deployment states: the share of each prompt found in it (``hit_rate``), where hits live
    (``tier``: ``hbm`` or ``host``), how a host hit loads (``load``: ``layerwise`` or ``whole``), the host store
    per GPU (``host_kv_gb``, GB)."""

    hit_rate: float = 0.0
    tier: str = "hbm"
    load: str = "layerwise"
    host_kv_gb: float = DEFAULT_HOST_KV_GB


def prefix_prefill(setup: ServingSetup, tp, ep, input_len, prefix: PrefixCache | None,
                   num_requests=1.0) -> PrefillCost:
    """:func:`tierwise.serve.phases.prefill_time`'s :class:`~tierwise.serve.records.PrefillCost` for prompts whose
    ``prefix.hit_rate`` share is cached (module docstring), with ``load_s`` (the host-to-device load of
    ``setup.kv_bytes_token`` per cached token), ``load_exposed_s`` and ``saved_s`` (the prefill the hit spares:
    the full prompt's GPU time less the suffix's)."""
    full = prefill_time(setup, tp, ep, input_len, num_requests)
    zero = 0.0 * full.total_s
    if prefix is None or prefix.hit_rate <= 0:
        return full.replace(load_s=zero, load_exposed_s=zero, saved_s=zero)
    model = setup.model
    i = np.asarray(input_len, dtype=float)
    p = np.floor(prefix.hit_rate * i)
    gpu = full.gpu_s
    pre = prefill_time(setup, tp, ep, np.maximum(p, 1.0), num_requests)
    fresh = prefill_time(setup, tp, ep, np.maximum(i - p, 1.0), num_requests)
    suffix = np.where(p > 0, np.maximum(gpu - pre.gpu_s, fresh.gpu_s), gpu)
    load = zero
    if prefix.tier == "host":
        n = np.asarray(num_requests, dtype=float)
        size = n * p * setup.kv_bytes_token * kv_fraction_per_gpu(model, np.asarray(tp, dtype=float))
        load = np.where(p > 0, kv_transfer_time(setup.cluster, "host", np.maximum(size, 1.0), setup.params), 0.0)
    exposed = exposed_transfer(load, suffix, model.num_layers, prefix.load == "layerwise")
    scale = suffix / np.maximum(gpu, 1e-30)
    return full.replace(layers_s=full.layers_s * scale, compute_s=full.compute_s * scale, comm_s=full.comm_s * scale,
                        total_s=suffix + full.host_s + exposed, load_s=load + zero, load_exposed_s=exposed + zero,
                        saved_s=gpu - suffix + zero)


def host_prefix_tokens(model: ModelSpec, kv_bytes_token: float, tp, host_kv_gb: float) -> np.ndarray:
    """Prefix tokens the host store of ``host_kv_gb`` GB per GPU holds (each GPU keeps its ranks' share)."""
    return np.floor(host_kv_gb * 1e9 / (kv_bytes_token * kv_fraction_per_gpu(model, np.asarray(tp, dtype=float))))
