"""``tierwise plan`` (rank parallel layouts and explain the winner) and ``tierwise scale`` (best plan per GPU
count). numpy and the estimator are imported inside the command bodies: start-up time counts."""

from __future__ import annotations

import contextlib
from typing import Annotated

import typer

from tierwise.cli._compute import ComputeOpt, StrictOpt, use_compute_profile
from tierwise.cli._economics import (
    OneBitOpt,
    PowerSgdOpt,
    PricesOpt,
    ReduceDtypeOpt,
    StalenessOpt,
    SyncEveryOpt,
    TokensOpt,
)
from tierwise.cli._fabric import FabricOpt, OversubOpt, RadixOpt, TiersOpt, TopologyOpt, fabric_overrides
from tierwise.cli._output import emit, print_table
from tierwise.cli._plan_options import (
    BalancedMoeOpt,
    BatchOpt,
    Bound,
    ClusterOpt,
    EagerOpt,
    EpOverlapOpt,
    Fixed,
    FrameworkOpt,
    FusedCeOpt,
    HtmlOpt,
    JsonOpt,
    ListOpt,
    ModelOpt,
    ObjOpt,
    OffloadOpt,
    SeqOpt,
    Zero3Opt,
    ZeroOpt,
    check_counts,
    constraints,
    load_model_and_cluster,
)
from tierwise.errors import PlanError, named_as_flags

_FLAGS = {"num_gpus": "--gpus", "global_batch_size": "--global-batch", "seq_length": "--seq",
          "micro_batch_size": "--mbs", "tp": "--tp", "pp": "--pp", "cp": "--cp", "ep": "--ep", "dp": "--dp",
          "vpp": "--vpp"}
"""The plan's fields this command takes as flags: its messages name them as flags (issue 32)."""


@contextlib.contextmanager
def _as_flags():
    """Re-raise a :class:`PlanError` with the plan's fields named as this command's flags
    (:func:`tierwise.errors.named_as_flags`): ``--gpus 12``, not ``num_gpus=12``."""
    try:
        yield
    except PlanError as exc:
        raise named_as_flags(exc, _FLAGS) from None




def render_plans(console, doc: dict) -> None:
    """Rich view of a ``plan --json`` document."""
    from rich.table import Table

    from tierwise.units import format_bytes, format_time

    title = (f"{doc['model']} on {doc['num_gpus']} x {doc['cluster']}, global batch {doc['global_batch_size']} x "
             f"{doc['seq_length']} tokens, ranked by {doc['objective']}")
    table = Table(title=title)
    tiers = ["scale_up", "scale_out"]
    if any("host" in p["estimate"]["breakdown"]["per_tier"] for p in doc["plans"]):
        tiers.insert(1, "host")
    # MFU is against the plan's precision's peak; beside an fp8 plan also against bf16's (published MFU's peak)
    bf16 = ("MFU bf16",) if any(p["precision"] != "bf16" for p in doc["plans"]) else ()
    for col in ("#", "tp", "pp", "dp", "cp", "ep", "vpp", "mbs", "recompute", "ZeRO", "prec", "step", "tokens/s",
                "MFU", *bf16, "memory/GPU", *(f"exposed {t}" for t in tiers), "bubble"):
        table.add_column(col, justify="right" if col not in ("recompute", "prec") else "left")
    for rank, p in enumerate(doc["plans"], 1):
        e = p["estimate"]
        per_tier = e["breakdown"]["per_tier"]
        exposed = [per_tier.get(t, {}).get("exposed_s", 0.0) for t in tiers]
        zero = str(p["zero_stage"]) + ("h" if p["dp_shard"] < p["dp"] else "")
        table.add_row(str(rank), str(p["tp"]), str(p["pp"]), str(p["dp"]), str(p["cp"]),
                      str(p["ep"]) + (f"/{p['etp']}" if p["ep"] > 1 else ""), str(p["vpp"]),
                      str(p["micro_batch_size"]), _memory_cell(p), zero, p["precision"], format_time(e["step_time_s"]),
                      f"{e['tokens_per_s']:,.0f}", f"{e['mfu']:.1%}", *(f"{e['mfu_bf16']:.1%}" for _ in bf16),
                      format_bytes(e["memory"]["per_gpu_bytes"]),
                      *(format_time(x) for x in exposed), format_time(e["breakdown"]["bubble_s"]))
    if doc["plans"]:
        print_table(console, table)
    console.print(doc["explanation"], markup=False)
    offload = ("; recompute 'none, N off' = N layers' activations offloaded to the host"
               if any(p.get("activation_offload_layers") for p in doc["plans"]) else "")
    console.print(f"evaluated {doc['num_evaluated']:,} plans of a space of {doc['space_size']:,} "
                  f"({doc['num_feasible']:,} fit memory); ep shown as ep/etp; ZeRO 'h' = HSDP; vpp > 1 = interleaved "
                  f"1F1B{offload}", style="dim")
    if doc.get("gpus"):
        console.print(f"GPUs: {doc['gpus']['summary']} (of {doc['gpus']['asked']:,} asked)")
        if doc["gpus"].get("note"):
            console.print(f"assumed: {doc['gpus']['note']}", style="dim")
    if doc.get("fabric"):
        console.print(f"fabric: {doc['fabric']['choice']}; {doc['fabric']['num_switches']:,} switches")
    for miss in doc.get("infeasible", []):
        console.print(f"does not fit: {miss['plan']}: {format_bytes(miss['memory_per_gpu_bytes'])} of "
                      f"{format_bytes(miss['capacity_bytes'])}", style="dim")
    for line in doc.get("assumed", []):
        console.print(f"assumed ({doc['framework']}): {line}", style="dim")
    for note in doc.get("notes", []):
        console.print(f"note: {note}", style="yellow")


