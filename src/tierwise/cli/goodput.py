"""``tierwise goodput``: how often a job is interrupted, what each interruption costs, how often to
checkpoint, and the share of wall-clock time that trains (ETTR). Also the blocks that ``plan --goodput`` and
``scale --goodput`` add (ranking and scaling by goodput); the planner itself knows nothing of failures."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tierwise.cli._fabric import FabricOpt, OversubOpt, RadixOpt, TiersOpt, TopologyOpt, fabric_overrides
from tierwise.cli._output import emit, kv_table, print_table
from tierwise.cli._plan_options import BatchOpt, Fixed, JsonOpt, ListOpt, SeqOpt, ZeroOpt

RatesOpt = Annotated[str | None, typer.Option("--failure-rates", help="YAML file of per-part failure rates "
                                              "(same keys as the shipped goodput/rates.yaml)")]
NodeRateOpt = Annotated[float | None, typer.Option("--node-failure-rate", help="all-cause failures per node per "
                                                   "day; replaces the per-part rates")]


def _duration(text: str | None, option: str) -> float | None:
    """``auto``/None -> None; else seconds from '90', '90 s', '15 min', '2 h' or '1 d'."""
    from tierwise.goodput.rates import GoodputError
    from tierwise.units import UnitError, parse_time

    if text is None or str(text).strip().lower() == "auto":
        return None
    t = str(text).strip()
    scale = 1.0
    if t.endswith("d") and not t.endswith("ed"):
        t, scale = t[:-1], 86400.0
    try:
        return parse_time(t, what=option, maximum=3650 * 86400.0 / scale) * scale
    except UnitError as exc:
        raise GoodputError(f"{exc}; or 'auto'") from None


def options_from_flags(*, failure_rates=None, node_failure_rate=None, checkpoint_interval=None,
                       checkpoint_write="auto", storage_bandwidth=None, restart_time=None, spares=None, days=30.0,
                       runs=0, seed=0, tokens=None, fabric=None):
    from tierwise.goodput.model import GoodputOptions
    from tierwise.goodput.rates import GoodputError
    from tierwise.units import UnitError, parse_bandwidth, parse_count

    write: str | float = "auto"
    if checkpoint_write is not None and str(checkpoint_write).strip().lower() in ("auto", "async", "sync"):
        write = str(checkpoint_write).strip().lower()
    elif checkpoint_write is not None:
        write = _duration(checkpoint_write, "--checkpoint-write")  # type: ignore[assignment]
    storage = None
    if storage_bandwidth is not None:
        try:
            storage = parse_bandwidth(storage_bandwidth, what="--storage-bandwidth")
        except UnitError as exc:
            raise GoodputError(str(exc)) from None
    n_tokens = None
    if tokens is not None:
        try:
            n_tokens = float(parse_count(tokens, what="--tokens", maximum=10**18))
        except UnitError as exc:
            raise GoodputError(f"{exc}; e.g. 15T is written 15000000000000") from None
    return GoodputOptions(failure_rates=failure_rates, node_failure_rate=node_failure_rate,
                          checkpoint_interval_s=_duration(checkpoint_interval, "--checkpoint-interval"),
                          checkpoint_write=write, storage_bytes_per_s=storage,
                          restart_s=_duration(restart_time, "--restart-time"), spares=spares, days=days, runs=runs,
                          seed=seed, tokens=n_tokens, fabric=fabric)


def _best_plan(m, cl, gpus: int, global_batch: int, seq: int, c) -> tuple[Any, str, dict]:
    """The planner's best plan (on the GPUs a layout uses: :mod:`tierwise.planner.gpus`), its source line and the
    document's ``gpus`` block."""
    from tierwise.documents.training import gpus_document
    from tierwise.goodput.rates import GoodputError
    from tierwise.planner.explain import plan_label
    from tierwise.planner.gpus import answer_any_gpus

    answer = answer_any_gpus(m, cl, gpus, global_batch, seq, constraints=c, top=1)
    if not answer.plans:
        raise GoodputError(answer.explanation[0].splitlines()[0])
    plan = answer.plans[0].plan
    return plan, (f"the planner's best plan by step time for global batch {global_batch} x {seq} tokens "
                  f"({plan_label(plan)}; `tierwise plan` shows the ranking)"), gpus_document(answer.gpus)


