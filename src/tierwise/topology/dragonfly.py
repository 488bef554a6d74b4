"""Dragonfly (Kim, Dally, Scott & Abts, "Technology-Driven, Highly-Scalable Dragonfly Topology", ISCA 2008).

Groups of ``a`` routers, all-to-all local links inside a group; each router has ``p`` NICs and ``h``
global links. With radix k we take the paper's balanced choice ``a = 2p = 2h`` (section 3.1):
``p = h = k/4``, ``a = k/2`` (ports used ``p + a - 1 + h = k - 1``). Global port q of group G
(router ``q // h``) goes to group ``(G + 1 + q mod (g-1)) mod g`` (the consecutive arrangement), so with
the maximum ``g = a h + 1`` groups every pair of groups shares exactly one global link.

A fabric smaller than ``g`` full groups keeps ``g = max(2, ceil(E / (a p)))`` groups and trims every group to
``a' = ceil(E / (g p))`` routers (at least ``ceil((g - 1) / h)``, so each group still reaches every other):
no router is bought for NICs that are not there; the tables' ``a`` is the routers a group has.

Minimal routing (ECMP) takes local, global, local hops (at most 3 switch-to-switch hops). Under
adversarial traffic (every NIC of group G sends to group G+1) all ``a p`` NICs of a group share the one
global link to the next group, the paper's worst case (section 4.2). Adaptive routing is UGAL with
Valiant paths through intermediate groups (:func:`tierwise.netsim.routing.dragonfly_ugal`).

Bisection (one-way): cutting the groups in halves cuts ``floor(g/2) ceil(g/2)`` group pairs, each with at
least ``floor(a h / (g - 1))`` global links of bandwidth b: ``B = floor(g/2) ceil(g/2) floor(a h/(g-1)) b``
(exact when ``g - 1`` divides ``a h``, e.g. the maximum ``g = a h + 1``; Kim et al. section 3.2).
"""

from __future__ import annotations

import numpy as np

from tierwise.errors import TopologyError
from tierwise.topology.graph import SWITCH, GraphBuilder

__all__ = ["add_dragonfly", "dragonfly_shape", "dragonfly_bisection"]


def dragonfly_shape(radix: int) -> tuple[int, int, int]:
    """(p NICs per router, a routers per group, h global links per router)."""
    if radix < 4:
        raise TopologyError(f"radix {radix} is too small for a dragonfly; use --radix >= 4")
    return radix // 4, radix // 2, radix // 4


def dragonfly_bisection(groups: int, radix: int, b: float, routers_per_group: int | None = None) -> float:
    p, a, h = dragonfly_shape(radix)
    a = routers_per_group or a
    if groups < 2:
        return 0.0
    return (groups // 2) * (groups - groups // 2) * (a * h // (groups - 1)) * b


def add_dragonfly(gb: GraphBuilder, nic_nodes: np.ndarray, *, radix: int, groups: int | None, cap: float,
                  lat: float, num_gpus: int) -> dict:
    p, a, h = dragonfly_shape(radix)
    E = nic_nodes.size
    per_group = a * p
    g_max = a * h + 1
    g = groups if groups is not None else -(-E // per_group)
    if g > g_max or g * per_group < E:
        raise TopologyError(
            f"radix {radix} is too small for {num_gpus} GPUs ({E} NICs) in a dragonfly "
            f"(max {g_max} groups x {per_group} NICs = {g_max * per_group}); use a larger --radix"
        )
    g = max(g, 2)
    if groups is None:  # trim the groups to the NICs they serve (module docstring)
        a = max(-(-E // (g * p)), -(-(g - 1) // h), 1)
    routers = gb.add_nodes(SWITCH, g * a, tier=1)
    nic_router = np.arange(E) // p
    up, down = gb.add_cables(nic_nodes, routers[nic_router], cap, lat, tier=1)
    # local all-to-all inside each group
    i, j = np.triu_indices(a, k=1)
    G = np.repeat(np.arange(g), i.size)
    ri, rj = np.tile(i, g), np.tile(j, g)
    fwd, back = gb.add_cables(routers[G * a + ri], routers[G * a + rj], cap, lat, tier=2)
    local = np.full((g, a, a), -1, dtype=np.int64)
    local[G, ri, rj] = fwd
    local[G, rj, ri] = back
    # global links, consecutive arrangement
    ports = a * h
    M = -(-ports // (g - 1))
    Gs = np.repeat(np.arange(g), ports)
    q = np.tile(np.arange(ports), g)
    off = q % (g - 1)
    m = q // (g - 1)
    Hs = (Gs + 1 + off) % g
    off_back = (Gs - Hs - 1) % g
    q_back = off_back + m * (g - 1)
    keep = (Gs < Hs) & (q_back < ports)
    Gs, Hs, q, q_back, m = Gs[keep], Hs[keep], q[keep], q_back[keep], m[keep]
    pair_group = gb.new_groups(g * g)
    fwd, back = gb.add_cables(routers[Gs * a + q // h], routers[Hs * a + q_back // h], cap, lat, tier=3,
                              group_ab=pair_group[Gs * g + Hs], group_ba=pair_group[Hs * g + Gs])
    glob = np.full((g, g, M), -1, dtype=np.int64)
    glob[Gs, Hs, m] = fwd
    glob[Hs, Gs, m] = back
    glob_count = (glob >= 0).sum(axis=2)
    return {"p": p, "a": a, "h": h, "groups": g, "nic_router": nic_router, "nic_up": up, "nic_down": down,
            "local": local, "glob": glob, "glob_count": glob_count, "router_base": int(routers[0]),
            "switches_per_tier": [g * a]}