def render_scale(console, doc: dict, labels: list[str | None]) -> None:
    """Rich view of a ``scale --json`` document; ``labels`` names each point's plan (None where it has none)."""
    from rich.table import Table

    precision = f", {doc['precision']}" if doc.get("precision") else ""
    table = Table(title=f"{doc['model']} on {doc['cluster']}: best plan per GPU count (global batch "
                        f"{doc['global_batch_size']} x {doc['seq_length']}{precision})")
    for col in ("GPUs", "plan", "tokens/s", "vs linear", "compute share"):
        table.add_column(col)
    for p, label in zip(doc["points"], labels, strict=True):
        if p["plan"] is None:
            table.add_row(str(p["num_gpus"]), "-", "-", "-", "-")
            continue
        table.add_row(str(p["num_gpus"]), label, f"{p['tokens_per_s']:,.0f}",
                      f"{p['efficiency_vs_linear']:.0%}", f"{p['scaling_efficiency']:.0%}")
    print_table(console, table)
    lines = doc["explanation"].splitlines()
    for line in [*(x for x in lines[:-1] if x.startswith("one precision per curve")), lines[-1]]:
        console.print(line, markup=False)


def _levers_and_prices(reduce_dtype, powersgd_rank, onebit, sync_every, async_staleness, prices):
    from tierwise.cli._economics import load_prices_checked, make_levers

    return make_levers(reduce_dtype, powersgd_rank, onebit, sync_every, async_staleness), load_prices_checked(prices)


def _with_levers(cluster, levers):
    """The cluster the planner ranks on: the levers ride in its compute parameters (tierwise.estimate.levers)."""
    from tierwise.estimate.levers import with_levers

    return with_levers(cluster, levers)


def _add_economics(doc: dict, cluster, gpus: int, levers, tokens, prices, overrides=None) -> None:
    """The best plan's cost and energy, and each plan's cost per million tokens (same cluster, same capex; with
    ``--goodput``, at each plan's goodput on the GPUs it holds with its spares)."""
    from tierwise.cli._economics import economics_block

    if levers.active:
        doc["levers"] = levers.describe()
    if not doc["plans"]:
        return
    if "goodput" in doc:
        # plan --goodput: price the useful work, as `tierwise goodput` does (cli/goodput._goodput_economics):
        # each plan at its goodput throughput on the GPUs it holds, its p99 spares included
        for i, p in enumerate(doc["plans"]):
            g = p["goodput"]
            held = gpus + int(g["spare_gpus_p99"] or 0)
            e = economics_block(g["goodput_tokens_per_s"], cluster, held, tokens=tokens, prices=prices,
                                overrides=overrides)
            p["usd_per_million_tokens"] = e["usd_per_million_tokens"]
            if i == 0:
                e["assumed"] = [f"priced at the goodput ({g['goodput_tokens_per_s']:,.0f} tokens/s, ETTR "
                                f"{g['ettr']:.3f}) on {held:,} GPUs ({gpus:,} in the job + spares at p99)",
                                *e["assumed"]]
                doc["economics"] = e
                doc["fabric"] = e["fabric"]
        return
    best = economics_block(doc["plans"][0]["estimate"]["tokens_per_s"], cluster, gpus, tokens=tokens, prices=prices,
                           overrides=overrides)
    doc["economics"] = best
    doc["fabric"] = best["fabric"]
    usd_per_s = best["usd_per_hour"] / 3600
    for p in doc["plans"]:
        p["usd_per_million_tokens"] = usd_per_s / p["estimate"]["tokens_per_s"] * 1e6


