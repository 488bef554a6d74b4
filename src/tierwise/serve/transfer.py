"""The KV cache of one request, shipped from the prefill pool to the decode pool over the tier that links them.

``t = t_setup + (B_kv I / n_send) / BW_tier`` (inference-notes.md section 2): the ``n_send = tp_prefill`` ranks
of the prefill instance each send their share in parallel, one-way, over their own link. Tiers:

* ``scale_up``: NVLink / NVSwitch inside a scale-up domain (NVL72: a whole rack), priced as a point-to-point
  ``send-recv`` by :func:`tierwise.collectives.model.collective_cost` across a scale-up hop;
* ``scale_out``: RDMA over the NICs between nodes (GPUDirect RDMA), a ``send-recv`` across a scale-out hop;
* ``host``: staged through host memory over PCIe (device-to-host, then host-to-device: the two crossings
  pipeline, so the slower one-way PCIe rate at the tier's link efficiency);
* ``tcp``: kernel TCP through host memory, CPU-bound: a per-node rate (params ``tcp_bytes_per_s_per_node``)
  shared by the node's GPUs.

Whole: the transfer starts after the last layer's prefill, all of it adds to TTFT. Streamed layer by layer
(TensorRT-LLM, SGLang and Mooncake overlap or pipeline it): layer ``l``'s KV leaves as soon as layer ``l`` is
computed, so only ``max(t / L, t - t_prefill (L - 1) / L)`` is exposed, and the link, not the GPUs, limits
TTFT when ``t > t_prefill``.
"""

from __future__ import annotations

import numpy as np

from tierwise.collectives.model import collective_cost
from tierwise.errors import ScenarioError
from tierwise.hierarchy import TierCode, hop_classes, pair_span
from tierwise.serve.params import ServingParameters, model_parameters
from tierwise.specs.cluster import Cluster

__all__ = ["KV_LINKS", "pick_kv_link", "kv_transfer_time", "exposed_transfer"]

KV_LINKS = ("auto", "scale_up", "scale_out", "host", "tcp")


def pick_kv_link(cluster: Cluster, prefill_gpus, decode_gpus) -> np.ndarray:
    """``--kv-link auto``: the pools laid out on consecutive GPUs (prefill first) share a scale-up domain when
    both fit in one (``P + D <= scale_up_domain``, e.g. an NVL72 rack, or one 8-GPU NVLink node); otherwise
    the transfer crosses the scale-out network."""
    total = np.asarray(prefill_gpus) + np.asarray(decode_gpus)
    return np.where(total <= cluster.scale_up_domain, "scale_up", "scale_out")


def _hop(cluster: Cluster, tier: int) -> int:
    for k, c in enumerate(hop_classes(cluster)):
        if c.tier == tier:
            return k
    raise ScenarioError(f"cluster {cluster.name!r} has no {TierCode(tier).name.lower()} tier to carry the KV cache; "
                        "use --kv-link scale_up, host or tcp")


def kv_transfer_time(cluster: Cluster, link: str, bytes_per_sender, params: ServingParameters) -> np.ndarray:
    """Seconds to move ``bytes_per_sender`` from each sending rank over ``link`` (module docstring)."""
    size = np.asarray(bytes_per_sender, dtype=float)
    if link == "scale_up":
        k = _hop(cluster, TierCode.SCALE_UP)
        return collective_cost("send-recv", size, pair_span(cluster, k, size.shape), cluster,
                               parameters=model_parameters(params)).time_s
    if link == "scale_out":
        if cluster.nics_per_node <= 0:
            raise ScenarioError(f"cluster {cluster.name!r} has no NICs for --kv-link scale_out; use host or tcp")
        k = _hop(cluster, TierCode.SCALE_OUT)
        return collective_cost("send-recv", size, pair_span(cluster, k, size.shape), cluster,
                               parameters=model_parameters(params)).time_s
    if link == "host":
        if cluster.host_bytes_per_s <= 0:
            raise ScenarioError(f"cluster {cluster.name!r} has no host link figure for --kv-link host; use tcp")
        eff = model_parameters(params).collectives["link_efficiency"]["host"]
        return cluster.host_latency_s + size / (cluster.host_bytes_per_s * eff)
    if link == "tcp":
        return params.tcp_latency_s + size / (params.tcp_bytes_per_s_per_node / cluster.gpus_per_node)
    raise ScenarioError(f"--kv-link {link!r}; use one of {', '.join(KV_LINKS)}")


def exposed_transfer(transfer_s, prefill_s, num_layers: int, streamed: bool) -> np.ndarray:
    """The part of the transfer TTFT sees (module docstring)."""
    t = np.asarray(transfer_s, dtype=float)
    if not streamed:
        return t
    p = np.asarray(prefill_s, dtype=float)
    return np.maximum(t / num_layers, t - p * (num_layers - 1) / num_layers)
