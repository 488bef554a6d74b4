"""The interconnect hierarchy of a cluster, and where a group of ranks lands on it.

A cluster is an ordered list of tiers, fastest first: ``hbm`` (on-package memory), ``scale_up`` (NVLink /
Infinity Fabric inside a scale-up domain), ``host`` (PCIe inside a server), ``scale_out`` (the NICs and the
network between domains; further levels ``scale_out_2``, ... where the cluster declares oversubscribed
levels). Bandwidths are one-way per accelerator.

Placement: rank ``r`` runs on GPU ``r``; GPU ``g`` sits in host ``g // gpus_per_node`` and scale-up domain
``g // scale_up_domain``. Parallel axes are laid out innermost first (Megatron-Core's default order
``tp, cp, dp, pp``, configurable), so an axis's group is ``size`` ranks spaced ``stride`` apart, stride being
the product of the degrees of the axes inside it. A group spans the tiers its stride and size reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.specs.cluster import Cluster

__all__ = ["Tier", "tiers", "GroupSpan", "group_span", "TIER_ORDER", "tier_name"]

TIER_ORDER = ("local", "scale_up", "host", "scale_out")
"""Tier codes used in vectorized results: 0 = the group is one rank, then the tiers a group can cross."""


@dataclass(frozen=True, kw_only=True)
class Tier:
    """One tier of the hierarchy, with the datasheet figure beside the one-way figure the model uses."""

    name: str
    technology: str
    domain_size: int
    """GPUs that share this tier without crossing the next (0 = the whole cluster)."""
    bytes_per_s: float
    """One-way bandwidth per accelerator."""
    datasheet_bytes_per_s: float
    datasheet_direction: str
    """How the datasheet quotes it: ``bidirectional`` (both directions summed), ``one-way``, or ``total``."""
    latency_s: float
    ratio_to_hbm: float
    datasheet_ratio_to_hbm: float
    note: str = ""


def tiers(cluster: Cluster) -> list[Tier]:
    """The tiers of ``cluster``, fastest first, with both one-way and datasheet ratios to HBM.

    The seeds compare datasheet figures: 3,350 / 900 ~ 3.7x (HBM / NVLink), 900 / 50 = 18x (NVLink / NIC).
    The NVLink figure is both directions summed while the NIC's is one way; one-way against one-way the
    NVLink / NIC gap is 450 / 50 = 9x. Both are shown.
    """
    acc = cluster.accelerator
    hbm = acc.hbm_bytes_per_s
    out = [
        Tier(name="hbm", technology=f"HBM ({acc.display_name})", domain_size=1, bytes_per_s=hbm,
             datasheet_bytes_per_s=hbm, datasheet_direction="total", latency_s=0.0,
             ratio_to_hbm=1.0, datasheet_ratio_to_hbm=1.0,
             note="read+write total of the memory system; the reference for the ratios"),
        Tier(name="scale_up", technology=acc.scale_up_fabric or "scale-up fabric",
             domain_size=cluster.scale_up_domain, bytes_per_s=cluster.scale_up_bytes_per_s,
             datasheet_bytes_per_s=cluster.scale_up_bidirectional_bytes_per_s, datasheet_direction="bidirectional",
             latency_s=cluster.scale_up_latency_s, ratio_to_hbm=hbm / cluster.scale_up_bytes_per_s,
             datasheet_ratio_to_hbm=hbm / cluster.scale_up_bidirectional_bytes_per_s,
             note=(f"{cluster.scale_up_topology}; one peer gets {cluster.scale_up_p2p_bytes_per_s / 1e9:.4g} GB/s"
                   if cluster.scale_up_topology != "switched" else "switched: any peer gets the full rate")),
    ]
    if cluster.host_bytes_per_s > 0:
        out.append(Tier(
            name="host", technology=acc.host_link_name or "host link", domain_size=cluster.gpus_per_node,
            bytes_per_s=cluster.host_bytes_per_s, datasheet_bytes_per_s=2 * cluster.host_bytes_per_s,
            datasheet_direction="bidirectional", latency_s=cluster.host_latency_s,
            ratio_to_hbm=hbm / cluster.host_bytes_per_s, datasheet_ratio_to_hbm=hbm / (2 * cluster.host_bytes_per_s),
            note=("GPU-GPU traffic uses it only where the host holds more GPUs than a scale-up domain"
                  if cluster.gpus_per_node <= cluster.scale_up_domain else "joins the scale-up domains of a host"),
        ))
    if cluster.nics_per_node > 0:
        per_gpu = cluster.scale_out_bytes_per_s
        levels = cluster.scale_out_levels or ()
        out.append(Tier(
            name="scale_out", technology=f"{cluster.nics_per_node} x {cluster.nic_bytes_per_s * 8 / 1e9:.4g} Gb/s NIC per host",
            domain_size=levels[0].domain_size if levels else 0, bytes_per_s=per_gpu,
            datasheet_bytes_per_s=cluster.nic_bytes_per_s, datasheet_direction="one-way",
            latency_s=cluster.scale_out_latency_s, ratio_to_hbm=hbm / per_gpu,
            datasheet_ratio_to_hbm=hbm / cluster.nic_bytes_per_s,
            note=f"per GPU: its share of the host's NICs ({cluster.nics_per_node} NICs / {cluster.gpus_per_node} GPUs)",
        ))
        factor = 1.0
        for i, level in enumerate(levels):
            factor *= level.oversubscription
            nxt = levels[i + 1].domain_size if i + 1 < len(levels) else 0
            out.append(Tier(
                name=f"scale_out_{i + 2}", technology=f"above {level.name} ({level.oversubscription:g}:1)",
                domain_size=nxt, bytes_per_s=per_gpu / factor, datasheet_bytes_per_s=cluster.nic_bytes_per_s,
                datasheet_direction="one-way", latency_s=cluster.scale_out_latency_s,
                ratio_to_hbm=hbm * factor / per_gpu, datasheet_ratio_to_hbm=hbm / cluster.nic_bytes_per_s,
                note=f"traffic leaving a {level.domain_size}-GPU {level.name} group, oversubscribed {factor:g}:1",
            ))
    return out


def tier_name(code: int | np.integer, level: int | np.integer = 0) -> str:
    """Name of a vectorized tier code (with the scale-out level for codes >= 3)."""
    code = int(code)
    if code < 3:
        return TIER_ORDER[code]
    return "scale_out" if int(level) == 0 else f"scale_out_{int(level) + 1}"


@dataclass(frozen=True)
class GroupSpan:
    """Where groups of ``size`` ranks spaced ``stride`` apart land (all fields are arrays of one shape)."""

    size: np.ndarray
    ranks_per_domain: np.ndarray
    """Members of the group inside one scale-up domain (``nl``)."""
    num_domains: np.ndarray
    """Scale-up domains the group spans (``m = size / nl``)."""
    ranks_per_node: np.ndarray
    tier: np.ndarray
    """Outermost tier crossed: 0 local (size 1), 1 scale_up, 2 host, 3 scale_out."""
    level: np.ndarray
    """For scale-out groups: how many oversubscribed levels above the first the group crosses."""
    oversubscription: np.ndarray
    """Product of the oversubscription ratios of the levels crossed (1 = non-blocking)."""


def _members_per_block(block: int, size: np.ndarray, stride: np.ndarray) -> np.ndarray:
    # stride >= block: every member in its own block; else block // stride members share one
    return np.minimum(np.maximum(block // stride, 1), size)


def group_span(cluster: Cluster, size, stride) -> GroupSpan:
    """Vectorized placement of groups of ``size`` ranks with ``stride`` onto ``cluster``'s tiers.

    >>> from tierwise.specs.cluster import load_cluster
    >>> span = group_span(load_cluster("dgx-h100"), [8, 8], [1, 8])
    >>> span.tier.tolist()  # a TP group of 8 stays on NVLink; a DP group of 8 at stride 8 crosses nodes
    [1, 3]
    """
    # int32 arithmetic: GPU counts fit, and integer division is about twice as fast as in int64
    size = np.asarray(size, dtype=np.int32)
    stride = np.maximum(np.asarray(stride, dtype=np.int32), 1)
    size, stride = np.broadcast_arrays(size, stride)
    nl = _members_per_block(cluster.scale_up_domain, size, stride)
    m = (size + nl - 1) // nl
    per_node = _members_per_block(cluster.gpus_per_node, size, stride)
    # across scale-up domains: the scale-out network, except inside one host of a PCIe server (domain < host)
    crossing = np.where(m > 1, np.int8(3), np.int8(1))
    if cluster.scale_up_domain < cluster.gpus_per_node:
        pcie_only = (size + per_node - 1) // per_node <= 1
        crossing = np.where(pcie_only & (m > 1), np.int8(2), crossing)
    tier = np.where(size > 1, crossing, np.int8(0))
    level = np.zeros(size.shape, dtype=np.int8)
    over = np.ones(size.shape, dtype=float)
    if cluster.scale_out_levels:
        extent = (size.astype(np.int64) - 1) * stride + 1
        for lv in cluster.scale_out_levels:
            beyond = (tier == 3) & (extent > lv.domain_size)
            level = level + beyond
            over = np.where(beyond, over * lv.oversubscription, over)
    return GroupSpan(size=size, ranks_per_domain=nl, num_domains=m, ranks_per_node=per_node, tier=tier,
                     level=level, oversubscription=over)
