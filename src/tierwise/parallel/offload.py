"""Activation offload to host memory (Megatron-Core ``cpu_offloading_num_layers``; plan
``activation_offload_layers``): the bytes it takes out of HBM and the time it costs on the host tier.

Megatron-Core's CPU offloading (``megatron/core/cpu_offload.py``, ``AsyncDoubleBufferGroupOffloadHandler``)
copies the saved activations of the first ``k`` transformer layers device-to-host on a side stream as soon as
each layer's forward has finished, and waits for layer ``i``'s copy at the end of layer ``i + 1``'s forward;
in the backward it prefetches layer ``i``'s activations host-to-device while layer ``i + 1``'s backward runs.
So each layer's copy overlaps one layer's compute: per offloaded layer and micro-batch

    exposed = max(0, x - f) (forward, device-to-host) + max(0, x - b) (backward, host-to-device)

with ``x = host latency + activation bytes of the layer / host rate`` the copy of one layer's activations,
``f`` one layer's forward and ``b`` its backward (twice the forward: two GEMMs per forward GEMM, Narayanan et
al. SC 2021 sec. 3.5). The host rate is the cluster's host tier one way (``host_bandwidth`` or the
accelerator's ``host_link``: PCIe 5.0 x16 63 GB/s one way on H100 / H200 servers; NVLink-C2C to Grace on
GB200 / GB300, 900 GB/s bidirectional = 450 GB/s one way) times ``collectives.link_efficiency.host`` (0.88:
H200 PCIe 5 H2D 55.4 of 63 GB/s, hardware-notes.md section 1). The copies run on the copy engines (DMA), not
the SMs, so no ``overlap_interference`` is charged; their HBM traffic (the host rate, under 6% of HBM
bandwidth on PCIe, under 6% on C2C against 8 TB/s) is left out.

Memory: the offloaded layers' activations leave HBM (:func:`offloaded_layers`): at least one layer (the last)
stays, as Megatron-Core requires ``cpu_offloading_num_layers < num_layers``; the one layer in flight to or from
the host reuses the slot its neighbour's backward frees (double buffer), counted as nothing more. Megatron-Core
refuses offload with pipeline parallelism and with recompute (``TransformerConfig.__post_init__``;
:data:`tierwise.specs.plan._OFFLOAD_RULES`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.errors import SpecError
from tierwise.specs.parameters import Parameters
from tierwise.specs.plan import PlanBatch

__all__ = ["Offload", "offloaded_layers", "host_copy_rate", "activation_offload"]


@dataclass(frozen=True)
class Offload:
    """Per micro-batch on the slowest stage: bytes copied each way, copy seconds (both ways), exposed seconds."""

    bytes_per_mb: np.ndarray
    time_s: np.ndarray
    exposed_s: np.ndarray


def offloaded_layers(plans: PlanBatch, layers) -> np.ndarray:
    """Layers of a stage whose activations are offloaded: the plan's ``activation_offload_layers``, at most all
    but one of the stage's layers (Megatron-Core keeps the last: ``cpu_offloading_num_layers < num_layers``)."""
    layers = np.asarray(layers, dtype=float)
    return np.clip(plans.activation_offload_layers.astype(float), 0.0, np.maximum(layers - 1.0, 0.0))


def host_copy_rate(cluster, parameters: Parameters) -> float:
    """Achievable one-way bytes/s of one GPU's host link under ``parameters`` (module docstring); 0 when the
    cluster has none."""
    eff = {**parameters.collectives["link_efficiency"], **cluster.efficiency}["host"]
    return float(cluster.host_bytes_per_s) * eff


def activation_offload(cluster, plans: PlanBatch, layers, fwd_per_layer, bwd_per_layer,
                       act_bytes_per_layer, *, parameters: Parameters) -> Offload:
    """The offload of one micro-batch on a stage of ``layers`` layers (module docstring): ``fwd_per_layer`` /
    ``bwd_per_layer`` one layer's forward / backward seconds, ``act_bytes_per_layer`` one layer's saved
    activation bytes for the micro-batch. A cluster without a host-link figure cannot price it: an error."""
    k = offloaded_layers(plans, layers)
    used = k > 0
    rate = host_copy_rate(cluster, parameters)
    act = np.asarray(act_bytes_per_layer, dtype=float)
    if rate <= 0 and np.any(used):
        raise SpecError(f"activation_offload_layers needs the host link's bandwidth, which cluster {cluster.name!r} "
                        "does not give; set host_bandwidth in the cluster file or activation_offload_layers: 0")
    x = np.where(used, cluster.host_latency_s + act / max(rate, 1e-30), 0.0)
    exposed = k * (np.maximum(x - fwd_per_layer, 0.0) + np.maximum(x - bwd_per_layer, 0.0))
    return Offload(bytes_per_mb=k * act, time_s=np.where(used, 2.0 * k * x, 0.0), exposed_s=np.where(used, exposed, 0.0))
