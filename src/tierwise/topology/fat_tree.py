"""Folded-Clos (fat-tree) scale-out fabrics of 1, 2 or 3 switch tiers built from radix-k switches.

Structure (Al-Fares, Loukissas & Vahdat, "A Scalable, Commodity Data Center Network Architecture",
SIGCOMM 2008, section 3; Leiserson, "Fat-trees", IEEE Trans. Computers 1985):

* a leaf has ``d`` ports down to NICs and ``u = k - d`` up; oversubscription ``o = d / u``
  (``d = k/2`` when non-blocking); we oversubscribe only the leaf tier, as most AI fabrics do;
* 2 tiers: leaf ``l``'s uplink ``a`` goes to spine ``a // w``, where ``w = min(u, floor(k / L))`` uplinks of
  every leaf share one spine (``w`` parallel links per leaf-spine pair), so ``S = ceil(u / w)`` spines serve
  ``L`` leaves: a full spine tier (``S = u``, one link per pair) only when ``L > k/2``. A spine's k ports
  reach at most k leaves, so at most ``k d`` NICs (``k^2/2`` non-blocking). Trimming the spines keeps every
  leaf's ``u`` uplinks and so the bisection; it only packs them onto fewer, fuller spines;
* 3 tiers: pods of ``k/2`` leaves and ``u`` aggregation switches (k/2 ports down, k/2 up); aggregation
  switch ``a`` of every pod joins core plane ``a``; at most k pods, so at most ``k (k/2) d`` NICs
  (``k^3/4`` non-blocking, e.g. 65,536 for radix 64, matching SemiAnalysis' Quantum-2 figure);
* a fabric smaller than the maximum keeps whole leaves and pods and trims the core: with P pods each
  core plane has ``C = (k/2)/t`` switches and each aggregation switch sends ``t`` parallel links to each
  core of its plane (``t`` the largest divisor of k/2 with ``t P <= k``), so no port bandwidth is lost.

Bisection (one-way, bytes/s): ``N/2 x b x min(1, u/d)`` for N NICs of bandwidth b -- the canonical cut
splits the leaves (and pods) in halves and the leaves' uplinks carry ``u/d`` of their NICs' rate; a
non-blocking Clos carries any permutation (Al-Fares et al. section 2.2), so no balanced cut is smaller.
"""

from __future__ import annotations

import math

import numpy as np

from tierwise.errors import TopologyError
from tierwise.topology.graph import SWITCH, GraphBuilder

__all__ = ["add_fat_tree", "max_endpoints", "leaf_ports", "fat_tree_bisection", "tiers_needed"]


