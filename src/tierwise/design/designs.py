"""Compare cluster designs on one training job: each design's best plan (from the planner), its throughput,
capex, power, network share of capex, tokens per dollar and per joule, the Pareto front, and the inverse
question: the slowest scale-out bandwidth that keeps the step within X% of the best.

A design is a base cluster (accelerator and scale-up domain: 8-GPU servers or NVL72 racks), a fabric kind
(InfiniBand or RoCE), a NIC speed, a topology family and an oversubscription. Its step time comes from the
analytic estimator on the base cluster with the design's NIC speed and, when oversubscribed, a scale-out level
whose uplinks carry ``1/o`` of the NICs' rate (:class:`~tierwise.specs.cluster.ScaleOutLevel`); its capex and
power come from the explicit fabric's inventory (:mod:`tierwise.topology`) and the price file.

What the analytic model does not separate: fat tree, rail-optimized, rail-only and dragonfly with the same NIC
rate and no oversubscription give the same step time for plans without expert parallelism, because data-,
pipeline- and context-parallel rings join same-rank GPUs of different servers (same-rail traffic, which every
one of these fabrics carries at the NIC rate); they differ in cost, and for adversarial traffic (worst-case
dragonfly permutations), which ``tierwise simulate`` measures. Expert all-to-all is cross-rail traffic: on a
rail-only design the collective model forwards its cross-rail bytes over the scale-up domain first (NCCL PXN,
:func:`tierwise.collectives.alpha_beta.rail_only_all_to_all_time`), so for a MoE model each design also prices
its best plan whose EP group crosses scale-up domains (``ep_across_domains``) and the notes give the rail-only
penalty on it (issue 34).

Speed: the plan space is restricted to ZeRO 1 or 3 without HSDP, up to 4 interleaved chunks, micro-batches of
at most 2 sequences, one precision (``restricted_space`` in the output says so); every design with the same
step-model inputs shares one search.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tierwise.design.cost import default_fabric, economics, fabric_cost
from tierwise.design.scaleup import load_figures, scale_up_extra
from tierwise.errors import TierwiseError
from tierwise.estimate.step import estimate
from tierwise.planner import search
from tierwise.planner.explain import plan_entry
from tierwise.planner.gpus import CANDIDATES, gpus_block, max_idle_gpus, usable_counts
from tierwise.planner.space import Constraints, NoLayoutError
from tierwise.specs.cluster import ScaleOutLevel, load_cluster, with_fabric_latency
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.topology.choose import FabricOverrides
from tierwise.topology.costs import load_prices
from tierwise.topology.fat_tree import leaf_ports

__all__ = ["Design", "DEFAULT_DESIGNS", "compare_designs", "design_cluster", "pareto_front", "best_plan",
           "RESTRICTED_SPACE", "ep_across_domains", "rail_only_penalty"]

RESTRICTED_SPACE = "ZeRO 1 or 3 (no HSDP), vpp <= 4, micro-batch <= 2, one precision"
EP_TOP = 2000
"""Ranked plans (EP >= 2) searched for the best one whose EP group crosses scale-up domains."""


@dataclass(frozen=True, kw_only=True)
class Design:
    """One cluster design (module docstring)."""

    name: str
    cluster: str
    """Catalog cluster (accelerator, server or rack)."""
    fabric: str = "ib"
    family: str | None = None
    """Topology family; None: rail-optimized for 8-GPU servers, nvl72 for racks."""
    oversubscription: float = 1.0
    nic_gbps: float | None = None
    """NIC speed; None: the cluster's."""


