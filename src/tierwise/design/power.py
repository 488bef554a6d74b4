"""The best cluster under a facility power budget, with the scale-out optics as an option.

For each design (accelerator, scale-up domain, scale-out fabric and NIC speed) and each optics option
(pluggable DSP modules, linear-drive LPO, co-packaged CPO: watts and price per 800G port in
``design/scaleup.yaml``, each sourced), the GPU count is the largest the budget powers:

``facility_W(N) = (servers_W(N) + network_W(N)) x PUE <= budget``

with servers at their rack or server power (:func:`tierwise.topology.costs.servers_cost`: NVL72 racks at 120
kW, 8-GPU servers at ``GPUs x (GPU W + 575 W)``, S11, S21), and the network at its switches, NICs and optics
(:func:`tierwise.design.cost.fabric_cost`) with the switch-side 800G modules re-priced at the option's
watts and dollars per port (the NIC end keeps its 400G pluggable: CPO and LPO are switch-side here). ``N`` is
rounded down to a multiple of 512 GPUs (64 below 8,192) so that the planner can split it. Each design then
gets its best plan (:func:`tierwise.design.bandwidth.job_plan`) on ``N`` GPUs; the designs are ranked by
tokens/s. "Watts saved become GPUs": against the pluggable option of the same design, the optics' saved
watts and the GPUs (or the faster NICs, where a design has a faster-NIC sibling) they power are stated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tierwise.design.bandwidth import job_plan
from tierwise.design.cost import default_fabric, fabric_cost
from tierwise.design.designs import design_cluster
from tierwise.design.scaleup import OPTICS, load_figures
from tierwise.errors import TierwiseError
from tierwise.estimate.step import estimate
from tierwise.specs.cluster import load_cluster
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import PlanBatch
from tierwise.topology.choose import FabricOverrides
from tierwise.topology.costs import load_prices

__all__ = ["PowerDesign", "POWER_DESIGNS", "power_capped", "FacilityPower", "facility_power", "parse_power"]

_SECONDS_PER_YEAR = 365.25 * 24 * 3600


_POWER_UNITS = {"w": 1.0, "kw": 1e3, "mw": 1e6, "gw": 1e9}
MAX_POWER_W = 1e11
"""100 GW: past any facility."""


def parse_power(text: str | float, what: str = "--power") -> float:
    """A facility power such as ``"50MW"``, ``"1.2 GW"`` or ``"800 kW"`` (bare number: watts), in watts."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgG]?[wW])?\s*", str(text))
    if not m:
        raise TierwiseError(f"{what} {text!r} is not a power; write e.g. 50MW, 800kW or 1.2GW")
    w = float(m.group(1)) * _POWER_UNITS[(m.group(2) or "w").lower()]
    if not 0 < w <= MAX_POWER_W:
        raise TierwiseError(f"{what} {text!r}: give a facility power between 1 W and 100 GW")
    return w


@dataclass(frozen=True)
class PowerDesign:
    name: str
    cluster: str
    fabric: str = "ib"
    nic_gbps: float | None = None


POWER_DESIGNS = (
    PowerDesign("H100 8-GPU, IB 400G", "dgx-h100"),
    PowerDesign("B200 8-GPU, IB 400G", "dgx-b200"),
    PowerDesign("GB200 NVL72, IB 400G", "gb200-nvl72"),
    PowerDesign("GB200 NVL72, IB 800G", "gb200-nvl72", nic_gbps=800),
    PowerDesign("MI355X 8-GPU, Ultra Ethernet 400G", "mi355x-8-uec", fabric="roce"),
)


