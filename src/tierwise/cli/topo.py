"""``tierwise topo FAMILY`` (fabric inventory, bisection, hops, cost, power) and ``tierwise simulate PATTERN``
(flow-level simulation of a collective on a fabric). numpy and the simulator load inside the commands."""

from __future__ import annotations

import os
import shlex

import typer

from tierwise.cli._output import emit, kv_table, print_table
from tierwise.files import short_repr

__all__ = ["register"]

_FAMILY_HELP = "fat-tree | rail-optimized | rail-only | dragonfly | torus | nvl72, or a topology YAML file"


def _spec(family, gpus, *, gpus_per_node, nics_per_node, radix, tiers, oversubscription, nic_bandwidth, scale_up,
          scale_up_bandwidth, domain_size, hop_latency, dims, groups):
    from tierwise.errors import TopologyError
    from tierwise.limits import MAX_FABRIC_GPUS, check_int
    from tierwise.topology.spec import load_topology_yaml, spec_from_mapping

    if _is_file(family):
        return load_topology_yaml(family)
    gpus = check_int(gpus, "--gpus", maximum=MAX_FABRIC_GPUS, error=TopologyError)
    if dims is not None and family != "torus":
        raise TopologyError(f"--dims {short_repr(dims, 40)} sets a torus's shape; it applies to the torus family, "
                            f"not {short_repr(family, 40)} (drop --dims or use torus)")
    if gpus_per_node is None:
        gpus_per_node = 4 if family == "nvl72" else (1 if family == "torus" else 8)
    data = dict(family=family, gpus=gpus, gpus_per_node=gpus_per_node, nics_per_node=nics_per_node, radix=radix,
                tiers=tiers, oversubscription=oversubscription, nic_bandwidth=nic_bandwidth, scale_up=scale_up,
                scale_up_bandwidth=scale_up_bandwidth, domain_size=domain_size, hop_latency=hop_latency,
                groups=groups)
    if dims is not None:
        data["dims"] = dims
    elif family == "torus":
        data["dims"] = _square_dims(gpus)
    return spec_from_mapping({k: v for k, v in data.items() if v is not None})


def _is_file(family: str) -> bool:
    return family.endswith((".yaml", ".yml")) or os.path.isfile(family)


