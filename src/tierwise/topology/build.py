"""Build a :class:`~tierwise.topology.graph.Fabric` from a :class:`~tierwise.topology.spec.TopologySpec`.

The steps: check the counts, add the GPUs and their scale-up domains, add the NICs (endpoints of the
scale-out fabric; GPU i of a node uses NIC ``i * nics / gpus_per_node``), then the family's fabric.
"""

from __future__ import annotations

import numpy as np

from tierwise.errors import TopologyError
from tierwise.topology import dragonfly, fat_tree, rail, scaleup, torus
from tierwise.topology.fat_tree import tiers_needed
from tierwise.topology.graph import NIC, Fabric, GraphBuilder
from tierwise.topology.spec import TopologySpec
from tierwise.units import parse_bandwidth, parse_time

__all__ = ["build_fabric"]


def _check_counts(spec: TopologySpec) -> tuple[int, str]:
    if spec.gpus < 1:
        raise TopologyError(f"--gpus {spec.gpus} must be at least 1")
    if spec.family == "torus":
        return 1, "none"
    gpn, nics = spec.gpus_per_node, spec.nics
    if gpn < 1 or spec.gpus % gpn:
        raise TopologyError(f"--gpus {spec.gpus} is not a multiple of --gpus-per-node {gpn}")
    if nics < 1 or (gpn % nics and nics % gpn):
        raise TopologyError(f"--nics-per-node {nics} must divide or be a multiple of --gpus-per-node {gpn}")
    if nics > gpn:
        raise TopologyError(f"--nics-per-node {nics} > --gpus-per-node {gpn} is not modelled; use <= {gpn}")
    scale_up = spec.scale_up
    domain = spec.domain_size or (72 if spec.family == "nvl72" else gpn)
    if spec.family == "nvl72":
        scale_up = "nvswitch"
    if scale_up not in ("nvswitch", "mesh", "none"):
        raise TopologyError(f"--scale-up {scale_up!r} is unknown; choose nvswitch, mesh or none")
    if domain % gpn or spec.gpus % domain:
        raise TopologyError(f"scale-up domain of {domain} GPUs must be a multiple of --gpus-per-node {gpn} "
                            f"and divide --gpus {spec.gpus}")
    if scale_up == "mesh" and domain != gpn:
        raise TopologyError("a switchless mesh spans one node; drop --domain-size or use --scale-up nvswitch")
    return domain, scale_up


