"""The analytic model's time for the collective the simulator ran, on the same fabric figures.

Calls :mod:`tierwise.collectives.alpha_beta` (never a copy of its formulas) with efficiency 1: ``b_in`` the
per-GPU one-way scale-up bandwidth, ``b_out`` each rank's share of its node's NICs
(``nic x nics_per_node / gpus_per_node``), and ``l_in``/``l_out`` the path latencies the simulator used.

The one form alpha_beta lacks is a single point-to-point transfer (permutation, pipeline sends):
``t = l + S / b`` -- a message of S bytes pays the path latency once and then streams at the path's
bottleneck bandwidth b (the alpha-beta model of Hockney, Parallel Computing 1994).
"""

from __future__ import annotations

from tierwise.collectives import alpha_beta
from tierwise.topology.graph import Fabric

__all__ = ["rank_bandwidths", "analytic_time"]


def rank_bandwidths(fab: Fabric) -> tuple[float, float]:
    """(b_in, b_out) one-way bytes/s per rank."""
    if fab.family == "torus":
        return fab.nic_bytes_per_s, fab.nic_bytes_per_s
    return fab.scale_up_bytes_per_s, fab.nic_bytes_per_s * fab.nics_per_node / fab.gpus_per_node


def analytic_time(fab: Fabric, kind: str, algorithm: str, size_bytes: float, n: int, nl: int,
                  l_in: float, l_out: float) -> float:
    b_in, b_out = rank_bandwidths(fab)
    args = (size_bytes, n, nl, b_in, b_out, l_in, l_out)
    if kind in ("all-reduce", "all-gather", "reduce-scatter"):
        fn = {"hierarchical": alpha_beta.hierarchical_time, "tree": alpha_beta.tree_time}.get(
            algorithm, alpha_beta.ring_time)
        return float(fn(kind, *args))
    if kind == "all-to-all":
        return float(alpha_beta.direct_all_to_all_time(*args))
    # permutation / pipeline: one point-to-point transfer per rank, l + S / b
    crosses = n > nl
    return float((l_out if crosses else l_in) + size_bytes / (b_out if crosses else b_in))
