"""The interconnect hierarchy of a cluster, and where a group of ranks lands on it.

A cluster is an ordered list of tiers, fastest first: ``hbm`` (on-package memory), ``scale_up`` (NVLink /
Infinity Fabric inside a scale-up domain), ``host`` (PCIe inside a server), ``scale_out`` (the NICs and the
network between domains; further levels ``scale_out_2``, ... where the cluster declares oversubscribed
levels). Bandwidths are one-way per accelerator.

Placement: rank ``r`` runs on GPU ``r``; GPU ``g`` sits in host ``g // gpus_per_node`` and scale-up domain
``g // scale_up_domain``. Parallel axes are laid out innermost first (Megatron-Core's default order
``tp, cp, dp, pp``, configurable), so an axis's group is ``size`` ranks spaced ``stride`` apart, stride being
the product of the degrees of the axes inside it. A group spans the tiers its stride and size reach.

Placement by hop (:func:`group_hops`): a group's collectives and transfers run over *hops* between
neighbouring members (member ``k`` to ``k + 1``; a ring adds the wrap-around from the last member to the
first). Each hop is classed by the outermost block it leaves (:func:`hop_classes`: inside a scale-up domain;
inside a host across domains, PCIe servers only; across hosts or domains, scale-out, and above each
oversubscribed level). A ring runs at the pace of its slowest hop; a pipeline pays each stage boundary on the
class that boundary crosses; a group's tier label is the tier of its slowest hop. Blocks are taken as
aligned with the groups for the collectives (a block of ``B`` GPUs holds ``min(max(B // stride, 1), size)``
members of a group): exact when block sizes, strides and group extents divide one another (powers of two on
8-GPU nodes); hop counts take the slowest group of the first tile of ``size x stride`` ranks. Groups of a
later tile that straddle a block boundary the first tile does not (a 72-GPU NVL72 rack cut into groups of
16) are not singled out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from tierwise.specs.cluster import Cluster

__all__ = ["Tier", "TierCode", "tiers", "GroupSpan", "group_span", "TIER_ORDER", "tier_name", "HopClass", "hop_classes",
           "GroupHops", "group_hops", "pair_span", "scale_up_domain"]

TIER_ORDER = ("local", "scale_up", "host", "scale_out")
"""Tier codes used in vectorized results: 0 = the group is one rank, then the tiers a group can cross."""


class TierCode(IntEnum):
    """The codes of :data:`TIER_ORDER` (``GroupSpan.tier``, ``StepEstimates.axis_tier``)."""

    LOCAL = 0
    SCALE_UP = 1
    HOST = 2
    SCALE_OUT = 3


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


def _scale_up_note(cluster: Cluster) -> str:
    """The hardware path a domain across hosts adds to NCCL's NVLink step (``Cluster.scale_up_extra_latency_s``), if any."""
    extra = cluster.scale_up_extra_latency_s
    if not extra:
        return ""
    return (f"; across hosts: NCCL's NVLink step + {extra * 1e9:.0f} ns of cables and switches "
            "(parameters.yaml latency.scale_up_*)")


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
                   if cluster.scale_up_topology != "switched" else "switched: any peer gets the full rate")
                  + _scale_up_note(cluster)),
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
        lat_out, roce_note = _scale_out_latency(cluster)
        out.append(Tier(
            name="scale_out", technology=f"{cluster.nics_per_node} x {cluster.nic_bytes_per_s * 8 / 1e9:.4g} Gb/s NIC per host",
            domain_size=levels[0].domain_size if levels else 0, bytes_per_s=per_gpu,
            datasheet_bytes_per_s=cluster.nic_bytes_per_s, datasheet_direction="one-way",
            latency_s=lat_out, ratio_to_hbm=hbm / per_gpu,
            datasheet_ratio_to_hbm=hbm / cluster.nic_bytes_per_s,
            note=f"per GPU: its share of the host's NICs ({cluster.nics_per_node} NICs / {cluster.gpus_per_node} GPUs)"
                 + roce_note,
        ))
        factor = 1.0
        for i, level in enumerate(levels):
            factor *= level.oversubscription
            nxt = levels[i + 1].domain_size if i + 1 < len(levels) else 0
            out.append(Tier(
                name=f"scale_out_{i + 2}", technology=f"above {level.name} ({level.oversubscription:g}:1)",
                domain_size=nxt, bytes_per_s=per_gpu / factor, datasheet_bytes_per_s=cluster.nic_bytes_per_s,
                datasheet_direction="one-way", latency_s=lat_out,
                ratio_to_hbm=hbm * factor / per_gpu, datasheet_ratio_to_hbm=hbm / cluster.nic_bytes_per_s,
                note=f"traffic leaving a {level.domain_size}-GPU {level.name} group, oversubscribed {factor:g}:1",
            ))
    return out


