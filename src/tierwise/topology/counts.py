"""The inventory of a Clos fabric (fat-tree, rail-optimized, nvl72; any planes) counted in closed form, equal to
:func:`tierwise.topology.metrics.inventory` of the built graph (tested on every family, size, radix,
oversubscription, tier and plane count in ``tests/topology/test_counts.py``) without building 10^7 links: the
economics block and goodput's part counts at 2^20 GPUs need the counts, not the graph.

Per plane of ``n`` NICs on radix-``k`` switches with ``d`` down and ``u`` up ports per leaf (:mod:`.fat_tree`):
``L = ceil(n / d)`` leaves (one switch of ``k`` ports for 1 tier); 2 tiers: ``S = ceil(u / w)`` spines,
``w = max(1, min(u, floor(k / L)))``; 3 tiers: ``P = ceil(L / (k/2))`` pods of ``u`` aggregation switches and
``u C`` cores, ``C = (k/2) / t`` with ``t`` the largest divisor of ``k/2`` with ``t P <= k``. Cables: ``n`` NIC-to-leaf,
``L u`` leaf-to-spine (or aggregation), ``P u (k/2)`` aggregation-to-core; a switch port per cable end on a switch.
"""

from __future__ import annotations

import math

from tierwise.topology.fat_tree import _check_size, leaf_ports, tiers_needed
from tierwise.topology.spec import TopologySpec

__all__ = ["clos_inventory", "COUNTED_FAMILIES"]

COUNTED_FAMILIES = ("fat-tree", "rail-optimized", "nvl72")


def _plane(n: int, k: int, tiers: int, o: float) -> tuple[list[int], dict[int, int]]:
    """Switches per tier and cables per tier (1 = NIC-to-leaf) of one plane of ``n`` NICs."""
    d, u = leaf_ports(k, o)
    L = max(1, math.ceil(n / d))
    if tiers == 1:
        return [1], {1: n}
    if tiers == 2:
        w = max(1, min(u, k // L))
        return [L, -(-u // w)], {1: n, 2: L * u}
    half = k // 2
    P = math.ceil(L / half)
    trunk = max(x for x in range(1, half + 1) if half % x == 0 and x * P <= k)
    return [L, P * u, u * (half // trunk)], {1: n, 2: L * u, 3: P * u * half}


def _tiers(spec: TopologySpec, n: int) -> int:
    """As :func:`tierwise.topology.build._tiers`: the fewest that hold the NICs, or the requested when no more."""
    need = tiers_needed(n, spec.radix, spec.oversubscription)
    if spec.tiers is None or (spec.tiers > need and not spec.exact_tiers):
        return need
    return spec.tiers


def clos_inventory(spec: TopologySpec, nic_gbps: float) -> dict | None:
    """The :func:`~tierwise.topology.metrics.inventory` dict of ``spec`` (module docstring), or None for a family
    it does not count (rail-only, dragonfly, torus: build the graph)."""
    if spec.family not in COUNTED_FAMILIES:
        return None
    gpn, R, G = spec.gpus_per_node, spec.nics, spec.gpus
    nics = G // gpn * R
    per_plane = nics // spec.planes
    tiers = _tiers(spec, per_plane)
    _check_size(per_plane, spec.radix, tiers, spec.oversubscription, G)  # the builder's message
    switches, cables = _plane(per_plane, spec.radix, tiers, spec.oversubscription)
    switches = [s * spec.planes for s in switches]
    cables = {t: c * spec.planes for t, c in cables.items()}
    domain = spec.domain_size or (72 if spec.family == "nvl72" else gpn)
    scale_up = "nvswitch" if spec.family == "nvl72" else spec.scale_up
    if scale_up == "nvswitch" and domain > 1:
        scale_up_links = G
    elif scale_up == "mesh" and domain > 1:
        scale_up_links = G // domain * domain * (domain - 1) // 2
    else:
        scale_up_links = 0
    total = sum(cables.values())
    ports = cables[1] + 2 * (total - cables[1])
    speed = f"{nic_gbps:g}G"
    return {
        "num_switches": sum(switches),
        "switches_per_tier": {f"tier{t}": (switches[t - 1] if t <= len(switches) else 0) for t in (1, 2, 3)},
        "switch_radix": spec.radix,
        "num_nics": nics,
        "num_cables": total,
        "cables_by_speed": {speed: total},
        "cables_by_tier": {name: cables[t] for t, name in ((1, "access"), (2, "tier2"), (3, "tier3")) if t in cables},
        "scale_up_links": scale_up_links,
        "scale_up_copper_links": scale_up_links if scale_up == "nvswitch" and domain > gpn else 0,
        "switch_ports_used": ports,
        "transceivers_nic": cables[1],
        "transceivers_switch_twin": (ports + 1) // 2,
        "transceivers_by_speed": {f"{speed} single-port (NIC)": cables[1],
                                  f"2x{speed} twin-port (switch)": (ports + 1) // 2},
        "tiers_built": tiers,
    }
