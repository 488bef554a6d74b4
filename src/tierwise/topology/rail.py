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

__all__ = ["rail_major_order", "rail_orders", "rail_switch_orders"]


def rail_major_order(num_nodes: int, nics_per_node: int, unit_nodes: int) -> np.ndarray:
    """NIC indices in leaf-port order for a rail-optimized fabric.

    Scalable units of ``unit_nodes`` nodes (the last may be smaller); inside a unit, rail r of every node
    in turn: unit s, rail r, node i -> NIC ``(s*unit + i) * R + r``. No port is left empty, so the leaves
    are as many as a fat tree's (a unit smaller than a leaf's ports puts several rails on one leaf).
    """
    out = []
    for start in range(0, num_nodes, unit_nodes):
        node = np.arange(start, min(start + unit_nodes, num_nodes))
        out.append((node[None, :] * nics_per_node + np.arange(nics_per_node)[:, None]).ravel())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def rail_orders(num_nodes: int, nics_per_node: int) -> list[np.ndarray]:
    """One NIC list per rail (rail-only: a separate network per rail)."""
    return [np.arange(num_nodes) * nics_per_node + r for r in range(nics_per_node)]


def rail_switch_orders(num_nodes: int, nics_per_node: int, radix: int) -> list[np.ndarray]:
    """NIC lists of the rail-only fabric's separate networks: one per rail, except that rails small enough
    to share one switch (``num_nodes <= radix / 2``) share it, ``floor(radix / num_nodes)`` rails per switch.

    A rail of n <= radix NICs needs one switch; eight 8-NIC rails on eight 64-port switches would buy more
    switches than a fat tree over the same NICs, so they share (the switch then also joins its rails, which
    costs nothing and only shortens cross-rail paths).
    """
    rails = rail_orders(num_nodes, nics_per_node)
    per = radix // num_nodes if num_nodes <= radix // 2 else 1
    if per <= 1:
        return rails
    return [np.concatenate(rails[i:i + per]) for i in range(0, len(rails), per)]