def leaf_ports(radix: int, oversubscription: float) -> tuple[int, int]:
    """(down, up) ports of a leaf: ``d = round(k o / (1 + o))``, ``u = k - d``."""
    if oversubscription < 1:
        raise TopologyError(
            f"oversubscription {oversubscription:g} is below 1; use 1 (non-blocking) or more, e.g. 2 for 2:1"
        )
    if radix < 2 or radix % 2:
        raise TopologyError(f"radix {radix} must be an even number of ports >= 2, e.g. --radix 64")
    d = int(round(radix * oversubscription / (1.0 + oversubscription)))
    d = min(max(d, radix // 2), radix - 1)
    return d, radix - d


def max_endpoints(radix: int, tiers: int, oversubscription: float = 1.0) -> int:
    d, _ = leaf_ports(radix, oversubscription)
    if tiers == 1:
        return radix
    if tiers == 2:
        return radix * d
    if tiers == 3:
        return radix * (radix // 2) * d
    raise TopologyError(f"tiers {tiers} is not supported; use --tiers 1, 2 or 3")


def tiers_needed(num: int, radix: int, oversubscription: float = 1.0) -> int:
    """The fewest tiers (1-3) whose fat tree of radix ``radix`` holds ``num`` endpoints (3 when none does:
    :func:`add_fat_tree` then raises naming the radix the endpoints need)."""
    return next((t for t in (1, 2) if max_endpoints(radix, t, oversubscription) >= num), 3)


def _check_size(num: int, radix: int, tiers: int, o: float, num_gpus: int | None) -> None:
    cap = max_endpoints(radix, tiers, o)
    if num <= cap:
        return
    need = radix
    while max_endpoints(need, tiers, o) < num:
        need += 2
    if num_gpus is None:
        what = f"{num} NICs"
    else:
        what = f"{num_gpus} GPUs" + (f" ({num} NICs)" if num_gpus != num else "")
    more = f" or --tiers {tiers + 1}" if tiers < 3 else ""
    raise TopologyError(
        f"radix {radix} is too small for {what} in a {tiers}-tier fat tree (max {cap}); "
        f"use --radix >= {need}{more}"
    )


def fat_tree_bisection(num_nics: int, nic_bytes_per_s: float, radix: int, tiers: int, o: float) -> float:
    """One-way bisection bandwidth (bytes/s): ``N/2 x b x min(1, u/d)`` (module docstring)."""
    if tiers == 1:
        return num_nics / 2 * nic_bytes_per_s
    d, u = leaf_ports(radix, o)
    return num_nics / 2 * nic_bytes_per_s * min(1.0, u / d)


def add_fat_tree(gb: GraphBuilder, nic_nodes: np.ndarray, order: np.ndarray, *, radix: int, tiers: int,
                 oversubscription: float, cap: float, lat: float, num_gpus: int | None = None) -> dict:
    """Add one fat tree whose leaf ports take the NICs ``order`` (NIC indices, -1 = empty port).

    Returns routing tables with link ids; leaf and switch indices are local to this tree.
    """
    k = radix
    d, u = leaf_ports(k, oversubscription)
    order = np.asarray(order, dtype=np.int64)
    num = int((order >= 0).sum())
    _check_size(num, k, tiers, oversubscription, num_gpus)
    L = max(1, math.ceil(order.size / d))
    if tiers == 1 and L > 1:
        order = order[order >= 0]
        L = 1
        d = k
    pad = np.full(L * d, -1, dtype=np.int64)
    pad[: order.size] = order
    ports = np.nonzero(pad >= 0)[0]
    nics = pad[ports]
    leaves = gb.add_nodes(SWITCH, L, tier=1)
    nic_leaf_local = ports // d
    up, down = gb.add_cables(nic_nodes[nics], leaves[nic_leaf_local], cap, lat, tier=1)
    t = {"tiers": tiers, "k": k, "d": d, "u": u, "num_leaves": L, "nics": nics,
         "nic_leaf": nic_leaf_local, "nic_up": up, "nic_down": down}
    if tiers == 1:
        t["switches_per_tier"] = [1]
        return t
    leaf_up_group = gb.new_groups(L)
    leaf_down_group = gb.new_groups(L)
    lidx = np.repeat(np.arange(L), u)
    if tiers == 2:
        w = max(1, min(u, k // L))  # uplinks of one leaf on one spine (module docstring)
        S = -(-u // w)
        spines = gb.add_nodes(SWITCH, S, tier=2)
        a = np.tile(np.arange(u), L)
        fwd, back = gb.add_cables(leaves[lidx], spines[a // w], cap, lat, tier=2,
                                  group_ab=leaf_up_group[lidx], group_ba=leaf_down_group[lidx])
        t["leaf_up"] = fwd.reshape(L, u)
        t["spine_down"] = back.reshape(L, u).T.copy()  # [uplink a, leaf]: the link spine a // w -> leaf
        t["links_per_spine_pair"] = w
        t["switches_per_tier"] = [L, S]
        return t
    return _add_three_tiers(gb, t, leaves, lidx, up_group=leaf_up_group, down_group=leaf_down_group, cap=cap,
                            lat=lat)


def _add_three_tiers(gb: GraphBuilder, t: dict, leaves: np.ndarray, lidx: np.ndarray, *, up_group: np.ndarray,
                     down_group: np.ndarray, cap: float, lat: float) -> dict:
    """Add the aggregation and core tiers of a 3-tier tree above ``leaves`` (module docstring) to ``t``.

    ``lidx`` is the leaf of each leaf uplink; ``up_group``/``down_group`` the leaves' link groups.
    """
    k, u, L = t["k"], t["u"], t["num_leaves"]
    half = k // 2
    P = math.ceil(L / half)
    aggs = gb.add_nodes(SWITCH, P * u, tier=2)
    pod = lidx // half
    a = np.tile(np.arange(u), L)
    fwd, back = gb.add_cables(leaves[lidx], aggs[pod * u + a], cap, lat, tier=2,
                              group_ab=up_group[lidx], group_ba=down_group[lidx])
    t["leaf_up"] = fwd.reshape(L, u)
    agg_down = np.full((P, u, half), -1, dtype=np.int64)
    agg_down[pod, a, lidx % half] = back
    t["agg_down"] = agg_down
    trunk = max(x for x in range(1, half + 1) if half % x == 0 and x * P <= k)
    C = half // trunk
    cores = gb.add_nodes(SWITCH, u * C, tier=3)
    pod_up_group = gb.new_groups(P)
    pod_down_group = gb.new_groups(P)
    p3, a3, j3 = (x.ravel() for x in np.meshgrid(np.arange(P), np.arange(u), np.arange(half), indexing="ij"))
    fwd, back = gb.add_cables(aggs[p3 * u + a3], cores[a3 * C + j3 // trunk], cap, lat, tier=3,
                              group_ab=pod_up_group[p3], group_ba=pod_down_group[p3])
    t["agg_up"] = fwd.reshape(P, u, half)
    t["core_down"] = back.reshape(P, u, C, trunk).transpose(1, 2, 0, 3).copy()
    t.update(num_pods=P, cores_per_plane=C, trunk=trunk, switches_per_tier=[L, P * u, u * C])
    return t