DEFAULT_DESIGNS = (
    Design(name="H100 8-GPU, IB 400G, rail-optimized", cluster="dgx-h100"),
    Design(name="H100 8-GPU, RoCE 400G, rail-optimized", cluster="dgx-h100", fabric="roce"),
    Design(name="H100 8-GPU, IB 400G, rail-only", cluster="dgx-h100", family="rail-only"),
    Design(name="H100 8-GPU, IB 400G, fat tree 2:1", cluster="dgx-h100", family="fat-tree", oversubscription=2.0),
    Design(name="H100 8-GPU, IB 400G, dragonfly", cluster="dgx-h100", family="dragonfly"),
    Design(name="H100 8-GPU, IB 200G, rail-optimized", cluster="dgx-h100", nic_gbps=200),
    Design(name="B200 8-GPU, IB 400G, rail-optimized", cluster="dgx-b200"),
    Design(name="GB200 NVL72, IB 400G", cluster="gb200-nvl72"),
    Design(name="GB200 NVL72, IB 800G", cluster="gb200-nvl72", nic_gbps=800),
    Design(name="MI355X 8-GPU, RoCE 400G, rail-optimized", cluster="mi355x-8", fabric="roce"),
    Design(name="MI355X 8-GPU, Ultra Ethernet 400G", cluster="mi355x-8-uec", fabric="roce"),
    Design(name="MI355X-class UALink 1,024 pod, Ultra Ethernet 400G", cluster="ualink-pod-1024", fabric="roce",
           family="rail-optimized"),
)
"""8-GPU servers vs NVL72 racks, IB vs RoCE, NIC speed, rails, oversubscription, fat tree / rail-only /
dragonfly; AMD MI355X on RoCE and on Ultra Ethernet (priced as Ethernet), and a UALink 1.0 pod (catalog
clusters mi355x-8, mi355x-8-uec, ualink-pod-1024, each with its sources)."""


def design_cluster(base, nic_gbps: float | None = None, oversubscription: float = 1.0, leaf_gpus: int = 256):
    """The base cluster with the design's NIC speed and, when ``oversubscription > 1``, a leaf level of
    ``leaf_gpus`` GPUs whose uplinks carry ``1/o`` of the NICs' rate."""

    c = base
    if nic_gbps is not None:
        c = replace(c, nic_bytes_per_s=nic_gbps * 1e9 / 8, name=f"{c.name} ({nic_gbps:g}G NICs)")
    if oversubscription > 1:
        c = replace(c, scale_out_levels=(ScaleOutLevel(name="leaf", domain_size=leaf_gpus,
                                                        oversubscription=oversubscription),),
                    name=f"{c.name} ({oversubscription:g}:1 above {leaf_gpus}-GPU leaves)")
    return c


def _constraints(precision: str):

    return Constraints(zero_stages=(1, 3), precision=(precision,), max_vpp=4, max_micro_batch_size=2, hsdp=False,
                       ep_comm_overlap=False)


def _best_on(model, cluster, num_gpus: int, global_batch: int, seq: int, precision: str,
             parameters: Parameters) -> dict[str, Any] | None:
    r = search(model, cluster, num_gpus, global_batch, seq, constraints=_constraints(precision), top=1,
               parameters=parameters)
    if not len(r.plans["tp"]):
        return None
    batch = r.batch()
    entry = plan_entry(model, cluster, num_gpus, batch.plan(0), estimate(model, cluster, batch, parameters=parameters), 0)
    entry["gpus"] = gpus_block(cluster, num_gpus, num_gpus)
    return entry


def best_plan(model, cluster, num_gpus: int, global_batch: int, seq: int, precision: str, *,
              parameters: Parameters) -> dict[str, Any] | None:
    """The planner's best plan (restricted space, :data:`RESTRICTED_SPACE`) and its estimate entry; None when
    no plan fits memory. When no layout uses every GPU, the best of the largest usable counts, as ``plan``
    does (:mod:`tierwise.planner.gpus`); ``gpus`` in the entry says how many it uses."""
    try:
        return _best_on(model, cluster, num_gpus, global_batch, seq, precision, parameters)
    except NoLayoutError as exc:
        first = exc
    best = None
    idle = max_idle_gpus(cluster, num_gpus)
    for n in usable_counts(model, num_gpus, global_batch, seq, _constraints(precision), idle)[:CANDIDATES]:
        try:
            entry = _best_on(model, cluster, n, global_batch, seq, precision, parameters)
        except NoLayoutError:
            continue
        if entry and (best is None or entry["estimate"]["tokens_per_s"] > best["estimate"]["tokens_per_s"]):
            best = entry
    if best is None:
        raise first
    best["gpus"] = gpus_block(cluster, num_gpus, best["gpus"]["used"])
    return best


