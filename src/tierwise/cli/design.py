"""``tierwise design`` (compare cluster designs on one job: throughput, capex, power, tokens per $ and per J,
Pareto front, right-sized scale-out bandwidth) and ``tierwise trend`` (the same job across GPU generations).
The planner, topology and plotly load inside the commands."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._fabric import FabricOpt, OversubOpt, RadixOpt, TiersOpt, TopologyOpt, fabric_overrides
from tierwise.cli._output import emit, print_table
from tierwise.cli._plan_options import JsonOpt

__all__ = ["register"]


def _common(model, gpus, global_batch, seq):
    from tierwise.errors import PlanError
    from tierwise.limits import MAX_BATCH, MAX_FABRIC_GPUS, MAX_SEQ, check_int
    from tierwise.specs.model import load_model

    check_int(gpus, "--gpus", minimum=8, maximum=MAX_FABRIC_GPUS, error=PlanError)
    check_int(global_batch, "--global-batch", maximum=MAX_BATCH, error=PlanError)
    check_int(seq, "--seq", maximum=MAX_SEQ, error=PlanError)
    return load_model(model)


def _html_first(html):
    if html is not None:
        from tierwise.atomic import check_writable
        from tierwise.report import require_plotly

        require_plotly()
        check_writable(html, "--html")


ModelOpt = Annotated[str, typer.Option("--model", help="catalog name, YAML file or config.json")]
GlobalBatchOpt = Annotated[int, typer.Option("--global-batch", help="global batch in sequences")]
SeqOpt = Annotated[int, typer.Option("--seq", help="sequence length")]
HtmlOpt = Annotated[str | None, typer.Option("--html", help="write an HTML page with plots to FILE")]
DesignGpusOpt = Annotated[int | None, typer.Option("--gpus", help="GPUs the job runs on (not with --power)")]
TokensOpt = Annotated[float | None, typer.Option("--tokens", help="tokens to train on (time, cost, energy)")]
BudgetOpt = Annotated[float | None, typer.Option("--budget", help="capex budget in USD")]
PrecisionOpt = Annotated[str, typer.Option("--precision", help="bf16 | fp8 (A100 has no fp8)")]
WithinOpt = Annotated[float, typer.Option("--within", help="right size: slowest NIC speed within this % of the best "
                                          "step")]
PricesOpt = Annotated[str | None, typer.Option("--prices", help="price/power YAML overriding the shipped one")]
DomainSweepOpt = Annotated[bool, typer.Option("--domain-sweep", help="sweep the scale-up domain size (NVL8 .. "
                                              "NVL576, a 1,024 UALink pod): step, goodput, capex, power")]
DomainsOpt = Annotated[str | None, typer.Option("--domains", help="with --domain-sweep: comma-separated sizes "
                                                "(default 8,16,36,72,144,576)")]
PowerOpt = Annotated[str | None, typer.Option("--power", help="facility power budget, e.g. 50MW: the best "
                                              "cluster it powers (optics pluggable / LPO / CPO)")]
PueOpt = Annotated[float | None, typer.Option("--pue", help="with --power: facility / IT power (default the "
                                              "price file's 1.3)")]
OpticsOpt = Annotated[str | None, typer.Option("--optics", help="with --domain-sweep: optics of a domain beyond "
                                               "a rack: pluggable (default) | lpo | cpo")]
TrendGpusOpt = Annotated[int, typer.Option("--gpus", help="GPUs the job runs on")]
TrendClusterOpt = Annotated[list[str] | None, typer.Option("--cluster", help="a further (future) part: catalog "
                                                           "name or cluster YAML; repeat for more")]


def register(app: typer.Typer) -> None:
    @app.command("design")
    def design_cmd(
        *,
        model: ModelOpt, gpus: DesignGpusOpt = None, tokens: TokensOpt = None, budget: BudgetOpt = None,
        precision: PrecisionOpt = "bf16", global_batch: GlobalBatchOpt = 2048, seq: SeqOpt = 8192,
        within: WithinOpt = 5.0, prices: PricesOpt = None, domain_sweep: DomainSweepOpt = False,
        domains: DomainsOpt = None, power: PowerOpt = None, pue: PueOpt = None, optics: OpticsOpt = None,
        as_json: JsonOpt = False, html: HtmlOpt = None,
        topology: TopologyOpt = None, fabric: FabricOpt = None, radix: RadixOpt = None, tiers: TiersOpt = None,
        oversubscription: OversubOpt = None,
    ) -> None:
        """Compare cluster designs on one job: best plan, throughput, capex, power, tokens per $ and per J.

        --domain-sweep: scale-up domain size against blast radius. --power 50MW: the best cluster a budget powers.
        """
        from tierwise.design.designs import compare_designs
        from tierwise.errors import TierwiseError
        from tierwise.limits import check_float
        from tierwise.topology.costs import load_prices

        _check_modes(domain_sweep=domain_sweep, domains=domains, optics=optics, power=power, pue=pue,
                     tokens=tokens, budget=budget, gpus=gpus)
        job = dict(global_batch=global_batch, seq=seq, precision=precision, prices=prices, as_json=as_json, html=html)
        if power is not None:
            _power_design(model, power, pue, **job)
            return
        if domain_sweep:
            _domain_sweep(model, gpus, domains, optics, **job)
            return
        m = _common(model, gpus, global_batch, seq)
        overrides = fabric_overrides(topology, fabric, radix, tiers, oversubscription)
        if tokens is not None:
            check_float(tokens, "--tokens", minimum=1.0, maximum=1e18, error=TierwiseError)
        if budget is not None:
            check_float(budget, "--budget", minimum=1.0, maximum=1e13, error=TierwiseError, hint=" (USD)")
        tol = check_float(within, "--within", minimum=0.0, maximum=1000.0, error=TierwiseError, hint=" (percent)")
        table_ = load_prices(prices)
        _html_first(html)
        doc = compare_designs(m, gpus, global_batch=global_batch, seq=seq, precision=precision.lower(),
                              tokens=tokens, budget=budget, prices=table_, tolerance=tol / 100, overrides=overrides)
        if html is not None:
            from tierwise.report import write_page
            from tierwise.report.design import design_page

            doc["html"] = write_page(html, design_page(doc))
        emit(doc, as_json, lambda con: _render_design(con, doc), document="design")
    app.command("trend")(trend_cmd)


def trend_cmd(
    model: ModelOpt, gpus: TrendGpusOpt, global_batch: GlobalBatchOpt = 2048, seq: SeqOpt = 8192,
    cluster: TrendClusterOpt = None, as_json: JsonOpt = False, html: HtmlOpt = None,
) -> None:
    """The same job on A100 -> H100 -> B200 -> GB200 -> GB300 (and your parts): how the comm share grows."""
    from tierwise.design.trend import generation_trend
    from tierwise.specs.cluster import load_cluster

    m = _common(model, gpus, global_batch, seq)
    extra = [_named(c, load_cluster(c)) for c in (cluster or [])]
    _html_first(html)
    doc = generation_trend(m, gpus, global_batch=global_batch, seq=seq, extra=extra)
    if html is not None:
        from tierwise.report import write_page
        from tierwise.report.design import trend_page

        doc["html"] = write_page(html, trend_page(doc))
    emit(doc, as_json, lambda con: _render_trend(con, doc), document="trend")


def _check_modes(*, domain_sweep, domains, optics, power, pue, tokens, budget, gpus) -> None:
    """An option of another mode (``--domain-sweep``, ``--power``, the comparison) is an error, never silently
    ignored; the comparison and the sweep need ``--gpus``, ``--power`` chooses it."""
    from tierwise.errors import TierwiseError

    for flag, value, mode, given in (("--domains", domains, "--domain-sweep", domain_sweep),
                                     ("--optics", optics, "--domain-sweep", domain_sweep),
                                     ("--pue", pue, "--power", power is not None)):
        if value is not None and not given:
            raise TierwiseError(f"{flag} belongs to {mode}; add {mode} or drop {flag}")
    if (power is not None or domain_sweep) and (tokens is not None or budget is not None):
        raise TierwiseError("--tokens and --budget belong to the design comparison; --domain-sweep and --power "
                            "rank by goodput tokens per $ / tokens per s and take neither")
    if power is not None:
        if domain_sweep or gpus is not None:
            raise TierwiseError("--power chooses the GPU count; give it without --gpus and --domain-sweep")
    elif gpus is None:
        raise TierwiseError("design needs --gpus (or --power BUDGET to let the budget choose the GPU count)")


def _domain_sweep(model, gpus, domains, optics, *, global_batch, seq, precision, prices, as_json, html):
    from tierwise.design.domain import DOMAIN_SIZES, domain_sweep
    from tierwise.errors import TierwiseError
    from tierwise.topology.costs import load_prices

    m = _common(model, gpus, global_batch, seq)
    sizes = DOMAIN_SIZES
    if domains is not None:
        try:
            sizes = tuple(int(x) for x in domains.split(",") if x.strip())
        except ValueError:
            raise TierwiseError(f"--domains {domains!r}: give comma-separated GPU counts, e.g. 8,72,576") from None
        if not sizes:
            raise TierwiseError("--domains is empty; give comma-separated GPU counts, e.g. 8,72,576")
    table_ = load_prices(prices)
    _html_first(html)
    doc = domain_sweep(m, gpus, sizes=sizes, global_batch=global_batch, seq=seq, precision=precision.lower(),
                       prices=table_, optics=(optics or "pluggable").lower())
    if html is not None:
        from tierwise.report import write_page
        from tierwise.report.design import domain_page

        doc["html"] = write_page(html, domain_page(doc))
    emit(doc, as_json, lambda con: _render_domains(con, doc), document="design-domains")


def _power_design(model, power, pue, *, global_batch, seq, precision, prices, as_json, html):
    from tierwise.design.power import parse_power, power_capped
    from tierwise.topology.costs import load_prices

    budget = parse_power(power)
    m = _common(model, 8, global_batch, seq)
    table_ = load_prices(prices)
    _html_first(html)
    doc = power_capped(m, budget, global_batch=global_batch, seq=seq, precision=precision.lower(), prices=table_,
                       pue=pue)
    if html is not None:
        from tierwise.report import write_page
        from tierwise.report.design import power_page

        doc["html"] = write_page(html, power_page(doc))
    emit(doc, as_json, lambda con: _render_power(con, doc), document="design-power")


def _render_domains(con, doc: dict) -> None:
    from rich.table import Table

    t = Table(title=f"{doc['model']} on {doc['num_gpus']:,} {doc['accelerator']}: scale-up domain size vs blast "
                    f"radius ({doc['optics']} optics beyond a rack)")
    for col in ("domain", "plan", "step", "ETTR", "fault unit", "spares p99", "capex", "MW", "goodput tok/$",
                "goodput tok/J"):
        t.add_column(col)
    for r in doc["rows"]:
        if not r["fits"]:
            t.add_row(r["domain"], "no plan fits", "", "", "", "", "", "", "", "")
            continue
        p = r["plan"]
        t.add_row(r["domain"] + (" *" if r["domain"] == doc["knee"] else ""),
                  f"tp{p['tp']} pp{p['pp']} cp{p['cp']} dp{p['dp']}", f"{r['step_time_s']:.3f} s", f"{r['ettr']:.3f}",
                  f"{r['fault_unit']} ({r['fault_unit_gpus']} GPUs)", f"{r['spare_gpus_p99']:,.0f} GPUs",
                  f"${r['capex_usd'] / 1e6:,.0f}M", f"{r['facility_w'] / 1e6:.1f}",
                  f"{r['goodput_tokens_per_usd']:,.0f}", f"{r['goodput_tokens_per_joule']:.4f}")
    print_table(con, t)
    con.print(doc["explanation"])
    con.print(f"best goodput tokens per joule: {doc['best_per_joule']}")
    for n in doc["notes"]:
        con.print(f"note: {n}", style="dim")


def _render_power(con, doc: dict) -> None:
    from rich.table import Table

    t = Table(title=f"{doc['model']} under {doc['facility_budget_w'] / 1e6:,.1f} MW facility (PUE {doc['pue']:g}, "
                    f"{doc['it_budget_w'] / 1e6:,.1f} MW IT)")
    for col in ("design", "optics", "GPUs (job)", "network MW", "saved vs pluggable", "plan", "step", "tokens/s",
                "capex", "tok/$", "tok/J"):
        t.add_column(col)
    for r in doc["rows"]:
        if not r["fits"]:
            t.add_row(r["design"], r["optics"], str(r.get("gpus", "")), "", "", r.get("why", "no plan fits"), "", "",
                      "", "", "")
            continue
        p = r["plan"]
        saved = r.get("network_w_saved_vs_pluggable", 0.0)
        t.add_row(r["design"], r["optics"], f"{r['gpus']:,} ({r['job_gpus']:,})", f"{r['network_w'] / 1e6:.2f}",
                  f"{saved / 1e3:,.0f} kW = {r.get('gpus_saved_watts_power', 0):,.0f} GPUs" if saved else "-",
                  f"tp{p['tp']} pp{p['pp']} cp{p['cp']} dp{p['dp']}", f"{r['step_time_s']:.3f} s",
                  f"{r['tokens_per_s']:,.0f}", f"${r['capex_usd'] / 1e6:,.0f}M", f"{r['tokens_per_usd']:,.0f}",
                  f"{r['tokens_per_joule']:.3f}")
    print_table(con, t)
    con.print(doc["explanation"])
    for n in doc["notes"]:
        con.print(f"note: {n}", style="dim")


def _named(ref: str, cl):
    """A user's cluster file is shown by its file name, also when the file names itself otherwise."""
    from dataclasses import replace
    from pathlib import Path

    return replace(cl, name=Path(ref).stem) if ref.endswith((".yaml", ".yml")) else cl


