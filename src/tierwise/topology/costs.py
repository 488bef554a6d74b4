"""Capex and power of a fabric's scale-out network from a price file (:file:`prices.yaml` by default).

Counting rules (stated in the output):

* every scale-out cable is optical: a 400G single-port module at the NIC end, and at a switch end half a
  twin-port 800G (2x400G) module per port (DGX SuperPOD style; hardware-notes.md section 3). SemiAnalysis
  notes 25-33% of GPU links could be copper instead (S21), so this is an upper bound on optics;
* switch price and power scale with ports x port speed relative to a 64-port 400G switch;
* scale-up (NVSwitch, NVL72 spine, mesh) is inside the server or rack price and is not counted;
* a torus's direct links are counted as cables without transceivers (TPU-style ICI).
"""

from __future__ import annotations

from importlib import resources

from tierwise.errors import TopologyError, did_you_mean
from tierwise.files import require_document, short_repr
from tierwise.limits import check_float

__all__ = ["load_prices", "network_cost"]

MAX_PRICE = 1e12
"""A price (USD) or power (W) of one part: a trillion is past any."""
_REQUIRED = ("switch_usd", "switch_w", "transceiver_switch_usd", "transceiver_switch_w", "transceiver_nic_usd",
             "transceiver_nic_w", "nic_usd", "nic_w", "cable_usd", "gpu_server_usd_per_gpu")


def load_prices(path: str | None = None) -> dict:
    """The shipped price table, with entries overridden by ``path`` (same keys; unknown keys are errors).

    A user's entry is a number (the value) or a mapping with a ``value`` and the shipped entries' other keys;
    the file goes through the guarded reader and strict YAML loader (:mod:`tierwise.files`).
    """
    from tierwise.files import load_yaml, read_user_text

    text = resources.files("tierwise.topology").joinpath("prices.yaml").read_text(encoding="utf-8")
    prices = load_yaml(text, "the shipped prices.yaml")
    if path is not None:
        where = f"price file {path!r}"
        user = load_yaml(read_user_text(path, what="price file", error=TopologyError), where, error=TopologyError)
        require_document(user, where, "give entries such as 'switch_usd: {value: 30000}'", error=TopologyError)
        for key, entry in user.items():
            if key not in prices:
                raise TopologyError(f"unknown key {short_repr(key)} in {where}{did_you_mean(str(key)[:100], _REQUIRED)};"
                                    f" allowed: {', '.join(_REQUIRED)}")
            if isinstance(entry, int | float) and not isinstance(entry, bool):
                entry = {"value": entry}
            if not isinstance(entry, dict):
                raise TopologyError(f"{key}={short_repr(entry)} in {where} must be a number or a mapping such as "
                                    "{value: 30000, source: ...}")
            allowed = ("value", "unit", "estimate", "assumption", "source")
            for sub in entry:
                if sub not in allowed:
                    raise TopologyError(f"unknown key {short_repr(sub)} under {key} in {where}; allowed: "
                                        f"{', '.join(allowed)}")
            if "value" not in entry:
                raise TopologyError(f"{key} in {where} needs a value, e.g. '{key}: {{value: 1000}}'")
            check_float(entry["value"], f"{key}.value", minimum=0.0, maximum=MAX_PRICE, error=TopologyError,
                        sep="=", where=f"in {where}", hint=" (USD or W)")
            merged = {"source": f"user price file {path}", "estimate": False} | dict(entry)
            prices[key] = merged
    return prices


def network_cost(inv: dict, num_gpus: int, nic_bytes_per_s: float, prices: dict) -> dict:
    """Capex (USD) and power (W) from an inventory (:func:`tierwise.topology.metrics.inventory`)."""
    v = {k: float(prices[k]["value"]) for k in _REQUIRED}
    scale = (inv["switch_radix"] * nic_bytes_per_s) / (64 * 50e9)
    parts_usd = {
        "switches": inv["num_switches"] * v["switch_usd"] * scale,
        "nics": inv["num_nics"] * v["nic_usd"],
        "transceivers": inv["transceivers_nic"] * v["transceiver_nic_usd"]
        + inv["transceivers_switch_twin"] * v["transceiver_switch_usd"],
        "cables": inv["num_cables"] * v["cable_usd"],
    }
    parts_w = {
        "switches": inv["num_switches"] * v["switch_w"] * scale,
        "nics": inv["num_nics"] * v["nic_w"],
        "transceivers": inv["transceivers_nic"] * v["transceiver_nic_w"]
        + inv["transceivers_switch_twin"] * v["transceiver_switch_w"],
    }
    capex = sum(parts_usd.values())
    gpu_cost = num_gpus * v["gpu_server_usd_per_gpu"]
    estimates = sorted(k for k in _REQUIRED if prices[k].get("estimate"))
    return {
        "network_capex_usd": capex,
        "network_power_w": sum(parts_w.values()),
        "capex_by_part_usd": parts_usd,
        "power_by_part_w": parts_w,
        "network_share_of_cluster_cost": capex / (capex + gpu_cost) if capex + gpu_cost else 0.0,
        "cost_assumptions": {
            "gpu_cost": f"GPU servers at ${v['gpu_server_usd_per_gpu']:,.0f} per GPU "
            f"({prices['gpu_server_usd_per_gpu']['source']}); share = network / (network + GPU servers)",
            "optics": "every scale-out cable optical (an upper bound: 25-33% of GPU links could be copper)",
            "switch_scaling": "switch price and power scale with ports x speed vs a 64x400G switch",
            "estimates": {k: prices[k].get("assumption", "") for k in estimates},
            "sources": {k: prices[k].get("source", "") for k in _REQUIRED},
        },
    }