def render_goodput(console, doc: dict) -> None:
    from rich.table import Table

    from tierwise.units import format_bytes, format_time

    t = kv_table(value_overflow="fold", title=f"goodput: {doc['model']} on {doc['num_gpus']} x {doc['cluster']}")
    mtti = doc["mtti_s"]
    rows = [("plan", doc["plan_source"]),
            ("MTTI", format_time(mtti) if mtti else "no failures counted"),
            ("interruptions per day", f"{doc['interruptions_per_day']:.3g}"),
            (f"interruptions in {doc['days']:g} days", f"{doc['interruptions_in_days']:.3g}"),
            ("checkpoint per GPU", format_bytes(doc["checkpoint_bytes_per_gpu"])),
            ("checkpoint (job, distinct)", format_bytes(doc["checkpoint_state_bytes"])),
            ("checkpoint write", f"{format_time(doc['checkpoint_write_s'])} ({doc['checkpoint_mode']}; stall "
                                 f"{format_time(doc['checkpoint_blocking_s'])})"),
            ("checkpoint interval", f"{format_time(doc['checkpoint_interval_s'])} ({doc['interval_source']}; Young "
                                    f"{format_time(doc['checkpoint_interval_young_s'] or float('inf'))})"),
            ("restart", format_time(doc["restart_s"])),
            ("ETTR (Daly)", f"{doc['ettr']:.4f}"),
            ("goodput", f"{doc['goodput_tokens_per_s']:,.0f} of {doc['tokens_per_s']:,.0f} tokens/s"),
            ("fault unit", f"{doc['fault_domain']['unit']} ({doc['fault_domain']['gpus_unavailable_per_failure']} "
                           f"GPUs out per failure; spares at p99: {doc['fault_domain']['spares_p99_units']})")]
    sim = doc.get("ettr_simulated")
    if sim:
        rows.append(("ETTR (Monte Carlo)", f"{sim['mean']:.4f} (p5 {sim['p5']:.4f}, p95 {sim['p95']:.4f}; "
                                           f"{sim['runs']} runs, seed {sim['seed']})"))
    if "time_to_train" in doc:
        tt = doc["time_to_train"]
        rows.append(("time to train", f"{tt['days']:.1f} days ({tt['failure_free_days']:.1f} without failures)"))
    for k, v in rows:
        t.add_row(k, v)
    print_table(console, t)
    comp = Table(title="interruptions by component")
    for col in ("component", "parts", "per part per day", "per day", "share"):
        comp.add_column(col, justify="left" if col == "component" else "right")
    for r in sorted(doc["by_component"], key=lambda r: -r["rate_per_day"]):
        comp.add_row(r["component"], f"{r['count']:,}", f"{r['rate_per_part_per_day']:.3g}", f"{r['rate_per_day']:.3g}",
                     f"{r['share']:.0%}")
    print_table(console, comp)
    for line in doc["explanation"]:
        console.print(line)
    for a in doc["assumed"]:
        console.print(f"assumed: {a}", style="dim")


ScenarioArg = Annotated[str | None, typer.Argument(help="scenario YAML (model, cluster, num_gpus, plan)")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="catalog name, YAML or config.json")]
ClusterOpt = Annotated[str | None, typer.Option("--cluster", help="catalog name or YAML file")]
GpusOpt = Annotated[int | None, typer.Option("--gpus", help="number of GPUs")]
IntervalOpt = Annotated[str, typer.Option("--checkpoint-interval", help="compute time between checkpoints (e.g. "
                                          "20 min) or auto (Daly)")]
WriteOpt = Annotated[str, typer.Option("--checkpoint-write", help="auto/async (two-stage), sync, or the blocking "
                                       "time (e.g. 30 s)")]
StorageOpt = Annotated[str | None, typer.Option("--storage-bandwidth", help="aggregate checkpoint storage "
                                                "bandwidth, e.g. '2 TB/s'")]
