"""Accelerator specs: dense peak FLOP/s per precision, HBM, and the per-accelerator link figures.

All bandwidths are stored **one-way per accelerator** in bytes/s; the datasheet's bidirectional figure is kept
beside it (``scale_up_bidirectional_bytes_per_s``) so the two are never confused. FLOP/s are **dense**
(no 2:4 structured sparsity).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierwise.errors import SpecError
from tierwise.files import short_repr
from tierwise.limits import check_float
from tierwise.specs import catalog
from tierwise.specs._mapping import check_keys, get_int, require_mapping
from tierwise.units import parse_bandwidth, parse_bytes

__all__ = ["Accelerator", "accelerator_from_mapping", "load_accelerator", "PRECISIONS"]

PRECISIONS = ("bf16", "fp8", "fp4")

_KEYS = (
    "display_name", "vendor", "peak_dense_tflops", "hbm_capacity", "hbm_type", "hbm_bandwidth", "scale_up",
    "host_link", "scale_out", "power_w", "power_term", "confidence", "source", "notes", "base", "generation",
)
_HOST_LINK_KEYS = ("name", "bandwidth_one_way", "memory_per_accelerator", "memory_source")
_SCALE_UP_KEYS = ("fabric", "bandwidth_bidirectional", "bandwidth_one_way", "p2p_one_way", "topology",
                  "domain_size", "domain_max")


@dataclass(frozen=True, kw_only=True)
class Accelerator:
    """One accelerator (GPU, TPU, ...)."""

    name: str
    display_name: str
    peak_dense_flops_per_s: Mapping[str, float]
    """Dense (no sparsity) peak by matmul precision: ``{"bf16": 989e12, "fp8": 1979e12}``."""
    hbm_capacity_bytes: float
    hbm_bytes_per_s: float
    scale_up_bytes_per_s: float
    """One-way scale-up bandwidth per accelerator (NVLink 4: 450e9, i.e. half of the datasheet's 900 GB/s)."""
    scale_up_bidirectional_bytes_per_s: float
    scale_up_p2p_bytes_per_s: float
    """One-way bandwidth to a single peer: equals the total on a switched fabric, one link on a mesh."""
    scale_up_topology: str
    """``switched`` (NVSwitch), ``mesh`` (point-to-point, no switch) or ``torus``."""
    scale_up_fabric: str = ""
    scale_up_domain_size: int = 1
    host_bytes_per_s: float = 0.0
    """One-way host link (PCIe) bandwidth."""
    host_link_name: str = ""
    host_memory_bytes: float = 0.0
    """Host (CPU) DRAM per accelerator in the reference server (catalog ``host_link.memory_per_accelerator``: the
    server's system memory over its accelerators); 0 = not known. Bounds what activation offload may park there
    (:mod:`tierwise.parallel.offload`)."""
    scale_out_bytes_per_s: float = 0.0
    """One-way NIC bandwidth per accelerator in a typical deployment."""
    power_w: float | None = None
    generation: str = ""
    """NVIDIA architecture (``ampere``, ``hopper``, ``blackwell``) for NCCL's per-generation protocol caps."""
    source: str = ""
    notes: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def peak_flops_per_s(self, precision: str) -> float:
        """Dense peak for ``precision``; an unsupported precision is a :class:`SpecError`."""
        try:
            return self.peak_dense_flops_per_s[precision]
        except KeyError:
            have = ", ".join(sorted(self.peak_dense_flops_per_s))
            raise SpecError(
                f"{self.name} has no {precision} matmul rate in the catalog (it has: {have}); use precision: bf16"
            ) from None


def accelerator_from_mapping(data: Mapping[str, Any], *, name: str, origin: str) -> Accelerator:
    """Build an :class:`Accelerator`; ``base:`` starts from a catalog entry and overrides its keys."""
    data = require_mapping(data, origin)
    if "base" in data:
        merged = dict(catalog.entry("accelerators", str(data["base"])))
        for key, value in data.items():
            if key == "base":
                continue
            if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        data = merged
    check_keys(data, _KEYS, origin, required=("peak_dense_tflops", "hbm_capacity", "hbm_bandwidth", "scale_up"))
    peaks = require_mapping(data["peak_dense_tflops"], f"{origin}: peak_dense_tflops")
    for precision, value in peaks.items():
        if precision not in PRECISIONS:
            raise SpecError(f"unknown precision {short_repr(precision)} in {origin}; use one of {', '.join(PRECISIONS)}")
        check_float(value, f"peak_dense_tflops.{precision}", minimum=1e-3, maximum=1e6,
                    error=SpecError, sep="=", where=f"in {origin}", hint=" (TFLOP/s)")
    up = require_mapping(data["scale_up"], f"{origin}: scale_up")
    check_keys(up, _SCALE_UP_KEYS, f"{origin}: scale_up", required=("bandwidth_one_way",))
    one_way = parse_bandwidth(up["bandwidth_one_way"], what=f"{origin}: scale_up.bandwidth_one_way")
    bidir = (parse_bandwidth(up["bandwidth_bidirectional"], what=f"{origin}: scale_up.bandwidth_bidirectional")
             if "bandwidth_bidirectional" in up else 2 * one_way)
    topology = str(up.get("topology", "switched"))
    if topology not in ("switched", "mesh", "torus"):
        raise SpecError(f"scale_up.topology={short_repr(topology)} in {origin}; use switched, mesh or torus")
    p2p = parse_bandwidth(up["p2p_one_way"], what=f"{origin}: scale_up.p2p_one_way") if "p2p_one_way" in up else one_way
    host = require_mapping(data.get("host_link", {}), f"{origin}: host_link")
    check_keys(host, _HOST_LINK_KEYS, f"{origin}: host_link")
    out = require_mapping(data.get("scale_out", {}), f"{origin}: scale_out")
    return Accelerator(
        name=name,
        display_name=str(data.get("display_name", name)),
        peak_dense_flops_per_s={k: float(v) * 1e12 for k, v in peaks.items()},
        hbm_capacity_bytes=parse_bytes(data["hbm_capacity"], what=f"{origin}: hbm_capacity"),
        hbm_bytes_per_s=parse_bandwidth(data["hbm_bandwidth"], what=f"{origin}: hbm_bandwidth"),
        scale_up_bytes_per_s=one_way,
        scale_up_bidirectional_bytes_per_s=bidir,
        scale_up_p2p_bytes_per_s=p2p,
        scale_up_topology=topology,
        scale_up_fabric=str(up.get("fabric", "")),
        scale_up_domain_size=get_int(up, "domain_size", f"{origin}: scale_up", default=1),
        host_bytes_per_s=(parse_bandwidth(host["bandwidth_one_way"], what=f"{origin}: host_link.bandwidth_one_way")
                          if "bandwidth_one_way" in host else 0.0),
        host_link_name=str(host.get("name", "")),
        host_memory_bytes=(parse_bytes(host["memory_per_accelerator"], what=f"{origin}: host_link.memory_per_accelerator")
                           if "memory_per_accelerator" in host else 0.0),
        scale_out_bytes_per_s=(parse_bandwidth(out["bandwidth_per_accelerator"],
                                               what=f"{origin}: scale_out.bandwidth_per_accelerator")
                               if "bandwidth_per_accelerator" in out else 0.0),
        power_w=(check_float(data["power_w"], "power_w", minimum=0.0, min_open=True, maximum=1e6, error=SpecError,
                             sep="=", where=f"in {origin}", hint=" (watts)")
                 if data.get("power_w") is not None else None),
        generation=str(data.get("generation", "")),
        source=str(data.get("source", "")),
        notes=str(data.get("notes", "")),
    )


def load_accelerator(ref: str | Mapping[str, Any]) -> Accelerator:
    """A catalog name or an inline mapping."""
    if isinstance(ref, Mapping):
        return accelerator_from_mapping(ref, name=str(ref.get("display_name", "custom")), origin="accelerator")
    key = str(ref).strip().lower()
    return accelerator_from_mapping(catalog.entry("accelerators", key), name=key, origin=f"catalog accelerator {key!r}")