def _render_design(con, doc: dict) -> None:
    from rich.table import Table

    t = Table(title=f"{doc['model']} on {doc['num_gpus']} GPUs ({doc['precision']}, global batch "
                    f"{doc['global_batch_size']} x {doc['seq_length']})")
    for col in ("design", "plan", "tokens/s", "capex", "net share", "MW", "$/M tok", "tok/J", "switches", "Pareto"):
        t.add_column(col)
    for r in doc["designs"]:
        if not r.get("fits"):
            t.add_row(r["name"], "no plan fits", "", "", "", "", "", "", str(r["num_switches"]), "")
            continue
        p = r["plan"]
        t.add_row(r["name"], f"tp{p['tp']} pp{p['pp']} cp{p['cp']} dp{p['dp']}", f"{r['tokens_per_s']:,.0f}",
                  f"${r['capex_usd'] / 1e6:,.0f}M" + ("" if r["within_budget"] else " (over)"),
                  f"{r['network_share_of_capex']:.1%}", f"{r['power_w'] / 1e6:.1f}",
                  f"{r['usd_per_million_tokens']:.3f}", f"{r['tokens_per_joule']:.3f}", str(r["num_switches"]),
                  "*" if r["pareto"] else "")
    print_table(con, t)
    con.print(f"Pareto front (tokens/s vs tokens per $): {', '.join(doc['pareto_front'])}")
    if doc["budget_usd"] is not None:
        con.print(f"fastest within ${doc['budget_usd']:,.0f}: {doc['fastest_within_budget'] or 'none'}")
    rs = doc["right_size"]
    sweep = ", ".join(f"{s['nic_gbps']}G {s['step_time_s']:.2f}s" for s in rs["sweep"] if s["step_time_s"])
    con.print(f"right size ({rs['cluster']}): slowest NIC within {100 * rs.get('tolerance', 0):g}% of the best step: "
              f"{rs['slowest_gbps_within']} Gb/s  [{sweep}]")
    con.print(f"network budget: {doc['seeds_network_budget']}", style="dim")
    for n in doc["notes"]:
        con.print(f"note: {n}", style="dim")