def _network(cluster, n: int, prices: dict, fabric: str, nic_gbps, option: dict) -> dict:
    """The fabric's report with the switch-side 800G modules at ``option``'s watts and price per port."""
    sized = design_cluster(cluster, nic_gbps)
    choice = default_fabric(sized, n, FabricOverrides(fabric=fabric))
    rep = fabric_cost(sized, n, prices, spec=choice.spec, fabric=choice.fabric)
    twin = rep["transceivers_switch_twin"]
    w = rep["network_power_w"] + twin * (float(option["w_per_800g_port"]) - float(prices["transceiver_switch_w"]["value"]))
    usd = rep["network_capex_usd"] + twin * (float(option["usd_per_800g_port"])
                                             - float(prices["transceiver_switch_usd"]["value"]))
    return {"power_w": w, "capex_usd": usd, "switch_side_800g_ports": twin, "servers": rep["servers"]}


@dataclass(frozen=True)
class FacilityPower:
    """Power and capex of ``gpus`` GPUs of one design (:func:`facility_power`)."""

    gpus: int
    gpus_bought: int
    """Whole servers or racks."""
    servers_w: float | None
    """Servers' or racks' power (``None``: no GPU power in the catalog)."""
    network_w: float
    it_w: float
    """servers + network (W)."""
    facility_w: float
    """IT power x PUE (W)."""
    capex_usd: float
    switch_side_800g_ports: float
    """Switch-side 800G modules (the ones an optics option replaces)."""


