"""Sourced figures of scale-up fabrics beyond one rack and of optics options (``design/scaleup.yaml``), and the
capex and power per GPU they add: used by the domain sweep (:mod:`.domain`), the power-capped design
(:mod:`.power`) and the designs compared (:mod:`.designs`, the UALink pod)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

from tierwise.errors import TierwiseError
from tierwise.files import load_yaml
from tierwise.specs.cluster import Cluster

__all__ = ["OPTICS", "ScaleUpExtra", "load_figures", "scale_up_extra", "value"]

OPTICS = ("pluggable", "lpo", "cpo")


def load_figures() -> dict:
    """The sourced figures of ``design/scaleup.yaml``."""
    text = resources.files("tierwise.design").joinpath("scaleup.yaml").read_text(encoding="utf-8")
    return load_yaml(text, "the shipped design/scaleup.yaml")


def value(entry) -> float:
    """A figure's number (an entry with ``value``, or a bare number)."""
    return float(entry["value"]) if isinstance(entry, dict) else float(entry)


@dataclass(frozen=True)
class ScaleUpExtra:
    """Capex and power per GPU a scale-up domain adds beyond one rack's copper (:func:`scale_up_extra`)."""

    usd_per_gpu: float
    w_per_gpu: float
    optical_ports_per_gpu: float
    """800G optical ports per GPU (0 inside a rack)."""
    switches_per_gpu: float
    """Scale-up switches (trays) per GPU: the rack's own plus the spine's."""
    optics: str | None
    """The optics option priced (``None`` inside a rack: no optics)."""
    basis: str

    def as_dict(self) -> dict[str, Any]:
        """The ``design --domain-sweep --json`` block (``optics`` only where optics are priced)."""
        return {k: v for k, v in asdict(self).items() if k != "optics" or v is not None}


def scale_up_extra(cluster: Cluster, size: int, figures: dict, optics: str = "pluggable", *,
                   ualink: bool = False) -> ScaleUpExtra:
    """Capex and power per GPU of the scale-up fabric beyond one rack's copper (module docstring): spine
    switches and 2 optical 800G ports per 800 Gb/s of the GPU's one-way scale-up rate (0 within a rack)."""
    if optics not in OPTICS:
        raise TierwiseError(f"--optics {optics!r}; choose one of {', '.join(OPTICS)}")
    nv = figures["nvlink"]
    trays_per_gpu = value(nv["trays_per_72_gpus"]) / 72
    if size <= 72 and not ualink:
        return ScaleUpExtra(usd_per_gpu=0.0, w_per_gpu=0.0, optical_ports_per_gpu=0.0, switches_per_gpu=trays_per_gpu,
                            optics=None, basis="inside one rack: copper NVLink spine, in the rack's price and power")
    if ualink:
        u = figures["ualink"]
        # x4 ports the accelerator's effective one-way rate takes (9 for the sweep's pod, 7 for ualink-pod-1024)
        port = value(u["port_gbps_one_way"]) * 1e9 / 8 * value(u["effective_fraction"])
        ports = round(cluster.scale_up_bytes_per_s / port)
        raw_gbps = ports * value(u["port_gbps_one_way"])
        spine_per_gpu = ports / value(u["switch_ports_800g"])
    else:
        raw_gbps = cluster.scale_up_bytes_per_s * 8 / 1e9
        spine_per_gpu = trays_per_gpu
    o = figures["optics"][optics]
    optical = 2 * raw_gbps / 800
    usd = optical * float(o["usd_per_800g_port"]) + spine_per_gpu * value(nv["tray_usd"])
    w = optical * float(o["w_per_800g_port"]) + spine_per_gpu * value(nv["tray_w"])
    return ScaleUpExtra(usd_per_gpu=usd, w_per_gpu=w, optical_ports_per_gpu=optical,
                        switches_per_gpu=trays_per_gpu + spine_per_gpu, optics=optics,
                        basis=f"spine {spine_per_gpu:.3f} switches per GPU + {optical:g} x 800G {o['name']} ports "
                              f"per GPU ({o['w_per_800g_port']} W, ${o['usd_per_800g_port']} each)")