def _square_dims(gpus: int) -> str:
    side = int(round(gpus ** 0.5))
    return f"{side}x{gpus // side}" if side * (gpus // side) == gpus else f"{gpus}"


# shared option declarations (typer reads defaults from these)
_O = dict(
    gpus=typer.Option(1024, "--gpus", help="number of GPUs"),
    gpus_per_node=typer.Option(None, "--gpus-per-node", help="default 8 (4 for nvl72, 1 for torus)"),
    nics_per_node=typer.Option(None, "--nics-per-node", help="scale-out NICs per node (default one per GPU)"),
    radix=typer.Option(None, "--radix", help="switch ports at the NIC speed (topo default: the fabric's switch, then "
                       "a larger generation or more planes as the GPUs need; simulate default 64)"),
    tiers=typer.Option(None, "--tiers", help="fat-tree tiers: 1, 2 or 3 (default: the fewest that hold the GPUs)"),
    oversubscription=typer.Option(1.0, "--oversubscription", help="leaf down:up ratio (1 = non-blocking)"),
    nic_bandwidth=typer.Option("400 Gb/s", "--nic-bandwidth", help="one-way per NIC"),
    scale_up=typer.Option("nvswitch", "--scale-up", help="nvswitch | mesh | none"),
    scale_up_bandwidth=typer.Option(None, "--scale-up-bandwidth", help="one-way per GPU (default 450 GB/s; "
                                    "900 GB/s for nvl72)"),
    domain_size=typer.Option(None, "--domain-size", help="GPUs per scale-up domain (default the node; 72 nvl72)"),
    hop_latency=typer.Option("300 ns", "--hop-latency", help="per scale-out link"),
    dims=typer.Option(None, "--dims", help="torus dims, e.g. 8x8x8"),
    groups=typer.Option(None, "--groups", help="dragonfly groups (default: as few as fit)"),
)


def register(app: typer.Typer) -> None:
    @app.command("topo")
    def topo(
        *,
        family: str = typer.Argument(..., help=_FAMILY_HELP),
        gpus: int = _O["gpus"], gpus_per_node: int = _O["gpus_per_node"], nics_per_node: int = _O["nics_per_node"],
        radix: int = _O["radix"], tiers: int = _O["tiers"], oversubscription: float = _O["oversubscription"],
        nic_bandwidth: str = _O["nic_bandwidth"], scale_up: str = _O["scale_up"],
        scale_up_bandwidth: str = _O["scale_up_bandwidth"], domain_size: int = _O["domain_size"],
        hop_latency: str = _O["hop_latency"], dims: str = _O["dims"], groups: int = _O["groups"],
        prices: str = typer.Option(None, "--prices", help="price/power YAML overriding the shipped one"),
        cluster: str = typer.Option(None, "--cluster", help="catalog cluster or cluster YAML whose servers "
                                    "or racks the fabric joins (their price and power; default gb200-nvl72 for "
                                    "nvl72, else dgx-h100)"),
        fabric: str = typer.Option(None, "--fabric", help="ib | roce (default: roce for a cluster named *roce*, "
                                   "else ib)"),
        leaf_placement: str = typer.Option("row", "--leaf-placement", help="row (leaves a rack away: optical NIC "
                                           "links) | rack (top of rack: copper NIC links where a leaf fits a rack)"),
        cpo: bool = typer.Option(False, "--cpo", help="co-packaged optics on the switches"),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
    ) -> None:
        """Inventory, bisection (one-way), hops, capex and power of a scale-out fabric."""
        from tierwise.cli.tiers import domain_line
        from tierwise.hierarchy import scale_up_domain
        from tierwise.netsim.routing import route
        from tierwise.topology import build_fabric
        from tierwise.topology.costs import load_prices
        from tierwise.topology.metrics import topology_report

        spec = _spec(family, gpus, gpus_per_node=gpus_per_node, nics_per_node=nics_per_node, radix=radix,
                     tiers=tiers, oversubscription=oversubscription, nic_bandwidth=nic_bandwidth, scale_up=scale_up,
                     scale_up_bandwidth=scale_up_bandwidth, domain_size=domain_size, hop_latency=hop_latency,
                     dims=dims, groups=groups)
        spec, cl, fabric, assumed = _topo_cluster(spec, family, cluster=cluster, fabric=fabric, radix=radix,
                                                  tiers=tiers)
        report = topology_report(build_fabric(spec), load_prices(prices), route_fn=route,
                                 accelerator=cl.accelerator.name, gpu_power_w=cl.accelerator.power_w,
                                 fabric=fabric, placement=leaf_placement, cpo=cpo)
        report["cluster"] = cl.name
        report["scale_up_domain"] = scale_up_domain(cl)
        report["scale_up_domain_line"] = domain_line(report["scale_up_domain"])
        report["assumed"] = assumed
        emit(report, as_json, lambda con: _render_topo(con, report), document="topo")

    app.command("simulate")(simulate_cmd)


def _topo_cluster(spec, family: str, *, cluster, fabric, radix, tiers):
    """The cluster whose servers or racks the fabric joins, the fabric kind, and (no ``--radix`` given) the
    switch chosen for the GPUs: the spec, the cluster, the fabric and what was assumed."""
    from tierwise.errors import TopologyError
    from tierwise.specs.cluster import load_cluster
    from tierwise.topology.choose import choose_for_spec
    from tierwise.topology.costs import fabric_of

    assumed = []
    if cluster is None:
        cluster = "gb200-nvl72" if spec.family == "nvl72" else "dgx-h100"
        why = "the rack part the nvl72 family implies" if spec.family == "nvl72" else "the default 8-GPU server"
        assumed.append(f"--cluster {cluster} ({why})")
    cl = load_cluster(cluster)
    if spec.family == "nvl72" and cl.scale_up_domain <= cl.gpus_per_node:
        raise TopologyError(f"topo nvl72 joins NVLink racks, but --cluster {cluster} is {cl.gpus_per_node}-GPU "
                            "servers; give a rack part (gb200-nvl72, gb300-nvl72) or leave --cluster out")
    if fabric is None:
        fabric = fabric_of(cluster, cl)
        assumed.append(f"--fabric {fabric} (from the cluster {cluster!r})")
    if radix is None and not _is_file(family) and spec.family in ("fat-tree", "rail-optimized", "nvl72"):
        choice = choose_for_spec(spec, fabric, tiers)
        spec = choice.spec
        assumed.append(f"fabric: {choice.reason}")
    return spec, cl, fabric, assumed


# simulate's own options (typer reads defaults from these)
_S = dict(
    topology=typer.Option("fat-tree", "--topology", help=_FAMILY_HELP),
    size=typer.Option("1GB", "--size", help="collective size (nccl-tests convention)"),
    ranks=typer.Option(None, "--ranks", help="ranks taking part (first N GPUs; default all)"),
    routing=typer.Option("adaptive", "--routing", help="ecmp | adaptive"),
    algorithm=typer.Option("auto", "--algorithm", help="ring | hierarchical | tree (all-reduce) | direct (auto: ring/direct)"),
    fail_links=typer.Option("0", "--fail-links", help="scale-out cables to fail: N or P%"),
    fail_switches=typer.Option("0", "--fail-switches", help="fabric switches to fail: N or P%"),
    fail_domains=typer.Option("0", "--fail-domains", help="scale-up domains (nodes/racks) to fail"),
    slow_links=typer.Option("0", "--slow-links", help="scale-out cables running slow (stragglers on the fabric): N "
                            "or P%"),
    slow_by=typer.Option(0.25, "--slow-by", help="how much slower a slow cable is (0.25: 1/1.25 of its rate)"),
    stages=typer.Option(4, "--stages", help="pipeline stages (pattern pipeline)"),
    shift=typer.Option(None, "--shift", help="permutation r -> r+SHIFT instead of random"),
    second_job=typer.Option(None, "--second-job", help="a second job's collective (all-reduce, all-gather, "
                            "reduce-scatter, all-to-all, permutation) on the other half of the servers: each job's "
                            "time alone and together"),
    placement=typer.Option(None, "--placement", help="with --second-job: packed (each job on its own half of the "
                           "servers; the default) | fragmented (servers alternate)"),
    fan_in=typer.Option(None, "--fan-in", help="incast: senders to one receiver (each also sends a victim flow to an "
                        "idle GPU; max-min, DCQCN and PFC sharing compared; default 8)"),
    seed=typer.Option(1, "--seed", help="seed of ECMP hashing, permutations and failures"),
    per_flow=typer.Option(False, "--per-flow", help="all-to-all: one flow per GPU pair (<= 1,024 ranks) instead of "
                          "path classes"),
    emit_cluster=typer.Option(None, "--emit-cluster", help="write a cluster YAML with the simulated scale-out "
                              "efficiency"),
    cluster=typer.Option("dgx-h100", "--cluster", help="catalog cluster the emitted YAML starts from (its "
                         "accelerator and links; the fabric's shape replaces the rest)"),
)


def simulate_cmd(
    *,
    pattern: str = typer.Argument(..., help="all-reduce | all-gather | reduce-scatter | all-to-all | "
                                  "pipeline | permutation | incast"),
    topology: str = _S["topology"], size: str = _S["size"], ranks: int = _S["ranks"], routing: str = _S["routing"],
    algorithm: str = _S["algorithm"], fail_links: str = _S["fail_links"], fail_switches: str = _S["fail_switches"],
    fail_domains: str = _S["fail_domains"], slow_links: str = _S["slow_links"], slow_by: float = _S["slow_by"],
    stages: int = _S["stages"], shift: int = _S["shift"], second_job: str = _S["second_job"],
    placement: str = _S["placement"], fan_in: int = _S["fan_in"], seed: int = _S["seed"],
    per_flow: bool = _S["per_flow"], emit_cluster: str = _S["emit_cluster"], cluster: str = _S["cluster"],
    gpus: int = _O["gpus"], gpus_per_node: int = _O["gpus_per_node"], nics_per_node: int = _O["nics_per_node"],
    radix: int = _O["radix"], tiers: int = _O["tiers"], oversubscription: float = _O["oversubscription"],
    nic_bandwidth: str = _O["nic_bandwidth"], scale_up: str = _O["scale_up"],
    scale_up_bandwidth: str = _O["scale_up_bandwidth"], domain_size: int = _O["domain_size"],
    hop_latency: str = _O["hop_latency"], dims: str = _O["dims"], groups: int = _O["groups"],
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    html: str = typer.Option(None, "--html", help="write a self-contained HTML report here"),
) -> None:
    """Flow-level simulation: completion time, algbw/busbw, bottleneck links, degradation under failures."""
    from tierwise.collectives.volumes import normalize_kind
    from tierwise.errors import TopologyError
    from tierwise.limits import MAX_BYTES, check_int
    from tierwise.netsim import Failures
    from tierwise.units import parse_bytes

    _check_outputs(cluster, emit_cluster, html)
    kind = pattern if pattern in ("pipeline", "permutation", "incast") else normalize_kind(pattern)
    size_bytes = parse_bytes(size, what="--size", maximum=MAX_BYTES)
    check_int(seed, "--seed", minimum=0, maximum=2**32 - 1, error=TopologyError)
    spec = _spec(topology, gpus, gpus_per_node=gpus_per_node, nics_per_node=nics_per_node, radix=radix, tiers=tiers,
                 oversubscription=oversubscription, nic_bandwidth=nic_bandwidth, scale_up=scale_up,
                 scale_up_bandwidth=scale_up_bandwidth, domain_size=domain_size, hop_latency=hop_latency, dims=dims,
                 groups=groups)
    given = {"--ranks": ranks is not None, "--algorithm": algorithm != "auto", "--fail-links": fail_links != "0",
             "--fail-switches": fail_switches != "0", "--fail-domains": fail_domains != "0",
             "--slow-links": slow_links != "0", "--shift": shift is not None, "--per-flow": per_flow,
             "--emit-cluster": emit_cluster is not None, "--html": html is not None}
    if _other_patterns(spec, kind, size_bytes, routing, seed, as_json, second_job=second_job,
                       placement=placement, fan_in=fan_in, given=given):
        return
    ranks = _check_ranks(spec, ranks, stages, shift)
    failures = Failures(links=fail_links, switches=fail_switches, domains=fail_domains, slow_links=slow_links,
                        slow_by=slow_by)
    _run_simulation(spec, pattern, kind, size_bytes, algorithm=algorithm, ranks=ranks, routing=routing, seed=seed,
                    stages=stages, shift=shift, per_flow=per_flow, failures=failures, cluster=cluster,
                    oversubscription=oversubscription, emit_cluster=emit_cluster, html=html, as_json=as_json)


def _check_outputs(cluster: str, emit_cluster: str | None, html: str | None) -> None:
    """Before the simulation: the ``--cluster`` named (the notes' comparison too: an unknown one is an error, never
    ignored), and the places ``--emit-cluster`` and ``--html`` write (one that cannot be written fails now)."""
    from tierwise.specs.cluster import load_cluster

    load_cluster(cluster)
    if emit_cluster is not None:
        from tierwise.atomic import check_writable

        check_writable(emit_cluster, "--emit-cluster")
    if html is not None:  # issue 19: before the simulation
        from tierwise.report import check_html

        check_html(html)


def _check_ranks(spec, ranks: int | None, stages: int, shift: int | None) -> int | None:
    """``--gpus``, ``--ranks``, ``--stages`` and ``--shift`` within what a flow-level simulation of this fabric
    takes (the bounds suggested are the fabric's own, so that a suggested value is one that is accepted)."""
    from tierwise.errors import TopologyError
    from tierwise.limits import MAX_SIM_GPUS, check_int

    check_int(spec.gpus, "--gpus", maximum=MAX_SIM_GPUS, error=TopologyError,
              hint=" for simulate (a flow-level simulation of more GPUs takes minutes; topo and design take up "
                   "to 1,048,576)")
    fabric_gpus = int(getattr(spec, "gpus", MAX_SIM_GPUS) or MAX_SIM_GPUS)
    if ranks is not None:
        ranks = check_int(ranks, "--ranks", minimum=2, maximum=max(2, fabric_gpus), error=TopologyError,
                          hint=f" (the fabric's {fabric_gpus} GPUs)")
    check_int(stages, "--stages", minimum=2, maximum=max(2, ranks or fabric_gpus), error=TopologyError,
              hint=" (the ranks simulated)")
    if shift is not None:
        check_int(shift, "--shift", minimum=-MAX_SIM_GPUS, maximum=MAX_SIM_GPUS, error=TopologyError)
    return ranks


def _run_simulation(spec, pattern: str, kind: str, size_bytes: float, *, algorithm, ranks, routing, seed, stages,
                    shift, per_flow, failures, cluster, oversubscription, emit_cluster, html, as_json) -> None:
    """Simulate the collective on the fabric, add the notes comparing it with the ring model, write
    ``--emit-cluster`` and ``--html``, print the result."""
    from tierwise.cli._progress import progress
    from tierwise.netsim import simulate
    from tierwise.topology import build_fabric

    with progress(f"simulating {pattern}"):
        fab = build_fabric(spec)
        result = simulate(fab, kind, size_bytes, algorithm=algorithm, num_ranks=ranks, routing=routing,
                          seed=seed, stages=stages, shift=shift, per_flow=per_flow,
                          failures=failures)
    from tierwise.netsim.compare import simulate_ring_notes

    extra, notes = simulate_ring_notes(fab, result, base=cluster, oversubscription=oversubscription)
    result.update(extra)
    result["notes"] = notes
    if emit_cluster is not None:
        from tierwise.netsim.emit import write_cluster

        result["emitted_cluster"] = write_cluster(emit_cluster, fab, result, _argv_text(), base=cluster)
    if html is not None:
        from tierwise.report import write_page
        from tierwise.report.simulate import simulate_page

        result["html"] = write_page(html, simulate_page(result))
    emit(result, as_json, lambda con: _render_sim(con, result), document="simulate")


def _other_patterns(spec, kind: str, size_bytes: float, routing: str, seed: int, as_json: bool, *,
                    second_job, placement, fan_in, given: dict) -> bool:
    """Run ``simulate incast`` or a two-job simulation when asked (True: done); refuse ``--placement`` without
    ``--second-job``, ``--fan-in`` without ``incast``, and the options (``given``) neither uses, in one line."""
    from tierwise.errors import TopologyError

    if second_job is None and placement is not None:
        raise TopologyError(f"--placement {short_repr(placement, 40)} places a second job; give --second-job "
                            "PATTERN with it, or drop --placement")
    if kind != "incast" and fan_in is not None:
        raise TopologyError(f"--fan-in {fan_in} sets the senders of the incast pattern; use `simulate incast "
                            "--fan-in N`, or drop --fan-in")
    if kind != "incast" and second_job is None:
        return False
    given = {**given, "--second-job": kind == "incast" and second_job is not None}
    _refuse_unused("incast" if kind == "incast" else "--second-job", given)
    if kind == "incast":
        _incast(spec, 8 if fan_in is None else fan_in, size_bytes, routing, seed, as_json)
    else:
        _two_jobs(spec, kind, second_job, placement or "packed", size_bytes, routing, seed, as_json)
    return True


def _refuse_unused(what: str, given: dict) -> None:
    """One line naming the options given that ``what`` (incast, a second job) does not use."""
    from tierwise.errors import TopologyError

    unused = [flag for flag, on in given.items() if on]
    if unused:
        raise TopologyError(f"{', '.join(unused)} do(es) not apply to {what}; drop {unused[0]}")


def _incast(spec, fan_in: int, size_bytes: float, routing: str, seed: int, as_json: bool) -> None:
    """``simulate incast`` (:mod:`tierwise.netsim.incast`): one table of the incast and its victims."""
    from tierwise.errors import TopologyError
    from tierwise.limits import MAX_SIM_GPUS, check_int
    from tierwise.netsim.incast import simulate_incast
    from tierwise.topology import build_fabric
    from tierwise.units import format_bandwidth, format_time

    check_int(spec.gpus, "--gpus", maximum=MAX_SIM_GPUS, error=TopologyError)
    check_int(fan_in, "--fan-in", minimum=1, maximum=max(1, spec.gpus), error=TopologyError)
    result = simulate_incast(build_fabric(spec), fan_in, size_bytes, routing=routing, seed=seed)

    def render(con):
        t = kv_table(f"incast of {fan_in} senders to one GPU on {result['topology']} ({routing})", key_style="")
        t.add_row("incast time", f"{format_time(result['incast_time_s'])} (analytic N S / C: "
                  f"{format_time(result['incast_analytic_time_s'])})")
        for mode, v in result["victims"].items():
            t.add_row(f"victim flow, {mode}", f"{format_bandwidth(v['rate_bytes_per_s'])}, {format_time(v['time_s'])}")
        t.add_row("victim slowdown under PFC", f"x{result['victim_slowdown_pfc']:.2f}")
        print_table(con, t)
        for note in result["notes"]:
            con.print(f"- {note}")

    emit(result, as_json, render, document="simulate-incast")


def _two_jobs(spec, kind: str, second: str, placement: str, size_bytes: float, routing: str, seed: int,
              as_json: bool) -> None:
    """``simulate PATTERN --second-job PATTERN2`` (:mod:`tierwise.netsim.jobs`): each job alone and together."""
    from tierwise.collectives.volumes import normalize_kind
    from tierwise.errors import TierwiseError, TopologyError
    from tierwise.limits import MAX_SIM_GPUS, check_int
    from tierwise.netsim.jobs import simulate_two_jobs
    from tierwise.topology import build_fabric
    from tierwise.units import format_time

    allowed = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "permutation")
    try:
        second = second if second == "permutation" else normalize_kind(second)
    except TierwiseError:
        second = str(second)  # named with the flag below
    for flag, k in (("PATTERN", kind), ("--second-job", second)):
        if k not in allowed:
            raise TopologyError(f"{flag} {k!r} cannot run beside another job; use one of {', '.join(allowed)}")
    check_int(spec.gpus, "--gpus", maximum=MAX_SIM_GPUS, error=TopologyError)
    result = simulate_two_jobs(build_fabric(spec), kind, second, size_bytes, placement=placement, routing=routing,
                               seed=seed)

    def render(con):
        t = kv_table(f"two jobs on {result['topology']} ({placement}, {routing})", key_style="")
        for j in result["jobs"]:
            t.add_row(f"job {j['job']}: {j['pattern']} on {j['gpus']} GPUs",
                      f"{format_time(j['alone_time_s'])} alone, {format_time(j['together_time_s'])} together "
                      f"(x{j['slowdown']:.3f})")
        print_table(con, t)
        for note in result["notes"]:
            con.print(f"- {note}")

    emit(result, as_json, render, document="simulate-jobs")