def ep_across_domains(model, cluster, num_gpus: int, global_batch: int, seq: int, precision: str, *,
                      parameters: Parameters) -> dict:
    """The best plan (of the :data:`EP_TOP` best with EP >= 2, restricted space) whose EP group spans more than
    one scale-up domain (``ep x etp`` GPUs > the domain) with an expert TP smaller than the domain, so that its
    dispatch / combine all-to-all crosses the scale-out fabric between GPUs at different positions in their
    domains, i.e. across rails (with ``etp`` = the domain every EP peer sits at the same position, on the same
    rail, and rail-only costs it nothing): ``{plan, step_time_s, tokens_per_s, ep_gpus}``, or ``{why}`` when there is none (a dense
    model, or every EP group fits one domain, as Mixtral's 8 experts do on an NVL72 rack)."""
    if model.moe is None:
        return {"why": "dense model: no expert parallelism"}
    try:
        r = search(model, cluster, num_gpus, global_batch, seq, constraints=replace(_constraints(precision), min_ep=2),
                   top=EP_TOP, parameters=parameters)
    except NoLayoutError as exc:
        return {"why": f"no EP plan on {num_gpus} GPUs: {exc}"}
    span = np.asarray(r.plans["ep"]) * np.asarray(r.plans["etp"])
    etp = np.asarray(r.plans["etp"])
    rows = np.flatnonzero((span > cluster.scale_up_domain) & (etp < cluster.scale_up_domain))
    if not rows.size:
        return {"why": f"every EP group of the {len(span)} best EP plans fits one {cluster.scale_up_domain}-GPU "
                       "scale-up domain or keeps its peers on one rail (expert TP = the domain)"}
    i = int(rows[0])
    batch = r.batch()
    entry = plan_entry(model, cluster, num_gpus, batch.plan(i), estimate(model, cluster, batch, parameters=parameters), i)
    e = entry["estimate"]
    return {"plan": {k: entry[k] for k in ("tp", "pp", "cp", "dp", "ep", "vpp", "micro_batch_size", "zero_stage")},
            "ep_gpus": int(span[i]), "step_time_s": e["step_time_s"], "tokens_per_s": e["tokens_per_s"]}


