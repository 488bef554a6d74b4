"""Cost and energy of training on a cluster: capex (servers or racks, fabric, optics) amortised over a stated
life, power at a stated PUE and price per kWh, and what that makes a million tokens, a joule and a run cost.

``usd_per_s = capex / life_s + facility_power_w x usd_per_kwh / 3.6e6``, ``facility = IT power x PUE``;
``usd_per_million_tokens = usd_per_s / tokens_per_s x 1e6``; ``joules_per_token = facility_w / tokens_per_s``;
``time_to_train_s = tokens / tokens_per_s``. IT power is the servers' (or racks') and the network's at their
stated power (TDP-class figures: an upper bound on average draw). Every price comes from
:file:`tierwise/topology/prices.yaml` (sourced, or an estimate with its basis) or a user price file.

The fabric priced with a cluster, unless one is given, is :func:`default_fabric`, which is
:func:`tierwise.topology.choose.choose_fabric`: a rail-optimized fat tree of the cluster's NICs for 8-GPU
servers, the NVL72 family for racks, the fewest tiers of the cluster's switch, then a larger-radix generation,
then more planes (docs/topology.md, "How the fabric is chosen").
"""

from __future__ import annotations

from dataclasses import replace

from tierwise.errors import TierwiseError
from tierwise.limits import check_float
from tierwise.topology import build_fabric
from tierwise.topology.choose import FabricChoice, FabricOverrides, choose_fabric
from tierwise.topology.costs import fabric_of, load_prices
from tierwise.topology.counts import clos_inventory
from tierwise.topology.metrics import counted_report, topology_report
from tierwise.units import parse_bandwidth

__all__ = ["economics", "default_fabric", "fabric_cost"]

_SECONDS_PER_YEAR = 365.25 * 24 * 3600


def default_fabric(cluster, num_gpus: int, overrides: FabricOverrides | None = None) -> FabricChoice:
    """The fabric of ``num_gpus`` GPUs of ``cluster``: :func:`tierwise.topology.choose.choose_fabric` (the one
    chooser every command uses; its ``reason`` goes under ``assumed``)."""
    return choose_fabric(cluster, num_gpus, overrides)


def fabric_cost(cluster, num_gpus: int, prices: dict, *, spec=None, fabric: str | None = None,
                placement: str = "row", cpo: bool = False, overrides: FabricOverrides | None = None) -> dict:
    """The topology report (inventory, capex, power, share) of the cluster's fabric for ``num_gpus`` GPUs:
    ``spec`` when given, else :func:`default_fabric` (with ``overrides``; its reason in ``fabric_choice``)."""
    choice = None
    if spec is None:
        choice = default_fabric(cluster, num_gpus, overrides)
        spec, fabric = choice.spec, choice.fabric
    fabric = fabric or fabric_of(cluster.name, cluster)
    inv = clos_inventory(spec, parse_bandwidth(spec.nic_bandwidth) * 8 / 1e9) if placement == "row" else None
    if inv is not None:  # counted in closed form: a 2^20-GPU fabric is not built link by link for its price
        out = counted_report(spec, inv, prices, accelerator=cluster.accelerator.name,
                             gpu_power_w=cluster.accelerator.power_w, fabric=fabric, cpo=cpo)
        out["fabric_choice"] = choice.reason if choice else f"{spec.family} fabric as given"
        return out
    fab = build_fabric(spec)
    out = topology_report(fab, prices, accelerator=cluster.accelerator.name, gpu_power_w=cluster.accelerator.power_w,
                          fabric=fabric, placement=placement, cpo=cpo, hop_classes=False)
    out["fabric_choice"] = choice.reason if choice else f"{spec.family} fabric as given"
    return out


