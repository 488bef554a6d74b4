"""Scale-up domains: an 8-GPU NVSwitch node, an NVL72 rack, or a switchless full mesh.

* NVSwitch node / NVL72: the domain's switches form one non-blocking crossbar (DGX H100: 4 NVSwitch chips,
  18 NVLink4 links per GPU, 900 GB/s bidirectional = 450 GB/s one-way per GPU; GB200 NVL72: 9 switch
  trays joining 72 GPUs at 900 GB/s one-way each, NVIDIA datasheets via hardware-notes.md). We model it
  as GPU -> crossbar -> GPU with the per-GPU one-way bandwidth on each GPU's link, which is exact for a
  crossbar whose only constraints are the GPU ports.
* switchless mesh (e.g. AMD MI300X's 7 Infinity Fabric links per GPU): a direct link between every pair
  of the d GPUs of a domain, each ``b / (d - 1)``.
"""

from __future__ import annotations

import numpy as np

from tierwise.topology.graph import GPU, SCALEUP_SWITCH, GraphBuilder

__all__ = ["add_scale_up"]


def add_scale_up(gb: GraphBuilder, num_gpus: int, domain_size: int, kind: str, b_in: float, lat: float) -> dict:
    """Add GPUs (node ids 0..num_gpus-1) and their scale-up links; return routing tables."""
    gpus = gb.add_nodes(GPU, num_gpus)
    tables: dict = {}
    if kind == "none" or domain_size <= 1:
        return tables
    num_domains = num_gpus // domain_size
    if kind == "nvswitch":
        sw = gb.add_nodes(SCALEUP_SWITCH, num_domains)
        up, down = gb.add_cables(gpus, sw[gpus // domain_size], b_in, lat, tier=0)
        tables["gpu_up"], tables["gpu_down"] = up, down
    elif kind == "mesh":
        d = domain_size
        i, j = np.triu_indices(d, k=1)
        base = (np.arange(num_domains) * d)[:, None]
        a, b = (base + i).ravel(), (base + j).ravel()
        fwd, back = gb.add_cables(a, b, b_in / (d - 1), lat, tier=0)
        # mesh[g, local peer] -> link id
        mesh = np.full((num_gpus, d), -1, dtype=np.int64)
        mesh[a, b % d] = fwd
        mesh[b, a % d] = back
        tables["mesh"] = mesh
    else:
        raise ValueError(kind)
    return tables
