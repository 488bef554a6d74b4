"""The parameters of a fabric, from CLI flags or a topology YAML, validated once here.

Units are parsed on load (``"400 Gb/s"`` -> bytes/s one-way); unknown keys are an error naming the key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tierwise.errors import TopologyError, UnitError, did_you_mean
from tierwise.files import load_yaml, read_user_text, require_document, short_repr
from tierwise.limits import (
    MAX_FABRIC_GPUS,
    MAX_LATENCY_S,
    MAX_OVERSUBSCRIPTION,
    MAX_RADIX,
    check_float,
    check_int,
)
from tierwise.units import parse_bandwidth, parse_time

__all__ = ["TopologySpec", "FAMILIES", "load_topology_yaml", "spec_from_mapping"]

FAMILIES = ("fat-tree", "rail-optimized", "rail-only", "dragonfly", "torus", "nvl72")


@dataclass(frozen=True, kw_only=True)
class TopologySpec:
    family: str = "fat-tree"
    """One of :data:`FAMILIES`."""
    gpus: int = 1024
    gpus_per_node: int = 8
    nics_per_node: int | None = None
    """Scale-out NICs per node; default one per GPU."""
    radix: int = 64
    """Switch ports at the NIC speed."""
    tiers: int | None = None
    """Fat-tree tiers (1, 2 or 3); default (None) the fewest that hold the NICs. A request for more than the
    NICs need builds the tiers needed and notes it."""
    oversubscription: float = 1.0
    """Leaf downlinks : uplinks (1 = non-blocking)."""
    planes: int = 1
    """Independent Clos planes (fat-tree, rail-optimized, nvl72): a node's NIC rails split evenly over them, rails
    ``[p R/P, (p+1) R/P)`` on plane p; traffic between planes crosses the scale-up domain first (NCCL PXN), as
    on a rail-only fabric. Chosen by :func:`tierwise.topology.choose.choose_fabric` when one plane of 3 tiers
    cannot hold the NICs."""
    exact_tiers: bool = False
    """Build exactly ``tiers`` even when fewer hold the NICs (the testbed's two leaves joined by a shaped
    uplink: the uplink is the point, although one switch would hold its few nodes). Library use only."""
    nic_bandwidth: str = "400 Gb/s"
    scale_up: str = "nvswitch"
    """nvswitch (a crossbar per domain), mesh (switchless all-to-all links) or none."""
    scale_up_bandwidth: str | None = None
    """One-way per GPU; default 450 GB/s (H100 NVLink4, 900 GB/s bidirectional), 900 GB/s for nvl72
    (GB200 NVLink5, 1.8 TB/s bidirectional)."""
    domain_size: int | None = None
    """GPUs per scale-up domain; default the node (72 for nvl72)."""
    hop_latency: str = "300 ns"
    """Per scale-out link (switch traversal + wire); network.csv gives 130-500 ns per hop (low confidence)."""
    scale_up_latency: str = "250 ns"
    """Per scale-up link (estimate)."""
    dims: str = "8x8"
    """Torus dimensions, e.g. 8x8x8 (one GPU per torus node)."""
    groups: int | None = None
    """Dragonfly groups; default as many as the endpoints need."""

    @property
    def nics(self) -> int:
        return self.gpus_per_node if self.nics_per_node is None else self.nics_per_node


_KEYS = {f.name for f in dataclasses.fields(TopologySpec)}


def spec_from_mapping(data: dict, where: str = "topology") -> TopologySpec:
    """Build a spec from a mapping (YAML keys may use '-' or '_'); unknown keys raise TopologyError."""
    clean = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name == "topology":
            name = "family"
        if name not in _KEYS:
            raise TopologyError(
                f"unknown key {short_repr(key)} in {where}; allowed keys: {', '.join(sorted(_KEYS))}"
                f"{did_you_mean(name[:100], sorted(_KEYS))}"
            )
        _check_type(name, value, where)
        clean[name] = value
    family = str(clean.get("family", "fat-tree"))
    if family not in FAMILIES:
        raise TopologyError(f"unknown topology family {short_repr(family)}; choose one of {', '.join(FAMILIES)}")
    _check_numbers(clean, flags=where == "topology")
    return TopologySpec(**clean)


_INT_BOUNDS = {
    "gpus": (1, MAX_FABRIC_GPUS),
    "gpus_per_node": (1, MAX_FABRIC_GPUS),
    "nics_per_node": (1, MAX_FABRIC_GPUS),
    "radix": (2, MAX_RADIX),
    "tiers": (1, 3),
    "planes": (1, 8),
    "domain_size": (1, MAX_FABRIC_GPUS),
    "groups": (2, MAX_FABRIC_GPUS),
}
"""Counts of a fabric: 2^17 GPUs build in seconds; a dragonfly needs two groups; a switch at most 4,096 ports."""
_RATES = ("nic_bandwidth", "scale_up_bandwidth")
_LATENCIES = ("hop_latency", "scale_up_latency")


def _check_numbers(clean: dict, *, flags: bool) -> None:
    """Every count, rate and latency of a spec in range, named as the user wrote it (``--radix`` or ``radix``)."""

    def name(key: str) -> str:
        return "--" + key.replace("_", "-") if flags else key

    for key, (lo, hi) in _INT_BOUNDS.items():  # in this order: gpus bounds gpus_per_node, which bounds the NICs
        if clean.get(key) is not None:
            # the bound suggested is this fabric's where one is known, so that the value suggested is accepted
            if key == "gpus_per_node" and isinstance(clean.get("gpus"), int):
                hi = clean["gpus"]
            elif key == "nics_per_node" and isinstance(clean.get("gpus_per_node", 8), int):
                hi = clean.get("gpus_per_node", 8)
            clean[key] = check_int(clean[key], name(key), minimum=lo, maximum=hi, error=TopologyError)
    if clean.get("oversubscription") is not None:
        clean["oversubscription"] = check_float(
            clean["oversubscription"], name("oversubscription"), minimum=1.0, maximum=MAX_OVERSUBSCRIPTION,
            error=TopologyError, hint=" (1 = non-blocking, 2 = 2:1)")
    try:
        for key in _RATES:
            if clean.get(key) is not None:
                parse_bandwidth(clean[key], what=name(key))
        for key in _LATENCIES:
            if clean.get(key) is not None:
                parse_time(clean[key], what=name(key), maximum=MAX_LATENCY_S)
    except UnitError as exc:
        raise TopologyError(str(exc)) from None


_INT_KEYS = ("gpus", "gpus_per_node", "nics_per_node", "radix", "tiers", "planes", "domain_size", "groups")
_STR_KEYS = ("family", "nic_bandwidth", "scale_up", "scale_up_bandwidth", "hop_latency", "scale_up_latency", "dims")



def _check_type(name: str, value: object, where: str) -> None:
    """A value of the wrong type (a string where a count belongs, a list where a string belongs) is one line;
    ranges (and NaN or infinities) are checked by :func:`_check_numbers`."""
    if name in _INT_KEYS and (isinstance(value, bool) or not isinstance(value, int)):
        raise TopologyError(f"{name}={short_repr(value)} in {where} must be a whole number")
    if name == "oversubscription" and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise TopologyError(f"oversubscription={short_repr(value)} in {where} must be a finite number >= 1 "
                            "(1 = non-blocking)")
    if name in _STR_KEYS and not isinstance(value, str):
        example = {"dims": "'8x8x8'", "family": "fat-tree", "scale_up": "nvswitch"}.get(name, "'400 Gb/s'")
        raise TopologyError(f"{name}={short_repr(value)} in {where} must be a string such as {example}")


def load_topology_yaml(path: str) -> TopologySpec:
    """A topology YAML file through the guarded reader and strict YAML loader (:mod:`tierwise.files`)."""

    text = read_user_text(path, what="topology file", error=TopologyError)
    data = require_document(load_yaml(text, f"topology file {path!r}", error=TopologyError),
                            f"topology file {path!r}", "give keys such as family, gpus, radix", error=TopologyError)
    return spec_from_mapping(data, where=f"topology file {path!r}")
