"""What a GPU of a serving pool costs per second, from the catalog's server prices (the prices ``design`` uses).

``usd/s per GPU = server capex per GPU / life + (GPU power + server overhead) per GPU x PUE x usd/kWh / 3.6e6``:
:func:`tierwise.design.cost.economics`'s formula (capex amortised over ``life_years``, facility power at the
price file's PUE and electricity price) for the servers alone, per GPU. The servers (8-GPU) or racks (NVL72) are
priced by :func:`tierwise.topology.costs.servers_cost` from :file:`tierwise/topology/prices.yaml`, each price with
its source or its stated assumption (an accelerator without a price of its own is priced as an H100 server's GPU,
and says so). The scale-out network is left out: two pools of a P/D pair are compared by the GPUs they hold,
and a pool's share of a shared fabric depends on the site, not on the pair.

A P/D pair's cost per million output tokens is ``(P usd_A + D usd_B) / output tokens/s x 1e6`` (the way Splitwise,
Patel et al. ISCA 2024, provisions its H100 / A100 pools: under a cost or a power budget, by the machines'
prices, for the tokens served).
"""

from __future__ import annotations

from tierwise.specs.cluster import Cluster
from tierwise.topology.costs import load_prices, servers_cost

__all__ = ["gpu_usd_per_s", "SECONDS_PER_YEAR"]

SECONDS_PER_YEAR = 365.25 * 24 * 3600


def gpu_usd_per_s(cluster: Cluster, prices: dict | None = None) -> tuple[float, str]:
    """(USD per second one GPU of ``cluster`` costs, the basis in words) (module docstring)."""
    prices = prices or load_prices()
    unit = max(cluster.scale_up_domain, cluster.gpus_per_node)
    s = servers_cost(cluster.accelerator.name, unit, cluster.accelerator.power_w, prices)
    life, pue, kwh = (float(prices[k]["value"]) for k in ("life_years", "pue", "usd_per_kwh"))
    capex = s["capex_usd"] / unit / (life * SECONDS_PER_YEAR)
    power_w = (s["power_w"] or 0.0) / unit
    energy = power_w * pue * kwh / 3.6e6
    basis = (f"{cluster.name}: {s['basis']}, over {life:g} years; {power_w:,.0f} W per GPU "
             f"({s['power_basis']}) x PUE {pue:g} at ${kwh:g}/kWh"
             + ("" if s["power_w"] else " (no power figure: capex only)"))
    return capex + energy, basis
