"""Cluster specs: accelerators grouped into hosts and scale-up domains, joined by a scale-out network.

A cluster distinguishes the **host** (``gpus_per_node``: the GPUs that share a server, its PCIe and its NICs)
from the **scale-up domain** (``scale_up_domain``: the GPUs one NVLink/NVSwitch or Infinity Fabric joins:
8 on a DGX, 72 on an NVL72 rack whose hosts hold 4 GPUs each).

Bandwidths are one-way per GPU (or per NIC where named so). A cluster mapping may start from a catalog
cluster (``base: dgx-h100``) and override any key, or describe a cluster fully. It may also carry figures
fitted by ``tierwise calibrate`` (``fitted``) or simulated by ``tierwise simulate --emit-cluster``
(``efficiency``); the collective model uses them in place of the catalog defaults. ``compute`` overrides
global compute parameters with what was measured on this cluster's accelerator (``tierwise calibrate`` of a
``measure gemm`` result: ``matmul_efficiency_max``; of a ``measure hbm`` result: ``memory_bound_efficiency``;
``tierwise measure compute``: both and the attention families', with ``compute_measured_on`` naming the device).
A compute profile given as ``--compute FILE`` is merged in by :func:`load_cluster`
(:mod:`tierwise.specs.compute_profile`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tierwise.errors import SpecError
from tierwise.files import describe_type, require_document, short_repr
from tierwise.limits import MAX_LATENCY_S, MAX_OVERSUBSCRIPTION
from tierwise.specs import catalog
from tierwise.specs._mapping import check_keys, get_bool, get_float, get_int, require_mapping
from tierwise.specs.accelerator import Accelerator, load_accelerator
from tierwise.specs.compute_profile import check_device, parse_compute, profile_in_force
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.units import parse_bandwidth, parse_bytes, parse_time

__all__ = ["Cluster", "ScaleOutLevel", "FittedRegime", "FittedTier", "cluster_from_mapping", "load_cluster",
           "scale_up_extra_s", "with_scale_up_domain", "with_sharp"]

_KEYS = (
    "base", "name", "display_name", "accelerator", "gpus_per_node", "scale_up_domain", "nics_per_node",
    "nic_bandwidth", "scale_up_bandwidth", "scale_up_p2p_bandwidth", "scale_up_topology", "in_network_reduction",
    "host_bandwidth", "host_memory", "scale_up_latency", "host_latency", "scale_out_latency", "scale_out_levels", "efficiency",
    "fitted", "compute", "source", "notes", "num_gpus_max", "fabric", "compute_measured_on", "compute_rows",
)
FABRIC_KEYS = ("topology", "fabric", "radix", "tiers", "oversubscription", "sharp")
"""What a cluster file may fix of its scale-out fabric (``fabric:``; the rest is chosen for the GPU count by
:func:`tierwise.topology.choose.choose_fabric`; a command's flags of the same names override it). ``sharp:
true`` says the InfiniBand switches run SHARP for NCCL (CollNet): off unless stated, as NCCL uses it only with
the SHARP plugin and ``NCCL_COLLNET_ENABLE=1`` (:attr:`Cluster.scale_out_reduction`)."""
TIER_NAMES = ("scale_up", "host", "scale_out")


@dataclass(frozen=True, kw_only=True)
class ScaleOutLevel:
    """One level of a multi-level scale-out fabric (leaf, spine, ...)."""

    name: str
    domain_size: int
    """GPUs below one switch group of this level; a group spanning more GPUs crosses the next level up."""
    oversubscription: float = 1.0
    """Downlink:uplink ratio above this level (2.0 halves the bandwidth of traffic that leaves it)."""


@dataclass(frozen=True, kw_only=True)
class FittedRegime:
    """One alpha-beta line of a fitted collective: ``time = latency_s + size x bus_factor / busbw``."""

    name: str
    min_bytes: float
    max_bytes: float
    latency_s: float
    busbw_bytes_per_s: float
    step_latency_s: float | None = None
    """``model: host-copy`` tiers only: latency per sequential algorithm step (``measure/hostcopy.py``)."""
    copy_s_per_byte: float | None = None
    """``model: host-copy`` tiers only: seconds per byte of copy work of the busiest rank."""
    memory_s_per_byte: float | None = None
    """``model: host-copy`` tiers only, optional: seconds per byte of the copies outside gloo's algorithm
    (measured by ``measure collective``'s host memory probe); absent, they cost ``copy_s_per_byte``."""


@dataclass(frozen=True, kw_only=True)
class FittedTier:
    """Collective figures fitted for one tier by ``tierwise calibrate`` (see ``measure/fit.py``)."""

    num_ranks: int
    ranks_per_domain: int
    op: str
    regimes: tuple[FittedRegime, ...]
    source: str = ""
    model: str = "bus-factor"
    """How the fit transfers to other ops: ``bus-factor`` (nccl-tests factors; the default) or ``host-copy``
    (one host's gloo loopback: copy work and message steps, ``measure/hostcopy.py``)."""


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """A cluster of identical accelerators (one-way bandwidths, per GPU unless named otherwise)."""

    name: str
    accelerator: Accelerator
    gpus_per_node: int
    scale_up_domain: int
    nics_per_node: int
    nic_bytes_per_s: float
    """One-way line rate of one NIC (400 Gb/s NDR: 50e9)."""
    scale_up_bytes_per_s: float
    scale_up_p2p_bytes_per_s: float
    scale_up_topology: str
    in_network_reduction: bool
    """NVLink SHARP (NVLS) in the scale-up switches: all-reduce reduced inside the switch."""
    host_bytes_per_s: float
    scale_up_latency_s: float
    host_latency_s: float
    scale_out_latency_s: float
    latency_parameters: Mapping[str, float]
    """The ``latency:`` section of the parameters the cluster was built under (:func:`load_cluster`'s
    ``parameters``): the defaults a derived copy re-derives its latencies from (:func:`with_scale_up_domain`,
    :func:`with_fabric_latency`, :attr:`scale_up_extra_latency_s`)."""
    scale_out_levels: tuple[ScaleOutLevel, ...] = ()
    efficiency: Mapping[str, float] = field(default_factory=dict)
    """Per-tier bandwidth efficiency overriding the global parameters (e.g. from the network simulator)."""
    fitted: Mapping[str, FittedTier] = field(default_factory=dict)
    compute: Mapping[str, float] = field(default_factory=dict)
    """Global compute parameters overridden by measurements on this accelerator (see :data:`COMPUTE_KEYS`)."""
    fabric: Mapping[str, Any] = field(default_factory=dict)
    """The scale-out fabric the cluster file fixes (:data:`FABRIC_KEYS`); empty: chosen for the GPU count."""
    host_memory_bytes: float = 0.0
    """Host DRAM per GPU (cluster file ``host_memory``, else the accelerator's reference server:
    :attr:`~tierwise.specs.accelerator.Accelerator.host_memory_bytes`); 0 = not known, offload unchecked."""
    scale_out_extra_per_switch_s: float = 0.0
    """Latency a scale-out step adds per switch it crosses over the IB baseline ``scale_out_latency_s``:
    the RoCE extra (parameters.yaml ``latency.roce_extra_per_switch``) on an Ethernet fabric whose latency the
    cluster file does not state, else 0 (:meth:`scale_out_latency_at`)."""
    scale_out_latency_stated: bool = False
    """The cluster file states ``scale_out_latency`` (then no fabric extra is added to it)."""
    scale_up_latency_stated: bool = False
    """The cluster file states ``scale_up_latency`` (then no hardware path is added to it)."""
    compute_device: str = ""
    """The device ``compute`` was measured on (``measure compute``'s ``compute_measured_on.device``), if named."""
    display_name: str = ""
    source: str = ""
    notes: str = ""

    @functools.cached_property
    def fingerprint(self) -> str:
        """The cluster's whole content as text: a key for caches of what depends on the cluster (two clusters
        with equal fingerprints price every collective alike; a modified copy gets its own)."""
        return repr(self)

    def scale_out_latency_at(self, num_domains):
        """Per-step scale-out latency of a group spanning ``num_domains`` scale-up domains (array or scalar):
        ``scale_out_latency_s`` plus the per-switch extra times the switches a step crosses, 1 inside one
        leaf (``radix/2`` domains), 3 leaf-spine-leaf (``radix^2/2``), else 5 (a 3-tier Clos); the radix
        is the cluster file's ``fabric.radix`` or 64 (Quantum-2 / Spectrum-4 SN5600 at 800G)."""
        if not self.scale_out_extra_per_switch_s:
            return self.scale_out_latency_s + 0.0 * np.asarray(num_domains, dtype=float)
        return self.scale_out_latency_s + self.scale_out_extra_per_switch_s * switches_crossed(
            num_domains, int(self.fabric.get("radix", 64)))

    @property
    def scale_up_extra_latency_s(self) -> float:
        """The hardware path this domain adds over NCCL's NVLink baseboard (:func:`scale_up_extra_s`; 0 where the
        cluster file states its ``scale_up_latency``): already in ``scale_up_latency_s``, and added to NCCL's NVLS
        constant by the collective model."""
        if self.scale_up_latency_stated:
            return 0.0
        return scale_up_extra_s(self.accelerator, self.gpus_per_node, self.scale_up_domain, self.latency_parameters)

    @property
    def scale_out_reduction(self) -> bool:
        """InfiniBand SHARP in the scale-out switches, used by NCCL's CollNet: the cluster file's ``fabric.sharp``
        (or ``--sharp``). Off by default: NCCL enables CollNet only with the SHARP plugin loaded and
        ``NCCL_COLLNET_ENABLE=1`` (HPC-X "NCCL-RDMA-SHARP Plugins"; NCCL environment variables)."""
        return bool(self.fabric.get("sharp", False))

    @property
    def scale_out_bytes_per_s(self) -> float:
        """One-way scale-out bandwidth per GPU: its share of its host's NICs."""
        return self.nics_per_node * self.nic_bytes_per_s / self.gpus_per_node

    @property
    def scale_up_bidirectional_bytes_per_s(self) -> float:
        return 2.0 * self.scale_up_bytes_per_s


def switches_crossed(num_domains, radix: int):
    """Switches a scale-out step between ``num_domains`` domains crosses on a non-blocking Clos of ``radix``:
    1 within a leaf of ``radix/2`` downlinks, 3 within a 2-tier plane of ``radix^2/2``, else 5."""
    m = np.asarray(num_domains, dtype=float)
    half = radix / 2
    return np.where(m <= half, 1.0, np.where(m <= radix * half, 3.0, 5.0))


def scale_up_extra_s(accelerator: Accelerator, gpus_per_node: int, domain: int,
                     latency: Mapping[str, float]) -> float:
    """Hardware latency a scale-up step adds over NCCL's NVLink constant (calibrated on an 8-GPU baseboard:
    GPU -> switch -> GPU over board trace). Derivation in parameters.yaml ``latency.scale_up_*``: a domain inside
    one host adds 0; one that spans hosts within one switch tier's reach (the accelerator's catalog domain, e.g.
    NVL72) adds the copper runs GPU -> switch -> GPU (``scale_up_rack_cable``); a larger one (NVL144, NVL576: a
    second tier, design/scaleup.yaml ``nvlink.second_tier``) also crosses a leaf and a spine more
    (2 x ``scale_up_per_switch``) over 2 optical runs (``scale_up_spine_cable``). ``latency``: the parameters'
    ``latency:`` section (:class:`~tierwise.specs.parameters.Parameters`)."""
    if domain <= gpus_per_node:
        return 0.0
    lat = latency
    extra = lat["scale_up_rack_cable"]
    if domain > max(accelerator.scale_up_domain_size, gpus_per_node):
        extra += 2 * lat["scale_up_per_switch"] + lat["scale_up_spine_cable"]
    return extra


def with_scale_up_domain(cluster: Cluster, domain: int, **changes: Any) -> Cluster:
    """``cluster`` with a ``domain``-GPU scale-up domain, its latency re-derived for that domain (NCCL's NVLink
    constant plus :func:`scale_up_extra_s`) unless the cluster file states it."""
    if not cluster.scale_up_latency_stated and "scale_up_latency_s" not in changes:
        lat = cluster.latency_parameters
        changes["scale_up_latency_s"] = lat["nvlink"] + scale_up_extra_s(
            cluster.accelerator, cluster.gpus_per_node, domain, lat)
    return replace(cluster, scale_up_domain=domain, **changes)


def _roce_extra(data: Mapping[str, Any], name: str | None, lat: Mapping[str, float]) -> float:
    """The RoCE per-switch extra for a cluster file that does not state its scale-out latency, else 0."""
    return lat["roce_extra_per_switch"] if "scale_out_latency" not in data and is_roce(name or "", data) else 0.0


def with_fabric_latency(cluster: Cluster, fabric: str) -> Cluster:
    """``cluster`` on the scale-out ``fabric`` a design or chooser fixed (``ib`` or ``roce``): the RoCE
    per-switch extra on (or off), unless the cluster file states its latency; on ``roce`` SHARP off."""
    if fabric == "roce" and cluster.scale_out_reduction:  # SHARP is an InfiniBand switch feature
        cluster = replace(cluster, fabric={k: v for k, v in cluster.fabric.items() if k != "sharp"})
    if cluster.scale_out_latency_stated:
        return cluster
    extra = cluster.latency_parameters["roce_extra_per_switch"] if fabric == "roce" else 0.0
    return cluster if extra == cluster.scale_out_extra_per_switch_s else replace(
        cluster, scale_out_extra_per_switch_s=extra)


def is_roce(name: str, data: Mapping[str, Any]) -> bool:
    """An Ethernet (RoCE) scale-out: the ``fabric.fabric`` key says roce/ethernet, or the name or display name
    does (the rule of :func:`tierwise.topology.costs.fabric_of`)."""
    fab = data.get("fabric")
    if isinstance(fab, Mapping) and isinstance(fab.get("fabric"), str):
        return fab["fabric"].lower() in ("roce", "ethernet")
    text = f"{name} {data.get('name', '')} {data.get('display_name', '')}".lower()
    return "roce" in text or "ethernet" in text


def _latency(data: Mapping[str, Any], key: str, default_s: float, origin: str) -> float:
    if key not in data:
        return default_s
    return parse_time(data[key], what=f"{origin}: {key}", allow_zero=True, maximum=MAX_LATENCY_S)


def _levels(raw: Any, origin: str) -> tuple[ScaleOutLevel, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError(f"scale_out_levels in {origin} must be a list of {{name, domain_size, oversubscription}}")
    levels = []
    for i, item in enumerate(raw):
        where = f"{origin}: scale_out_levels[{i}]"
        item = require_mapping(item, where)
        check_keys(item, ("name", "domain_size", "oversubscription"), where, required=("domain_size",))
        over = get_float(item, "oversubscription", where, default=1.0, minimum=1.0, maximum=MAX_OVERSUBSCRIPTION)
        levels.append(ScaleOutLevel(name=str(item.get("name", f"level{i + 1}")),
                                    domain_size=get_int(item, "domain_size", where), oversubscription=over))
    return tuple(sorted(levels, key=lambda lv: lv.domain_size))


def _fractions(raw: Any, origin: str, block: str, keys: tuple[str, ...]) -> dict[str, float]:
    """A block of fractions in (0, 1] keyed by ``keys`` (``efficiency:`` by tier, ``compute:`` by parameter)."""
    if raw is None:
        return {}
    where = f"{origin}: {block}"
    raw = require_mapping(raw, where)
    check_keys(raw, keys, where)
    return {k: get_float(raw, k, where, minimum=1e-6, maximum=1.0) for k in raw}


def _fabric(raw: Any, origin: str) -> dict[str, Any]:
    """The ``fabric:`` block (:data:`FABRIC_KEYS`): names checked here, values by the chooser's own checks."""
    if raw is None:
        return {}
    where = f"{origin}: fabric"
    raw = require_mapping(raw, where)
    check_keys(raw, FABRIC_KEYS, where)
    out: dict[str, Any] = {}
    for key in ("topology", "fabric"):
        if key in raw:
            if not isinstance(raw[key], str):
                raise SpecError(f"{key}={short_repr(raw[key])} in {where} must be a name such as "
                                f"{'fat-tree' if key == 'topology' else 'ib'}")
            out[key] = raw[key]
    for key, lo, hi in (("radix", 2, 4096), ("tiers", 1, 3)):
        if key in raw:
            out[key] = get_int(raw, key, where, minimum=lo, maximum=hi)
    if "oversubscription" in raw:
        out["oversubscription"] = get_float(raw, "oversubscription", where, minimum=1.0, maximum=MAX_OVERSUBSCRIPTION)
    if "sharp" in raw:
        out["sharp"] = get_bool(raw, "sharp", where)
    return out


def with_sharp(cluster: Cluster, origin: str = "--sharp") -> Cluster:
    """``cluster`` with InfiniBand SHARP on (``--sharp``); a one-line :class:`SpecError` on an Ethernet fabric,
    whose switches reduce nothing (no catalog Ethernet switch has in-network reduction)."""
    if is_roce(cluster.name, {"name": cluster.name, "display_name": cluster.display_name, "fabric": cluster.fabric}):
        raise SpecError(f"{origin}: the cluster's scale-out is Ethernet (RoCE); SHARP runs only in InfiniBand "
                        "switches (Quantum-2 SHARPv3, Quantum-X800 SHARPv4); leave out --sharp or use an ib cluster")
    return replace(cluster, fabric={**cluster.fabric, "sharp": True})


def _fitted(raw: Any, origin: str) -> dict[str, FittedTier]:
    if raw is None:
        return {}
    raw = require_mapping(raw, f"{origin}: fitted")
    out: dict[str, FittedTier] = {}
    source = str(raw.get("source", ""))
    for tier, spec in raw.items():
        if tier == "source":
            continue
        where = f"{origin}: fitted.{tier}"
        if tier not in TIER_NAMES:
            raise SpecError(f"unknown tier {short_repr(tier)} in {origin}: fitted; use one of {', '.join(TIER_NAMES)}")
        spec = require_mapping(spec, where)
        check_keys(spec, ("num_ranks", "ranks_per_domain", "op", "model", "regimes", "residuals", "source"), where,
                   required=("num_ranks", "regimes"))
        model = str(spec.get("model", "bus-factor"))
        if model not in ("bus-factor", "host-copy"):
            raise SpecError(f"{where}.model: unknown model {short_repr(model)}; use bus-factor (default) or host-copy")
        regimes = []
        if spec["regimes"] is not None and not isinstance(spec["regimes"], list):
            raise SpecError(f"{where}.regimes must be a list of regimes, not {describe_type(spec['regimes'])}; "
                            "run tierwise calibrate again")
        for j, reg in enumerate(spec["regimes"] or []):
            rw = f"{where}.regimes[{j}]"
            reg = require_mapping(reg, rw)
            host_keys = ("step_latency_s", "copy_s_per_byte") if model == "host-copy" else ()
            optional = ("memory_s_per_byte",) if host_keys else ()
            check_keys(reg, ("name", "min_bytes", "max_bytes", "latency_s", "busbw_bytes_per_s", *host_keys,
                             *optional), rw, required=("latency_s", "busbw_bytes_per_s", *host_keys))
            max_b = reg.get("max_bytes")
            regimes.append(FittedRegime(
                name=str(reg.get("name", f"regime{j}")),
                min_bytes=parse_bytes(reg.get("min_bytes", 0), what=f"{rw}.min_bytes", allow_zero=True),
                max_bytes=math.inf if max_b is None else parse_bytes(max_b, what=f"{rw}.max_bytes"),
                latency_s=parse_time(reg["latency_s"], what=f"{rw}.latency_s"),
                # a flat regime's busbw is a fitted lower bound, which may sit outside a link's range
                busbw_bytes_per_s=parse_bandwidth(reg["busbw_bytes_per_s"], what=f"{rw}.busbw_bytes_per_s",
                                                  minimum=0.0, maximum=None),
                step_latency_s=(parse_time(reg["step_latency_s"], what=f"{rw}.step_latency_s", allow_zero=True)
                                if host_keys else None),
                copy_s_per_byte=(get_float(reg, "copy_s_per_byte", rw, minimum=0.0) if host_keys else None),
                memory_s_per_byte=(get_float(reg, "memory_s_per_byte", rw, minimum=0.0)
                                   if optional and reg.get("memory_s_per_byte") is not None else None),
            ))
        if not regimes:
            raise SpecError(f"{where} has no regimes; run tierwise calibrate again or remove it")
        num_ranks = get_int(spec, "num_ranks", where, minimum=2)
        out[tier] = FittedTier(
            num_ranks=num_ranks,
            ranks_per_domain=get_int(spec, "ranks_per_domain", where, default=num_ranks),
            op=str(spec.get("op", "all-reduce")),
            regimes=tuple(regimes),
            source=str(spec.get("source", source)),
            model=model,
        )
    return out


def _merge_base(data: Mapping[str, Any], origin: str, name: str | None = None) -> dict[str, Any]:
    """``data`` over its ``base`` catalog cluster. Its name: its own ``name:``, else the name it is loaded under
    (a catalog key such as ``hgx-h100-roce``, whose entry is a base plus its own values, keeps that key), else
    the base, with what the mapping changes listed (``dgx-h100 (modified: nic_bandwidth)``)."""
    base_name = str(data["base"])
    merged = dict(catalog.entry("clusters", base_name))
    merged.update({k: v for k, v in data.items() if k != "base"})
    if "name" not in data:
        changed = sorted(k for k in data if k not in ("base", "display_name", "source", "notes"))
        merged["name"] = name or (f"{base_name} (modified: {', '.join(changed)})" if changed else base_name)
    return merged


def cluster_from_mapping(data: Mapping[str, Any], *, name: str | None = None, origin: str = "cluster",
                         parameters: Parameters | None = None) -> Cluster:
    """Build and validate a :class:`Cluster` from a mapping (catalog entry, scenario, or file), its latency
    defaults from ``parameters``' ``latency:`` section (None, this being an entry point: :func:`load_parameters`)."""
    data = require_mapping(data, origin)
    check_keys(data, _KEYS, origin)
    if "base" in data:
        data = _merge_base(data, origin, name)
    check_keys(data, _KEYS, origin, required=("accelerator",))
    acc = load_accelerator(data["accelerator"])
    gpn, domain, nics, nic_bw = _node_shape(data, acc, origin)
    up_bw, p2p_bw, topo = _scale_up_links(data, acc, origin)
    lat = (parameters if parameters is not None else load_parameters()).latency
    return Cluster(
        name=str(data.get("name", name or "custom")),
        display_name=str(data.get("display_name", data.get("name", name or "custom"))),
        accelerator=acc,
        gpus_per_node=gpn,
        scale_up_domain=domain,
        nics_per_node=nics,
        nic_bytes_per_s=nic_bw,
        scale_up_bytes_per_s=up_bw,
        scale_up_p2p_bytes_per_s=p2p_bw,
        scale_up_topology=topo,
        in_network_reduction=get_bool(data, "in_network_reduction", origin, default=False),
        host_bytes_per_s=(parse_bandwidth(data["host_bandwidth"], what=f"{origin}: host_bandwidth")
                          if "host_bandwidth" in data else acc.host_bytes_per_s),
        host_memory_bytes=(parse_bytes(data["host_memory"], what=f"{origin}: host_memory")
                           if "host_memory" in data else acc.host_memory_bytes),
        scale_up_latency_s=_latency(data, "scale_up_latency", lat["nvlink"] + scale_up_extra_s(acc, gpn, domain, lat),
                                    origin),
        host_latency_s=_latency(data, "host_latency", lat["pci"], origin),
        scale_out_latency_s=_latency(data, "scale_out_latency", lat["net"], origin), latency_parameters=dict(lat),
        scale_out_levels=_levels(data.get("scale_out_levels"), origin),
        efficiency=_fractions(data.get("efficiency"), origin, "efficiency", TIER_NAMES),
        fitted=_fitted(data.get("fitted"), origin),
        compute=parse_compute(data.get("compute"), origin),
        compute_device=_measured_on(data.get("compute_measured_on"), origin),
        fabric=_sharp_checked(_fabric(data.get("fabric"), origin), data, name, origin),
        scale_out_extra_per_switch_s=_roce_extra(data, name, lat), scale_out_latency_stated="scale_out_latency" in data,
        scale_up_latency_stated="scale_up_latency" in data,
        source=str(data.get("source", "")), notes=str(data.get("notes", "")),
    )

def _node_shape(data: Mapping[str, Any], acc: Accelerator, origin: str) -> tuple[int, int, int, float]:
    """GPUs per node, scale-up domain size, NICs per node and each NIC's rate (bytes/s, one way), checked:
    a cluster needs NICs with a rate, and a domain is whole hosts or a host holds whole domains."""
    gpn = get_int(data, "gpus_per_node", origin, default=8)
    domain = get_int(data, "scale_up_domain", origin, default=acc.scale_up_domain_size or gpn)
    if data.get("nics_per_node", gpn) == 0:
        raise SpecError(f"nics_per_node=0 in {origin}: a cluster without NICs cannot reach its scale-out network; "
                        f"use nics_per_node >= 1 (e.g. {gpn}, one per GPU)")
    nics = get_int(data, "nics_per_node", origin, default=gpn)
    if data.get("num_gpus_max") is not None:  # documentation only, but a number all the same
        get_int(data, "num_gpus_max", origin)
    nic_bw = (parse_bandwidth(data["nic_bandwidth"], what=f"{origin}: nic_bandwidth")
              if "nic_bandwidth" in data else acc.scale_out_bytes_per_s)
    if nics > 0 and nic_bw <= 0:
        raise SpecError(f"{origin} has nics_per_node={nics} but no nic_bandwidth; add e.g. nic_bandwidth: '400 Gb/s'")
    if domain % gpn and gpn % domain:
        raise SpecError(
            f"scale_up_domain={domain} and gpus_per_node={gpn} in {origin}: one must divide the other "
            "(a scale-up domain is a group of whole hosts, or a host holds whole domains)"
        )
    return gpn, domain, nics, nic_bw


def _scale_up_links(data: Mapping[str, Any], acc: Accelerator, origin: str) -> tuple[float, float, str]:
    """Scale-up rate per GPU, point-to-point rate (the accelerator's p2p share of a given scale-up rate when
    only that is set) and topology (switched, mesh or torus)."""
    up_bw = (parse_bandwidth(data["scale_up_bandwidth"], what=f"{origin}: scale_up_bandwidth")
             if "scale_up_bandwidth" in data else acc.scale_up_bytes_per_s)
    p2p_bw = (parse_bandwidth(data["scale_up_p2p_bandwidth"], what=f"{origin}: scale_up_p2p_bandwidth")
              if "scale_up_p2p_bandwidth" in data else acc.scale_up_p2p_bytes_per_s * up_bw / acc.scale_up_bytes_per_s)
    topo = str(data.get("scale_up_topology", acc.scale_up_topology))
    if topo not in ("switched", "mesh", "torus"):
        raise SpecError(f"scale_up_topology={short_repr(topo)} in {origin}; use switched, mesh or torus")
    return up_bw, p2p_bw, topo


def _sharp_checked(fabric: dict[str, Any], data: Mapping[str, Any], name: str | None, origin: str) -> dict[str, Any]:
    """The ``fabric:`` block, refused with one line when it sets ``sharp: true`` on an Ethernet (RoCE) fabric."""
    if fabric.get("sharp") and is_roce(name or "", data):
        raise SpecError(f"{origin}: fabric.sharp is true on an Ethernet (RoCE) scale-out; SHARP runs only in "
                        "InfiniBand switches (Quantum-2 SHARPv3, Quantum-X800 SHARPv4); set fabric: ib or drop sharp")
    return fabric


def _measured_on(raw: Any, origin: str) -> str:
    """The device named by a ``compute_measured_on:`` block (``measure compute``), or ''."""
    if raw is None:
        return ""
    raw = require_mapping(raw, f"{origin}: compute_measured_on")
    check_keys(raw, ("device", "torch", "cuda", "hip", "date"), f"{origin}: compute_measured_on")
    return str(raw.get("device", ""))


def _with_profile(cluster: Cluster, origin: str) -> Cluster:
    """``cluster`` under the compute profile in force (:mod:`tierwise.specs.compute_profile`): its rates over
    the cluster's own, and the device each was measured on checked against the accelerator."""
    prof = profile_in_force()
    if prof is None:
        return cluster
    if cluster.compute and cluster.compute_device:
        check_device(cluster.compute_device, cluster.accelerator.name, origin, prof.strict, prof.warnings)
    if not prof.compute:
        return cluster
    check_device(prof.device, cluster.accelerator.name, prof.origin, prof.strict, prof.warnings)
    return replace(cluster, compute={**dict(cluster.compute), **prof.compute}, compute_device=prof.device)


CLUSTER_FILE_NEEDS = "it needs cluster keys (accelerator, gpus_per_node, ... or base: a catalog cluster name)"
"""What a cluster file must hold, said when one is empty or not a mapping."""


def load_cluster(ref: str | Mapping[str, Any] | Path, parameters: Parameters | None = None) -> Cluster:
    """A catalog name, a mapping, or the path of a YAML file holding a cluster mapping; its latency defaults from
    ``parameters`` (:func:`cluster_from_mapping`; None, this being an entry point: :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    if isinstance(ref, Mapping):
        return _with_profile(cluster_from_mapping(ref, origin="cluster", parameters=parameters), "cluster")
    text = str(ref)
    if isinstance(ref, Path) or text.endswith((".yaml", ".yml", ".json")) or "/" in text:
        data = require_document(catalog.load_yaml_file(text, what="cluster file"), f"cluster file {text!r}",
                                CLUSTER_FILE_NEEDS)
        origin = f"cluster file {text!r}"
        return _with_profile(cluster_from_mapping(data, name=Path(text).stem, origin=origin, parameters=parameters),
                             origin)
    key = text.strip().lower()
    return _with_profile(cluster_from_mapping(catalog.entry("clusters", key), name=key, parameters=parameters,
                                              origin=f"catalog cluster {key!r}"), f"catalog cluster {key!r}")