RestartOpt = Annotated[str | None, typer.Option("--restart-time", help="failure to resumed progress, e.g. 10 min")]
SparesOpt = Annotated[int | None, typer.Option("--spares", help="spare units (nodes or racks) for the Monte Carlo")]
DaysOpt = Annotated[float, typer.Option("--days", help="length of the run")]
RunsOpt = Annotated[int, typer.Option("--runs", help="Monte Carlo runs (0: analytic only)")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Monte Carlo seed")]
TokensOpt = Annotated[str | None, typer.Option("--tokens", help="tokens to train, for the time-to-train")]
PricesOpt = Annotated[str | None, typer.Option("--prices", help="price/power YAML overriding the shipped "
                                               "topology/prices.yaml (cost and energy of the goodput)")]
HtmlOpt = Annotated[str | None, typer.Option("--html", help="write a self-contained HTML page")]


def register(app: typer.Typer) -> None:
    @app.command("goodput")
    def goodput_cmd(
        *,
        scenario: ScenarioArg = None, model: ModelOpt = None, cluster: ClusterOpt = None, gpus: GpusOpt = None,
        global_batch: BatchOpt = 1024, seq: SeqOpt = 8192,
        tp: Fixed = None, pp: Fixed = None, cp: Fixed = None, ep: Fixed = None, dp: Fixed = None,
        recompute: ListOpt = None, precision: ListOpt = None, zero: ZeroOpt = None,
        failure_rates: RatesOpt = None, node_failure_rate: NodeRateOpt = None,
        checkpoint_interval: IntervalOpt = "auto", checkpoint_write: WriteOpt = "auto",
        storage_bandwidth: StorageOpt = None, restart_time: RestartOpt = None, spares: SparesOpt = None,
        days: DaysOpt = 30.0, runs: RunsOpt = 0, seed: SeedOpt = 0, tokens: TokensOpt = None,
        prices: PricesOpt = None, as_json: JsonOpt = False, html: HtmlOpt = None,
        topology: TopologyOpt = None, fabric: FabricOpt = None, radix: RadixOpt = None, tiers: TiersOpt = None,
        oversubscription: OversubOpt = None,
    ) -> None:
        """Failures, fault domains and checkpoints: MTTI, optimal checkpoint interval, ETTR and goodput."""
        from tierwise.documents.training import goodput_document
        from tierwise.goodput.model import goodput

        if html is not None:
            from tierwise.atomic import check_writable
            from tierwise.report import require_plotly

            require_plotly()
            check_writable(html, "--html")
        from tierwise.cli._economics import load_prices_checked

        price_table = load_prices_checked(prices)  # a bad price file fails before the work
        opts = options_from_flags(failure_rates=failure_rates, node_failure_rate=node_failure_rate,
                                  checkpoint_interval=checkpoint_interval, checkpoint_write=checkpoint_write,
                                  storage_bandwidth=storage_bandwidth, restart_time=restart_time, spares=spares,
                                  days=days, runs=runs, seed=seed, tokens=tokens,
                                  fabric=fabric_overrides(topology, fabric, radix, tiers, oversubscription))
        m, cl, n, plan, source, gpus_used = _goodput_job(
            scenario, model=model, cluster=cluster, gpus=gpus, global_batch=global_batch, seq=seq,
            degrees=dict(tp=tp, pp=pp, cp=cp, ep=ep, dp=dp), recompute=recompute, precision=precision, zero=zero)
        doc = goodput_document(goodput(m, cl, n, plan, opts, plan_source=source))
        if scenario is None:
            doc["gpus"] = gpus_used
        doc["economics"] = _goodput_economics(doc, cl, n, opts, price_table)
        if html is not None:
            from tierwise.report.goodput import goodput_page

            goodput_page(doc, html)
        emit(doc, as_json, lambda console: _render_with_economics(console, doc), document="goodput")


def _goodput_job(scenario, *, model, cluster, gpus, global_batch, seq, degrees, recompute, precision, zero):
    """The job ``goodput`` prices: a scenario file's, or the best plan for ``--model --cluster --gpus``
    (model, cluster, GPUs used, plan, where the plan came from, and the GPU accounting of a searched plan)."""
    from tierwise.cli._plan_options import check_counts, constraints, load_model_and_cluster
    from tierwise.goodput.rates import GoodputError

    if scenario is not None:
        if model or cluster or gpus:
            raise GoodputError("give a scenario file or --model/--cluster/--gpus, not both")
        from tierwise.estimate.scenario import load_scenario

        s = load_scenario(scenario)
        return s.model, s.cluster, s.num_gpus, s.plan, f"scenario file {scenario!r}", None
    missing = [o for o, v in (("--model", model), ("--cluster", cluster), ("--gpus", gpus)) if v is None]
    if missing:
        raise GoodputError(f"missing {', '.join(missing)}; give a scenario file or --model, --cluster "
                           "and --gpus")
    check_counts(gpus=gpus, global_batch=global_batch, seq=seq, **degrees)
    c = constraints(**degrees, recompute=recompute, precision=precision, zero=zero)
    m, cl = load_model_and_cluster(model, cluster)
    plan, source, gpus_used = _best_plan(m, cl, int(gpus), global_batch, seq, c)
    return m, cl, gpus_used["used"], plan, source, gpus_used


def _goodput_economics(doc: dict, cl, n: int, opts, prices) -> dict:
    """Cost and energy of the useful work (issue 17): :func:`tierwise.design.cost.economics` at the goodput
    throughput, with the spare GPUs held at p99 bought and powered too (they are capex whether or not used)."""
    from tierwise.cli._economics import economics_block

    asked = doc.get("gpus", {}).get("asked", n)  # GPUs a layout leaves idle are bought too (hot spares)
    provisioned = max(asked, n + int(doc["fault_domain"].get("spare_gpus_p99", 0) or 0))
    e = economics_block(doc["goodput_tokens_per_s"], cl, provisioned, tokens=opts.tokens, prices=prices,
                        overrides=opts.fabric)
    e["assumed"] = [f"priced at the goodput ({doc['goodput_tokens_per_s']:,.0f} tokens/s, ETTR {doc['ettr']:.3f}) "
                    f"on {provisioned:,} GPUs ({n:,} in the job + spares at p99)", *e["assumed"]]
    return e


def _render_with_economics(console, doc: dict) -> None:
    from tierwise.cli._economics import render_economics

    render_goodput(console, doc)
    if doc.get("gpus") and doc["gpus"]["idle"]:
        console.print(f"GPUs: {doc['gpus']['summary']} (of {doc['gpus']['asked']:,} asked); {doc['gpus']['note']}")
    if doc.get("economics"):
        console.print(f"fabric: {doc['economics']['fabric']['choice']}", style="dim")
    render_economics(console, doc.get("economics"))


# --- plan --goodput and scale --goodput: the tables of the blocks tierwise.goodput.ranking adds -----------------

def render_plan_goodput(console, doc: dict, labels: list[str]) -> None:
    """The goodput table of ``plan --goodput``'s document; ``labels`` names the plans it lists, in its order."""
    from rich.table import Table

    if "goodput" not in doc or not doc["plans"]:
        return
    g = doc["goodput"]
    t = Table(title=f"ranked by goodput ({g['interruptions_per_day']:.3g} interruptions/day)")
    for col in ("#", "plan", "step rank", "tokens/s", "ETTR", "goodput", "fault unit", "spare GPUs", "adjusted"):
        t.add_column(col, justify="left" if col in ("plan", "fault unit") else "right")
    for r, (e, label) in enumerate(zip(doc["plans"], labels, strict=True), 1):
        gp = e["goodput"]
        t.add_row(str(r), label, str(gp["step_rank"]), f"{e['estimate']['tokens_per_s']:,.0f}",
                  f"{gp['ettr']:.4f}", f"{gp['goodput_tokens_per_s']:,.0f}", gp["fault_unit"],
                  str(gp["spare_gpus_p99"]), f"{gp['adjusted_tokens_per_s']:,.0f}")
    print_table(console, t)
    console.print(f"ranked by {g['ranked_by']}", style="dim")


def render_scale_goodput(console, doc: dict) -> None:
    from rich.table import Table

    t = Table(title="with failures counted")
    for col in ("GPUs", "MTTI", "ETTR", "goodput tokens/s", "spare GPUs", "adjusted"):
        t.add_column(col, justify="right")
    for p in doc["points"]:
        g = p.get("goodput")
        if g:
            t.add_row(str(p["num_gpus"]), f"{g['mtti_s'] / 3600:.3g} h", f"{g['ettr']:.4f}",
                      f"{g['goodput_tokens_per_s']:,.0f}", f"{g['spare_gpus_p99']:.0f}",
                      f"{g['adjusted_tokens_per_s']:,.0f}")
    print_table(console, t)
    console.print(doc["goodput_explanation"])