def _render_plan_economics(console, doc: dict) -> None:
    from tierwise.cli._economics import render_economics, render_levers

    render_plans(console, doc)
    render_levers(console, doc.get("levers"))
    render_economics(console, doc.get("economics"))


# --- --goodput (issue 15): rank or scale with failures counted; the work lives in cli/goodput.py ----------
GoodputFlag = Annotated[bool, typer.Option("--goodput", help="count failures and checkpoints: rank by goodput-"
                                           "adjusted throughput (see `tierwise goodput`)")]
GoodputRatesOpt = Annotated[str | None, typer.Option("--failure-rates", help="with --goodput: per-part failure "
                                                     "rates file")]
GoodputNodeOpt = Annotated[float | None, typer.Option("--node-failure-rate", help="with --goodput: all-cause "
                                                      "failures per node per day")]


def _plan_document(answer, m, cl, top: int, opts) -> tuple[dict, list[str]]:
    """The ``plan`` document of the planner's answer and the labels of the plans it lists; with ``--goodput``
    (``opts``) the plans re-ranked by goodput-adjusted throughput, the first ``top`` kept."""
    from tierwise.documents.training import plan_document, with_goodput_ranking
    from tierwise.planner.explain import plan_label

    labels = [plan_label(r.plan) for r in answer.plans]
    if opts is None:
        return plan_document(answer), labels
    from tierwise.goodput.ranking import goodput_ranking

    ranking = goodput_ranking(answer, m, cl, opts)
    order = ranking.order[:top] if ranking is not None else range(len(labels))
    return with_goodput_ranking(plan_document(answer), ranking, top), [labels[j] for j in order]


def _goodput_pool() -> int:
    from tierwise.goodput.ranking import GOODPUT_POOL

    return GOODPUT_POOL


def _goodput_options(on: bool, failure_rates: str | None, node_failure_rate: float | None, overrides=None):
    """The goodput options when ``--goodput`` is given (None otherwise); its flags without it are an error."""
    if not on:
        if failure_rates is not None or node_failure_rate is not None:
            raise PlanError("--failure-rates and --node-failure-rate need --goodput")
        return None
    from tierwise.cli.goodput import options_from_flags

    return options_from_flags(failure_rates=failure_rates, node_failure_rate=node_failure_rate, fabric=overrides)


PlanGpusOpt = Annotated[int, typer.Option("--gpus", help="number of GPUs")]
TopOpt = Annotated[int, typer.Option("--top", help="how many plans to show")]
MbsOpt = Annotated[int | None, typer.Option("--mbs", "--micro-batch-size", help="fix the micro-batch size")]
MaxVppOpt = Annotated[int, typer.Option(help="upper bound on interleaved chunks")]
MaxMbsOpt = Annotated[int, typer.Option(help="upper bound on the micro-batch size")]
ScheduleOpt = Annotated[str | None, typer.Option(
    "--schedule", help="pipeline schedule every plan runs: 1f1b, interleaved, dualpipe or dualpipev "
                       "(default: 1f1b, interleaved when vpp > 1)")]
InfeasibleOpt = Annotated[bool, typer.Option("--show-infeasible", help="list the nearest misses")]
ScaleGpusOpt = Annotated[str, typer.Option("--gpus", help="doubling range LO:HI, or a comma-separated list")]


