"""How many of each part a job's GPUs depend on: GPUs, NICs, hosts from the cluster; leaf and spine switches
and switch-to-switch cables from the fabric every command chooses (:func:`tierwise.topology.choose.choose_fabric`,
built as the ``topo`` command builds it); NVLink switches per scale-up domain from the rate catalog."""

from __future__ import annotations

import math

from tierwise.goodput.rates import RateCatalog
from tierwise.topology import build_fabric
from tierwise.topology.choose import FabricOverrides, choose_fabric
from tierwise.topology.counts import COUNTED_FAMILIES, clos_inventory
from tierwise.topology.fat_tree import leaf_ports
from tierwise.topology.metrics import inventory

__all__ = ["component_counts"]


def _nvlink_switches(cluster, rates: RateCatalog) -> tuple[int, str]:
    """NVLink switches in one scale-up domain and the catalog entry that says so (0 without NVSwitch)."""
    table = rates.nvlink_switches_per_domain
    if getattr(cluster, "scale_up_topology", "switched") != "switched" or cluster.scale_up_domain <= 1:
        return 0, "no NVLink switch (the scale-up links are point-to-point)"
    name = cluster.accelerator.name.lower()
    if cluster.scale_up_domain == 72:
        key = "nvl72"
    elif name.startswith("a100"):
        key = "a100"
    elif name.startswith(("h100", "h200", "h800", "h20")):
        key = "hopper"
    elif name.startswith(("b200", "b300", "gb")):
        key = "blackwell"
    else:
        return 0, f"no NVLink switch count for {cluster.accelerator.name} in the catalog; give nvlink_switch parts"
    return int(table[key].value), table[key].source


def _blast_radius(choice, inv: dict) -> str:
    """What one switch failure of each tier takes, from the fabric's shape (folded Clos, Al-Fares et al. 2008
    section 3: every leaf has ``u`` uplinks spread over the tier above, so a switch above the leaves cuts no NIC)."""
    spec = choice.spec
    d, u = leaf_ports(spec.radix, spec.oversubscription)
    tiers = inv["switches_per_tier"]
    if choice.tiers == 2:
        spines = tiers["tier2"] // spec.planes
        above = (f"a spine failure cuts no NIC and removes 1/{spines} of its plane's leaf uplinks "
                 f"({u} per leaf over {spines} spines), re-routed")
    else:
        cores = tiers["tier3"] // spec.planes
        above = (f"an aggregation switch failure cuts no NIC and removes 1/{u} of its pod's leaf uplinks; a core "
                 f"failure 1/{cores} of its plane's core capacity; both re-routed")
    return (f"blast radius: a leaf failure cuts {d} NIC ports (one rail of up to {d} hosts); {above} (the job "
            "restarts either way; a spine's failure costs bandwidth, not hosts)")


def component_counts(cluster, num_gpus: int, rates: RateCatalog,
                     overrides: FabricOverrides | None = None) -> tuple[dict[str, int], list[str]]:
    """Parts per ``per`` key of :data:`tierwise.goodput.rates.PER` for ``num_gpus`` GPUs, and how each was
    counted. The fabric is chosen and built at the job's size (whole servers or scale-up racks), so its switches
    and cables are the ones the job's traffic crosses: leaves (tier 1) and every switch above them (spines,
    aggregation and core switches of all planes)."""
    gpn = cluster.gpus_per_node
    hosts = math.ceil(num_gpus / gpn)
    domains = math.ceil(num_gpus / cluster.scale_up_domain)
    nics = hosts * cluster.nics_per_node
    hbm_gib = num_gpus * round(cluster.accelerator.hbm_capacity_bytes / 2**30)
    counts: dict[str, int] = {"gpu": num_gpus, "hbm_gib": hbm_gib, "host": hosts, "node": hosts, "nic": nics, "job": 1,
                              "leaf_switch": 0, "spine_switch": 0, "fabric_cable": 0}
    how = [f"{num_gpus} GPUs on {hosts} hosts of {gpn} GPUs, {nics} NICs ({cluster.nics_per_node} per host), "
           f"{hbm_gib:,} GiB of HBM"]
    if hosts > 1 or (domains > 1):
        choice = choose_fabric(cluster, num_gpus, overrides)
        gbps = cluster.nic_bytes_per_s * 8 / 1e9
        inv = clos_inventory(choice.spec, gbps) or inventory(build_fabric(choice.spec))
        tiers = inv["switches_per_tier"]
        counts["leaf_switch"] = tiers.get("tier1", 0)
        counts["spine_switch"] = tiers.get("tier2", 0) + tiers.get("tier3", 0)
        counts["fabric_cable"] = inv["num_cables"] - inv["cables_by_tier"].get("access", 0)
        how.append(f"fabric: {choice.reason}; {counts['leaf_switch']:,} leaf and {counts['spine_switch']:,} "
                   f"spine switches, {counts['fabric_cable']:,} switch-to-switch cables (the topo inventory)")
        if choice.spec.family in COUNTED_FAMILIES and choice.tiers > 1:
            how.append(_blast_radius(choice, inv))
    per_domain, source = _nvlink_switches(cluster, rates)
    counts["nvlink_switch"] = per_domain * domains
    how.append(f"{per_domain} NVLink switches per {cluster.scale_up_domain}-GPU scale-up domain x {domains} ({source})")
    return counts, how
