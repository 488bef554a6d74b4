"""``tierwise serve`` and ``tierwise serve-plan``: inference (prefill, decode, KV transfer) on the same tiers."""

from __future__ import annotations

import typer

from tierwise.cli._compute import ComputeOpt, StrictOpt, use_compute_profile
from tierwise.cli._output import emit, kv_table, print_table
from tierwise.cli._serve_options import (
    SIM_OPTIONS,
    ArrivalsOpt,
    AttentionKernelOpt,
    BatchingOpt,
    BatchOpt,
    BeamsOpt,
    ClusterOpt,
    CompareAttentionOpt,
    CvOpt,
    DecodeClusterOpt,
    DecodeEpOpt,
    DecodeGpusOpt,
    DecodeTpOpt,
    EngineOpt,
    EpOpt,
    GpusOpt,
    HostKvGbOpt,
    HtmlOpt,
    InputLenOpt,
    JsonOpt,
    KvCacheFractionOpt,
    KvCacheOfOpt,
    KvLinkOpt,
    KvPrecisionOpt,
    KvReservationOpt,
    KvWholeOpt,
    MaxBatchOpt,
    MaxTpOpt,
    ModelOpt,
    ModesOpt,
    MtpAcceptanceOpt,
    MtpOpt,
    OutputLenOpt,
    PlanDecodeClusterOpt,
    PlanGpusOpt,
    PrecisionOpt,
    PreemptionOpt,
    PrefillEpOpt,
    PrefillGpusOpt,
    PrefillTpOpt,
    PrefixHitRateOpt,
    PrefixLoadOpt,
    PrefixTierOpt,
    RateOpt,
    RedundantOpt,
    RequestsOpt,
    ScenarioFileArg,
    ScenarioOpt,
    SeedOpt,
    SimulateOpt,
    TokenBudgetOpt,
    TopOpt,
    TpOpt,
    TpotSloOpt,
    TraceOpt,
    TtftSloOpt,
    TwoBatchOpt,
)


def _config(scenario_file, flags: dict, *, pools: bool = True):
    """A :class:`ServeConfig` from a scenario file, updated by the flags given (``pools``: the command has
    ``--prefill-gpus``/``--decode-gpus``; its error names only the flags it has)."""
    from tierwise.errors import ScenarioError
    from tierwise.serve.api import ServeConfig, config_from_mapping

    given = {k: v for k, v in flags.items() if v is not None}
    if scenario_file is not None:
        from tierwise.files import load_yaml, read_user_text, require_document

        where = f"scenario file {scenario_file!r}"
        text = read_user_text(scenario_file, what="scenario file", error=ScenarioError)
        data = require_document(load_yaml(text, where, error=ScenarioError), where,
                                "write a mapping with model, cluster, num_gpus, input_len, output_len, ...",
                                error=ScenarioError)
        return config_from_mapping({**data, **given}, where)
    if "model" not in given or "cluster" not in given:
        gpus = "--gpus N or --prefill-gpus P --decode-gpus D" if pools else "--gpus N"
        raise ScenarioError(f"give a SCENARIO.yaml or --model M --cluster C (with {gpus})")
    return ServeConfig(**given)


_CONFIG_FLAGS = ("model", "cluster", "tp", "ep", "precision", "kv_precision", "input_len", "output_len", "scenario",
                 "rate", "ttft_slo", "tpot_slo", "batching", "kv_reservation", "prefill_gpus", "decode_gpus",
                 "prefill_tp", "decode_tp", "decode_ep", "kv_link", "max_batch", "beams", "kv_cache_fraction",
                 "kv_cache_of", "attention_kernel", "engine", "decode_cluster", "prefill_ep", "redundant_experts",
                 "prefix_hit_rate", "prefix_tier", "prefix_load", "host_kv_gb", "mtp", "mtp_acceptance")
"""The options whose names are :class:`~tierwise.serve.api.ServeConfig` fields."""


def _flags(options: dict) -> dict:
    """The :class:`~tierwise.serve.api.ServeConfig` fields a command's ``options`` give (None: not given; an
    option the command lacks is not given): ``--gpus`` is ``num_gpus``, ``--batch`` a whole number or ``auto``
    (0), ``--kv-whole`` ``kv_streamed`` False, ``--two-batch-overlap`` True or not given."""
    flags = {k: options.get(k) for k in _CONFIG_FLAGS}
    flags.update(num_gpus=options.get("gpus"), batch=_batch(options.get("batch")),
                 kv_streamed=False if options.get("kv_whole") else None,
                 two_batch_overlap=options.get("two_batch_overlap") or None)
    return flags