def _memory_cell(p: dict) -> str:
    """The recompute column: the plan's recompute, with its offloaded layers where it offloads activations."""
    k = p.get("activation_offload_layers")
    return f"{p['recompute']}, {k} off" if k else p["recompute"]


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(
        *,
        ctx: typer.Context,
        model: ModelOpt, cluster: ClusterOpt, gpus: PlanGpusOpt,
        global_batch: BatchOpt = 1024, seq: SeqOpt = 8192, top: TopOpt = 10, as_json: JsonOpt = False,
        tp: Fixed = None, pp: Fixed = None, cp: Fixed = None, ep: Fixed = None, dp: Fixed = None,
        vpp: Fixed = None, mbs: MbsOpt = None,
        max_tp: Bound = None, max_pp: Bound = None, max_cp: Bound = None, max_ep: Bound = None,
        max_vpp: MaxVppOpt = 8, max_mbs: MaxMbsOpt = 8,
        recompute: ListOpt = None, precision: ListOpt = None,
        zero: ZeroOpt = None, objective: ObjOpt = "step_time", ep_overlap: EpOverlapOpt = True,
        offload: OffloadOpt = True, eager: EagerOpt = None, zero3_gather: Zero3Opt = None,
        fused_ce: FusedCeOpt = False,
        balanced_moe: BalancedMoeOpt = None,
        framework: FrameworkOpt = None, schedule: ScheduleOpt = None, show_infeasible: InfeasibleOpt = False,
        tokens: TokensOpt = None, prices: PricesOpt = None, reduce_dtype: ReduceDtypeOpt = None,
        powersgd_rank: PowerSgdOpt = 0, onebit: OneBitOpt = False, sync_every: SyncEveryOpt = 1,
        async_staleness: StalenessOpt = 0,
        goodput: GoodputFlag = False, failure_rates: GoodputRatesOpt = None, node_failure_rate: GoodputNodeOpt = None,
        topology: TopologyOpt = None, fabric: FabricOpt = None, radix: RadixOpt = None, tiers: TiersOpt = None,
        oversubscription: OversubOpt = None,
        html: HtmlOpt = None, compute: ComputeOpt = None, strict: StrictOpt = False,
    ) -> None:
        """Search every parallel layout, fit memory, rank by the estimator, and explain the winner."""
        from tierwise.planner.gpus import answer_any_gpus

        check_counts(gpus=gpus, global_batch=global_batch, seq=seq, top=top, tp=tp, pp=pp, cp=cp, ep=ep, dp=dp,
                      vpp=vpp, mbs=mbs, max_tp=max_tp, max_pp=max_pp, max_cp=max_cp, max_ep=max_ep,
                      max_vpp=max_vpp, max_mbs=max_mbs)
        c = constraints(tp=tp, pp=pp, cp=cp, ep=ep, dp=dp, vpp=vpp, micro_batch_size=mbs, max_tp=max_tp,
                         max_pp=max_pp, max_cp=max_cp, max_ep=max_ep, max_vpp=max_vpp, max_micro_batch_size=max_mbs,
                         recompute=recompute, precision=precision, zero=zero, ep_comm_overlap=ep_overlap,
                         activation_offload=offload, fused_elementwise=None if eager is None else not eager,
                         zero3_gather=zero3_gather,
                         fused_cross_entropy=fused_ce, moe_force_balance=balanced_moe, framework=framework,
                         schedule=schedule)
        if html is not None:  # issue 19: before the work
            from tierwise.report import check_html

            check_html(html)
        use_compute_profile(ctx, compute, strict)
        m, cl = load_model_and_cluster(model, cluster)
        levers, price_table = _levers_and_prices(reduce_dtype, powersgd_rank, onebit, sync_every, async_staleness,
                                                 prices)
        cl = _with_levers(cl, levers)
        overrides = fabric_overrides(topology, fabric, radix, tiers, oversubscription)
        opts = _goodput_options(goodput, failure_rates, node_failure_rate, overrides)
        from tierwise.cli._progress import progress

        with progress(f"searching plans on {gpus} GPUs"), _as_flags():
            answer = answer_any_gpus(m, cl, gpus, global_batch, seq, constraints=c, objective=objective,
                                     top=top if opts is None else max(top, _goodput_pool()),
                                     show_infeasible=show_infeasible)
        doc, labels = _plan_document(answer, m, cl, top, opts)
        _add_economics(doc, cl, gpus, levers, tokens, price_table, overrides)
        _emit_plan(doc, labels if opts is not None else None, as_json=as_json, html=html)

    app.command("scale")(scale_cmd)


