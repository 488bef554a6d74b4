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

from tierwise.errors import TopologyError
from tierwise.topology import dragonfly, fat_tree, torus
from tierwise.topology.costs import (
    PLACEMENTS,
    by_reach,
    load_prices,
    network_cost,
    servers_cost,
    share_sensitivity,
)
from tierwise.topology.graph import SWITCH, Fabric
from tierwise.units import parse_bandwidth

__all__ = ["bisection_bytes_per_s", "endpoints", "canonical_partition", "hops", "hops_by_class", "inventory",
           "topology_report", "counted_report"]


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


def _tree_hops(fab: Fabric, s_nic: np.ndarray, t_nic: np.ndarray) -> np.ndarray:
    """Scale-out links crossed from NIC ``s_nic`` to NIC ``t_nic`` of the same tree (closed form: 2 through one
    leaf, 4 through a spine or an aggregation switch of the pod, 6 through a core; Al-Fares et al. 2008)."""
    tree_of = fab.tables["nic_tree"]
    out = np.zeros(s_nic.size, dtype=np.int64)
    for i, tr in enumerate(fab.tables["trees"]):
        m = tree_of[s_nic] == i
        ls, lt = tr["nic_leaf"][s_nic[m]], tr["nic_leaf"][t_nic[m]]
        h = np.where(ls == lt, 2, 4)
        if tr["tiers"] == 3:
            half = tr["k"] // 2
            h = np.where((ls != lt) & (ls // half != lt // half), 6, h)
        out[m] = h
    return out


def hops_by_class(fab: Fabric, max_pairs: int = 20000, seed: int = 0) -> dict | None:
    """Scale-out links crossed per traffic class, GPU pairs in different scale-up domains: **same rail** (the
    two GPUs use NICs of the same rail index, what ring and hierarchical collectives send) and **cross rail**.

    A rail-optimized fat tree puts a rail of ``d`` nodes on one leaf, so same-rail traffic takes 2 links where a
    node-major fat tree takes 4 or 6 (the seeds' "reduces the number of switch hops", true for same-rail
    traffic only). Rail-only has no path between rails: cross-rail traffic first crosses the scale-up
    network to the source node's GPU on the destination's rail (NCCL PXN; Wang et al. 2023 section 4), counted
    in ``scale_up_hops``. None for dragonfly and torus (no rails).
    """
    if fab.family in ("torus", "dragonfly") or "trees" not in fab.tables:
        return None
    R, gpn, G = fab.nics_per_node, fab.gpus_per_node, fab.num_gpus
    dom = max(fab.domain_size, 1)
    rng = np.random.default_rng(seed)
    s, d = rng.integers(0, G, max_pairs), rng.integers(0, G, max_pairs)
    far = (s // dom) != (d // dom)
    s, d = s[far], d[far]
    s_nic, t_nic = fab.gpu_nic[s], fab.gpu_nic[d]
    same = (s_nic % R) == (t_nic % R)
    tree_of = fab.tables["nic_tree"]
    cross_tree = tree_of[s_nic] != tree_of[t_nic]
    # PXN: hop inside the source node to its NIC on the destination's rail, then that rail's tree
    src = np.where(cross_tree, (s // gpn) * R + t_nic % R, s_nic)
    h = _tree_hops(fab, src, t_nic)
    scale_up = np.where(cross_tree, 2, 0)
    out = {}
    for name, m in (("same_rail", same), ("cross_rail", ~same)):
        if not m.any():
            continue
        out[name] = {"avg_scale_out_hops": float(h[m].mean()), "max_scale_out_hops": int(h[m].max()),
                     "avg_scale_up_hops": float(scale_up[m].mean()), "pairs": int(m.sum())}
    return out


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
    nvlink_copper = int((tiers == 0).sum()) if fab.scale_up == "nvswitch" and fab.domain_size > fab.gpus_per_node else 0
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
        "scale_up_copper_links": nvlink_copper,
        "switch_ports_used": switch_ports,
        "transceivers_nic": nic_ends if optical else 0,
        "transceivers_switch_twin": (switch_ports + 1) // 2 if optical else 0,
        "transceivers_by_speed": ({f"{speed} single-port (NIC)": nic_ends,
                                   f"2x{speed} twin-port (switch)": (switch_ports + 1) // 2} if optical else {}),
    }


_NICS_PER_RACK_8GPU = 32
"""NICs in one rack of 8-GPU servers: four DGX H100-class servers (~10.2 kW each) per ~40 kW rack (estimate)."""


def copper_access(fab: Fabric, placement: str) -> tuple[bool, str]:
    """Whether the NIC-to-leaf links are in-rack copper (``placement="rack"`` and a leaf's NICs in one rack)."""

    if placement not in PLACEMENTS:
        raise TopologyError(f"--leaf-placement {placement!r} is unknown; choose one of {', '.join(PLACEMENTS)}")
    if placement == "row" or fab.family in ("torus", "dragonfly"):
        return False, ""
    per_rack = fab.domain_size * fab.nics_per_node // fab.gpus_per_node if fab.domain_size > fab.gpus_per_node \
        else _NICS_PER_RACK_8GPU
    d = fab.tables["trees"][0]["d"]
    if fab.family != "fat-tree" or per_rack % d and d % per_rack:
        return False, (f"--leaf-placement rack: a {fab.family} leaf's {d} NIC ports take NICs from several racks "
                       f"({per_rack} NICs per rack), so its NIC links stay optical")
    return True, f"--leaf-placement rack: leaves at the top of the rack, {per_rack} NICs per rack, copper NIC links"


def topology_report(fab: Fabric, prices: dict | None = None, route_fn=None, *, accelerator: str | None = None,
                    gpu_power_w: float | None = None, fabric: str = "ib", placement: str = "row",
                    cpo: bool = False, sensitivity: bool = True, hop_classes: bool = True) -> dict:
    """Everything ``tierwise topo`` prints (``route_fn`` as in :func:`hops`); ``accelerator`` (a catalog name)
    prices the servers or racks the fabric joins (:func:`tierwise.topology.costs.servers_cost`);
    ``hop_classes=False`` leaves out the sampled hops per traffic class (the economics block does not print them)."""

    prices = prices or load_prices()
    inv = inventory(fab)
    h = hops(fab, route_fn)
    copper, copper_note = copper_access(fab, placement)
    servers = servers_cost(accelerator or "h100-sxm", fab.num_gpus, gpu_power_w, prices)
    kw = dict(fabric=fabric, copper_access=copper, cpo=cpo)
    cost = network_cost(inv, fab.num_gpus, fab.nic_bytes_per_s, prices, servers=servers, **kw)
    notes = list(fab.tables.get("notes", []))
    if copper_note:
        notes.append(copper_note)
    out = {
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
        "hops_by_class": hops_by_class(fab) if hop_classes else None,
        **{k: v for k, v in inv.items() if k not in ("num_switches",)},
        **cost.as_dict(),
        "servers": servers,
        "by_reach": by_reach(inv, copper),
        "notes": notes,
    }
    if sensitivity:
        out["network_share_range"] = share_sensitivity(
            inv, fab.num_gpus, fab.nic_bytes_per_s, prices, (accelerator or "h100-sxm", fab.num_gpus, gpu_power_w),
            **kw)
    return out


def counted_report(spec, inv: dict, prices: dict | None = None, *, accelerator: str | None = None,
                   gpu_power_w: float | None = None, fabric: str = "ib", cpo: bool = False) -> dict:
    """:func:`topology_report`'s inventory, cost, share and reach figures for a Clos fabric counted in closed form
    (:func:`tierwise.topology.counts.clos_inventory`, leaves a rack away: optical NIC links), without the graph:
    no hops (the diameter is ``2 x tiers``). What the economics block and ``design`` read at 2^20 GPUs."""

    prices = prices or load_prices()
    b = parse_bandwidth(spec.nic_bandwidth, what="--nic-bandwidth")
    servers = servers_cost(accelerator or "h100-sxm", spec.gpus, gpu_power_w, prices)
    kw = dict(fabric=fabric, copper_access=False, cpo=cpo)
    cost = network_cost(inv, spec.gpus, b, prices, servers=servers, **kw)
    tiers = inv["tiers_built"]
    domain = spec.domain_size or (72 if spec.family == "nvl72" else spec.gpus_per_node)
    params = {k: v for k, v in vars(spec).items() if v is not None}
    params.update(nics_per_node=spec.nics, domain_size=domain, tiers_built=tiers,
                  scale_up="nvswitch" if spec.family == "nvl72" else spec.scale_up)
    per_plane = inv["num_nics"] // spec.planes
    out = {
        "topology": spec.family, "params": params, "num_gpus": spec.gpus, "num_switches": inv["num_switches"],
        "num_links": inv["num_cables"],
        "num_links_note": "scale-out cables (each two one-way links); scale_up_links counted apart",
        "bisection_bytes_per_s": spec.planes * fat_tree.fat_tree_bisection(per_plane, b, spec.radix, tiers,
                                                                          spec.oversubscription),
        "bisection_note": "one-way, bytes/s, over balanced halves of the NICs",
        "diameter_hops": 2 * tiers, "avg_hops": None, "hops_by_class": None,
        **{k: v for k, v in inv.items() if k not in ("num_switches", "tiers_built")},
        **cost.as_dict(), "servers": servers, "by_reach": by_reach(inv, False), "notes": [],
        "counted": "closed form (topology/counts.py), equal to the built graph's inventory",
    }
    out["network_share_range"] = share_sensitivity(
        inv, spec.gpus, b, prices, (accelerator or "h100-sxm", spec.gpus, gpu_power_w), **kw)
    return out