def _batch(batch: str | None) -> int | None:
    """``--batch``: a whole number of at least 1, or ``auto`` (0); None when not given."""
    from tierwise.errors import ScenarioError

    if batch is None:
        return None
    if batch == "auto":
        return 0
    try:
        b = int(batch)
    except ValueError:
        raise ScenarioError(f"--batch {batch[:40]!r} is not a whole number or 'auto'; use --batch 256 or "
                            "--batch auto") from None
    if b < 1:
        raise ScenarioError(f"--batch {batch[:40]} must be at least 1 (or 'auto')")
    return b


def render_serve(console, doc: dict) -> None:
    """Rich view of one ``serve --json`` document."""
    from tierwise.units import format_bytes, format_time

    dep = doc["deployment"]
    if doc["mode"] == "disaggregated":
        on = "" if doc.get("decode_cluster") is None else f" on {doc['decode_cluster']}"
        shape = (f"prefill {dep['prefill_gpus']} GPUs (tp {dep['prefill_tp']}, ep {dep['prefill_ep']}) + decode "
                 f"{dep['decode_gpus']} GPUs{on} (tp {dep['decode_tp']}, ep {dep['decode_ep']})")
    else:
        shape = f"{dep['instances']} x tp {dep['tp']} (ep {dep['ep']}" + (
            f", attention dp {dep['attention_dp']})" if dep["attention_dp"] > 1 else ")")
    if doc.get("ep_tier"):
        shape += f", EP on {doc['ep_tier']}"
    t = kv_table(f"{doc['model']} on {doc['num_gpus']} x {doc['cluster']}: {doc['mode']}, {shape}, {doc['scenario']}, "
                 f"{doc['precision']} weights, {doc['kv_precision']} KV, {doc['input_len']}/{doc['output_len']} tokens")
    t.add_row("output tokens/s (per GPU)", f"{doc['output_tokens_per_s']:,.0f} ({doc['output_tokens_per_s_per_gpu']:,.1f})")
    t.add_row("TTFT / TPOT (mean)", f"{format_time(doc['ttft_s'])} / {format_time(doc['tpot_s'])}")
    t.add_row("TTFT / TPOT (p99)", f"{format_time(doc['ttft_p99_s'])} / {format_time(doc['tpot_p99_s'])}")
    t.add_row("batch per instance", f"{doc['batch']:,.0f}")
    t.add_row("engine (time per decode step beyond kernels)",
              f"{doc['engine']} ({format_time(doc['phases']['decode_overhead_s'])})")
    t.add_row("KV bytes per token (attention)", f"{doc['kv_bytes_per_token']:,.0f} B ({doc['attention']})")
    t.add_row("KV bytes per request", format_bytes(doc["kv_bytes_per_request"]))
    t.add_row("KV cache per GPU (weights per GPU)", f"{format_bytes(doc['kv_cache_bytes_per_gpu'])} "
                                                     f"({format_bytes(doc['weight_bytes_per_gpu'])})")
    t.add_row("max concurrency (all instances)", f"{doc['max_concurrency']:,}")
    t.add_row("prefill / decode bound", f"{doc['prefill_bound']} / {doc['decode_bound']}")
    if doc["kv_transfer_tier"] is not None:
        t.add_row("KV transfer (tier)", f"{format_time(doc['kv_transfer_s'])} over {doc['kv_transfer_tier']}, "
                                        f"{format_time(doc['kv_transfer_exposed_s'])} exposed "
                                        f"({'streamed by layer' if doc['kv_transfer_streamed'] else 'whole'})")
        t.add_row("KV bandwidth a prefill node needs", f"{doc['kv_bandwidth_needed_per_prefill_node_bytes_per_s'] / 1e9:,.2f} GB/s")
    if doc.get("mtp"):
        m = doc["mtp"]
        t.add_row("MTP speculative decoding", f"{m['tokens']} token(s) per step from {m['modules']} module(s), "
                                              f"acceptance {m['acceptance']:.2f}: {m['accepted_per_step']:.2f} tokens "
                                              f"per {format_time(m['step_s'])} step ({format_time(m['draft_s'])} drafting)")
    t.add_row("fits / meets SLO", f"{doc['fits']} / {doc['meets_slo']}")
    for a in doc["assumed"]:
        t.add_row("assumed", a)
    print_table(console, t)