def rail_only_penalty(rows: list[dict]) -> list[str]:
    """One note per rail-only design with a rail-optimized twin (same cluster, fabric, NIC speed and
    oversubscription): the step of each one's best plan and of its EP-across-domains plan, rail-only over
    rail-optimized."""
    notes = []
    for r in rows:
        if r["topology"] != "rail-only" or not r.get("fits"):
            continue
        twin = next((t for t in rows if t["topology"] == "rail-optimized" and t.get("fits") and all(
            t[k] == r[k] for k in ("cluster", "fabric", "nic_gbps", "oversubscription"))), None)
        if twin is None:
            continue
        line = f"{r['name']} vs {twin['name']}: best plan step x{r['step_time_s'] / twin['step_time_s']:.4f}"
        a, b = r.get("ep_across_domains", {}), twin.get("ep_across_domains", {})
        if "step_time_s" in a and "step_time_s" in b:
            line += (f"; EP across domains (ep {a['plan']['ep']} over {a['ep_gpus']} GPUs) "
                     f"x{a['step_time_s'] / b['step_time_s']:.4f}: cross-rail all-to-all bytes cross NVLink first "
                     "(PXN); with NVLink ~9x the NIC rate the forward is absorbed and only its step latency shows")
        notes.append(line)
    return notes


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats in both coordinates (both maximised)."""
    front = []
    for i, (a, b) in enumerate(points):
        if not any((a2 >= a and b2 >= b) and (a2 > a or b2 > b) for j, (a2, b2) in enumerate(points) if j != i):
            front.append(i)
    return front


def _scale_up_beyond_rack(cl, gpus: int) -> dict | None:
    """Capex and power of a scale-up domain larger than one 72-GPU rack (a UALink pod): spine switches and
    optics per GPU (:func:`tierwise.design.scaleup.scale_up_extra`); None for domains of one rack or less."""
    if cl.scale_up_domain <= 72:
        return None
    extra = scale_up_extra(cl, cl.scale_up_domain, load_figures(), ualink=cl.name.startswith("ualink"))
    return {"usd": extra.usd_per_gpu * gpus, "w": extra.w_per_gpu * gpus, "basis": extra.basis}


def _evaluate(design: Design, model, num_gpus, global_batch, seq, *, precision, prices, tokens, cache,
              parameters: Parameters, overrides: FabricOverrides | None = None) -> dict:
    """One design's best plan, fabric (chosen for the GPUs: :func:`tierwise.topology.choose.choose_fabric`, the
    design's topology, fabric and oversubscription fixed unless ``overrides`` fix them), capex and economics."""
    base = load_cluster(design.cluster, parameters=parameters)
    o = overrides or FabricOverrides()
    fixed = FabricOverrides(topology=o.topology or design.family, fabric=o.fabric or design.fabric, radix=o.radix,
                            tiers=o.tiers, oversubscription=o.oversubscription or design.oversubscription)
    over = fixed.oversubscription
    choice = default_fabric(design_cluster(base, design.nic_gbps), num_gpus, fixed)
    spec = choice.spec
    leaf_gpus = max(leaf_ports(spec.radix, over)[0] // base.gpus_per_node, 1) * base.gpus_per_node
    cl = with_fabric_latency(design_cluster(base, design.nic_gbps, over, leaf_gpus), choice.fabric)
    rail_only = spec.family == "rail-only"
    if rail_only:  # the collective model forwards cross-rail all-to-all bytes over the scale-up domain
        cl = replace(cl, fabric={**cl.fabric, "topology": "rail-only"})
    key = (design.cluster, round(cl.nic_bytes_per_s * 8 / 1e9), over, cl.scale_out_extra_per_switch_s, rail_only)
    if key not in cache:
        cache[key] = best_plan(model, cl, num_gpus, global_batch, seq, precision, parameters=parameters)
    if ("ep",) + key not in cache:
        cache[("ep",) + key] = ep_across_domains(model, cl, num_gpus, global_batch, seq, precision,
                                                   parameters=parameters)
    entry = cache[key]
    priced = spec.gpus
    net = fabric_cost(cl, priced, prices, spec=spec, fabric=choice.fabric)
    net["fabric_choice"] = choice.reason
    scale_up = _scale_up_beyond_rack(cl, priced)
    if scale_up is not None:  # a domain past one rack: its spine switches and optics (design/scaleup.py)
        net = {**net, "network_capex_usd": net["network_capex_usd"] + scale_up["usd"],
               "network_power_w": net["network_power_w"] + scale_up["w"],
               "capex_by_part_usd": {**net["capex_by_part_usd"], "scale_up_spine": scale_up["usd"]}}
    out: dict[str, Any] = {"name": design.name, "cluster": design.cluster, "fabric": design.fabric,
                           "topology": net["topology"], "oversubscription": design.oversubscription,
                           "nic_gbps": cl.nic_bytes_per_s * 8 / 1e9, "gpus_priced": priced,
                           "num_switches": net["num_switches"], "switch_radix": net["switch_radix"],
                           "fabric_choice": choice.reason}
    out["ep_across_domains"] = cache[("ep",) + key]
    if entry is None:
        out.update(fits=False, tokens_per_s=0.0)
        return out
    e = entry["estimate"]
    econ = economics(e["tokens_per_s"], cl, num_gpus, prices, tokens=tokens, network=net, fabric=choice.fabric)
    out["gpus"] = entry["gpus"]
    out.update(fits=True, plan={k: entry[k] for k in ("tp", "pp", "cp", "dp", "ep", "vpp", "micro_batch_size",
                                                      "recompute", "zero_stage", "precision")},
               step_time_s=e["step_time_s"], tokens_per_s=e["tokens_per_s"], mfu=e["mfu"], mfu_bf16=e["mfu_bf16"],
               exposed_comm_s=e["breakdown"]["exposed_comm_s"],
               capex_usd=econ["capex_usd"]["total"], network_capex_usd=net["network_capex_usd"],
               network_share_of_capex=econ["network_share_of_capex"], power_w=econ["power_w"]["facility"],
               tokens_per_usd=econ["tokens_per_usd"], tokens_per_joule=econ["tokens_per_joule"],
               usd_per_million_tokens=econ["usd_per_million_tokens"], economics=econ)
    return out


def right_size(model, base_cluster: str, num_gpus: int, global_batch: int, seq: int, precision: str, *,
               tolerance: float, gbps=(50, 100, 200, 400, 800, 1600), cache: dict | None = None,
               parameters: Parameters) -> dict:
    """The slowest NIC speed (scale-out bandwidth per GPU) whose best plan's step is within ``tolerance`` of the
    best step over ``gbps`` (each speed gets its own best plan)."""
    base = load_cluster(base_cluster, parameters=parameters)
    rows = []
    cache = {} if cache is None else cache
    for g in gbps:
        key = (base_cluster, g, 1.0)
        if key not in cache:
            cache[key] = best_plan(model, design_cluster(base, g), num_gpus, global_batch, seq, precision,
                                   parameters=parameters)
        entry = cache[key]
        rows.append({"nic_gbps": g, "step_time_s": entry["estimate"]["step_time_s"] if entry else None,
                     "plan": entry and {k: entry[k] for k in ("tp", "pp", "cp", "dp")}})
    steps = [r["step_time_s"] for r in rows if r["step_time_s"]]
    if not steps:
        return {"cluster": base_cluster, "sweep": rows, "slowest_gbps_within": None}
    best = min(steps)
    ok = [r["nic_gbps"] for r in rows if r["step_time_s"] and r["step_time_s"] <= best * (1 + tolerance)]
    return {"cluster": base_cluster, "tolerance": tolerance, "best_step_time_s": best, "sweep": rows,
            "slowest_gbps_within": min(ok),
            "note": "each NIC speed gets its own best plan; bandwidth per GPU = NICs per node x speed / GPUs per node"}


def compare_designs(model, num_gpus: int, *, global_batch: int = 2048, seq: int = 8192, precision: str = "bf16",
                    tokens: float | None = None, budget: float | None = None, prices: dict | None = None,
                    tolerance: float = 0.05, designs=DEFAULT_DESIGNS,
                    overrides: FabricOverrides | None = None, parameters: Parameters | None = None) -> dict:
    """The ``design --json`` document (module docstring); ``overrides`` fix the fabric of every design (the
    user's ``--topology --fabric --radix --tiers --oversubscription``). ``parameters``: the model's parameters
    every design is priced under (None, this being ``design``'s entry point: :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    if precision not in ("bf16", "fp8"):
        raise TierwiseError(f"--precision {precision!r}; choose bf16 or fp8")
    prices = prices or load_prices()
    cache: dict = {}
    rows = [_evaluate(d, model, num_gpus, global_batch, seq, precision=precision, prices=prices, tokens=tokens,
                      cache=cache, overrides=overrides, parameters=parameters) for d in designs]
    ok = [i for i, r in enumerate(rows) if r["fits"]]
    front = [ok[i] for i in pareto_front([(rows[i]["tokens_per_s"], rows[i]["tokens_per_usd"]) for i in ok])]
    for i, r in enumerate(rows):
        r["pareto"] = i in front
        r["within_budget"] = budget is None or (r["fits"] and r["capex_usd"] <= budget)
    affordable = [i for i in ok if rows[i]["within_budget"]]
    best = max(affordable, key=lambda i: rows[i]["tokens_per_s"]) if affordable else None
    inverse = right_size(model, designs[0].cluster, num_gpus, global_batch, seq, precision, tolerance=tolerance,
                         cache=cache, parameters=parameters)
    notes = [
        "fat tree, rail-optimized, rail-only and dragonfly at the same NIC rate give the same analytic step for "
        "plans without EP: data/pipeline/context rings are same-rail traffic; they differ in cost (and, for "
        "adversarial traffic, in `tierwise simulate`); EP all-to-all on rail-only is forwarded over NVLink (PXN)",
        f"plan space restricted for speed: {RESTRICTED_SPACE}",
        "NVL72 designs are priced as whole racks (gpus_priced); the job runs on num_gpus of them",
        "InfiniBand and RoCE at the same line rate give the same analytic step; they differ in switch and NIC "
        "price and power (and in congestion control and routing, which tierwise does not model; both ran "
        "24K-GPU jobs, hardware-notes section 3)",
        *rail_only_penalty(rows),
    ]
    return {"model": model.name, "num_gpus": num_gpus, "global_batch_size": global_batch, "seq_length": seq,
            "precision": precision, "tokens": tokens, "budget_usd": budget, "designs": rows,
            "pareto_front": [rows[i]["name"] for i in front], "pareto_axes": ["tokens_per_s", "tokens_per_usd"],
            "fastest_within_budget": rows[best]["name"] if best is not None else None,
            "right_size": inverse, "restricted_space": RESTRICTED_SPACE, "notes": notes,
            "seeds_network_budget": "15-25% of cluster cost (seeds); each design's share is computed, not tuned"}