def scale_up_domain(cluster: Cluster) -> dict:
    """The scale-up domain as a whole (the seeds' "130 TB/s of aggregate NVLink" for NVL72).

    With ``D`` GPUs of one-way rate ``B`` each: aggregate ``D x B`` one way, ``2 D B`` both directions summed
    (NVIDIA's figure: 72 x 1.8 TB/s = 129.6 TB/s). Bisection, one way, across the worst cut into halves:
    switched (non-blocking NVSwitch / NVLink Switch): ``D / 2 x B`` (every GPU of one half sends at full rate);
    full mesh with ``p`` one-way per peer link: ``(D / 2)^2 x p`` links cross the cut; a torus's depends on its
    shape and is not given here.
    """
    d, b = cluster.scale_up_domain, cluster.scale_up_bytes_per_s
    if cluster.scale_up_topology == "switched":
        bis, how = d / 2 * b, "switched: D/2 x one-way rate per GPU"
    elif cluster.scale_up_topology == "mesh":
        bis, how = (d / 2) ** 2 * cluster.scale_up_p2p_bytes_per_s, "full mesh: (D/2)^2 links x one-way rate per link"
    else:
        bis, how = None, "torus: depends on the torus shape (not given)"
    return {"gpus": d, "aggregate_bytes_per_s": d * b, "aggregate_bidirectional_bytes_per_s": 2 * d * b,
            "bisection_bytes_per_s": bis, "bisection_basis": how,
            "note": "aggregate = GPUs x one-way rate (bidirectional: x2, as datasheets quote); bisection one way"}


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


