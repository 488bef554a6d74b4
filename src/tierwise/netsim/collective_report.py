"""The ``tierwise collective`` report: one collective's modelled time beside its datasheet arithmetic.

It sits in netsim because a ring's report compares the model with the flow simulator
(:mod:`tierwise.netsim.compare`); everything else it uses lives below (collectives, hierarchy, specs).
Heavy modules load inside the function, as the CLI's start-up wants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tierwise.collectives.model import CollectiveCost, collective_cost
from tierwise.collectives.volumes import bus_factor, normalize_kind
from tierwise.errors import SpecError
from tierwise.hierarchy import TIER_ORDER, GroupSpan, group_span, tier_name, tiers
from tierwise.limits import MAX_BYTES, MAX_GPUS, check_int
from tierwise.netsim.compare import collective_ring_note
from tierwise.specs.cluster import Cluster, cluster_from_mapping, load_cluster, with_sharp
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.units import format_bandwidth, format_bytes, format_time, parse_bandwidth, parse_bytes

__all__ = ["collective_report"]


def collective_report(kind: str, size: str, ranks: int, ranks_per_node: int | None, algorithm: str,
                      cluster_ref: str, link_bandwidth: str | None, sharp: bool = False, *,
                      parameters: Parameters | None = None) -> dict:
    """The document ``tierwise collective`` prints: one collective's cost on a cluster, or on one link.

    ``size`` is the buffer as nccl-tests counts it; the group is ``ranks`` ranks, ``ranks_per_node`` of them
    per node (default: fill nodes), placed with :func:`tierwise.hierarchy.group_span` and priced by
    :func:`tierwise.collectives.model.collective_cost` with ``algorithm``. With ``link_bandwidth`` the
    collective runs on a flat cluster of one such link per rank, and the same group on ``cluster_ref`` is
    priced beside it (``cluster_time_s``). ``algbw`` is size / time and ``busbw`` is algbw x the bus factor
    (nccl-tests' definitions, its doc/PERFORMANCE.md); ``datasheet_time_s`` is the ring-equivalent bytes per
    rank over the datasheet rate of the tier crossed (or of the link). The notes explain the gap between the
    two, and for a ring the gap to the flow simulator (:func:`tierwise.netsim.compare.collective_ring_note`).
    ``sharp`` turns InfiniBand SHARP on (:func:`tierwise.specs.cluster.with_sharp`); a note says whether the
    all-reduce reduced in the network, or why not. ``parameters``: the model's (None, this being a command's
    entry point: :func:`~tierwise.specs.parameters.load_parameters`).
    Raises :class:`tierwise.errors.SpecError` for a group the options cannot form.
    """
    kind = normalize_kind(kind)
    parameters = parameters if parameters is not None else load_parameters()
    size_bytes = parse_bytes(size, what="--size", maximum=MAX_BYTES)
    base = _checked_cluster(kind, ranks, ranks_per_node, cluster_ref, sharp, parameters)
    group = _Group(kind, size_bytes, ranks, algorithm, parameters)
    per_node = ranks_per_node or min(ranks, base.gpus_per_node)
    if link_bandwidth is not None:
        priced = _on_link(group, base, per_node, parse_bandwidth(link_bandwidth, what="--link-bandwidth"))
    else:
        priced = _on_cluster(group, base, per_node)
    if base.scale_out_reduction and kind == "all-reduce" and link_bandwidth is None:
        priced.notes.append(_sharp_note(priced.cost, priced.span))
    if str(priced.cost.algorithm) == "ring":
        why = collective_ring_note(kind, size_bytes, priced.span, priced.cluster, parameters=parameters)
        if why:
            priced.notes.append(why)
    return _document(group, priced)


class _Group(NamedTuple):
    """The collective asked for: its kind, buffer size (bytes, as nccl-tests counts it), ranks and algorithm."""

    kind: str
    size_bytes: float
    ranks: int
    algorithm: str
    parameters: Parameters
    """The model's parameters it is priced under."""


@dataclass(frozen=True)
class _Priced:
    """The collective priced on one cluster: where it ran, its cost, the datasheet rate it is set beside."""

    cluster: Cluster
    per_node: int
    """Ranks per node on the named cluster (as asked, else filling nodes)."""
    span: GroupSpan
    cost: CollectiveCost
    datasheet_bw: float
    """Bytes/s the datasheet arithmetic divides by (the tier crossed, or the link)."""
    cluster_time_s: float | None
    """With ``--link-bandwidth``: the same group's time on the named cluster."""
    notes: list[str]


def _checked_cluster(kind: str, ranks: int, ranks_per_node: int | None, cluster_ref: str, sharp: bool,
                     parameters: Parameters) -> Cluster:
    """The named cluster (with SHARP on if asked), after the checks on the group the options describe."""
    check_int(ranks, "--ranks", minimum=2, maximum=MAX_GPUS, error=SpecError,
              hint=" (one rank moves nothing: its busbw is 0/0)")
    if kind == "send-recv" and ranks != 2:
        raise SpecError(f"send-recv is between two ranks; use --ranks 2 (got {ranks})")
    base = load_cluster(cluster_ref, parameters)
    if sharp:
        base = with_sharp(base)
    if ranks_per_node is not None:  # the bound is the cluster's: a suggested value is one that is accepted
        check_int(ranks_per_node, "--ranks-per-node", maximum=base.gpus_per_node, error=SpecError,
                  hint=f" (the {base.gpus_per_node} GPUs per node of {base.name})")
    return base


