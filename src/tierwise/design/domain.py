"""Scale-up domain size against blast radius: the same job on NVLink domains of 8 to 576 GPUs (and a 1,024-GPU
UALink pod), with step time, goodput, capex, power, and goodput tokens per dollar and per joule.

Every row is the same accelerator (GB200-class by default) and the same scale-out NICs; only the scale-up
domain changes. Domains up to one 72-GPU rack are NVLink partitions of NVL72 racks (NMX-Manager partitions,
:mod:`tierwise.goodput.domain`): the hardware and its price are the rack's. Beyond a rack the domain is a
two-level NVLink fabric (``scaleup.yaml`` ``nvlink.second_tier``): a spine of switch trays joined to the racks
by optics, 2 optical 800G ports per 800 Gb/s of a GPU's one-way scale-up rate (the rack end and the spine end).
The UALink pod is the same structure with UALink 1.0 switches and ports (``scaleup.yaml`` ``ualink``).

Per row:

* **step**: the planner's best plan on the cluster with ``scale_up_domain = D``
  (:func:`tierwise.design.bandwidth.job_plan`, the restricted space of ``design``);
* **goodput**: :func:`tierwise.goodput.evaluate` (MTTI from part counts, Daly's checkpoint interval, ETTR)
  with the NVLink switch count of the domain (9 trays per 72 GPUs, twice that with a spine), the fault unit of
  :func:`tierwise.goodput.domain.fault_domain` (a host, or the whole ``D``-GPU domain when the plan's scale-up
  group spans hosts, and always for an NVLink switch failure), and the p99 spare pool in those units;
* **capex** ``= (GPUs bought + spare GPUs) x (rack price / 72 + spine share per GPU) + scale-out fabric``;
  **power** ``= GPUs bought x (rack W / 72 + spine W per GPU) + scale-out fabric W``, facility ``x PUE``
  (spares are capital, not load); ``usd_per_s = capex / life + facility W x usd/kWh / 3.6e6``
  (:mod:`tierwise.design.cost`);
* **goodput tokens per $** ``= tokens/s x ETTR / usd_per_s`` and **per J** ``= tokens/s x ETTR / facility W``.

The **knee** is the domain size with the most goodput tokens per dollar: below it a larger domain buys more
step time than it costs; above it the spine's optics and the larger fault unit cost more than the step gains.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from tierwise.design.bandwidth import job_plan
from tierwise.design.cost import fabric_cost
from tierwise.design.scaleup import OPTICS, load_figures, scale_up_extra, value
from tierwise.errors import TierwiseError
from tierwise.estimate.step import estimate
from tierwise.goodput import FailureModel, GoodputOptions, evaluate, failure_model
from tierwise.specs import catalog
from tierwise.specs.cluster import Cluster, load_cluster, with_scale_up_domain
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import PlanBatch
from tierwise.topology.costs import load_prices

__all__ = ["DOMAIN_SIZES", "UALINK_POD", "max_domain", "domain_cluster", "domain_sweep"]

DOMAIN_SIZES = (8, 16, 36, 72, 144, 576)
"""NVLink domain sizes swept by default (NVL8 baseboard, NVL16, NVL36, NVL72, two and eight racks)."""
UALINK_POD = 1024
_SECONDS_PER_YEAR = 365.25 * 24 * 3600
_RACK_KEYS = {"gb200": ("rack_gb200_nvl72_usd", "rack_gb200_nvl72_w"),
              "gb300": ("rack_gb300_nvl72_usd", "rack_gb300_nvl72_w")}
"""The NVL72 rack whose price and power per GPU every row pays (prices.yaml, S38 / S10 / S11)."""


def max_domain(cluster: Cluster) -> int:
    """The largest scale-up domain the accelerator's own fabric builds: the catalog's ``scale_up.domain_max``
    (hardware.csv column domain_max: 576 for NVLink 5, 8 for MI355X's Infinity Fabric mesh); the cluster's own
    domain for an accelerator outside the catalog."""
    try:
        entry = catalog.entry("accelerators", cluster.accelerator.name)
    except TierwiseError:
        return cluster.scale_up_domain
    up = entry.get("scale_up") or {}
    return int(up.get("domain_max", cluster.scale_up_domain))


def domain_cluster(base: Cluster, size: int, *, ualink: bool = False, figures: dict | None = None) -> Cluster:
    """``base`` with a ``size``-GPU scale-up domain (NVLink, or a UALink 1.0 pod with its rate and latency).

    Raises :class:`TierwiseError` for a size the accelerator's fabric cannot build (more than its catalog
    ``domain_max``, or UALink's 1,024) or that is not a whole number of its hosts."""
    figures = figures or load_figures()
    gpn = base.gpus_per_node
    if size < 1 or size % gpn:
        raise TierwiseError(f"domain size {size}: a scale-up domain is whole hosts of {gpn} GPUs on {base.name}; "
                            f"use a multiple of {gpn}")
    if ualink:
        u = figures["ualink"]
        if size > value(u["pod_max"]):
            raise TierwiseError(f"domain size {size}: a UALink 1.0 pod holds at most {value(u['pod_max']):.0f} "
                                "accelerators")
        rate = value(u["ports_per_accelerator"]) * value(u["port_gbps_one_way"]) * 1e9 / 8
        eff = rate * value(u["effective_fraction"])
        return replace(base, scale_up_domain=size, scale_up_bytes_per_s=eff, scale_up_p2p_bytes_per_s=eff,
                       scale_up_latency_s=value(u["latency_one_way_s"]), in_network_reduction=False,
                       name=f"{base.accelerator.name} UALink {size}", fitted={})
    limit = max_domain(base)
    if size > limit:
        raise TierwiseError(f"domain size {size}: {base.accelerator.name}'s scale-up fabric builds domains of at most "
                            f"{limit} GPUs; choose a smaller size (or the UALink pod row)")
    return with_scale_up_domain(base, size, name=f"{base.accelerator.name} NVL{size}")


def _failure_model(cluster: Cluster, num_gpus: int, opts: GoodputOptions, switches: int) -> FailureModel:
    """:func:`tierwise.goodput.failure_model` with the scale-up switches counted for this domain size."""
    return failure_model(cluster, num_gpus, opts).with_count("nvlink_switch", switches)


def _row(model, base, size, num_gpus, *, global_batch, seq, precision, prices, figures, optics, opts, net,
         parameters: Parameters, ualink=False) -> dict[str, Any]:
    cl = domain_cluster(base, size, ualink=ualink, figures=figures)
    label = f"UALink {size}" if ualink else f"NVL{size}"
    row: dict[str, Any] = {"domain": label, "scale_up_domain": size, "fabric": "ualink" if ualink else "nvlink",
                           "scale_up_gbytes_per_s_per_gpu": cl.scale_up_bytes_per_s / 1e9}
    try:
        plan, _ = job_plan(model, cl, num_gpus, global_batch, seq, precision=precision, parameters=parameters)
    except TierwiseError as exc:
        row.update(fits=False, why=str(exc))
        return row
    batch = PlanBatch.from_plans([plan])
    est = estimate(model, cl, batch, parameters=parameters)
    extra = scale_up_extra(cl, size, figures, optics, ualink=ualink)
    unit = max(size, 72)
    bought = -(-num_gpus // unit) * unit
    switches = math.ceil(extra.switches_per_gpu * bought)
    ev = evaluate(model, cl, num_gpus, batch, est, opts, fm=_failure_model(cl, num_gpus, opts, switches),
                  parameters=est.parameters)
    ettr, spare = float(ev.ettr[0]), float(ev.spare_gpus_p99[0])
    dom = ev.fault_domain[0]
    usd_key, w_key = _RACK_KEYS[base.accelerator.name]
    rack_usd = float(prices[usd_key]["value"]) / 72
    rack_w = float(prices[w_key]["value"]) / 72
    per_gpu_usd = rack_usd + extra.usd_per_gpu
    capex = (bought + spare) * per_gpu_usd + net["network_capex_usd"]
    it_w = bought * (rack_w + extra.w_per_gpu) + net["network_power_w"]
    pue, kwh, life = (float(prices[k]["value"]) for k in ("pue", "usd_per_kwh", "life_years"))
    facility = it_w * pue
    usd_per_s = capex / (life * _SECONDS_PER_YEAR) + facility * kwh / 3.6e6
    tps = float(est.tokens_per_s[0])
    row.update(fits=True, plan={k: getattr(plan, k) for k in ("tp", "pp", "cp", "dp", "ep")},
               step_time_s=float(est.step_time_s[0]), tokens_per_s=tps,
               exposed_comm_s=float(est.exposed_comm_s[0]), mtti_h=ev.failure_model.mtti_s / 3600,
               ettr=ettr, goodput_tokens_per_s=tps * ettr, fault_unit=dom["unit"], fault_unit_gpus=dom["unit_gpus"],
               nvlink_switch_failure_takes_gpus=size if size > base.gpus_per_node else base.gpus_per_node,
               spare_gpus_p99=spare, gpus_bought=bought, scale_up_switches=switches,
               scale_up_extra=extra.as_dict(), capex_usd=capex, facility_w=facility,
               goodput_tokens_per_usd=tps * ettr / usd_per_s, goodput_tokens_per_joule=tps * ettr / facility)
    return row


def domain_sweep(model, num_gpus: int, *, base: str | Cluster = "gb200-nvl72", sizes=DOMAIN_SIZES,
                 ualink_pod: bool = True, global_batch: int = 2048, seq: int = 8192, precision: str = "bf16",
                 prices: dict | None = None, optics: str = "pluggable",
                 goodput: GoodputOptions | None = None, parameters: Parameters | None = None) -> dict[str, Any]:
    """The ``design --domain-sweep --json`` document (module docstring), priced under ``parameters`` (None,
    this being the command's entry point: :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    figures = load_figures()
    prices = prices or load_prices()
    cl = base if isinstance(base, Cluster) else load_cluster(base, parameters=parameters)
    if cl.accelerator.name not in _RACK_KEYS:
        raise TierwiseError(f"the domain sweep prices NVL72 racks; base {cl.name} has {cl.accelerator.name}: use "
                            "gb200-nvl72 or gb300-nvl72")
    for s in sizes:  # every size checked before any work
        domain_cluster(cl, int(s), figures=figures)
    if optics not in OPTICS:
        raise TierwiseError(f"--optics {optics!r}; choose one of {', '.join(OPTICS)}")
    opts = goodput or GoodputOptions()
    unit72 = -(-num_gpus // 72) * 72
    net = fabric_cost(replace(cl, scale_up_domain=72), unit72, prices)
    common = dict(global_batch=global_batch, seq=seq, precision=precision, prices=prices, figures=figures,
                  optics=optics, opts=opts, net=net, parameters=parameters)
    rows = [_row(model, cl, int(s), num_gpus, **common) for s in sizes]
    if ualink_pod:
        rows.append(_row(model, cl, UALINK_POD, num_gpus, **common, ualink=True))
    ok = [r for r in rows if r["fits"]]
    knee = max(ok, key=lambda r: r["goodput_tokens_per_usd"]) if ok else None
    best_j = max(ok, key=lambda r: r["goodput_tokens_per_joule"]) if ok else None
    return {"model": model.name, "num_gpus": num_gpus, "accelerator": cl.accelerator.name, "optics": optics,
            "global_batch_size": global_batch, "seq_length": seq, "precision": precision, "rows": rows,
            "knee": knee["domain"] if knee else None, "best_per_joule": best_j["domain"] if best_j else None,
            "explanation": _explain(ok, knee) if knee else "no domain size fits a plan",
            "notes": ["domains up to 72 GPUs are NVLink partitions of NVL72 racks (hardware and price of the rack); "
                      "beyond a rack, a spine of switch trays over optics (design/scaleup.yaml, estimates marked)",
                      "the scale-out fabric (NICs, switches) is the same in every row; a larger domain could "
                      "buy fewer NICs, which this sweep does not take",
                      "spare GPUs (p99 pool in the fault unit) count in capex, not in power",
                      "optical transceivers are not counted as failing parts (no rate in goodput/rates.yaml)",
                      "a partition smaller than a rack (NVL8..NVL36) counts its own GPUs as the unit an NVLink tray "
                      "failure takes out; in a partitioned NVL72 rack a tray serves every partition, so the "
                      "physical blast radius is the rack"],
            "sources": {k: v.get("source") for k, v in figures["optics"].items()}
            | {f"nvlink_{k}": v.get("source") for k, v in figures["nvlink"].items()}
            | {f"ualink_{k}": v.get("source") for k, v in figures["ualink"].items()}}


def _explain(ok: list[dict], knee: dict) -> str:
    i = ok.index(knee)
    parts = [f"knee at {knee['domain']}: {knee['goodput_tokens_per_usd']:,.0f} goodput tokens per $"]
    if i > 0:
        prev = ok[i - 1]
        parts.append(f"from {prev['domain']} it cuts the step {prev['step_time_s']:.2f} -> {knee['step_time_s']:.2f} s "
                     f"at capex {prev['capex_usd'] / 1e6:,.0f} -> {knee['capex_usd'] / 1e6:,.0f} M$")
    if i + 1 < len(ok):
        nxt = ok[i + 1]
        parts.append(f"{nxt['domain']} steps {nxt['step_time_s']:.2f} s ({knee['step_time_s'] / nxt['step_time_s'] - 1:+.1%} "
                     f"speed) but costs {nxt['capex_usd'] / knee['capex_usd'] - 1:+.1%} capex "
                     f"(spine optics {nxt['scale_up_extra']['w_per_gpu']:.0f} W and ${nxt['scale_up_extra']['usd_per_gpu']:,.0f} "
                     f"per GPU; spares {nxt['spare_gpus_p99']:.0f} GPUs in {nxt['fault_unit_gpus']}-GPU units) and ETTR "
                     f"{nxt['ettr']:.3f} vs {knee['ettr']:.3f}")
    return "; ".join(parts)
