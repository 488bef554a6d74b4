"""Fault domains: what one failure takes out, given the cluster and the plan.

In synchronous data-parallel training every interruption stops the whole job (all ranks wait on every
collective), so the restart count does not depend on the fault domain. What does:

* the **unit** to exclude and replace: the failed part's host (an 8-GPU node, an NVL72 compute tray) or
  the whole scale-up domain (an NVL72 rack) when the plan's scale-up group cannot be re-formed on the
  rack's remaining GPUs;
* **GPUs unavailable** until repair: ``D - floor((D - n) / g) g`` for a domain of ``D`` GPUs, ``n`` GPUs
  per host and a plan whose groups inside the domain hold ``g`` GPUs (the rack keeps only whole groups);
* the **spares** that a restart without waiting needs, at that granularity (:func:`spares_needed`).

NVIDIA's NVLink partition states (NMX-Manager "Partition Health", reliability-notes §13): DEGRADED, some
GPUs parked with health NO_NVLINK while the rest keep full bandwidth (operational); BANDWIDTH (adaptive
mode), trunk links missing and all GPUs at reduced bandwidth (operational); UNHEALTHY, e.g. a lost NVLink
switch in full-bandwidth mode (not operational).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["scale_up_group", "fault_domain", "spares_needed", "DEGRADED_STATES"]

DEGRADED_STATES = {
    "DEGRADED": "failed GPUs parked (NO_NVLINK), the rest of the NVLink partition at full bandwidth",
    "BANDWIDTH": "trunk links missing: every GPU still communicates, at reduced bandwidth (adaptive mode)",
    "UNHEALTHY": "an NVLink switch lost in full-bandwidth mode: the partition is not operational",
}
"""NVIDIA NMX-Manager partition health states (reliability-notes §13, R21a)."""


def scale_up_group(plan_ranks: dict[str, int], plan_tiers: dict[str, str], domain: int) -> int:
    """GPUs inside one scale-up domain that one model-replica piece couples: the product of the group sizes
    of the axes the estimator places on the scale-up tier (or inside one GPU), at most the domain."""
    g = 1
    for axis, ranks in plan_ranks.items():
        if ranks > 1 and plan_tiers.get(axis) in ("local", "scale_up"):
            g *= ranks
    return max(1, min(g, domain))


def fault_domain(cluster, group: int) -> dict[str, Any]:
    """The unit a GPU/host failure excludes, the GPUs it makes unavailable, and why (for the output)."""
    d, n = cluster.scale_up_domain, cluster.gpus_per_node
    keep = ((d - n) // group) * group if d > n else 0
    lost = d - keep if d > n else n
    rack = d > n and lost > n
    unit = "rack" if rack else "node"
    why = []
    if d > n:
        why.append(f"a {d}-GPU NVLink domain spans {d // n} hosts of {n} GPUs: a failed GPU or host is parked "
                   f"(partition state DEGRADED: {DEGRADED_STATES['DEGRADED']})")
        if rack:
            why.append(f"the plan couples {group} GPUs inside the domain, so the other {d - n} GPUs of the rack "
                       f"hold only {keep // group if group else 0} whole groups: {lost} GPUs are unavailable per "
                       "failure and the job needs a spare rack to restart at full size")
        else:
            why.append(f"the plan couples {group} GPUs inside the domain, so the rack's other GPUs still hold whole "
                       f"groups: only the {n}-GPU host is excluded (the rack runs DEGRADED)")
        why.append(f"an NVLink switch failure makes the rack UNHEALTHY in full-bandwidth mode ({d} GPUs out); in "
                   f"adaptive mode it runs at reduced bandwidth (BANDWIDTH state)")
    else:
        why.append(f"the scale-up domain is the {n}-GPU node: a GPU, NIC, NVSwitch or host failure excludes "
                   f"that node ({n} GPUs) and a spare node replaces it")
    return {"unit": unit, "unit_gpus": d if rack else n, "scale_up_group_gpus": group,
            "gpus_unavailable_per_failure": lost, "scale_up_domain_gpus": d, "gpus_per_host": n, "why": why}


def spares_needed(unit_failures_per_day: float, repair_s: float, quantile: float = 0.99) -> int:
    """Spare units that cover the units in repair with probability ``quantile``.

    Units in repair at a random time are Poisson with mean ``lambda x repair`` (an M/G/infinity queue:
    Little's law gives the mean, Palm's theorem the Poisson law), so the spare pool is its quantile.
    """
    from scipy.stats import poisson

    mean = unit_failures_per_day * repair_s / 86400.0
    return int(poisson.ppf(quantile, mean)) if mean > 0 else 0


def unit_of(component: dict[str, Any], domain: dict[str, Any]) -> tuple[str | None, int]:
    """(unit excluded, GPUs unavailable) for one failure of ``component`` under ``domain``."""
    per, kind = component["per"], component["kind"]
    if kind in ("software", "maintenance") or per in ("leaf_switch", "spine_switch", "fabric_cable", "job"):
        return None, 0  # the job restarts in place; the fabric routes around the part
    if per == "nvlink_switch" and domain["scale_up_domain_gpus"] > domain["gpus_per_host"]:
        return "rack", domain["scale_up_domain_gpus"]
    return domain["unit"], domain["gpus_unavailable_per_failure"]


def ceil_div(a: int, b: int) -> int:
    return math.ceil(a / b)