def _members_per_block(block: int, size: np.ndarray, stride: np.ndarray, outer_size=None,
                       outer_stride=None) -> np.ndarray:
    """Members of a group in one aligned block of ``block`` GPUs.

    stride >= block: every member in its own block; else ``block // stride`` members share one. A
    two-axis group (``size`` ranks at ``stride`` inside, ``outer_size`` copies of that at ``outer_stride``
    >= size x stride, e.g. the ranks of cp x dp when another axis sits between them) holds the product of
    the two axes' counts: a block smaller than ``outer_stride`` holds one outer index.
    """
    inner = np.minimum(np.maximum(block // stride, 1), size)
    if outer_size is None:
        return inner
    return inner * np.minimum(np.maximum(block // outer_stride, 1), outer_size)


def group_span(cluster: Cluster, size, stride, outer_size=None, outer_stride=None) -> GroupSpan:
    """Vectorized placement of groups of ``size`` ranks with ``stride`` onto ``cluster``'s tiers.

    With ``outer_size`` / ``outer_stride`` the group is two-dimensional: ``size`` ranks at ``stride``, times
    ``outer_size`` at ``outer_stride`` (``outer_stride >= size x stride``); the span is of all
    ``size x outer_size`` ranks (see :func:`_members_per_block`).

    >>> from tierwise.specs.cluster import load_cluster
    >>> span = group_span(load_cluster("dgx-h100"), [8, 8], [1, 8])
    >>> span.tier.tolist()  # a TP group of 8 stays on NVLink; a DP group of 8 at stride 8 crosses nodes
    [1, 3]
    """
    # int32 arithmetic: GPU counts fit, and integer division is about twice as fast as in int64
    size = np.asarray(size, dtype=np.int32)
    stride = np.maximum(np.asarray(stride, dtype=np.int32), 1)
    if outer_size is None:
        size, stride = np.broadcast_arrays(size, stride)
        extent = (size.astype(np.int64) - 1) * stride + 1
    else:
        outer_size = np.asarray(outer_size, dtype=np.int32)
        outer_stride = np.maximum(np.asarray(outer_stride, dtype=np.int32), 1)
        size, stride, outer_size, outer_stride = np.broadcast_arrays(size, stride, outer_size, outer_stride)
        extent = ((outer_size.astype(np.int64) - 1) * outer_stride + (size.astype(np.int64) - 1) * stride + 1)
        inner_size = size
        size = size * outer_size

    def members(block):
        if outer_size is None:
            return _members_per_block(block, size, stride)
        return _members_per_block(block, inner_size, stride, outer_size, outer_stride)

    nl = members(cluster.scale_up_domain)
    m = (size + nl - 1) // nl
    per_node = members(cluster.gpus_per_node)
    # across scale-up domains: the scale-out network, except inside one host of a PCIe server (domain < host)
    crossing = np.where(m > 1, np.int8(TierCode.SCALE_OUT), np.int8(TierCode.SCALE_UP))
    if cluster.scale_up_domain < cluster.gpus_per_node:
        pcie_only = (size + per_node - 1) // per_node <= 1
        crossing = np.where(pcie_only & (m > 1), np.int8(TierCode.HOST), crossing)
    tier = np.where(size > 1, crossing, np.int8(0))
    level = np.zeros(size.shape, dtype=np.int8)
    over = np.ones(size.shape, dtype=float)
    if cluster.scale_out_levels:
        for lv in cluster.scale_out_levels:
            beyond = (tier == TierCode.SCALE_OUT) & (extent > lv.domain_size)
            level = level + beyond
            over = np.where(beyond, over * lv.oversubscription, over)
    return GroupSpan(size=size, ranks_per_domain=nl, num_domains=m, ranks_per_node=per_node, tier=tier,
                     level=level, oversubscription=over)


@dataclass(frozen=True)
class HopClass:
    """One class of hop between two ranks: the tier it runs on and the block it stays inside."""

    name: str
    """``scale_up``, ``host``, ``scale_out``, ``scale_out_2``, ... (as :func:`tiers` names them)."""
    tier: int
    """Tier code (:data:`TIER_ORDER`): 1 scale_up, 2 host, 3 scale_out."""
    level: int
    """Oversubscribed scale-out levels crossed above the first (0 below them)."""
    oversubscription: float
    block: int
    """GPUs a hop of this class, or a faster one, stays inside (0: the whole cluster)."""


def hop_classes(cluster: Cluster) -> tuple[HopClass, ...]:
    """The hop classes of ``cluster``, fastest first.

    A hop inside a scale-up domain runs on it (an NVL72 rack's hosts share one NVLink domain); a hop
    between scale-up domains of one host crosses PCIe (a PCIe server whose domain is smaller than the host);
    any other hop leaves the host or domain through the NICs, and each oversubscribed level it leaves
    divides the rate by that level's ratio (as :func:`group_span` does).
    """
    domain, host = cluster.scale_up_domain, cluster.gpus_per_node
    out = [HopClass("scale_up", TierCode.SCALE_UP, 0, 1.0, domain)]
    if domain < host:
        out.append(HopClass("host", TierCode.HOST, 0, 1.0, host))
    levels = cluster.scale_out_levels or ()
    out.append(HopClass("scale_out", TierCode.SCALE_OUT, 0, 1.0, levels[0].domain_size if levels else 0))
    over = 1.0
    for i, lv in enumerate(levels):
        over *= lv.oversubscription
        out.append(HopClass(f"scale_out_{i + 2}", TierCode.SCALE_OUT, i + 1, over,
                            levels[i + 1].domain_size if i + 1 < len(levels) else 0))
    return tuple(out)


@dataclass(frozen=True)
class GroupHops:
    """Hops of groups of ``size`` ranks at ``stride``, per hop class (arrays of one shape ``N``).

    ``hops[k]``: how many of the group's hops are of class ``classes[k]``: ``size`` hops for a ring (the
    wrap-around included), ``size - 1`` for a chain (a pipeline's stage boundaries). ``slowest`` /
    ``fastest``: index of the outermost / innermost class the group uses (-1 for a group of one rank).
    """

    classes: tuple[HopClass, ...]
    hops: np.ndarray
    """Shape ``(len(classes), N)``."""
    slowest: np.ndarray
    fastest: np.ndarray
    tier: np.ndarray
    """Tier code of the slowest hop (0 for a group of one): the group's tier label."""
    level: np.ndarray


def group_hops(cluster: Cluster, size, stride, *, ring: bool) -> GroupHops:
    """Count the hops of groups of ``size`` ranks at ``stride`` by the class of block each hop leaves.

    Derivation: the groups of one tile of ``size x stride`` consecutive ranks interleave (members ``i + k x
    stride``, ``0 <= i < stride``). With ``stride >= B`` every hop leaves its block of ``B`` GPUs; otherwise a
    hop advances less than a block, so it crosses at most one boundary, and the group with ``i = stride -
    1`` crosses every boundary inside the tile: ``ceil(size x stride / B) - 1`` of a chain's ``size - 1``
    hops, plus the wrap-around of a ring when that is not zero (it returns to the first block). Where the
    blocks and tiles divide one another (powers of two on 8-GPU nodes) every group crosses as many; else
    this is the slowest group of the first tile. A hop's class is the outermost block it leaves, so class
    ``k`` holds the hops leaving block ``k - 1`` minus those leaving block ``k``. The slowest class is the
    tier :func:`group_span` gives the whole group (``size > B / stride`` either way).

    >>> from tierwise.specs.cluster import load_cluster
    >>> h = group_hops(load_cluster("dgx-h100"), 8, 2, ring=False)  # pp 8 at stride 2 (tp 2 inside)
    >>> h.hops.tolist(), h.tier.tolist()  # 6 boundaries on NVLink, one across the node boundary
    ([6, 1], 3)
    """
    classes = hop_classes(cluster)
    size = np.asarray(size, dtype=np.int32)
    stride = np.maximum(np.asarray(stride, dtype=np.int32), 1)
    size, stride = np.broadcast_arrays(size, stride)
    total = np.where(size > 1, size if ring else size - 1, 0)
    leaving = [total]
    extent = size.astype(np.int64) * stride
    for cls in classes[:-1]:
        # boundaries of ``block`` inside the group's tile of size x stride ranks (every hop when stride >= block)
        chain = np.where(stride >= cls.block, size - 1, (extent + cls.block - 1) // cls.block - 1)
        chain = np.minimum(np.maximum(chain, 0), np.maximum(size - 1, 0))
        leaving.append(np.where(chain > 0, chain + 1, 0) if ring else chain)
    leaving.append(np.zeros(size.shape, dtype=total.dtype))
    for k in range(len(leaving) - 2, 0, -1):  # a hop leaving an outer block leaves every inner one too
        leaving[k] = np.maximum(leaving[k], leaving[k + 1])
    hops = np.stack([leaving[k] - leaving[k + 1] for k in range(len(classes))])
    slowest = np.full(size.shape, -1, dtype=np.int8)
    fastest = np.full(size.shape, -1, dtype=np.int8)
    for k in range(len(classes)):
        used = hops[k] > 0
        slowest = np.where(used, np.int8(k), slowest)
        fastest = np.where(used & (fastest < 0), np.int8(k), fastest)
    codes = np.array([c.tier for c in classes] + [0], dtype=np.int8)
    levels = np.array([c.level for c in classes] + [0], dtype=np.int8)
    return GroupHops(classes=classes, hops=hops, slowest=slowest, fastest=fastest, tier=codes[slowest],
                     level=levels[slowest])


def pair_span(cluster: Cluster, hop_class, shape=None) -> GroupSpan:
    """The :class:`GroupSpan` of two ranks joined by a hop of class ``hop_class`` (an index into
    :func:`hop_classes`; -1 = a group of one rank, nothing to send), for pricing a transfer across it."""
    classes = hop_classes(cluster)
    k = np.asarray(hop_class, dtype=np.int64)
    if shape is not None:
        k = np.broadcast_to(k, shape)
    one = k < 0
    kk = np.where(one, 0, k)
    tier = np.array([c.tier for c in classes], dtype=np.int8)[kk]
    inside = tier == TierCode.SCALE_UP
    size = np.where(one, 1, 2).astype(np.int32)
    return GroupSpan(
        size=size, ranks_per_domain=np.where(inside | one, size, 1).astype(np.int32),
        num_domains=np.where(inside | one, 1, 2).astype(np.int32),
        ranks_per_node=np.where((tier <= 2) | one, size, 1).astype(np.int32),
        tier=np.where(one, 0, tier).astype(np.int8),
        level=np.where(one, 0, np.array([c.level for c in classes], dtype=np.int8)[kk]).astype(np.int8),
        oversubscription=np.where(one, 1.0, np.array([c.oversubscription for c in classes])[kk]),
    )


def _scale_out_latency(cluster: Cluster) -> tuple[float, str]:
    """The scale-out tier's step latency as ``tiers`` shows it: a leaf-spine-leaf step (3 switches,
    :meth:`Cluster.scale_out_latency_at`), and for a RoCE fabric a note with the spans' figures."""
    extra = cluster.scale_out_extra_per_switch_s
    if not extra:
        return cluster.scale_out_latency_s, ""
    base = cluster.scale_out_latency_s
    lat = [base + k * extra for k in (1, 3, 5)]
    return lat[1], (f"; RoCE: IB baseline {base * 1e6:.2g} us + {extra * 1e9:.0f} ns per Ethernet switch "
                    f"(Spectrum-4 ~500 vs Quantum-2 ~130 ns): {lat[0] * 1e6:.3g} us in one leaf, "
                    f"{lat[1] * 1e6:.3g} us leaf-spine-leaf, {lat[2] * 1e6:.3g} us across 3 tiers")