def facility_power(cluster, n: int, prices: dict, fabric: str, nic_gbps, option: dict, pue: float) -> FacilityPower:
    """Facility watts of ``n`` GPUs of ``cluster`` (module docstring), with its parts."""
    unit = max(cluster.scale_up_domain, cluster.gpus_per_node)
    bought = -(-n // unit) * unit
    net = _network(cluster, bought, prices, fabric, nic_gbps, option)
    srv = net["servers"]
    it = (srv["power_w"] or 0.0) + net["power_w"]
    return FacilityPower(gpus=n, gpus_bought=bought, servers_w=srv["power_w"], network_w=net["power_w"], it_w=it,
                         facility_w=it * pue, capex_usd=srv["capex_usd"] + net["capex_usd"],
                         switch_side_800g_ports=net["switch_side_800g_ports"])


def _fit_gpus(cluster, budget_w, prices, fabric, nic_gbps, option, pue) -> FacilityPower | None:
    """The largest GPU count (multiple of 512; 64 below 8,192) the budget powers, with its power."""
    probe = facility_power(cluster, 4096, prices, fabric, nic_gbps, option, pue)
    per_gpu = probe.facility_w / probe.gpus_bought
    n_est = int(budget_w / per_gpu)
    step = 512 if n_est >= 8192 else 64
    n = (n_est // step) * step
    while n >= step:
        p = facility_power(cluster, n, prices, fabric, nic_gbps, option, pue)
        if p.facility_w <= budget_w:
            return p
        n -= step
    return None


def _best_count(model, cl, d, n, global_batch, seq, precision, cache, *, parameters: Parameters):
    """The job's GPU count (``n`` rounded down to 512, 1,024, 2,048, 4,096 or a power of two: a count the plan
    splits well; a
    power-bought cluster need not run every GPU in one job), its plan and estimate, by tokens/s."""
    best = (n, None, "no plan fits memory")
    counts = {(n // g) * g for g in ((512, 1024, 2048, 4096) if n >= 8192 else (64,))}
    counts.add(1 << (n.bit_length() - 1))  # the largest power of two: global batches are powers of two
    for m in sorted(counts, reverse=True):
        if m < 64:
            continue
        key = (d.cluster, d.nic_gbps, m)
        if key not in cache:
            try:
                plan, _ = job_plan(model, cl, m, global_batch, seq, precision=precision, parameters=parameters)
                cache[key] = (plan, estimate(model, cl, PlanBatch.from_plans([plan]), parameters=parameters))
            except TierwiseError as exc:
                cache[key] = (None, str(exc))
        plan, est = cache[key]
        if plan is not None and (best[1] is None or est.tokens_per_s[0] > best[2].tokens_per_s[0]):
            best = (m, plan, est)
    return best


def _row(model, d: PowerDesign, cl, optics: str, budget_w, *, prices, option, pue, global_batch, seq, precision,
         cache, parameters: Parameters) -> dict[str, Any]:
    """One design with one optics option under the budget: GPUs it powers, the job's count and plan, the rates."""
    life, kwh = float(prices["life_years"]["value"]), float(prices["usd_per_kwh"]["value"])
    row: dict[str, Any] = {"design": d.name, "cluster": d.cluster, "optics": optics, "fabric": d.fabric,
                           "nic_gbps": cl.nic_bytes_per_s * 8 / 1e9}
    fit = _fit_gpus(cl, budget_w, prices, d.fabric, d.nic_gbps, option, pue)
    if fit is None:
        row.update(fits=False, why="the budget powers fewer than 64 GPUs of this design")
        return row
    job_n, plan, est = _best_count(model, cl, d, fit.gpus, global_batch, seq, precision, cache,
                                    parameters=parameters)
    row.update(gpus=fit.gpus, job_gpus=job_n, gpus_bought=fit.gpus_bought, facility_w=fit.facility_w,
               it_w=fit.it_w, network_w=fit.network_w, servers_w=fit.servers_w, capex_usd=fit.capex_usd)
    if plan is None:
        row.update(fits=False, why=est)
        return row
    tps = float(est.tokens_per_s[0])
    usd_per_s = fit.capex_usd / (life * _SECONDS_PER_YEAR) + fit.facility_w * kwh / 3.6e6
    row.update(fits=True, plan={k: getattr(plan, k) for k in ("tp", "pp", "cp", "dp", "ep")},
               step_time_s=float(est.step_time_s[0]), tokens_per_s=tps, mfu=float(est.mfu[0]),
               mfu_bf16=float(est.mfu_bf16[0]),
               tokens_per_usd=tps / usd_per_s, tokens_per_joule=tps / fit.facility_w)
    return row


def power_capped(model, facility_budget_w: float, *, designs=POWER_DESIGNS, optics=OPTICS, global_batch: int = 2048,
                 seq: int = 8192, precision: str = "bf16", prices: dict | None = None,
                 pue: float | None = None, parameters: Parameters | None = None) -> dict[str, Any]:
    """The ``design --power --json`` document (module docstring), priced under ``parameters`` (None, this
    being the command's entry point: :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    prices = prices or load_prices()
    figures = load_figures()
    pue = float(prices["pue"]["value"]) if pue is None else pue
    if not 1.0 <= pue <= 5.0:
        raise TierwiseError(f"--pue {pue:g}: use a power usage effectiveness between 1.0 and 5.0")
    for o in optics:
        if o not in OPTICS:
            raise TierwiseError(f"--optics {o!r}; choose from {', '.join(OPTICS)}")
    clusters = {d.cluster: load_cluster(d.cluster, parameters=parameters) for d in designs}
    smallest = min(facility_power(clusters[d.cluster], max(clusters[d.cluster].scale_up_domain,
                                                           clusters[d.cluster].gpus_per_node),
                                  prices, d.fabric, d.nic_gbps, figures["optics"]["pluggable"], pue).facility_w
                   for d in designs)
    if facility_budget_w < smallest:
        raise TierwiseError(f"--power {facility_budget_w / 1e3:,.1f} kW is below one server or rack of any design "
                            f"(the smallest takes {smallest / 1e3:,.1f} kW at PUE {pue:g}); give a larger budget")
    cache: dict = {}
    rows = [_row(model, d, design_cluster(clusters[d.cluster], d.nic_gbps), o, facility_budget_w, prices=prices,
                 option=figures["optics"][o], pue=pue, global_batch=global_batch, seq=seq, precision=precision,
                 cache=cache, parameters=parameters) for d in designs for o in optics]
    _savings(rows)
    ok = [r for r in rows if r["fits"]]
    if not ok:
        raise TierwiseError(f"no design fits a plan of {model.name} within {facility_budget_w / 1e6:,.2f} MW; "
                            "give a larger --power or a smaller model")
    best = max(ok, key=lambda r: (r["tokens_per_s"], r["tokens_per_usd"]))
    return {"model": model.name, "facility_budget_w": facility_budget_w, "pue": pue,
            "it_budget_w": facility_budget_w / pue, "global_batch_size": global_batch, "seq_length": seq,
            "precision": precision, "rows": rows, "best": {k: best[k] for k in ("design", "optics", "gpus", "job_gpus",
                                                                                    "tokens_per_s", "step_time_s")},
            "explanation": _explain(rows, best),
            "optics_sources": {k: v["source"] for k, v in figures["optics"].items()},
            "notes": ["GPU counts are multiples of 512 (64 below 8,192) so the planner can split them; NVL72 racks "
                      "are bought whole", "optics options replace the switch-side 800G modules; NIC-side 400G "
                      "modules stay pluggable (9 W, S35)",
                      "Ultra Ethernet is priced as Ethernet (RoCE-class NICs and 51.2T Ethernet switches) and runs "
                      "at the same analytic step as RoCE: its transport (packet spraying, trimming) is what "
                      "`tierwise simulate` models with adaptive routing"]}


def _savings(rows: list[dict]) -> None:
    """Per row: network watts saved against the same design's pluggable optics and the GPUs they power."""
    base = {r["design"]: r for r in rows if r["optics"] == "pluggable" and r.get("gpus")}
    for r in rows:
        b = base.get(r["design"])
        if b is None or not r.get("gpus"):
            continue
        per_gpu = b["facility_w"] / b["gpus_bought"]
        # IT watts of network saved at the pluggable design's size, and the GPUs they power at its facility W/GPU
        saved = (b["network_w"] / b["gpus_bought"] - r["network_w"] / r["gpus_bought"]) * b["gpus_bought"]
        r["network_w_saved_vs_pluggable"] = saved
        r["gpus_saved_watts_power"] = saved * b["facility_w"] / b["it_w"] / per_gpu
        r["extra_gpus_vs_pluggable"] = r["gpus"] - b["gpus"]


def _explain(rows: list[dict], best: dict) -> str:
    ok = [r for r in rows if r["fits"]]
    parts = [f"best under the budget: {best['design']} with {best['optics']} optics, {best['gpus']:,} GPUs, "
             f"{best['tokens_per_s']:,.0f} tokens/s (step {best['step_time_s']:.2f} s)"]
    for name in dict.fromkeys(r["design"] for r in ok):
        mine = {r["optics"]: r for r in ok if r["design"] == name}
        if "pluggable" in mine and "cpo" in mine:
            p, c = mine["pluggable"], mine["cpo"]
            parts.append(f"{name}: CPO saves {c.get('network_w_saved_vs_pluggable', 0) / 1e3:,.0f} kW of optics, "
                         f"enough for {c.get('gpus_saved_watts_power', 0):,.0f} GPUs ({p['gpus']:,} -> {c['gpus']:,} in 512s), step {p['step_time_s']:.2f} -> {c['step_time_s']:.2f} s")
    parts.append("a job runs on a count the plan splits well (job_gpus); GPUs past it power nothing for this job "
                 "at this global batch")
    by = {r["design"]: r for r in ok if r["optics"] == "pluggable"}
    if "GB200 NVL72, IB 400G" in by and "GB200 NVL72, IB 800G" in by:
        a, b = by["GB200 NVL72, IB 400G"], by["GB200 NVL72, IB 800G"]
        parts.append(f"800G NICs on GB200 cost {a['gpus'] - b['gpus']:,} GPUs of power and change the step "
                     f"{a['step_time_s']:.2f} -> {b['step_time_s']:.2f} s")
    return "; ".join(parts)
