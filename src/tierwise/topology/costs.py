"""Capex and power of a fabric's scale-out network, and of the servers or racks it joins, from a price file
(:file:`prices.yaml` by default).

Counting rules (stated in the output):

* **cables by reach.** A link whose two ends sit in one rack is copper: a passive DAC (about 2-3 m at 100G
  per lane) when ``placement="rack"`` puts a fat tree's leaf at the top of the rack its NICs are in; an NVL72
  rack's NVLink spine is copper inside the rack price. A link to a leaf in another rack (a DGX SuperPOD's
  rail-aligned NIC-to-leaf links, every link above the leaves) is optical: a 400G single-port module at a
  NIC end and half an 800G twin-port (2x400G) module per switch port (hardware-notes.md section 3);
* **co-packaged optics** (``cpo=True``): a switch port's optics are on the switch package, so switch-side
  modules are replaced by the published CPO power per port (NIC ends keep pluggables);
* **InfiniBand vs RoCE**: different switch price and power (Quantum-2 vs Tomahawk-5 class 51.2T) and the
  RoCE NIC's extra price and power (BlueField-3 SuperNIC over ConnectX-7, S21); an Ethernet 51.2T switch
  offers 128 ports at 400G where Quantum-2 offers 64 (the radix is the fabric's);
* switch price and power scale with ports x port speed relative to a 51.2 Tb/s switch;
* a torus's direct links are counted as cables without transceivers (TPU-style ICI).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib import resources

from tierwise.errors import TopologyError
from tierwise.files import load_yaml, read_user_text, require_document, short_repr
from tierwise.limits import check_float
from tierwise.specs._mapping import check_keys

__all__ = ["load_prices", "NetworkCost", "network_cost", "servers_cost", "share_sensitivity", "fabric_of", "by_reach", "FABRICS",
           "PLACEMENTS", "REACH_CLASSES", "LEFT_OUT"]

MAX_PRICE = 1e12
"""A price (USD) or power (W) of one part: a trillion is past any."""
_REQUIRED = ("switch_usd", "switch_w", "switch_eth_usd", "switch_eth_w", "cpo_w_per_800g_port",
             "cpo_usd_per_800g_port", "transceiver_switch_usd", "transceiver_switch_w", "transceiver_nic_usd",
             "transceiver_nic_w", "nic_usd", "nic_w", "nic_roce_extra_usd", "nic_roce_extra_w", "cable_usd",
             "dac_usd", "dac_w", "acc_usd", "acc_w", "gpu_server_usd_per_gpu", "server_a100_usd", "server_h100_usd",
             "server_b200_usd", "server_mi355x_usd", "rack_gb200_nvl72_usd", "rack_gb300_nvl72_usd",
             "server_overhead_w_per_gpu",
             "rack_gb200_nvl72_w", "rack_gb300_nvl72_w", "usd_per_kwh", "pue", "life_years")
FABRICS = ("ib", "roce")
PLACEMENTS = ("row", "rack")
"""Where a fat tree's leaves stand: ``row`` (end or middle of row, a rack away: optical NIC links, as a DGX
SuperPOD) or ``rack`` (top of the rack its NICs are in: copper NIC links when a leaf's NICs fit one rack)."""


def load_prices(path: str | None = None) -> dict:
    """The shipped price table, with entries overridden by ``path`` (same keys; unknown keys are errors).

    A user's entry is a number (the value) or a mapping with a ``value`` and the shipped entries' other keys;
    the file goes through the guarded reader and strict YAML loader (:mod:`tierwise.files`).
    """

    text = resources.files("tierwise.topology").joinpath("prices.yaml").read_text(encoding="utf-8")
    prices = load_yaml(text, "the shipped prices.yaml")
    if path is not None:
        where = f"price file {path!r}"
        user = load_yaml(read_user_text(path, what="price file", error=TopologyError), where, error=TopologyError)
        require_document(user, where, "give entries such as 'switch_usd: {value: 30000}'", error=TopologyError)
        check_keys(user, _REQUIRED, where, error=TopologyError)
        for key, entry in user.items():
            if isinstance(entry, int | float) and not isinstance(entry, bool):
                entry = {"value": entry}
            if not isinstance(entry, dict):
                raise TopologyError(f"{key}={short_repr(entry)} in {where} must be a number or a mapping such as "
                                    "{value: 30000, source: ...}")
            check_keys(entry, ("value", "unit", "estimate", "assumption", "source", "low", "high"),
                       f"{key} of {where}", required=("value",), error=TopologyError)
            check_float(entry["value"], f"{key}.value", minimum=0.0, maximum=MAX_PRICE, error=TopologyError,
                        sep="=", where=f"in {where}", hint=" (USD or W)")
            merged = {"source": f"user price file {path}", "estimate": False} | dict(entry)
            if "low" not in entry:  # the user's figure is the figure: no shipped range around it
                merged.pop("low", None)
                merged.pop("high", None)
            prices[key] = merged
    return prices


@dataclass(frozen=True)
class NetworkCost:
    """Capex and power of a scale-out network and its share of the cluster's capex (:func:`network_cost`). Field
    order is the order of the keys :meth:`as_dict` gives ``topo --json``."""

    network_capex_usd: float
    network_power_w: float
    capex_by_part_usd: dict[str, float]
    """switches, nics, optics, cables (USD)."""
    power_by_part_w: dict[str, float]
    """switches, nics, optics, cables (W)."""
    servers_capex_usd: float
    network_share_of_capex: float
    """network / (network + servers); 0 for a cluster of no capex."""
    links_by_medium: dict[str, int]
    """copper and optical cables."""
    fabric: str
    """ib or roce."""
    cost_assumptions: dict
    """What was assumed and the source of each price used (estimates named)."""

    def as_dict(self) -> dict:
        """The figures as the ``topo --json`` keys (the dict blocks copied)."""
        return asdict(self)


def network_cost(inv: dict, num_gpus: int, nic_bytes_per_s: float, prices: dict, *, fabric: str = "ib",
                 servers: dict | None = None, copper_access: bool = False, cpo: bool = False) -> NetworkCost:
    """Capex (USD) and power (W) of the scale-out network from an inventory
    (:func:`tierwise.topology.metrics.inventory`), and its share of the cluster's capex.

    ``servers`` is :func:`servers_cost`'s record (without it, ``gpu_server_usd_per_gpu`` per GPU);
    ``copper_access``: NIC-to-leaf links are in-rack copper; ``cpo``: co-packaged optics on the switches.
    """
    if fabric not in FABRICS:
        raise TopologyError(f"--fabric {short_repr(fabric)} is unknown; choose one of {', '.join(FABRICS)}")
    v = {k: float(prices[k]["value"]) for k in _REQUIRED}
    sw = "switch_eth" if fabric == "roce" else "switch"
    scale = (inv["switch_radix"] * nic_bytes_per_s) / (51.2e12 / 8)  # ports x speed vs a 51.2 Tb/s switch
    nic_usd = v["nic_usd"] + (v["nic_roce_extra_usd"] if fabric == "roce" else 0.0)
    nic_w = v["nic_w"] + (v["nic_roce_extra_w"] if fabric == "roce" else 0.0)
    by_tier = inv.get("cables_by_tier", {})
    access = int(by_tier.get("access", 0)) if inv["num_nics"] else 0
    copper = access if copper_access else 0
    optical = inv["num_cables"] - copper if inv["num_nics"] else 0
    nic_modules = inv["transceivers_nic"] - copper
    switch_ports_optical = max(inv["switch_ports_used"] - copper, 0) if inv["num_nics"] else 0
    twin = (switch_ports_optical + 1) // 2
    speed_ratio = nic_bytes_per_s / 50e9  # a 400G port is half an 800G twin module
    if cpo:
        switch_optics_usd = switch_ports_optical * speed_ratio / 2 * v["cpo_usd_per_800g_port"]
        switch_optics_w = switch_ports_optical * speed_ratio / 2 * v["cpo_w_per_800g_port"]
        twin = 0
    else:
        switch_optics_usd = twin * v["transceiver_switch_usd"] * speed_ratio
        switch_optics_w = twin * v["transceiver_switch_w"] * speed_ratio
    copper_cables = inv["num_cables"] if not inv["num_nics"] else copper  # a torus's direct links
    parts_usd = {
        "switches": inv["num_switches"] * v[f"{sw}_usd"] * scale,
        "nics": inv["num_nics"] * nic_usd * speed_ratio,
        "optics": nic_modules * v["transceiver_nic_usd"] * speed_ratio + switch_optics_usd,
        "cables": optical * v["cable_usd"] + copper_cables * v["dac_usd"] * speed_ratio,
    }
    parts_w = {
        "switches": inv["num_switches"] * v[f"{sw}_w"] * scale,
        "nics": inv["num_nics"] * nic_w * speed_ratio,
        "optics": nic_modules * v["transceiver_nic_w"] * speed_ratio + switch_optics_w,
        "cables": copper_cables * v["dac_w"],
    }
    capex = sum(parts_usd.values())
    if servers is None:
        servers = {"capex_usd": num_gpus * v["gpu_server_usd_per_gpu"], "basis": "gpu_server_usd_per_gpu per GPU",
                   "power_w": None, "price_key": "gpu_server_usd_per_gpu"}
    total = capex + servers["capex_usd"]
    return NetworkCost(
        network_capex_usd=capex,
        network_power_w=sum(parts_w.values()),
        capex_by_part_usd=parts_usd,
        power_by_part_w=parts_w,
        servers_capex_usd=servers["capex_usd"],
        network_share_of_capex=capex / total if total else 0.0,
        links_by_medium={"copper": int(copper_cables), "optical": int(optical)},
        fabric=fabric,
        cost_assumptions=_cost_assumptions(prices, servers, fabric=fabric, copper_access=copper_access, cpo=cpo),
    )


def _cost_assumptions(prices: dict, servers: dict, *, fabric: str, copper_access: bool, cpo: bool) -> dict:
    """What :func:`network_cost` assumed, and the source of each price it used (estimates named)."""
    keys = [k for k in _REQUIRED if k not in _SERVER_KEYS + ("usd_per_kwh", "pue", "life_years",
                                                             "server_overhead_w_per_gpu")] + [servers["price_key"]]
    estimates = sorted(k for k in keys if prices[k].get("estimate"))
    return {
        "gpu_cost": f"servers/racks: {servers['basis']}; share = network / (network + servers); storage, "
                    "CPU nodes and facility are not counted",
        "optics": ("NIC-to-leaf links in-rack copper (DAC), links above the leaves optical" if copper_access
                   else "NIC-to-leaf links to leaves in other racks and every link above them optical"),
        "switch_optics": "co-packaged optics (CPO) on the switches" if cpo else "pluggable switch-side modules",
        "fabric": "RoCE: Ethernet switches, BlueField-3 class NICs" if fabric == "roce"
        else "InfiniBand: Quantum-2 class switches, ConnectX-7 class NICs",
        "switch_scaling": "switch price and power scale with ports x speed vs a 51.2 Tb/s switch",
        "estimates": {k: prices[k].get("assumption", "") for k in estimates},
        "sources": {k: prices[k].get("source", "") for k in keys},
    }


_SERVER_KEYS = ("gpu_server_usd_per_gpu", "server_a100_usd", "server_h100_usd", "server_b200_usd", "server_mi355x_usd",
                "rack_gb200_nvl72_usd", "rack_gb300_nvl72_usd", "rack_gb200_nvl72_w", "rack_gb300_nvl72_w")
_SERVER_PRICE = {  # accelerator -> (price key, GPUs the price buys, rack power key or None)
    "a100-sxm-80gb": ("server_a100_usd", 8, None), "a100-sxm-40gb": ("server_a100_usd", 8, None),
    "h100-sxm": ("server_h100_usd", 8, None), "h200-sxm": ("server_h100_usd", 8, None),
    "h800": ("server_h100_usd", 8, None), "b200": ("server_b200_usd", 8, None), "b300": ("server_b200_usd", 8, None),
    "mi355x": ("server_mi355x_usd", 8, None),
    "gb200": ("rack_gb200_nvl72_usd", 72, "rack_gb200_nvl72_w"),
    "gb300": ("rack_gb300_nvl72_usd", 72, "rack_gb300_nvl72_w"),
}


REACH_CLASSES = {
    "copper": "passive DAC in the rack, <= 3 m (hardware-notes section 3: 2-3 m at 100G per lane, S21)",
    "multimode": "multimode SR optics or AOC within a row, <= 50-100 m (NVIDIA LinkX SR4 / SR8, S35; IEEE "
                 "802.3cm 400GBASE-SR4.2: 100 m on OM4)",
    "single-mode": "single-mode DR optics across the hall, <= 500 m (NVIDIA LinkX DR4 / DR8, S35; IEEE 802.3bs "
                   "400GBASE-DR4: 500 m)",
}
"""Reach classes of scale-out cables (assumption by tier, as SemiAnalysis lays out a 100K-GPU hall, S21: NIC to
leaf in the rack or row, leaf to spine across the row, spine to core across the hall): NIC-to-leaf links are
copper in the rack (``--leaf-placement rack`` where a leaf fits a rack) else multimode, leaf-to-spine (tier 2)
links multimode, spine-to-core (tier 3) links single-mode. The price and power model keeps one optical module
price per port (:func:`network_cost`); this table is the count by reach, comparable with published inventories."""
LEFT_OUT = ("front-end (north-south) Ethernet, storage network, out-of-band management network; the NVL72 NVLink "
            "spine's copper is inside the rack (scale_up_copper_links)")
"""What the cable and transceiver counts leave out (published inventories of 100K-GPU builds often count the
back-end fabric only; these networks are typically a small fraction of its optics, S21)."""


def by_reach(inv: dict, copper_access: bool) -> dict:
    """Cables and transceivers of a fabric per reach class (:data:`REACH_CLASSES`): a copper cable has no
    transceivers; an optical one has one at each end (a NIC end is a single-port module, a switch end half a
    twin-port module, as :func:`tierwise.topology.metrics.inventory` counts them)."""
    tiers = inv.get("cables_by_tier", {})
    access = int(tiers.get("access", 0)) if inv["num_nics"] else 0
    cables = {"copper": access if copper_access else 0, "multimode": (0 if copper_access else access)
              + int(tiers.get("tier2", 0)), "single-mode": int(tiers.get("tier3", 0))}
    if not inv["num_nics"]:  # a torus: direct links, no transceivers
        return {"cables": {"copper": inv["num_cables"]}, "transceiver_ends": {}, "classes": REACH_CLASSES,
                "left_out": LEFT_OUT}
    ends = {"multimode": 2 * cables["multimode"], "single-mode": 2 * cables["single-mode"]}
    return {"cables": cables, "transceiver_ends": ends, "classes": REACH_CLASSES, "left_out": LEFT_OUT}


def fabric_of(name: str, cluster) -> str:
    """``roce`` for a cluster whose name or display name says RoCE or Ethernet, else ``ib``."""
    text = f"{name} {cluster.name} {cluster.display_name}".lower()
    return "roce" if "roce" in text or "ethernet" in text else "ib"


def servers_cost(accelerator: str, num_gpus: int, gpu_power_w: float | None, prices: dict) -> dict:
    """Capex and power of the servers (8-GPU) or racks (NVL72) holding ``num_gpus`` GPUs.

    An NVL72 rack is priced as a rack (its NVLink spine, switch trays and Grace CPUs inside, S38) and its power
    is the rack's; an 8-GPU server's power is ``GPUs x (GPU power + server overhead per GPU)`` (S21). An
    accelerator without a price of its own uses ``gpu_server_usd_per_gpu`` (an H100 server's) and says so.
    """
    key, per, rack_w = _SERVER_PRICE.get(accelerator, ("gpu_server_usd_per_gpu", 1, None))
    usd = float(prices[key]["value"])
    units = -(-num_gpus // per)
    if rack_w is not None:
        power = units * float(prices[rack_w]["value"])
        power_basis = f"{prices[rack_w]['value']:,.0f} W per rack"
    elif gpu_power_w is not None:
        power = num_gpus * (gpu_power_w + float(prices["server_overhead_w_per_gpu"]["value"]))
        power_basis = f"{gpu_power_w:g} W per GPU + {prices['server_overhead_w_per_gpu']['value']:g} W server overhead"
    else:
        power = None
        power_basis = "no GPU power in the catalog"
    what = "rack" if per == 72 else ("server" if per == 8 else "GPU (an H100 server's price per GPU: no entry "
                                                                "for this accelerator)")
    return {"capex_usd": units * usd, "units": units, "gpus_per_unit": per, "price_key": key,
            "usd_per_unit": usd, "power_w": power, "power_basis": power_basis,
            "basis": f"{units:,} x ${usd:,.0f} per {what} ({key}: {prices[key].get('source', '')})",
            "low_usd": units * float(prices[key].get("low", usd)),
            "high_usd": units * float(prices[key].get("high", usd))}


def share_sensitivity(inv: dict, num_gpus: int, nic_bytes_per_s: float, prices: dict, servers_args: tuple,
                      **kw) -> dict:
    """The network share of capex when every uncertain price (one with a ``low``/``high`` range) sits at its
    low or high end: the share's range is (network low, servers high) .. (network high, servers low)."""
    def at(end: str) -> dict:
        return {k: (dict(e, value=e[end]) if end in e else e) for k, e in prices.items()}

    out = {}
    for name, net_end, srv_end in (("low", "low", "high"), ("high", "high", "low")):
        srv = servers_cost(*servers_args, at(srv_end))
        out[name] = network_cost(inv, num_gpus, nic_bytes_per_s, at(net_end), servers=srv,
                                 **kw).network_share_of_capex
    out["varied"] = sorted(k for k, e in prices.items() if "low" in e)
    return out
