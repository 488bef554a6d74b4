"""The global, documented parameters of the performance model (``catalog/parameters.yaml``).

They are fitted once, globally, and say how; nothing here is specific to one run or one source.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from tierwise.specs import catalog
from tierwise.units import parse_time

__all__ = ["Parameters", "load_parameters"]

PROTOCOLS = ("ll", "ll128", "simple")
LINK_CLASSES = ("nvlink", "pci", "net")


@dataclass(frozen=True)
class Parameters:
    latency: dict[str, float]
    """Default LL step latency per link class, seconds."""
    collectives: dict[str, Any]
    """Collective-model parameters with times parsed to seconds."""
    compute: dict[str, Any]
    raw: dict[str, Any]


def _times(table: dict[str, Any]) -> dict[str, float]:
    return {k: parse_time(v) for k, v in table.items()}


@functools.cache
def load_parameters() -> Parameters:
    raw = catalog.entries("parameters")
    col = dict(raw["collectives"])
    parsed = {
        "ll_step_latency": _times(col["ll_step_latency"]),
        "protocol_extra_step_latency": {p: _times(t) for p, t in col["protocol_extra_step_latency"].items()},
        "base_latency": {a: _times(t) for a, t in col["base_latency"].items()},
        "protocol_bandwidth_fraction": dict(col["protocol_bandwidth_fraction"]),
        "link_efficiency": dict(col["link_efficiency"]),
        "mesh_link_efficiency": float(col["mesh_link_efficiency"]),
        "nvls_efficiency": float(col["nvls_efficiency"]),
        "nvls_efficiency_by_generation": {k: float(v) for k, v in col["nvls_efficiency_by_generation"].items()},
        "all_to_all_efficiency": float(col["all_to_all_efficiency"]),
        "tree_efficiency": float(col["tree_efficiency"]),
        "simple_chunk_bytes": float(col["simple_chunk_bytes"]),
        "simple_channels": float(col["simple_channels"]),
        "launch_overhead": parse_time(col["launch_overhead"]),
        "launch_overhead_per_extra_gpu": parse_time(col["launch_overhead_per_extra_gpu_in_process"]),
        "nvls_latency": parse_time(col["nvls_latency"]),
        "ll_max_busbw": {k: float(v) * 1e9 for k, v in col["ll_max_busbw"].items()},
        "ll_max_busbw_multi_node": {k: float(v) * 1e9 for k, v in col["ll_max_busbw_multi_node"].items()},
        "ll128_per_channel_busbw": {k: float(v) * 1e9 for k, v in col["ll128_per_channel_busbw"].items()},
        "nvls_tree_net_latency": parse_time(col["nvls_tree_net_latency"]),
    }
    lat = {k: parse_time(v) for k, v in raw["latency"].items() if k != "source"}
    return Parameters(latency=lat, collectives=parsed, compute=dict(raw.get("compute", {})), raw=raw)