def _no_sim_flags(sim: dict) -> None:
    from tierwise.errors import ScenarioError

    given = [k for k, v in sim.items() if v is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ScenarioError(f"{flag} is a setting of --simulate; add --simulate or drop it")


def _simulate(cfg, sim: dict) -> dict:
    from tierwise.serve.simulate import SimRequest, simulation_block

    return simulation_block(cfg, SimRequest(**{k: v for k, v in sim.items() if v is not None}))


def render_simulation(console, doc: dict) -> None:
    """The ``simulation`` block: percentiles, goodput, queue, beside the closed form."""
    from tierwise.units import format_time

    s = doc["simulation"]
    t = kv_table(f"simulated: {s['requests']:,} requests ({s['arrivals']}), {s['served']:,} served, token budget "
                 f"{s['token_budget']:,}, preemption {s['preemption']}, prefix hit rate {s['prefix_hit_rate']:g} "
                 f"({s['prefix_tier']})")
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        v = s[name]
        if v["p50"] is not None:
            t.add_row(name[:-2].upper() + " p50 / p90 / p99",
                      " / ".join(format_time(v[k]) for k in ("p50", "p90", "p99")))
    t.add_row("output tokens/s (simulated / closed form)",
              f"{s['output_tokens_per_s']:,.0f} / {doc['output_tokens_per_s']:,.0f}")
    t.add_row("TPOT mean (simulated / closed form)",
              f"{format_time(s['tpot_s']['mean'] or 0)} / {format_time(doc['tpot_s'])}")
    t.add_row("goodput (SLO attainment)", f"{s['goodput_requests_per_s']:,.2f} requests/s ({s['slo_attainment']:.1%})")
    t.add_row("waiting requests (mean / max)", f"{s['queue']['mean']:,.1f} / {s['queue']['max']:,.0f}")
    t.add_row("preemptions", f"{s['preemptions']:,}")
    print_table(console, t)


def render_compare(console, doc: dict) -> None:
    from rich.table import Table

    table = Table(title="attention variants side by side (same deployment)")
    for col in ("model", "attention", "KV heads", "KV B/token", "KV B/token/GPU", "KV per request", "max concurrency",
                "batch", "tok/s/GPU", "TPOT", "KV transfer"):
        table.add_column(col)
    for r in doc["compare_attention"]:
        table.add_row(r["model"], r["attention"], str(r["kv_heads"]), f"{r['kv_bytes_per_token']:,.0f}",
                      f"{r['kv_bytes_per_token_per_gpu']:,.0f}", f"{r['kv_bytes_per_request'] / 1e6:,.1f} MB",
                      f"{r['max_concurrency']:,}", f"{r['batch']:,.0f}", f"{r['output_tokens_per_s_per_gpu']:,.1f}",
                      f"{r['tpot_s'] * 1e3:.1f} ms",
                      "-" if r["kv_transfer_tier"] is None else f"{r['kv_transfer_s'] * 1e3:.2f} ms ({r['kv_transfer_tier']})")
    print_table(console, table)


def render_plan(console, doc: dict) -> None:
    from rich.table import Table

    table = Table(title=f"serve-plan: {doc['model']} on {doc['num_gpus']} x {doc['cluster']} ({doc['candidates']} "
                        f"candidates, {doc['feasible']} feasible, {doc['search_s'] * 1e3:.0f} ms)")
    priced = any("usd_per_million_output_tokens" in b for b in doc["best"])
    for col in ("mode", "prefill", "decode", "batch", "tok/s/GPU", *(("$/M tok",) if priced else ()), "TTFT p99",
                "TPOT p99", "KV link", "bound"):
        table.add_column(col)
    for b in doc["best"]:
        usd = b.get("usd_per_million_output_tokens")
        cost = (f"{usd:,.3f}" if usd is not None else "-",) if priced else ()
        pre = "-" if b["prefill_gpus"] is None else f"{b['prefill_gpus']} (tp {b['prefill_tp']} ep {b['prefill_ep']})"
        on = f" on {b['decode_cluster']}" if b.get("decode_cluster") else ""
        tier = f" {b['decode_ep_tier']}" if b.get("decode_ep_tier") else ""
        table.add_row(b["mode"], pre, f"{b['decode_gpus']}{on} (tp {b['decode_tp']} ep {b['decode_ep']}{tier})",
                      f"{b['batch']:,.0f}", f"{b['output_tokens_per_s_per_gpu']:,.1f}", *cost,
                      f"{b['ttft_p99_s'] * 1e3:,.0f} ms",
                      f"{b['tpot_p99_s'] * 1e3:,.1f} ms", b["kv_transfer_tier"] or "-",
                      f"{b['prefill_bound']} / {b['decode_bound']}")
    print_table(console, table)
    if doc.get("why_ep"):
        console.print(doc["why_ep"])
    if doc.get("why_redundant"):
        console.print(doc["why_redundant"])
    for a in doc["assumed"]:
        console.print(f"assumed: {a}", style="dim")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
    app.command("serve-plan")(serve_plan_cmd)


def serve_cmd(
    *, ctx: typer.Context, scenario_file: ScenarioFileArg = None, model: ModelOpt = None, cluster: ClusterOpt = None,
    gpus: GpusOpt = None, tp: TpOpt = None, ep: EpOpt = None, precision: PrecisionOpt = None,
    kv_precision: KvPrecisionOpt = None, input_len: InputLenOpt = None, output_len: OutputLenOpt = None,
    scenario: ScenarioOpt = None, rate: RateOpt = None, ttft_slo: TtftSloOpt = None, tpot_slo: TpotSloOpt = None,
    batch: BatchOpt = None, batching: BatchingOpt = None, beams: BeamsOpt = None, max_batch: MaxBatchOpt = None,
    kv_reservation: KvReservationOpt = None, kv_cache_fraction: KvCacheFractionOpt = None,
    kv_cache_of: KvCacheOfOpt = None, attention_kernel: AttentionKernelOpt = None,
    prefill_gpus: PrefillGpusOpt = None, decode_gpus: DecodeGpusOpt = None, prefill_tp: PrefillTpOpt = None,
    decode_tp: DecodeTpOpt = None, decode_ep: DecodeEpOpt = None, decode_cluster: DecodeClusterOpt = None,
    prefill_ep: PrefillEpOpt = None, redundant_experts: RedundantOpt = None, two_batch_overlap: TwoBatchOpt = False,
    mtp: MtpOpt = None, mtp_acceptance: MtpAcceptanceOpt = None, kv_link: KvLinkOpt = None,
    engine: EngineOpt = None, kv_whole: KvWholeOpt = False,
    simulate: SimulateOpt = False, arrivals: ArrivalsOpt = None, cv: CvOpt = None, trace: TraceOpt = None,
    requests: RequestsOpt = None, seed: SeedOpt = None, token_budget: TokenBudgetOpt = None,
    preemption: PreemptionOpt = None,
    prefix_hit_rate: PrefixHitRateOpt = None, prefix_tier: PrefixTierOpt = None, prefix_load: PrefixLoadOpt = None,
    host_kv_gb: HostKvGbOpt = None, compare_attention: CompareAttentionOpt = False,
    as_json: JsonOpt = False, html: HtmlOpt = None, compute: ComputeOpt = None, strict: StrictOpt = False,
) -> None:
    """Serve a model: TTFT, TPOT, tokens/s, KV cache and the KV transfer between prefill and decode pools."""
    options = dict(locals())  # every option by name: parsed and run by _serve_document
    doc = _serve_document(options)
    emit(doc, as_json, lambda console: _render_serve_all(console, doc), document="serve")


def _serve_document(options: dict) -> dict:
    """The ``serve`` document of the command's ``options``: the ``--html`` target checked before the work, the
    options read into a :class:`~tierwise.serve.api.ServeConfig`, the closed form (or ``--simulate``) run, the
    ``--compare-attention`` block and the HTML page added."""
    from tierwise.atomic import check_writable
    from tierwise.serve.api import compare_attention, serve_estimate

    html = options["html"]
    if html is not None:
        from tierwise.report import require_plotly

        require_plotly()
        check_writable(html, "--html")
    cfg = _config(options["scenario_file"], _flags(options))
    use_compute_profile(options["ctx"], options["compute"], options["strict"])
    sim = {k: options[k] for k in SIM_OPTIONS}
    if options["simulate"]:  # the simulator runs the prefix cache the closed form prices
        sim.update(prefix_hit_rate=cfg.prefix_hit_rate, prefix_tier=cfg.prefix_tier)
    doc = _simulate(cfg, sim) if options["simulate"] else _no_sim_flags(sim) or serve_estimate(cfg)
    if options["compare_attention"]:
        doc.update(compare_attention(cfg))
    if html is not None:
        from tierwise.report.serve import serve_page

        doc["html"] = serve_page(doc, html)
    return doc


def _render_serve_all(console, doc: dict) -> None:
    """The terminal view of a ``serve`` document: the deployment, then the simulation and the attention
    comparison when present."""
    render_serve(console, doc)
    if "simulation" in doc:
        render_simulation(console, doc)
    if "compare_attention" in doc:
        render_compare(console, doc)


def serve_plan_cmd(
    *, ctx: typer.Context, scenario_file: ScenarioFileArg = None, model: ModelOpt = None, cluster: ClusterOpt = None,
    gpus: PlanGpusOpt = None, precision: PrecisionOpt = None, kv_precision: KvPrecisionOpt = None,
    input_len: InputLenOpt = None, output_len: OutputLenOpt = None, scenario: ScenarioOpt = None,
    rate: RateOpt = None, ttft_slo: TtftSloOpt = None, tpot_slo: TpotSloOpt = None, kv_link: KvLinkOpt = None,
    engine: EngineOpt = None, decode_cluster: PlanDecodeClusterOpt = None, mtp: MtpOpt = None,
    mtp_acceptance: MtpAcceptanceOpt = None, max_tp: MaxTpOpt = 8, modes: ModesOpt = "both", top: TopOpt = 10,
    as_json: JsonOpt = False, compute: ComputeOpt = None, strict: StrictOpt = False,
) -> None:
    """Search the prefill/decode split, TP/EP per pool and batch for the most output tokens/s per GPU."""
    from tierwise.serve.api import serve_plan_document

    # mtp taken as given, not searched; the pools' degrees are what serve-plan searches
    cfg = _config(scenario_file, _flags(dict(locals())), pools=False)
    use_compute_profile(ctx, compute, strict)
    doc = serve_plan_document(cfg, max_tp=max_tp, modes=modes, top=top)
    emit(doc, as_json, lambda console: render_plan(console, doc), document="serve-plan")


def render_serving_validation(console, doc: dict) -> None:
    """Rich view of ``validate --serving --json``: the per-row table, then the summaries."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"tierwise validate --serving: {doc['dataset']}")
    for col in ("row", "source", "model", "hardware", "GPUs", "plan", "metric", "measured", "predicted", "error"):
        table.add_column(col, overflow="fold")
    for r in doc["rows"]:
        if r["skipped"]:
            continue
        mark = "" if r["scored"] else " (not scored)"
        table.add_row(r["row_id"], r["source_id"], r["model"][:22], r["hardware"][:18], r["num_gpus"],
                      r.get("plan", ""), r["metric"], f"{r['measured']:,.1f}", f"{r['predicted']:,.1f}",
                      f"{r['error_pct']:+.1f}%{mark}")
    print_table(console, table)
    s = doc["summary"]
    summ = Table(title="absolute % error, scored rows (high and medium confidence)")
    for col in ("rows", "count", "median", "mean", "p90", "max"):
        summ.add_column(col)
    for name in ("throughput", "latency", "small_batch_latency"):
        v = s[name]
        summ.add_row(name, str(v["rows"]), *("-" if v[x] is None else f"{v[x]:.1f}"
                                             for x in ("median", "mean", "p90", "max")))
    for k, v in s["per_source"].items():
        summ.add_row(f"source {k}", str(v["rows"]), *("-" if v[x] is None else f"{v[x]:.1f}"
                                                      for x in ("median", "mean", "p90", "max")))
    print_table(console, summ)
    console.print(Text(f"rows used {s['used']} of {s['rows']}"))
    for sk in s["skipped"]:
        console.print(f"skipped row {sk['row_id']} ({sk['source_id']}): {sk['reason']}", style="dim")


def validate_serving(dataset, source, as_json: bool, html, training_only: bool, engine: str | None = None) -> None:
    """``validate --serving``: called by the ``validate`` command."""
    from tierwise.errors import OutputError
    from tierwise.serve.validate import serving_validation_document

    if training_only:
        raise OutputError("--cross-validate, --fit and --fit-out are for training runs; drop them with --serving")
    if html is not None:
        from tierwise.atomic import check_writable
        from tierwise.report import require_plotly

        require_plotly()
        check_writable(html, "--html")
    doc = serving_validation_document(dataset, source=source, engine=engine)
    if html is not None:
        from tierwise.report.serve import validation_page

        doc["html"] = validation_page(doc, html)
    emit(doc, as_json, lambda console: render_serving_validation(console, doc), document="validate-serving")