def _emit_plan(doc: dict, goodput_labels: list[str] | None, *, as_json: bool, html: str | None) -> None:
    """Write the ``--html`` page and print the plan document (with its goodput table under ``--goodput``: the
    labels of the plans it lists)."""
    if html is not None:
        from tierwise.report import write_page
        from tierwise.report.plan import plan_page

        doc["html"] = write_page(html, plan_page(doc))
    if goodput_labels is not None:
        from tierwise.cli.goodput import render_plan_goodput

        emit(doc, as_json, lambda console: (_render_plan_economics(console, doc),
                                            render_plan_goodput(console, doc, goodput_labels)), document="plan")
        return
    emit(doc, as_json, lambda console: _render_plan_economics(console, doc), document="plan")


def scale_cmd(
    *,
    model: ModelOpt, cluster: ClusterOpt,
    gpus: ScaleGpusOpt,
    global_batch: BatchOpt = 1024, seq: SeqOpt = 8192, as_json: JsonOpt = False,
    recompute: ListOpt = None, precision: ListOpt = None,
    zero: ZeroOpt = None, objective: ObjOpt = "step_time", ep_overlap: EpOverlapOpt = True,
    offload: OffloadOpt = True, eager: EagerOpt = None, zero3_gather: Zero3Opt = None,
    fused_ce: FusedCeOpt = False,
    balanced_moe: BalancedMoeOpt = None,
    framework: FrameworkOpt = None,
    goodput: GoodputFlag = False, failure_rates: GoodputRatesOpt = None, node_failure_rate: GoodputNodeOpt = None,
    topology: TopologyOpt = None, fabric: FabricOpt = None, radix: RadixOpt = None, tiers: TiersOpt = None,
    oversubscription: OversubOpt = None,
    html: HtmlOpt = None,
) -> None:
    """Best plan at each GPU count and its efficiency against linear scaling: where adding GPUs stops paying."""
    from tierwise.documents.training import scale_document
    from tierwise.planner.answer import answer_scale, parse_gpu_range
    from tierwise.planner.explain import plan_label
    from tierwise.planner.gpus import answer_any_gpus

    check_counts(global_batch=global_batch, seq=seq)
    counts = parse_gpu_range(gpus)
    c = constraints(recompute=recompute, precision=precision, zero=zero, ep_comm_overlap=ep_overlap,
                     activation_offload=offload, fused_elementwise=None if eager is None else not eager,
                     zero3_gather=zero3_gather,
                     fused_cross_entropy=fused_ce, moe_force_balance=balanced_moe, framework=framework)
    if html is not None:  # issue 19: before the work
        from tierwise.report import check_html

        check_html(html)
    m, cl = load_model_and_cluster(model, cluster)
    opts = _goodput_options(goodput, failure_rates, node_failure_rate,
                            fabric_overrides(topology, fabric, radix, tiers, oversubscription))
    from tierwise.cli._progress import progress

    with progress(f"best plan at {len(counts)} GPU counts"), _as_flags():
        answer = answer_scale(m, cl, counts, global_batch, seq, constraints=c, objective=objective,
                              plan_fn=answer_any_gpus)
    doc = scale_document(answer)
    if opts is not None:
        from tierwise.documents.training import with_goodput_scaling
        from tierwise.goodput.ranking import goodput_scaling

        doc = with_goodput_scaling(doc, goodput_scaling(answer, m, cl, opts))
    labels = [None if p.best is None else plan_label(p.best.plan) for p in answer.points]
    _emit_scale(doc, labels, as_json=as_json, html=html, goodput=opts is not None)


def _emit_scale(doc: dict, labels: list[str | None], *, as_json: bool, html: str | None, goodput: bool) -> None:
    """Write the ``--html`` page and print the scale document (with its goodput table under ``--goodput``)."""
    if html is not None:
        from tierwise.report import write_page
        from tierwise.report.scale import scale_page

        doc["html"] = write_page(html, scale_page(doc))
    if goodput:
        from tierwise.cli.goodput import render_scale_goodput

        emit(doc, as_json, lambda console: (render_scale(console, doc, labels), render_scale_goodput(console, doc)),
             document="scale")
        return
    emit(doc, as_json, lambda console: render_scale(console, doc, labels), document="scale")