def _argv_text() -> str:
    import sys

    return shlex.join(sys.argv[1:]) if sys.argv[1:] else "(in-process)"


def _render_topo(con, r: dict) -> None:
    from tierwise.units import format_bandwidth

    t = kv_table(f"{r['topology']} fabric, {r['num_gpus']} GPUs", key_style="")
    rows = [
        ("switches", f"{r['num_switches']}  ({', '.join(f'{k}: {v}' for k, v in r['switches_per_tier'].items() if v)})"),
        ("scale-out cables", f"{r['num_links']}  by tier {r['cables_by_tier']}"),
        ("transceivers", ", ".join(f"{k}: {v}" for k, v in r["transceivers_by_speed"].items()) or "none"),
        ("cables by reach", ", ".join(f"{k}: {v:,}" for k, v in r["by_reach"]["cables"].items())),
        ("optical ends by reach", ", ".join(f"{k}: {v:,}" for k, v in r["by_reach"]["transceiver_ends"].items())
         or "none"),
        ("not counted", r["by_reach"]["left_out"]),
        ("bisection (one-way)", format_bandwidth(r["bisection_bytes_per_s"])),
        ("diameter / avg hops", f"{r['diameter_hops']} / {r['avg_hops']:.2f}  (scale-out links, NIC to NIC)"),
        ("network capex", f"${r['network_capex_usd']:,.0f}  ({r['fabric']}; links: {r['links_by_medium']})"),
        ("network power", f"{r['network_power_w'] / 1e3:,.1f} kW"),
        ("servers / racks", r["servers"]["basis"]),
        ("network share of cost", f"{100 * r['network_share_of_capex']:.1f}%"
         + (f"  (uncertain prices: {100 * r['network_share_range']['low']:.1f}-"
            f"{100 * r['network_share_range']['high']:.1f}%; seeds' budget 15-25%)" if "network_share_range" in r
            else "")),
    ]
    for cls, hv in (r.get("hops_by_class") or {}).items():
        rows.append((f"hops, {cls.replace('_', ' ')}", f"{hv['avg_scale_out_hops']:.2f} avg, {hv['max_scale_out_hops']} "
                     f"max scale-out links" + (f" + {hv['avg_scale_up_hops']:.1f} scale-up (PXN)"
                                               if hv["avg_scale_up_hops"] else "")))
    for k, v in rows:
        t.add_row(k, v)
    print_table(con, t)
    a = r["cost_assumptions"]
    con.print(f"assumptions: {a['gpu_cost']}; {a['optics']}; {a['switch_optics']}; {a['fabric']}; "
              f"{a['switch_scaling']}")
    if r.get("scale_up_domain_line"):
        con.print(r["scale_up_domain_line"])
    for note in r.get("notes", []) + [f"assumed {x}" for x in r.get("assumed", [])]:
        con.print(f"note: {note}")
    for k, v in a["estimates"].items():
        con.print(f"  estimate {k}: {v}")