def build_fabric(spec: TopologySpec) -> Fabric:
    """Build the fabric; raises TopologyError naming the bad value and the fix."""

    domain, scale_up = _check_counts(spec)
    b_nic = parse_bandwidth(spec.nic_bandwidth, what="--nic-bandwidth")
    default_in = "900 GB/s" if spec.family == "nvl72" else "450 GB/s"
    b_in = parse_bandwidth(spec.scale_up_bandwidth or default_in, what="--scale-up-bandwidth")
    lat = parse_time(spec.hop_latency, what="--hop-latency")
    lat_in = parse_time(spec.scale_up_latency, what="scale_up_latency")
    gb = GraphBuilder()
    G = spec.gpus
    common = dict(family=spec.family, params=_params(spec, domain, scale_up), num_gpus=G,
                  nic_bytes_per_s=b_nic, scale_up_bytes_per_s=b_in)
    if spec.family == "torus":
        dims = torus.parse_dims(spec.dims, G)
        gb.add_nodes(0, G)
        tables = torus.add_torus(gb, dims, b_nic, lat)
        ids = np.arange(G)
        return gb.finish(gpus_per_node=1, nics_per_node=1, domain_size=1, scale_up="none", gpu_nic=ids,
                         nic_node=ids, tables=tables, **common)
    tables = scaleup.add_scale_up(gb, G, domain, scale_up, b_in, lat_in)
    gpn, R = spec.gpus_per_node, spec.nics
    num_nodes = G // gpn
    nic_nodes = gb.add_nodes(NIC, num_nodes * R)
    gpu = np.arange(G)
    gpu_nic = (gpu // gpn) * R + (gpu % gpn) * R // gpn
    o = float(spec.oversubscription)
    if o < 1:
        fat_tree.leaf_ports(max(spec.radix, 2) + max(spec.radix, 2) % 2, o)  # raises the message
    kw = dict(radix=spec.radix, oversubscription=o, cap=b_nic, lat=lat, num_gpus=G)
    notes: list[str] = []
    if spec.family in ("fat-tree", "rail-optimized", "nvl72"):
        trees = [fat_tree.add_fat_tree(gb, nic_nodes, order, tiers=_tiers(spec, order.size, o, notes), **kw)
                 for order in _plane_orders(spec, num_nodes, R, o)]
    elif spec.family == "rail-only":
        # each rail is its own Clos sized to its NICs (Wang et al. 2023 section 4)
        trees = [fat_tree.add_fat_tree(gb, nic_nodes, order,
                                       tiers=fat_tree.tiers_needed(order.size, spec.radix, o), **kw)
                 for order in rail.rail_switch_orders(num_nodes, R, spec.radix)]
    elif spec.family == "dragonfly":
        tables.update(dragonfly.add_dragonfly(gb, nic_nodes, radix=spec.radix, groups=spec.groups,
                                              cap=b_nic, lat=lat, num_gpus=G))
        trees = []
    else:
        raise TopologyError(f"unknown topology family {spec.family!r}")
    if trees:
        nic_tree = np.full(num_nodes * R, -1, dtype=np.int64)
        for i, t in enumerate(trees):
            nic_tree[t["nics"]] = i
            # per-NIC lookups indexed by NIC id
            for key in ("nic_leaf", "nic_up", "nic_down"):
                full = np.full(num_nodes * R, -1, dtype=np.int64)
                full[t["nics"]] = t[key]
                t[key] = full
        tables["trees"] = trees
        tables["nic_tree"] = nic_tree
        common["params"]["tiers_built"] = max(t["tiers"] for t in trees)
    tables["notes"] = notes
    return gb.finish(gpus_per_node=gpn, nics_per_node=R, domain_size=domain, scale_up=scale_up,
                     gpu_nic=gpu_nic, nic_node=nic_nodes, tables=tables, **common)


def _plane_orders(spec: TopologySpec, num_nodes: int, R: int, o: float) -> list[np.ndarray]:
    """NIC lists in leaf-port order, one per plane: node-major (fat-tree) or rail-major (rail-optimized, nvl72);
    plane p takes rails ``[p R/P, (p+1) R/P)`` of every node (:attr:`TopologySpec.planes`)."""
    P = spec.planes
    if R % P:
        raise TopologyError(f"planes={P} must divide the {R} NICs per node; use planes in "
                            f"{{{', '.join(str(p) for p in range(1, R + 1) if R % p == 0)}}}")
    if spec.family == "fat-tree":
        order = np.arange(num_nodes * R)
    else:
        order = rail.rail_major_order(num_nodes, R, fat_tree.leaf_ports(spec.radix, o)[0])
    if P == 1:
        return [order]
    plane = (order % R) // (R // P)
    return [order[plane == p] for p in range(P)]


def _tiers(spec: TopologySpec, num_nics: int, o: float, notes: list[str]) -> int:
    """The tiers to build: the fewest that hold the NICs, or the requested ``tiers`` when that is no more.

    A request for more tiers than the NICs need builds only the tiers needed (an extra tier would be idle
    switches: with one pod a core tier carries no traffic) and says so in ``notes``.
    """

    need = tiers_needed(num_nics, spec.radix, o)
    if spec.tiers is None:
        return need
    if spec.tiers > need and not spec.exact_tiers:
        notes.append(f"--tiers {spec.tiers} is more than {num_nics} NICs need at radix {spec.radix}: "
                     f"built {need} tier{'s' if need > 1 else ''} (a further tier would be idle switches)")
        return need
    return spec.tiers


def _params(spec: TopologySpec, domain: int, scale_up: str) -> dict:
    out = {k: v for k, v in vars(spec).items() if v is not None}
    out["nics_per_node"] = spec.nics
    out["domain_size"] = domain
    out["scale_up"] = scale_up
    return out