def _render_trend(con, doc: dict) -> None:
    from rich.table import Table

    t = Table(title=f"{doc['model']} on {doc['num_gpus']} GPUs across generations (bf16, best plan each)")
    for col in ("cluster", "domain", "FLOPs/byte", "step", "compute", "exposed comm", "share",
                "other domain: share", "buys back"):
        t.add_column(col)
    for r in doc["generations"]:
        if not r.get("fits"):
            t.add_row(r["cluster"], str(r["scale_up_domain"]), "", "no plan fits", "", "", "", "", "")
            continue
        o = r["other_domain"]
        bb = r.get("larger_domain_buys_back")
        t.add_row(r["cluster"], str(r["scale_up_domain"]), f"{r['flops_per_scale_out_byte']:,.0f}",
                  f"{r['step_time_s']:.2f}s", f"{r['compute_s']:.2f}s", f"{r['exposed_comm_s']:.2f}s",
                  f"{r['comm_share']:.1%}",
                  f"{o['scale_up_domain']}: {o['comm_share']:.1%}" if o.get("comm_share") is not None else "-",
                  f"x{bb['speedup']:.2f} step" if bb else "-")
    print_table(con, t)
    if doc["summary"]:
        con.print(doc["summary"]["sentence"])
    for n in doc["notes"]:
        con.print(f"note: {n}", style="dim")

