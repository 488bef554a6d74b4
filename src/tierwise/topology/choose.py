"""The scale-out fabric of a cluster at a GPU count: the one function every command that needs a fabric calls
(``estimate``, ``plan``, ``scale``, ``goodput``, ``design`` and ``topo`` when no radix is given).

The fabric is chosen the way large clusters are built (issue 28):

1. **fewest tiers at the cluster's switch**: the switch generation the cluster's NICs plug into by default
   (InfiniBand: Quantum-2, 64 x 400G or 128 x 200G; Ethernet: a 51.2 Tb/s Tomahawk 5 / Spectrum-4 class
   switch, 128 x 400G or 64 x 800G), 1, 2 or 3 tiers of a folded Clos (:mod:`.fat_tree`);
2. **a larger-radix generation** of the same fabric from :data:`SWITCHES` when that switch cannot hold the NICs
   in 3 tiers (InfiniBand: Quantum-X800, 144 ports; Ethernet: a 102.4 Tb/s Spectrum-6 / Tomahawk 6 class
   switch, 128 x 800G);
3. **more planes**: the NICs' rails split into 2, 4 or 8 independent Clos planes of the largest switch (the
   multi-plane / multi-rail designs the large operators publish: Alibaba HPN's dual plane, Qian et al.,
   SIGCOMM 2024 section 4; Meta's RoCE fabric of parallel planes, Gangidi et al., SIGCOMM 2024 section 3).
   Traffic between planes crosses the scale-up domain first (NCCL PXN), as on a rail-only fabric.

Capacity of a plane: ``max_endpoints(k, tiers, o)`` = ``k``, ``k d`` or ``k (k/2) d`` NICs for 1-3 tiers
(``d`` the leaf's down ports; Al-Fares et al. SIGCOMM 2008 section 3). A fabric of more than 3 tiers is not
built (no published AI fabric uses 4 tiers of a folded Clos; planes keep the diameter at 6 hops).

The user's overrides (``--topology --fabric --radix --tiers --oversubscription``, :class:`FabricOverrides`),
and where a flag is not given the cluster file's ``fabric:`` block, fix a step; what is left is chosen as above. :class:`FabricChoice` carries the spec and the reason, which every
command lists under ``assumed``.

>>> from tierwise.specs.cluster import load_cluster
>>> c = choose_fabric(load_cluster("dgx-h100"), 98304)
>>> c.spec.radix, c.tiers, c.planes
(144, 3, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tierwise.errors import TopologyError
from tierwise.limits import MAX_FABRIC_GPUS, MAX_OVERSUBSCRIPTION, MAX_RADIX, check_float, check_int
from tierwise.topology.costs import FABRICS, fabric_of
from tierwise.topology.fat_tree import leaf_ports, max_endpoints, tiers_needed
from tierwise.topology.spec import FAMILIES, TopologySpec
from tierwise.units import parse_bandwidth

__all__ = ["SwitchGeneration", "SWITCHES", "FabricOverrides", "FabricChoice", "choose_fabric", "choose_for_spec",
           "fabric_units",
           "MAX_TIERS", "MAX_PLANES"]

MAX_TIERS = 3
"""Tiers of one Clos plane that are built (module docstring)."""
SPARE_ALLOWANCE = MAX_FABRIC_GPUS // 8
"""GPUs past :data:`~tierwise.limits.MAX_FABRIC_GPUS` a fabric may hold: the spares bought beside a 2^20-GPU job
(``plan --goodput`` prices the job's GPUs and its p99 spare pool, about 0.3% at 2^20 H100s)."""
MAX_PLANES = 8
"""Planes at most: one per rail of an 8-NIC server."""


@dataclass(frozen=True, kw_only=True)
class SwitchGeneration:
    """A scale-out switch: its ports at each NIC speed it serves (one NIC per port)."""

    name: str
    fabric: str
    """``ib`` or ``roce`` (:data:`tierwise.topology.costs.FABRICS`)."""
    ports_at_gbps: dict
    """NIC line rate (Gb/s) -> ports at that rate."""
    source: str
    in_network_reduction: str = ""
    """The switch's in-network reduction for NCCL's CollNet ("SHARPv3"), or "" (none); it prices only where the
    cluster turns it on (``fabric.sharp``, :attr:`tierwise.specs.cluster.Cluster.scale_out_reduction`)."""


SWITCHES = (
    SwitchGeneration(name="Quantum-2 QM9700", fabric="ib", ports_at_gbps={100: 128, 200: 128, 400: 64},
                     source="network.yaml quantum2-qm9700: 64x400G or 128x200G over 32 twin-port OSFP cages "
                            "(network.csv quantum2_qm9700, S2;S19;S20;S21); 100G NICs take a 200G port; SHARPv3 "
                            "(network.yaml key_figures): streaming aggregation, one active tree per port (NVIDIA "
                            "SHARP 3.13 docs, Device Capabilities and Limitations), 511 streaming trees per subnet",
                     in_network_reduction="SHARPv3"),
    SwitchGeneration(name="Quantum-X800 Q3400", fabric="ib", ports_at_gbps={400: 144, 800: 144},
                     source="network.yaml quantum-x800-q3400: 144x800G XDR (network.csv quantum_x800_q3400, "
                            "S2;S22;S23); a 400G NDR NIC takes one port at 400G (assumption: one NIC per port, "
                            "no port splitting); SHARPv4 (network.yaml key_figures)",
                     in_network_reduction="SHARPv4"),
    SwitchGeneration(name="51.2T Ethernet (Tomahawk 5 / Spectrum-4 SN5600)", fabric="roce",
                     ports_at_gbps={100: 256, 200: 256, 400: 128, 800: 64},
                     source="network.yaml broadcom-th5: 64x800G / 128x400G / 256x200G (S24;S25); spectrum4-sn5600 "
                            "64x800GbE or 128x400GbE (S2;S21)"),
    SwitchGeneration(name="102.4T Ethernet (Spectrum-6 SN6600 / Tomahawk 6)", fabric="roce",
                     ports_at_gbps={800: 128},
                     source="network.yaml spectrum6: SN6600 128x800G 102.4T (S2;S23); broadcom-th6 102.4T (S26)"),
)
"""Switch generations in the order they are tried (module docstring, step 2)."""


@dataclass(frozen=True, kw_only=True)
class FabricOverrides:
    """What the user fixed (``None``: chosen). Flags of every command that builds a fabric, or a cluster YAML."""

    topology: str | None = None
    fabric: str | None = None
    radix: int | None = None
    tiers: int | None = None
    oversubscription: float | None = None

    def checked(self) -> FabricOverrides:
        """The overrides with each value in range (one line naming the flag and the range, exit 2)."""
        if self.topology is not None and self.topology not in FAMILIES:
            raise TopologyError(f"--topology {self.topology!r} is unknown; choose one of {', '.join(FAMILIES)}")
        if self.fabric is not None and self.fabric not in FABRICS:
            raise TopologyError(f"--fabric {self.fabric!r} is unknown; choose one of {', '.join(FABRICS)}")
        radix = None if self.radix is None else check_int(self.radix, "--radix", minimum=2, maximum=MAX_RADIX,
                                                          error=TopologyError)
        if radix is not None and radix % 2:
            raise TopologyError(f"--radix {radix} must be an even number of ports, e.g. --radix {radix + 1}")
        tiers = None if self.tiers is None else check_int(self.tiers, "--tiers", minimum=1, maximum=MAX_TIERS,
                                                          error=TopologyError,
                                                          hint=" (more NICs take more planes, chosen for you)")
        over = None if self.oversubscription is None else check_float(
            self.oversubscription, "--oversubscription", minimum=1.0, maximum=MAX_OVERSUBSCRIPTION,
            error=TopologyError, hint=" (1 = non-blocking, 2 = 2:1)")
        return replace(self, radix=radix, tiers=tiers, oversubscription=over)

    def flags(self) -> list[str]:
        """The overrides as the flags that set them (for ``assumed``)."""
        return [f"--{k} {v:g}" if isinstance(v, float) else f"--{k} {v}"
                for k, v in (("topology", self.topology), ("fabric", self.fabric), ("radix", self.radix),
                             ("tiers", self.tiers), ("oversubscription", self.oversubscription)) if v is not None]


@dataclass(frozen=True, kw_only=True)
class FabricChoice:
    """The chosen fabric: a buildable spec, the fabric kind, the switch, and why (for ``assumed``)."""

    spec: TopologySpec
    fabric: str
    switch: str
    tiers: int
    planes: int
    reason: str


def fabric_units(cluster, num_gpus: int) -> int:
    """GPUs of whole fabric units (servers, or scale-up racks wider than a server) that hold ``num_gpus``."""
    unit = max(cluster.scale_up_domain, cluster.gpus_per_node)
    return -(-num_gpus // unit) * unit


def _gbps(cluster) -> float:
    return cluster.nic_bytes_per_s * 8 / 1e9


def _candidates(fabric: str, gbps: float, radix: int | None) -> list[tuple[int, str, str]]:
    """(radix, switch name, source) to try in order: the user's radix alone, or the fabric's generations that
    serve the NIC speed (a NIC slower than every listed speed takes the slowest port that serves it)."""
    if radix is not None:
        most, name = _largest_at(gbps)
        if radix > most:
            raise TopologyError(f"--radix {radix} is more ports at {gbps:g} Gb/s than any switch in the catalog "
                                f"offers ({name}: {most}); use --radix <= {most}, or leave it out to have the "
                                "switch, tiers and planes chosen")
        return [(radix, f"{radix}-port switch (--radix)", "given")]
    out = []
    for sw in SWITCHES:
        if sw.fabric != fabric:
            continue
        speeds = sorted(s for s in sw.ports_at_gbps if s >= gbps - 1e-6)
        if speeds:
            out.append((sw.ports_at_gbps[speeds[0]], sw.name, sw.source))
    if not out:
        raise TopologyError(f"no {fabric} switch in the catalog serves {gbps:g} Gb/s NICs; give --radix (switch "
                            f"ports at the NIC speed)")
    return out


def _largest_at(gbps: float) -> tuple[int, str]:
    """The most ports any catalog switch (either fabric) offers at a NIC speed, and that switch."""
    best = (0, "none")
    for sw in SWITCHES:
        speeds = sorted(s for s in sw.ports_at_gbps if s >= gbps - 1e-6)
        if speeds and sw.ports_at_gbps[speeds[0]] > best[0]:
            best = (sw.ports_at_gbps[speeds[0]], sw.name)
    return best


def _plane_options(nics_per_node: int) -> list[int]:
    return [p for p in range(1, min(nics_per_node, MAX_PLANES) + 1) if nics_per_node % p == 0]


def choose_fabric(cluster, num_gpus: int, overrides: FabricOverrides | None = None) -> FabricChoice:
    """The scale-out fabric of ``num_gpus`` GPUs of ``cluster`` (module docstring); ``num_gpus`` is rounded up to
    whole servers or racks (:func:`fabric_units`). Raises :class:`TopologyError` naming the count and what would
    hold it when no switch, tier count and plane count does."""
    o = _with_cluster_file(overrides or FabricOverrides(), cluster).checked()
    gpus = fabric_units(cluster, check_int(num_gpus, "--gpus", maximum=MAX_FABRIC_GPUS + SPARE_ALLOWANCE,
                                           error=TopologyError, hint=" (the job's GPUs and their spares)"))
    fabric = o.fabric or fabric_of(cluster.name, cluster)
    rack = cluster.scale_up_domain > cluster.gpus_per_node
    family = o.topology or ("nvl72" if rack else "rail-optimized")
    over = o.oversubscription or 1.0
    gbps = _gbps(cluster)
    base = dict(family=family, gpus=gpus, gpus_per_node=cluster.gpus_per_node, nics_per_node=cluster.nics_per_node,
                oversubscription=over, nic_bandwidth=f"{gbps:g} Gb/s")
    if family == "nvl72" or (rack and family in ("fat-tree", "rail-optimized", "rail-only")):
        base["domain_size"] = cluster.scale_up_domain
    return _choose(TopologySpec(**base), gbps, fabric, o)


def _with_cluster_file(o: FabricOverrides, cluster) -> FabricOverrides:
    """The user's flags, and where a flag is not given, what the cluster file's ``fabric:`` block fixes."""
    fixed = getattr(cluster, "fabric", None) or {}
    # ``sharp`` is a property of the switches the cluster's collectives use, not a choice of the fabric's shape
    return replace(o, **{k: v for k, v in fixed.items() if k != "sharp" and getattr(o, k) is None})


def choose_for_spec(spec: TopologySpec, fabric: str, tiers: int | None = None) -> FabricChoice:
    """``topo``'s fabric when ``--radix`` is not given: the switch, tiers and planes for the spec's own NICs, as
    :func:`choose_fabric` chooses them (``tiers``: the user's ``--tiers``)."""
    gbps = parse_bandwidth(spec.nic_bandwidth, what="--nic-bandwidth") * 8 / 1e9
    o = FabricOverrides(fabric=fabric, tiers=tiers, oversubscription=spec.oversubscription).checked()
    return _choose(spec, gbps, fabric, o)


def _choose(base: TopologySpec, gbps: float, fabric: str, o: FabricOverrides) -> FabricChoice:
    """The first (switch, planes) whose Clos of at most ``o.tiers`` (else 3) tiers holds the NICs (module
    docstring); dragonfly, torus and rail-only take the first switch."""
    family, over = base.family, base.oversubscription
    nics = base.gpus // base.gpus_per_node * base.nics
    cands = _candidates(fabric, gbps, o.radix)
    max_tiers = o.tiers or MAX_TIERS
    if family in ("dragonfly", "torus", "rail-only"):
        radix, name, _ = cands[0]
        why = f"{family} (--topology) of {name}, radix {radix}"
        return FabricChoice(spec=replace(base, radix=radix, tiers=o.tiers), fabric=fabric, switch=name,
                            tiers=o.tiers or 0, planes=1, reason=why)
    leaf_ports(cands[0][0], over)  # radix and oversubscription checked once, with the message
    for planes in _plane_options(base.nics):
        for i, (radix, name, _source) in enumerate(cands):
            per_plane = -(-nics // planes)
            if max_endpoints(radix, max_tiers, over) < per_plane:
                continue
            tiers = o.tiers or tiers_needed(per_plane, radix, over)
            why = _reason(family, fabric, name, radix=radix, tiers=tiers, planes=planes, nics=nics, gbps=gbps,
                          over=over, i=i, cands=cands)
            spec = replace(base, radix=radix, tiers=tiers, planes=planes)
            return FabricChoice(spec=spec, fabric=fabric, switch=name, tiers=tiers, planes=planes, reason=why)
    raise TopologyError(_unreachable(base.gpus, nics, cands, max_tiers, over, base.nics))


def _reason(family, fabric, name, *, radix, tiers, planes, nics, gbps, over, i, cands) -> str:
    what = f"{family} fabric ({fabric}), {tiers}-tier Clos of {name}, radix {radix} at {gbps:g}G"
    if planes > 1:
        what += f", {planes} planes of {nics // planes:,} NICs (rails split; cross-plane traffic via scale-up)"
    ratio = f", {over:g}:1 at the leaves" if over != 1 else ""
    if cands[0][2] == "given":
        return f"{what}{ratio}: {nics:,} NICs at the given --radix"
    first_r, first_name, _ = cands[0]
    cap3 = max_endpoints(first_r, MAX_TIERS, over)
    if i == 0 and planes == 1:
        why = f"the fewest tiers of the cluster's {fabric} switch that hold {nics:,} NICs"
    elif planes == 1:
        why = f"{nics:,} NICs exceed {first_name}'s {cap3:,} in 3 tiers: the next switch generation"
    else:
        best = max(max_endpoints(r, MAX_TIERS, over) for r, _, _ in cands)
        why = f"{nics:,} NICs exceed one 3-tier plane of any {fabric} switch in the catalog ({best:,}): {planes} planes"
    return f"{what}{ratio}: {why}"


def _unreachable(gpus, nics, cands, max_tiers, over, nics_per_node) -> str:
    planes = _plane_options(nics_per_node)[-1]
    best_r = max(r for r, _, _ in cands)
    cap = max_endpoints(best_r, max_tiers, over) * planes
    need = best_r
    while max_endpoints(need, max_tiers, over) * planes < nics and need < MAX_RADIX:
        need += 2
    fix = f"use --radix >= {need}" if max_endpoints(need, max_tiers, over) * planes >= nics else "use fewer --gpus"
    if max_tiers < MAX_TIERS:
        fix += f" or --tiers {MAX_TIERS}"
    return (f"--gpus {gpus:,} ({nics:,} NICs) is more than any fabric of up to {max_tiers} tiers and {planes} "
            f"plane{'s' if planes > 1 else ''} of radix {best_r} holds ({cap:,} NICs); {fix}")