def _run(group: _Group, cluster: Cluster, per_node: int) -> tuple[GroupSpan, CollectiveCost]:
    """The group placed ``per_node`` ranks per node on ``cluster`` and its cost."""
    if per_node < 1:
        raise SpecError(f"--ranks-per-node {per_node} must be >= 1")
    if per_node > cluster.gpus_per_node:
        raise SpecError(f"--ranks-per-node {per_node} exceeds the {cluster.gpus_per_node} GPUs per node "
                        f"of {cluster.name}; use --ranks-per-node <= {cluster.gpus_per_node}")
    stride = max(1, cluster.gpus_per_node // per_node)
    span = group_span(cluster, group.ranks, stride)
    return span, collective_cost(group.kind, group.size_bytes, span, cluster, group.algorithm,
                                 parameters=group.parameters)


def _on_link(group: _Group, base: Cluster, per_node: int, link: float) -> _Priced:
    """The group on a flat cluster of one ``link`` (bytes/s) per rank, with the same group on ``base`` beside
    it and notes on the datasheet arithmetic (and on a bidirectional NVLink-class figure)."""
    flat = cluster_from_mapping({"base": base.name, "name": f"one {format_bandwidth(link)} link per rank",
                                 "gpus_per_node": 1, "scale_up_domain": 1, "nics_per_node": 1,
                                 "nic_bandwidth": link}, origin="--link-bandwidth", parameters=group.parameters)
    span, cost = _run(group, flat, 1)
    _, ccost = _run(group, base, per_node)
    cluster_time = float(ccost.time_s)
    ring_bytes = group.size_bytes * float(bus_factor(group.kind, group.ranks))
    notes = [f"datasheet arithmetic: {format_bytes(ring_bytes)} per rank / "
             f"{format_bandwidth(link)} = {format_time(ring_bytes / link)}",
             f"modelled on the link: {format_time(float(cost.time_s))} (achievable fraction of the "
             "line rate, protocol and per-step latency included)"]
    if link >= 300e9:
        notes.append(f"{format_bandwidth(link)} looks like an NVLink-class datasheet figure, which "
                     f"counts both directions: one way it is {format_bandwidth(link / 2)}, so on such a "
                     f"link the time is about twice the datasheet arithmetic (--link-bandwidth "
                     f"{link / 2e9:g}GB/s models it)")
    notes.append(f"on {base.name} with {per_node} ranks per node this collective models "
                 f"{format_time(cluster_time)}: a ring across nodes runs one channel per NIC, so a node "
                 f"moves data at about {base.nics_per_node} x the NIC rate, not one NIC's rate")
    return _Priced(flat, per_node, span, cost, link, cluster_time, notes)


def _on_cluster(group: _Group, base: Cluster, per_node: int) -> _Priced:
    """The group on ``base``, set beside the datasheet rate of the tier it crosses."""
    span, cost = _run(group, base, per_node)
    tier_code = int(span.tier)
    tier_list = {t.name: t for t in tiers(base)}
    datasheet_bw = tier_list[tier_name(tier_code)].datasheet_bytes_per_s if tier_code else float("inf")
    notes: list[str] = []
    if tier_code == 1:
        notes.append(f"datasheet scale-up figure {format_bandwidth(datasheet_bw)} counts both "
                     f"directions; one way it is {format_bandwidth(base.scale_up_bytes_per_s)} per GPU")
    if tier_code == 3 and int(span.ranks_per_domain) > 1:
        notes.append(f"{int(span.ranks_per_domain)} ranks per domain share {base.nics_per_node} NICs "
                     "per node: the datasheet arithmetic uses one NIC's rate, a multi-channel ring uses "
                     "them all")
    return _Priced(base, per_node, span, cost, datasheet_bw, None, notes)


def _document(group: _Group, priced: _Priced) -> dict:
    """The JSON document: times, algbw and busbw (nccl-tests' definitions), choice, wire bytes, notes."""
    kind, size_bytes, ranks = group.kind, group.size_bytes, group.ranks
    cost = priced.cost
    time_s = float(cost.time_s)
    bpr = float(cost.bytes_per_rank)
    algbw = size_bytes / time_s if time_s > 0 else float("inf")
    data = {
        "op": kind,
        "size_bytes": size_bytes,
        "num_ranks": ranks,
        "ranks_per_node": priced.per_node,
        "cluster": priced.cluster.name,
        "tier": TIER_ORDER[int(priced.span.tier)],
        "bytes_per_rank": bpr,
        "time_s": time_s,
        "datasheet_time_s": bpr / priced.datasheet_bw if priced.datasheet_bw and ranks > 1 else 0.0,
        "algbw_bytes_per_s": algbw,
        "busbw_bytes_per_s": algbw * float(bus_factor(kind, ranks)) if kind != "send-recv" else algbw,
        "algorithm": str(cost.algorithm),
        "protocol": str(cost.protocol),
        "wire_bytes_per_tier": {"scale_up": float(cost.scale_up_bytes),
                                "scale_out": float(cost.scale_out_bytes)},
        "notes": priced.notes,
    }
    if priced.cluster_time_s is not None:
        data["cluster_time_s"] = priced.cluster_time_s
    return data


def _sharp_note(cost, span) -> str:
    """Whether an all-reduce on a SHARP fabric reduced in the switches, or why not."""
    if str(cost.algorithm) == "sharp":
        return ("SHARP (InfiniBand in-network reduction, NCCL CollNet): each rank sends its 1/ranks-per-node shard "
                "into the switch tree once, half a ring's bytes per NIC")
    if int(span.num_domains) < 2:
        return "SHARP not used: the group stays inside one scale-up domain (NCCL_COLLNET_NODE_THRESHOLD = 2 nodes)"
    return (f"SHARP not used: {str(cost.algorithm)} is faster at this size (SHARP's 31-43 us of "
            "fixed latency pays off only for larger buffers)")