def _rounded_gpus(cluster, num_gpus: int) -> tuple[int, str | None]:
    unit = max(cluster.scale_up_domain, cluster.gpus_per_node)
    if num_gpus % unit == 0:
        return num_gpus, None
    up = -(-num_gpus // unit) * unit
    return up, f"priced {up} GPUs: whole {unit}-GPU {'racks' if unit > 8 else 'servers'} for {num_gpus}"


def _running_costs(prices: dict, assumed: list[str], *, life_years, pue, usd_per_kwh) -> dict[str, float]:
    """``life_years``, ``pue`` and ``usd_per_kwh``, checked; each not given is the price file's (noted in
    ``assumed`` with its assumption or source)."""
    values = {}
    for key, given, lo, hi in (("life_years", life_years, 0.1, 50.0), ("pue", pue, 1.0, 5.0),
                               ("usd_per_kwh", usd_per_kwh, 0.0, 10.0)):
        if given is None:
            given = float(prices[key]["value"])
            assumed.append(f"{key} {given:g} ({prices[key].get('assumption') or prices[key].get('source')})")
        values[key] = check_float(given, "--" + key.replace("_", "-"), minimum=lo, maximum=hi, error=TierwiseError)
    return values


def _priced_network(cluster, num_gpus: int, prices: dict, assumed: list[str], *, network, fabric, overrides) -> dict:
    """The topology report priced: ``network`` as given, or the cluster's default fabric for the GPUs (rounded
    up to whole servers or racks) under the user's ``overrides``; what was chosen is noted in ``assumed``."""
    if network is None:
        if fabric is not None:
            overrides = replace(overrides or FabricOverrides(), fabric=fabric)
        elif not (overrides and overrides.fabric):
            assumed.append(f"fabric {fabric_of(cluster.name, cluster)} (from the cluster's name)")
        priced_gpus, note = _rounded_gpus(cluster, num_gpus)
        if note:
            assumed.append(note)
        network = fabric_cost(cluster, priced_gpus, prices, overrides=overrides)
        assumed.append(f"fabric: {network['fabric_choice']}")
    elif fabric is None:
        fabric = fabric_of(cluster.name, cluster)
        assumed.append(f"fabric {fabric} (from the cluster's name)")
    return network


def economics(tokens_per_s: float, cluster, num_gpus: int, prices: dict | None = None, *, tokens: float | None = None,
              life_years: float | None = None, pue: float | None = None, usd_per_kwh: float | None = None,
              network: dict | None = None, fabric: str | None = None,
              overrides: FabricOverrides | None = None) -> dict:
    """Cost per million tokens, time to train ``tokens``, energy per token, capex by part and power.

    ``network``: a topology report (:func:`fabric_cost`) to price; by default the cluster's default fabric.
    ``life_years``, ``pue`` and ``usd_per_kwh`` default to the price file's, listed under ``assumed``;
    ``overrides``: the user's ``--topology --fabric --radix --tiers --oversubscription`` for the default fabric.
    """
    prices = prices or load_prices()
    assumed: list[str] = []
    values = _running_costs(prices, assumed, life_years=life_years, pue=pue, usd_per_kwh=usd_per_kwh)
    if not tokens_per_s or tokens_per_s <= 0:
        raise TierwiseError(f"tokens_per_s={tokens_per_s!r} must be positive to price a run")
    network = _priced_network(cluster, num_gpus, prices, assumed, network=network, fabric=fabric, overrides=overrides)
    servers = network["servers"]
    net_usd = network["network_capex_usd"]
    capex = servers["capex_usd"] + net_usd
    server_w = servers["power_w"] or 0.0
    it_w = server_w + network["network_power_w"]
    facility_w = it_w * values["pue"]
    usd_per_s = capex / (values["life_years"] * _SECONDS_PER_YEAR) + facility_w * values["usd_per_kwh"] / 3.6e6
    out = {
        "tokens_per_s": tokens_per_s,
        "capex_usd": {"servers": servers["capex_usd"], **{f"network_{k}": v for k, v in
                                                          network["capex_by_part_usd"].items()},
                      "total": capex},
        "network_share_of_capex": net_usd / capex if capex else 0.0,
        "network_share_range": network.get("network_share_range"),
        "power_w": {"servers": server_w, "network": network["network_power_w"], "it": it_w, "facility": facility_w},
        "usd_per_hour": usd_per_s * 3600,
        "usd_per_million_tokens": usd_per_s / tokens_per_s * 1e6,
        "tokens_per_usd": tokens_per_s / usd_per_s,
        "joules_per_token": facility_w / tokens_per_s,
        "tokens_per_joule": tokens_per_s / facility_w if facility_w else None,
        "life_years": values["life_years"], "pue": values["pue"], "usd_per_kwh": values["usd_per_kwh"],
        "basis": {"servers": servers["basis"], "server_power": servers["power_basis"],
                  "formula": "usd/s = capex / life + facility W x usd/kWh / 3.6e6; facility = IT x PUE"},
        "assumed": assumed,
        "fabric": {"choice": network.get("fabric_choice", f"{network['topology']} fabric as given"),
                   "topology": network["topology"], "switch_radix": network["switch_radix"],
                   "tiers": network["params"].get("tiers_built"), "planes": network["params"].get("planes", 1),
                   "num_switches": network["num_switches"], "switches_per_tier": network["switches_per_tier"],
                   "gpus": network["num_gpus"]},
    }
    if servers["power_w"] is None:
        assumed.append("server power unknown for this accelerator: energy counts the network only")
    if tokens is not None:
        tokens = check_float(tokens, "--tokens", minimum=1.0, maximum=1e18, error=TierwiseError)
        t = tokens / tokens_per_s
        out.update(tokens=tokens, time_to_train_s=t, time_to_train_days=t / 86400, cost_to_train_usd=usd_per_s * t,
                   energy_to_train_mwh=facility_w * t / 3.6e9)
    return out