def _render_sim(con, r: dict) -> None:
    from rich.table import Table

    from tierwise.units import format_bandwidth, format_time

    t = kv_table(f"{r['pattern']} ({r['algorithm']}, {r['routing']}) on {r['topology']}, "
                 f"{r['num_ranks_simulated']} ranks", key_style="")
    t.add_row("time", format_time(r["time_s"]))
    t.add_row("analytic (alpha-beta, same fabric)", format_time(r["analytic_time_s"]))
    t.add_row("algbw / busbw", f"{format_bandwidth(r['algbw_bytes_per_s'])} / {format_bandwidth(r['busbw_bytes_per_s'])}")
    method = r.get("method", "per flow")
    choices = {"hashed": "ECMP/UGAL next hops counted by the per-flow hash",
               "drawn": "next-hop counts drawn from the hash's law (over 4,096 ranks)",
               "hashed+drawn": "minimal pairs counted by the per-flow hash, UGAL's minimal / Valiant split "
                               "drawn from its law"}.get(r.get("hop_choices"))
    t.add_row("method", f"{method} ({choices})" if method == "path classes" and choices else method)
    if "healthy_time_s" in r:
        t.add_row("healthy fabric", f"{format_time(r['healthy_time_s'])} (x{r['degradation']:.3f})")
    for kind, names in r.get("failures", {}).get("failed_parts", {}).items():
        if names:
            shown = ", ".join(names[:6]) + (f", ... and {len(names) - 6} more (all in --json)" if len(names) > 6 else "")
            t.add_row(f"failed {kind} ({len(names)})", shown)
    if r["unreachable_ranks"]:
        t.add_row("unreachable ranks", f"{len(r['unreachable_ranks'])}: {r['unreachable_ranks'][:16]}")
    print_table(con, t)
    b = Table(title="bottleneck links")
    for col in ("link", "utilization", "phase"):
        b.add_column(col)
    for x in r["bottleneck_links"]:
        b.add_row(x["link"], f"{x['utilization']:.3f}", x["phase"])
    print_table(con, b)
    for note in r.get("notes", []):
        con.print(f"- {note}")
