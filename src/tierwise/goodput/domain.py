"""Fault domains: what one failure takes out, given the cluster and the plan.

In synchronous data-parallel training every interruption stops the whole job (all ranks wait on every
collective), so the restart count does not depend on the fault domain. What does:

* the **unit** to exclude and replace: the failed part's host (an 8-GPU node, an NVL72 compute tray) or
  the whole scale-up domain (an NVL72 rack) when the plan's scale-up group cannot be re-formed on the
  rack's remaining GPUs;
* **GPUs unavailable** until repair: the host (``n`` GPUs) when the plan's scale-up group ``g`` fits in
  it, else the broken ``g``-GPU group, unless the rack has idle GPUs to re-form it (:func:`fault_domain`);
* the **spares** that a restart without waiting needs, at that granularity (:func:`spares_needed`).

NVIDIA's NVLink partition states (NMX-Manager "Partition Health", reliability-notes §13): DEGRADED, some
GPUs parked with health NO_NVLINK while the rest keep full bandwidth (operational); BANDWIDTH (adaptive
mode), trunk links missing and all GPUs at reduced bandwidth (operational); UNHEALTHY, e.g. a lost NVLink
switch in full-bandwidth mode (not operational).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["fault_domain", "spares_needed", "unit_of", "DEGRADED_STATES"]

DEGRADED_STATES = {
    "DEGRADED": "failed GPUs parked (NO_NVLINK), the rest of the NVLink partition at full bandwidth",
    "BANDWIDTH": "trunk links missing: every GPU still communicates, at reduced bandwidth (adaptive mode)",
    "UNHEALTHY": "an NVLink switch lost in full-bandwidth mode: the partition is not operational",
}
"""NVIDIA NMX-Manager partition health states (reliability-notes §13, R21a)."""


def fault_domain(cluster, group: int, num_gpus: int) -> dict[str, Any]:
    """What one GPU or host failure takes out, for a plan coupling ``group`` GPUs inside a scale-up domain.

    With ``D`` GPUs per domain, ``n`` per host, ``g`` coupled GPUs and a job of ``N`` GPUs on
    ``ceil(N / D)`` domains (``I = D - N / domains`` idle GPUs in each):

    * ``D <= n`` (8-GPU nodes) or ``g <= n``: the group lives inside a host, so a spare host anywhere
      replaces it (``unit = node``, ``n`` GPUs out);
    * ``g > n`` and ``I >= n`` with the rack's share of the job in whole groups: the parked host's group
      re-forms on the rack's idle GPUs (partition DEGRADED), no spare needed (``unit = none``);
    * otherwise the broken group (``g`` GPUs, all ``D`` when it spans the rack) must move to another NVLink
      domain: a spare rack, which holds ``floor(D / g)`` such replacements (``unit = rack``).
    """
    d, n = cluster.scale_up_domain, cluster.gpus_per_node
    g = max(1, min(group, d))
    domains = -(-num_gpus // d)
    idle = (domains * d - num_gpus) // domains
    why: list[str] = []
    if d <= n or g <= n:
        unit, out, slots, unit_gpus = "node", n, 1, n
        if d <= n:
            why.append(f"the scale-up domain is the {n}-GPU node: a GPU, NIC, NVSwitch or host failure excludes "
                       f"that node ({n} GPUs) and a spare node anywhere replaces it")
        else:
            why.append(f"the plan couples {g} GPUs inside the {d}-GPU NVLink domain, within one {n}-GPU host: a "
                       f"failed GPU's host is parked (partition DEGRADED: {DEGRADED_STATES['DEGRADED']}) and a "
                       "spare host anywhere replaces it over scale-out")
    elif idle >= n and (d - idle) % g == 0:
        unit, out, slots, unit_gpus = "none", 0, 1, 0
        why.append(f"the plan couples {g} GPUs across hosts of the {d}-GPU NVLink domain and leaves {idle} GPUs of "
                   f"each rack idle: with the failed {n}-GPU host parked (DEGRADED) its group re-forms on the idle "
                   "GPUs, so the job restarts in place without a spare")
    else:
        unit, out, slots, unit_gpus = "rack", g, max(d // g, 1), d
        why.append(f"the plan couples {g} GPUs across hosts of the {d}-GPU NVLink domain and the rack has "
                   f"{idle} idle GPUs: a failed {n}-GPU host (parked, DEGRADED) breaks a {g}-GPU group that "
                   f"cannot re-form in the rack, so it must move to another NVLink domain: a spare rack (holding "
                   f"{max(d // g, 1)} such replacements), not a spare host")
    if d > n:
        why.append(f"an NVLink switch failure makes the rack UNHEALTHY in full-bandwidth mode (all {d} GPUs out, "
                   "a spare rack needed); in adaptive mode it runs at reduced bandwidth (BANDWIDTH state)")
    return {"unit": unit, "unit_gpus": unit_gpus, "scale_up_group_gpus": g, "gpus_unavailable_per_failure": out,
            "replacements_per_unit": slots, "scale_up_domain_gpus": d, "gpus_per_host": n,
            "idle_gpus_per_domain": idle, "why": why}


def spares_needed(unit_failures_per_day: float, repair_s: float, quantile: float = 0.99) -> int:
    """Spare units that cover the units in repair with probability ``quantile``.

    Units in repair at a random time are Poisson with mean ``lambda x repair`` (an M/G/infinity queue:
    Little's law gives the mean, Palm's theorem the Poisson law), so the spare pool is its quantile: the
    smallest k with ``P(K <= k) >= quantile`` (as ``scipy.stats.poisson.ppf``; computed here in log space,
    ``log p(k) = k log(mean) - mean - log k!``, because importing scipy.stats costs a second of start-up).
    """
    mean = unit_failures_per_day * repair_s / 86400.0
    if mean <= 0:
        return 0
    k = np.arange(int(mean + 12.0 * math.sqrt(mean) + 40.0))
    log_pmf = k * math.log(mean) - mean - np.concatenate([[0.0], np.cumsum(np.log(k[1:]))])
    cdf = np.cumsum(np.exp(log_pmf))
    hit = np.nonzero(cdf >= quantile * (1.0 - 1e-12))[0]
    return int(hit[0]) if hit.size else int(k[-1])


def unit_of(component: dict[str, Any], domain: dict[str, Any]) -> tuple[str | None, int]:
    """(unit a spare must replace, GPUs unavailable) for one failure of ``component`` under ``domain``;
    ``None`` when the job restarts without a spare (software, maintenance, fabric parts the routing avoids,
    or a rack with idle GPUs to re-form its groups)."""
    per, kind = component["per"], component["kind"]
    if kind in ("software", "maintenance") or per in ("leaf_switch", "spine_switch", "fabric_cable", "job"):
        return None, 0
    if per == "nvlink_switch" and domain["scale_up_domain_gpus"] > domain["gpus_per_host"]:
        return "rack", domain["scale_up_domain_gpus"]
    if domain["unit"] == "none":
        return None, 0
    return domain["unit"], domain["gpus_unavailable_per_failure"]
