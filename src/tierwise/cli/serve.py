"""``tierwise serve`` and ``tierwise serve-plan``: inference (prefill, decode, KV transfer) on the same tiers."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._compute import ComputeOpt, StrictOpt, use_compute_profile
from tierwise.cli._output import emit, kv_table, print_table

MtpOpt = Annotated[int | None, typer.Option(
    "--mtp", help="speculative tokens per decode step from the model's MTP module(s) (default 0: off)")]
MtpAcceptanceOpt = Annotated[float | None, typer.Option(
    "--mtp-acceptance", help="--mtp: probability a drafted token is accepted (default 0.85, DeepSeek-V3 report "
                             "sec. 5.4.3)")]


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


def _flags(*, model, cluster, gpus, tp, ep, precision, kv_precision, input_len, output_len, scenario, rate, ttft_slo,
           tpot_slo, batch, batching, kv_reservation, prefill_gpus, decode_gpus, prefill_tp, decode_tp, decode_ep,
           kv_link, kv_whole, max_batch=None, beams=None, kv_cache_fraction=None, kv_cache_of=None,
           attention_kernel=None, engine=None, decode_cluster=None, prefill_ep=None, redundant_experts=None,
           two_batch_overlap=None) -> dict:
    from tierwise.errors import ScenarioError

    b = None
    if batch is not None:
        if batch == "auto":
            b = 0
        else:
            try:
                b = int(batch)
            except ValueError:
                raise ScenarioError(f"--batch {batch[:40]!r} is not a whole number or 'auto'; use --batch 256 or "
                                    "--batch auto") from None
            if b < 1:
                raise ScenarioError(f"--batch {batch[:40]} must be at least 1 (or 'auto')")
    return {"model": model, "cluster": cluster, "num_gpus": gpus, "tp": tp, "ep": ep, "precision": precision,
            "kv_precision": kv_precision, "input_len": input_len, "output_len": output_len, "scenario": scenario,
            "rate": rate, "ttft_slo": ttft_slo, "tpot_slo": tpot_slo, "batch": b, "batching": batching,
            "kv_reservation": kv_reservation, "prefill_gpus": prefill_gpus, "decode_gpus": decode_gpus,
            "prefill_tp": prefill_tp, "decode_tp": decode_tp, "decode_ep": decode_ep, "kv_link": kv_link,
            "kv_streamed": False if kv_whole else None, "max_batch": max_batch, "beams": beams,
            "kv_cache_fraction": kv_cache_fraction, "kv_cache_of": kv_cache_of, "attention_kernel": attention_kernel,
            "engine": engine, "decode_cluster": decode_cluster, "prefill_ep": prefill_ep,
            "redundant_experts": redundant_experts, "two_batch_overlap": two_batch_overlap}


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


# options serve and serve-plan share
ScenarioFileArg = Annotated[str | None, typer.Argument(help="scenario YAML (keys as the flags)")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="catalog model name")]
ClusterOpt = Annotated[str | None, typer.Option("--cluster", help="catalog cluster name")]
PrecisionOpt = Annotated[str | None, typer.Option("--precision", help="bf16, fp8 or fp4 weights")]
KvPrecisionOpt = Annotated[str | None, typer.Option("--kv-precision", help="bf16 or fp8 KV cache")]
InputLenOpt = Annotated[int | None, typer.Option("--input-len", help="prompt tokens")]
OutputLenOpt = Annotated[int | None, typer.Option("--output-len", help="generated tokens")]
ScenarioOpt = Annotated[str | None, typer.Option("--scenario", help="offline, server or interactive")]
RateOpt = Annotated[float | None, typer.Option("--rate", help="server arrivals, requests/s")]
TtftSloOpt = Annotated[float | None, typer.Option("--ttft-slo", help="p99 TTFT bound, seconds")]
TpotSloOpt = Annotated[float | None, typer.Option("--tpot-slo", help="p99 TPOT bound, seconds")]
KvLinkOpt = Annotated[str | None, typer.Option("--kv-link", help="auto, scale_up, scale_out, host or tcp")]
EngineOpt = Annotated[str | None, typer.Option("--engine", help="serving engine NAME[@VERSION]: vllm, sglang, trtllm, "
                                                                "lmdeploy (default vllm@0.8)")]


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_cmd(
        *,
        ctx: typer.Context,
        scenario_file: ScenarioFileArg = None,
        model: ModelOpt = None,
        cluster: ClusterOpt = None,
        gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs (aggregated)")] = None,
        tp: Annotated[int | None, typer.Option("--tp", help="tensor-parallel degree")] = None,
        ep: Annotated[int | None, typer.Option("--ep", help="expert-parallel degree: divides tp, or wider (up to "
                                                            "the instance, attention data-parallel)")] = None,
        precision: PrecisionOpt = None,
        kv_precision: KvPrecisionOpt = None,
        input_len: InputLenOpt = None,
        output_len: OutputLenOpt = None,
        scenario: ScenarioOpt = None,
        rate: RateOpt = None,
        ttft_slo: TtftSloOpt = None,
        tpot_slo: TpotSloOpt = None,
        batch: Annotated[str | None, typer.Option("--batch", help="sequences per instance, or auto")] = None,
        batching: Annotated[str | None, typer.Option("--batching", help="inflight or static")] = None,
        beams: Annotated[int | None, typer.Option("--beams", help="beam-search width (default 1)")] = None,
        max_batch: Annotated[int | None, typer.Option("--max-batch", help="scheduler cap for --batch auto "
                                                                          "(default 2048)")] = None,
        kv_reservation: Annotated[str | None, typer.Option("--kv-reservation", help="paged or full")] = None,
        kv_cache_fraction: Annotated[float | None, typer.Option(
            "--kv-cache-fraction", help="memory fraction for the KV cache (default 0.9)")] = None,
        kv_cache_of: Annotated[str | None, typer.Option(
            "--kv-cache-of", help="total (vLLM gpu_memory_utilization) or free (TensorRT-LLM "
                                  "kv_cache_free_gpu_mem_fraction)")] = None,
        attention_kernel: Annotated[str | None, typer.Option(
            "--attention-kernel", help="attention kernel family the engine runs: auto (the part's default), "
                                       "flash2, sdpa, cudnn, flash3, triton")] = None,
        prefill_gpus: Annotated[int | None, typer.Option("--prefill-gpus", help="disaggregated: prefill pool")] = None,
        decode_gpus: Annotated[int | None, typer.Option("--decode-gpus", help="disaggregated: decode pool")] = None,
        prefill_tp: Annotated[int | None, typer.Option("--prefill-tp", help="TP of a prefill instance")] = None,
        decode_tp: Annotated[int | None, typer.Option("--decode-tp", help="TP of a decode instance")] = None,
        decode_ep: Annotated[int | None, typer.Option("--decode-ep", help="EP of a decode instance (wider than "
                                                                          "--decode-tp: attention data-parallel)")] = None,
        decode_cluster: Annotated[str | None, typer.Option(
            "--decode-cluster", help="disaggregated: the decode pool's cluster when it differs (its own "
                                     "accelerator)")] = None,
        prefill_ep: Annotated[int | None, typer.Option("--prefill-ep", help="EP of a prefill instance")] = None,
        redundant_experts: Annotated[int | None, typer.Option(
            "--redundant-experts", help="EPLB redundant expert copies per MoE layer (their weights; EP up to "
                                        "routed + redundant)")] = None,
        two_batch_overlap: Annotated[bool, typer.Option(
            "--two-batch-overlap", help="two micro-batches per step: the all-to-all behind the other's "
                                        "compute")] = False,
        mtp: MtpOpt = None,
        mtp_acceptance: MtpAcceptanceOpt = None,
        kv_link: KvLinkOpt = None,
        engine: EngineOpt = None,
        kv_whole: Annotated[bool, typer.Option("--kv-whole", help="send the KV cache after prefill, not layer by "
                                                                  "layer")] = False,
        simulate: Annotated[bool, typer.Option("--simulate", help="run requests through an iteration-level "
                                               "event loop (tails, goodput, queue over time)")] = False,
        arrivals: Annotated[str | None, typer.Option("--arrivals", help="--simulate: poisson (default) or gamma "
                                                     "(bursty)")] = None,
        cv: Annotated[float | None, typer.Option("--cv", help="--simulate --arrivals gamma: inter-arrival "
                                                 "coefficient of variation (default 4)")] = None,
        trace: Annotated[str | None, typer.Option("--trace", help="--simulate: CSV/JSONL trace (arrival time, "
                                                  "prompt and output lengths)")] = None,
        requests: Annotated[int | None, typer.Option("--requests", help="--simulate: requests generated "
                                                     "(default 10,000)")] = None,
        seed: Annotated[int | None, typer.Option("--seed", help="--simulate: random seed (default 0)")] = None,
        token_budget: Annotated[int | None, typer.Option("--token-budget", help="--simulate: tokens per "
                                                         "iteration (default 8192)")] = None,
        preemption: Annotated[str | None, typer.Option("--preemption", help="--simulate: recompute (default) or "
                                                       "swap (KV to host memory)")] = None,
        prefix_hit_rate: Annotated[float | None, typer.Option("--prefix-hit-rate", help="share of each prompt "
                                                              "in the prefix cache")] = None,
        prefix_tier: Annotated[str | None, typer.Option("--prefix-tier", help="where prefix-cache hits live: hbm "
                                                        "(default) or host (KV offload)")] = None,
        prefix_load: Annotated[str | None, typer.Option("--prefix-load", help="host hits load layerwise "
                                                        "(default, behind the prefill) or whole")] = None,
        host_kv_gb: Annotated[float | None, typer.Option("--host-kv-gb", help="host memory per GPU for "
                                                         "offloaded KV, GB (default 5)")] = None,
        compare_attention: Annotated[bool, typer.Option("--compare-attention",
                                                        help="the model's attention beside its MHA equivalent")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="print the JSON document")] = False,
        html: Annotated[str | None, typer.Option("--html", help="write a self-contained HTML page here")] = None,
        compute: ComputeOpt = None, strict: StrictOpt = False,
    ) -> None:
        """Serve a model: TTFT, TPOT, tokens/s, KV cache and the KV transfer between prefill and decode pools."""
        from tierwise.atomic import check_writable
        from tierwise.serve.api import compare_attention as compare
        from tierwise.serve.api import serve_estimate

        if html is not None:
            from tierwise.report import require_plotly

            require_plotly()
            check_writable(html, "--html")
        flags = _flags(model=model, cluster=cluster, gpus=gpus, tp=tp, ep=ep, precision=precision,
                       kv_precision=kv_precision, input_len=input_len, output_len=output_len, scenario=scenario,
                       rate=rate, ttft_slo=ttft_slo, tpot_slo=tpot_slo, batch=batch, batching=batching,
                       kv_reservation=kv_reservation, prefill_gpus=prefill_gpus, decode_gpus=decode_gpus,
                       prefill_tp=prefill_tp, decode_tp=decode_tp, decode_ep=decode_ep, kv_link=kv_link,
                       kv_whole=kv_whole, max_batch=max_batch, beams=beams, kv_cache_fraction=kv_cache_fraction,
                       kv_cache_of=kv_cache_of, attention_kernel=attention_kernel, engine=engine,
                       decode_cluster=decode_cluster, prefill_ep=prefill_ep,
                       redundant_experts=redundant_experts, two_batch_overlap=two_batch_overlap or None)
        flags.update(prefix_hit_rate=prefix_hit_rate, prefix_tier=prefix_tier, prefix_load=prefix_load,
                     host_kv_gb=host_kv_gb, mtp=mtp, mtp_acceptance=mtp_acceptance)
        cfg = _config(scenario_file, flags)
        use_compute_profile(ctx, compute, strict)
        sim = {"arrivals": arrivals, "cv": cv, "trace": trace, "requests": requests, "seed": seed,
               "token_budget": token_budget, "preemption": preemption}
        if simulate:  # the simulator runs the prefix cache the closed form prices
            sim.update(prefix_hit_rate=cfg.prefix_hit_rate, prefix_tier=cfg.prefix_tier)
        doc = _simulate(cfg, sim) if simulate else _no_sim_flags(sim) or serve_estimate(cfg)
        if compare_attention:
            doc.update(compare(cfg))
        if html is not None:
            from tierwise.report.serve import serve_page

            doc["html"] = serve_page(doc, html)

        def render(console):
            render_serve(console, doc)
            if "simulation" in doc:
                render_simulation(console, doc)
            if compare_attention:
                render_compare(console, doc)

        emit(doc, as_json, render, document="serve")

    @app.command("serve-plan")
    def serve_plan_cmd(
        *,
        ctx: typer.Context,
        scenario_file: ScenarioFileArg = None,
        model: ModelOpt = None,
        cluster: ClusterOpt = None,
        gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs to split")] = None,
        precision: PrecisionOpt = None,
        kv_precision: KvPrecisionOpt = None,
        input_len: InputLenOpt = None,
        output_len: OutputLenOpt = None,
        scenario: ScenarioOpt = None,
        rate: RateOpt = None,
        ttft_slo: TtftSloOpt = None,
        tpot_slo: TpotSloOpt = None,
        kv_link: KvLinkOpt = None,
        engine: EngineOpt = None,
        decode_cluster: Annotated[str | None, typer.Option(
            "--decode-cluster", help="plan the decode pool on this cluster (or on each of a comma-separated list) "
                                     "and the prefill pool on --cluster")] = None,
        mtp: MtpOpt = None,
        mtp_acceptance: MtpAcceptanceOpt = None,
        max_tp: Annotated[int, typer.Option("--max-tp", help="largest TP degree searched")] = 8,
        modes: Annotated[str, typer.Option("--modes", help="both, aggregated or disaggregated")] = "both",
        top: Annotated[int, typer.Option("--top", help="deployments listed")] = 10,
        as_json: Annotated[bool, typer.Option("--json", help="print the JSON document")] = False,
        compute: ComputeOpt = None, strict: StrictOpt = False,
    ) -> None:
        """Search the prefill/decode split, TP/EP per pool and batch for the most output tokens/s per GPU."""
        from tierwise.serve.api import serve_plan_document

        flags = _flags(model=model, cluster=cluster, gpus=gpus, tp=None, ep=None, precision=precision,
                       kv_precision=kv_precision, input_len=input_len, output_len=output_len, scenario=scenario,
                       rate=rate, ttft_slo=ttft_slo, tpot_slo=tpot_slo, batch=None, batching=None,
                       kv_reservation=None, prefill_gpus=None, decode_gpus=None, prefill_tp=None, decode_tp=None,
                       decode_ep=None, kv_link=kv_link, kv_whole=False, engine=engine, decode_cluster=decode_cluster)
        flags.update(mtp=mtp, mtp_acceptance=mtp_acceptance)  # taken as given, not searched
        cfg = _config(scenario_file, flags, pools=False)
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
