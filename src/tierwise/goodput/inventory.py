"""How many of each part a job's GPUs depend on: GPUs, NICs, hosts from the cluster; leaf and spine switches
and switch-to-switch cables from the fabric the ``topo`` command builds (:mod:`tierwise.topology`); NVLink
switches per scale-up domain from the rate catalog."""

from __future__ import annotations

import math

__all__ = ["component_counts", "fabric_family"]


def fabric_family(cluster) -> str:
    """The topology family that models the cluster's scale-out fabric: ``nvl72`` for 72-GPU NVLink racks,
    else a rail-optimized fat tree (one leaf per NIC rail, the DGX SuperPOD layout)."""
    return "nvl72" if cluster.scale_up_domain == 72 else "rail-optimized"


def _nvlink_switches(cluster, rates: dict) -> tuple[int, str]:
    """NVLink switches in one scale-up domain and the catalog entry that says so (0 without NVSwitch)."""
    table = rates["nvlink_switches_per_domain"]
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
    return int(table[key]["value"]), table[key]["source"]


def _smallest_fabric(family: str, gpus: int, gpn: int, nics: int) -> dict:
    """The inventory of the fabric with the fewest tiers (1, 2, 3) of 64-port switches that holds ``gpus``."""
    from tierwise.errors import TopologyError
    from tierwise.topology import TopologySpec, build_fabric
    from tierwise.topology.metrics import inventory

    for tiers in (1, 2, 3):
        try:
            return inventory(build_fabric(TopologySpec(family=family, gpus=gpus, gpus_per_node=gpn,
                                                       nics_per_node=nics, tiers=tiers, radix=64)))
        except TopologyError:
            if tiers == 3:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def component_counts(cluster, num_gpus: int, rates: dict) -> tuple[dict[str, int], list[str]]:
    """Parts per ``per`` key of :data:`tierwise.goodput.rates.PER` for ``num_gpus`` GPUs, and how each was
    counted. The fabric is built at the job's size (whole scale-up domains), so its switches and cables are
    the ones the job's traffic crosses."""
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
        family = fabric_family(cluster)
        fab_gpus = domains * 72 if family == "nvl72" else hosts * gpn
        inv = _smallest_fabric(family, fab_gpus, gpn, cluster.nics_per_node)
        tiers = inv["switches_per_tier"]
        counts["leaf_switch"] = tiers.get("tier1", 0)
        counts["spine_switch"] = tiers.get("tier2", 0) + tiers.get("tier3", 0)
        counts["fabric_cable"] = inv["num_cables"] - inv["cables_by_tier"].get("access", 0)
        how.append(f"{family} fabric of 64-port switches (the topo inventory): {counts['leaf_switch']} leaf and "
                   f"{counts['spine_switch']} spine switches, {counts['fabric_cable']} switch-to-switch cables")
    per_domain, source = _nvlink_switches(cluster, rates)
    counts["nvlink_switch"] = per_domain * domains
    how.append(f"{per_domain} NVLink switches per {cluster.scale_up_domain}-GPU scale-up domain x {domains} ({source})")
    return counts, how
