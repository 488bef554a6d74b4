"""Rail-optimized and rail-only scale-out fabrics.

* **Rail-optimized** (NVIDIA DGX SuperPOD reference architecture; Wang et al., "Rail-only: A Low-Cost
  High-Performance Network for Training LLMs with Trillion Parameters", arXiv 2307.12169, 2023, section 2):
  NIC r of every node in a scalable unit of ``d`` nodes plugs into the unit's leaf r (the "rail"), and the
  leaves join through spines. It is a fat tree whose leaf ports are filled rail-major instead of
  node-major: same switches and bisection, but same-rail traffic (what ring and hierarchical
  collectives send) stays one leaf away for d nodes.
* **Rail-only** (Wang et al. section 4): the spine is removed; each rail is its own (1- or 2-tier)
  network, and traffic between GPUs on different rails first crosses NVLink inside the source node to
  the GPU on the destination's rail (NCCL's PXN forwarding), then that rail.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rail_major_order", "rail_orders"]


def rail_major_order(num_nodes: int, nics_per_node: int, unit_nodes: int) -> np.ndarray:
    """NIC indices in leaf-port order for a rail-optimized fabric (-1 for empty ports).

    Scalable unit s, rail r, node i of the unit -> NIC ``(s*unit + i) * R + r``.
    """
    units = -(-num_nodes // unit_nodes)
    node = np.arange(units * unit_nodes).reshape(units, unit_nodes)
    nic = node[:, None, :] * nics_per_node + np.arange(nics_per_node)[None, :, None]
    nic = np.where(node[:, None, :] < num_nodes, nic, -1)
    return nic.ravel()


def rail_orders(num_nodes: int, nics_per_node: int) -> list[np.ndarray]:
    """One NIC list per rail (rail-only: a separate network per rail)."""
    return [np.arange(num_nodes) * nics_per_node + r for r in range(nics_per_node)]
