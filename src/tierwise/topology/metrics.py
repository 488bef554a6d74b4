"""Figures of a fabric: bisection bandwidth (closed form, and a min-cut check), hops, inventory.

Bisection bandwidth here is **one-way**: the bytes/s that can cross from one half of the endpoints to
the other in one direction, minimised over balanced halves. Closed forms are in each family's module:
fat tree / rail-optimized / NVL72 (:func:`.fat_tree.fat_tree_bisection`), rail-only (the sum of its
rails' trees), dragonfly (:func:`.dragonfly.dragonfly_bisection`, capped by the NICs), torus
(:func:`.torus.torus_bisection`). ``tests/topology/test_bisection.py`` checks each against the max flow
(= min cut) from one half to the other on small instances.
"""

from __future__ import annotations

import numpy as np

from tierwise.topology import dragonfly, fat_tree, torus
from tierwise.topology.graph import SWITCH, Fabric

__all__ = ["bisection_bytes_per_s", "endpoints", "canonical_partition", "hops", "inventory",
           "topology_report"]


def bisection_bytes_per_s(fab: Fabric) -> float:
    b = fab.nic_bytes_per_s
    t = fab.tables
    if fab.family == "torus":
        return torus.torus_bisection(t["dims"], b)
    if fab.family == "dragonfly":
        return min(fab.num_nics / 2 * b, dragonfly.dragonfly_bisection(t["groups"], fab.params["radix"], b, t["a"]))
    o = float(fab.params["oversubscription"])
    return sum(fat_tree.fat_tree_bisection(int((tr["nic_leaf"] >= 0).sum()), b, tr["k"], tr["tiers"], o)
               for tr in t["trees"])


def endpoints(fab: Fabric) -> np.ndarray:
    """Graph node ids of the fabric endpoints (NICs; GPUs for a torus)."""
    return fab.nic_node


def canonical_partition(fab: Fabric) -> np.ndarray:
    """Boolean mask over :func:`endpoints`: the closed form's cut (first half of leaves / groups / torus)."""
    t = fab.tables
    if fab.family == "torus":
        d = int(np.argmax(t["dims"]))
        return t["coords"][:, d] < t["dims"][d] // 2
    if fab.family == "dragonfly":
        group = t["nic_router"] // t["a"]
        return group < t["groups"] // 2
    leaf = np.zeros(fab.num_nics)
    for tr in t["trees"]:
        m = tr["nic_leaf"] >= 0
        leaf[m] = tr["nic_leaf"][m]
    order = np.argsort(leaf, kind="stable")
    mask = np.zeros(fab.num_nics, dtype=bool)
    mask[order[: fab.num_nics // 2]] = True
    return mask


def hops(fab: Fabric, route_fn=None, max_pairs: int = 20000, seed: int = 0) -> dict:
    """Scale-out links crossed NIC to NIC: diameter (closed form) and average (all pairs or a sample).

    ``route_fn(fab, src, dst) -> (paths, ok)`` is :func:`tierwise.netsim.routing.route`, passed in by the
    caller because topology sits below netsim (ARCHITECTURE.md: nothing flows upward); without it the
    average is None.
    """
    if fab.family == "torus":
        diameter = sum(k // 2 for k in fab.tables["dims"])
    elif fab.family == "dragonfly":
        diameter = 5
    else:
        diameter = 2 * max(tr["tiers"] for tr in fab.tables["trees"])
    dom = max(fab.domain_size, 1) if fab.scale_up != "none" else 1
    G = fab.num_gpus
    rng = np.random.default_rng(seed)
    if max_pairs >= G * G:
        s, d = np.repeat(np.arange(G), G), np.tile(np.arange(G), G)
    else:
        s, d = rng.integers(0, G, max_pairs), rng.integers(0, G, max_pairs)
    far = (s // dom) != (d // dom)
    if not far.any():
        return {"diameter_hops": 0, "avg_hops": 0.0, "hop_pairs": 0}
    if route_fn is None:
        return {"diameter_hops": int(diameter), "avg_hops": None, "hop_pairs": 0}
    paths, _ = route_fn(fab, s[far], d[far])
    out = (paths >= 0) & (fab.link_tier[np.maximum(paths, 0)] >= 1)
    return {"diameter_hops": int(diameter), "avg_hops": float(out.sum(axis=1).mean()),
            "hop_pairs": int(far.sum()), "max_hops_seen": int(out.sum(axis=1).max())}


def inventory(fab: Fabric) -> dict:
    """Switch, cable and transceiver counts (see :mod:`.costs` for the counting rules)."""
    is_sw = fab.node_kind == SWITCH
    per_tier = {f"tier{t}": int((is_sw & (fab.node_tier == t)).sum()) for t in (1, 2, 3)}
    fwd = np.unique(fab.link_cable, return_index=True)[1]
    tiers = fab.link_tier[fwd]
    src_sw = is_sw[fab.link_src[fwd]]
    dst_sw = is_sw[fab.link_dst[fwd]]
    out_cables = tiers >= 1
    speed = f"{fab.nic_bytes_per_s * 8 / 1e9:g}G"
    switch_ports = int((src_sw & out_cables).sum() + (dst_sw & out_cables).sum())
    nic_ends = int((out_cables & (~src_sw | ~dst_sw)).sum()) if fab.family != "torus" else 0
    optical = fab.family != "torus"
    return {
        "num_switches": int(is_sw.sum()),
        "switches_per_tier": per_tier,
        "switch_radix": int(fab.params.get("radix", 0)) if fab.family != "torus" else 0,
        "num_nics": fab.num_nics if fab.family != "torus" else 0,
        "num_cables": int(out_cables.sum()),
        "cables_by_speed": {speed: int(out_cables.sum())},
        "cables_by_tier": {name: int((tiers == t).sum()) for t, name in ((1, "access"), (2, "tier2"),
                                                                       (3, "tier3")) if (tiers == t).any()},
        "scale_up_links": int((tiers == 0).sum()),
        "switch_ports_used": switch_ports,
        "transceivers_nic": nic_ends if optical else 0,
        "transceivers_switch_twin": (switch_ports + 1) // 2 if optical else 0,
        "transceivers_by_speed": ({f"{speed} single-port (NIC)": nic_ends,
                                   f"2x{speed} twin-port (switch)": (switch_ports + 1) // 2} if optical else {}),
    }


def topology_report(fab: Fabric, prices: dict | None = None, route_fn=None) -> dict:
    """Everything ``tierwise topo`` prints (``route_fn`` as in :func:`hops`)."""
    from tierwise.topology.costs import load_prices, network_cost

    inv = inventory(fab)
    h = hops(fab, route_fn)
    cost = network_cost(inv, fab.num_gpus, fab.nic_bytes_per_s, prices or load_prices())
    return {
        "topology": fab.family,
        "params": fab.params,
        "num_gpus": fab.num_gpus,
        "num_switches": inv["num_switches"],
        "num_links": inv["num_cables"],
        "num_links_note": "scale-out cables (each two one-way links); scale_up_links counted apart",
        "bisection_bytes_per_s": bisection_bytes_per_s(fab),
        "bisection_note": "one-way, bytes/s, over balanced halves of the NICs",
        "diameter_hops": h["diameter_hops"],
        "avg_hops": h["avg_hops"],
        **{k: v for k, v in inv.items() if k not in ("num_switches",)},
        **cost,
    }
