"""``tierwise estimate SCENARIO.yaml [...]``: one training step of one parallel plan per scenario."""

from __future__ import annotations

import sys
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
from tierwise.cli._output import emit, kv_table, print_table
from tierwise.estimate.stragglers import check_stragglers, straggler_block


def _count(x: float) -> str:
    return f"{x / 1e9:,.2f}B" if x >= 1e9 else f"{x / 1e6:,.1f}M"


def model_line(s: dict) -> str:
    """One line of what the model reference was parsed into (``model_summary`` of the JSON document)."""
    params = _count(s["parameters"])
    if s["experts"]:
        params += f" ({_count(s['active_parameters'])} active)"
    heads = f"{s['attention_heads']} heads / {s['kv_heads']} KV heads" + (" (MLA)" if s["attention"] == "mla" else "")
    line = f"{params} parameters, {s['layers']} layers, hidden {s['hidden_size']:,}, {heads}"
    if s["experts"]:
        line += f", {s['experts']} experts top-{s['top_k']} on {s['moe_layers']} layers"
    return line + f", vocab {s['vocab_size']:,}"


def render_model(console, s: dict) -> None:
    """Every field of ``model_summary``: what a catalog entry, YAML or config.json was parsed into."""
    table = kv_table(f"model {s['name']}: as parsed")
    for key, value in s.items():
        if key == "name" or value is None:
            continue
        text = f"{value:,.0f}" if key.endswith("parameters") else (f"{value:,}" if isinstance(value, int)
                                                                    and not isinstance(value, bool) else str(value))
        table.add_row(key, text)
    print_table(console, table)


def _mtp_cell(mtp: dict) -> str:
    """The MTP module's share (``breakdown.mtp``): its bytes where it sits, what it adds to the fullest GPU, the
    step and the model FLOPs."""
    from tierwise.units import format_bytes, format_time

    return (f"{format_bytes(mtp['stage_bytes'])} there; +{format_bytes(max(mtp['per_gpu_bytes'], 0.0))} on the "
            f"fullest GPU, +{format_time(max(mtp['step_s'], 0.0))} step, +{mtp['model_flops'] / 1e15:,.0f} PFLOP "
            "model FLOPs")


def _render_axes(console, doc: dict) -> None:
    """The per-axis communication table of an estimate (and the interference note when some of it hides)."""
    from rich.table import Table

    from tierwise.units import format_bytes, format_time

    axes = Table(title="communication per step, per GPU")
    for col in ("axis", "group (ranks)", "tier", "bytes", "time", "exposed"):
        axes.add_column(col)
    hides = False
    for axis, row in doc["breakdown"]["per_axis"].items():
        if row["bytes"] > 0:
            group = row.get("group", axis)
            axes.add_row(axis, f"{group} ({row['ranks']})" if "ranks" in row else "-", row["tier"],
                         format_bytes(row["bytes"]), format_time(row["time_s"]), format_time(row["exposed_s"]))
            hides = hides or row["exposed_s"] < row["time_s"]
    print_table(console, axes)
    if hides and doc.get("interference_note"):
        console.print(doc["interference_note"], style="dim")


def render_estimate(console, doc: dict, show_model: bool = False) -> None:
    """Rich view of one ``estimate --json`` document (also used by other commands)."""
    from rich.text import Text

    from tierwise.units import format_bytes, format_time

    plan = doc["plan"]
    title = (f"{doc.get('model', '')} on {doc.get('num_gpus', '')} x {doc.get('cluster', '')}: "
             f"tp {plan['tp']} pp {plan['pp']} cp {plan['cp']} dp {plan['dp']} ep {plan['ep']} vpp {plan['vpp']} "
             f"mbs {plan['micro_batch_size']} gbs {plan['global_batch_size']} seq {plan['seq_length']} "
             f"{plan['recompute']} recompute, ZeRO {plan['zero_stage']}, {plan['precision']}"
             + (f", {plan['schedule']}" if str(plan.get("schedule", "")).startswith("dualpipe") else ""))
    table = kv_table(title)
    if doc.get("model_summary"):
        table.add_row("model (as parsed)", model_line(doc["model_summary"]))
    table.add_row("step time", format_time(doc["step_time_s"]))
    table.add_row("tokens/s (per GPU)", f"{doc['tokens_per_s']:,.0f} ({doc['tokens_per_s_per_gpu']:,.0f})")
    vs_bf16 = f"; {doc['mfu_bf16']:.1%} of the bf16 peak" if plan["precision"] != "bf16" else ""
    table.add_row("model TFLOP/s per GPU (MFU)", f"{doc['model_tflops_per_gpu']:.0f} ({doc['mfu']:.1%}{vs_bf16})")
    table.add_row("hardware TFLOP/s per GPU (HFU)", f"{doc['hardware_tflops_per_gpu']:.0f} ({doc['hfu']:.1%})")
    table.add_row("scaling efficiency (compute / step)", f"{doc['scaling_efficiency']:.1%}")
    bd = doc["breakdown"]
    for key, label in (("compute_s", "compute"), ("recompute_s", "recompute"), ("bubble_s", "bubble"),
                       ("exposed_comm_s", "exposed comm"), ("optimizer_s", "optimizer"),
                       ("shard_copy_s", "ZeRO-3 buffer copies")):
        if key != "shard_copy_s" or bd[key] > 0:
            table.add_row(label, format_time(bd[key]))
    if "offload_exposed_s" in bd:
        moved = f", {format_bytes(bd['offload_host_bytes'])} each way per step" if "offload_host_bytes" in bd else ""
        table.add_row(f"activation offload ({plan['activation_offload_layers']} layers to host{moved}), exposed",
                      format_time(bd["offload_exposed_s"]))
    mem = doc["memory"]
    fit = Text("(fits)") if mem["fits"] else Text("(does NOT fit)", style="red")
    table.add_row("memory per GPU",
                  Text(f"{format_bytes(mem['per_gpu_bytes'])} of {format_bytes(mem['capacity_bytes'])} ") + fit)
    table.add_row("  weights / grads / optimizer / activations",
                  " / ".join(format_bytes(mem[k]) for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes",
                                                           "activations_bytes")))
    if bd.get("mtp"):
        table.add_row(f"  MTP ({bd['mtp']['modules']} module, on the output head's stage)", _mtp_cell(bd["mtp"]))
    print_table(console, table)
    _render_axes(console, doc)
    console.print(doc["flops_note"], style="dim")
    if doc.get("cluster_compute"):
        measured = ", ".join(f"{k} {v:.4g}" for k, v in doc["cluster_compute"].items())
        console.print(f"from the cluster file or --compute profile (measured), in place of the global fit: {measured}",
                      style="dim")
    if doc["assumed"]:
        console.print(f"assumed: {', '.join(doc['assumed'])}", style="dim")
    for warning in doc.get("warnings", []):
        console.print(f"warning: {warning}", style="yellow")
    if show_model and doc.get("model_summary"):
        render_model(console, doc["model_summary"])


def _estimate_with_economics(scenario, levers, tokens, prices, overrides=None) -> dict:
    """The estimate document under the levers, with its cost and energy block (:mod:`tierwise.design.cost`)."""
    from dataclasses import replace

    from tierwise.cli._economics import economics_block, load_prices_checked
    from tierwise.estimate.levers import with_levers
    from tierwise.estimate.scenario import estimate_scenario

    price_table = load_prices_checked(prices)  # a bad price file fails before the work
    if levers.active:
        scenario = replace(scenario, cluster=with_levers(scenario.cluster, levers))
    doc = estimate_scenario(scenario)
    if levers.active:
        doc["levers"] = levers.describe()
    doc["economics"] = economics_block(doc["tokens_per_s"], scenario.cluster, doc["num_gpus"], tokens=tokens,
                                       prices=price_table, overrides=overrides)
    return doc


def _render_all(console, doc: dict, show_model: bool) -> None:
    from tierwise.cli._economics import render_economics, render_levers

    render_estimate(console, doc, show_model)
    _render_stragglers(console, doc.get("stragglers"))
    render_levers(console, doc.get("levers"))
    render_economics(console, doc.get("economics"))


StragglerRateOpt = Annotated[float | None, typer.Option(
    "--straggler-rate", help="share of GPUs slow at a time (e.g. 0.0005: 5 per 10,000; MegaScale saw ~0.5% of "
                             "machines): adds the expected step with stragglers")]
StragglerSlowOpt = Annotated[float, typer.Option(
    "--straggler-slowdown", help="how much slower a straggler is (0.25: 1.25x; published 10-40%)")]
StragglerDetectOpt = Annotated[float | None, typer.Option(
    "--straggler-detect", help="share of a straggler episode before it is detected and evicted (0-1): the step "
                               "with detection and eviction")]


def _add_stragglers(doc: dict, stragglers: tuple) -> None:
    """The ``stragglers`` block (:func:`tierwise.estimate.stragglers.straggler_block`) when a rate is given."""
    rate, slowdown, detect = stragglers
    if rate is not None:
        doc["stragglers"] = straggler_block(doc["num_gpus"], doc["step_time_s"], doc["tokens_per_s"], rate,
                                            slowdown, detect)


def _render_stragglers(console, st: dict | None) -> None:
    if not st:
        return
    console.print(f"stragglers: {st['rate']:.4g} of {st['num_gpus']:,} GPUs slow by {st['slowdown']:.0%} "
                  f"({st['expected_stragglers']:.2f} expected, P(any) {st['p_any_slow']:.1%}): step "
                  f"x{st['step_factor']:.3f} = {st['step_time_s']:.4g} s, {st['tokens_per_s']:,.0f} tokens/s; "
                  f"evicting to {st['evict_spares']} hot spare(s) restores x1.000")
    if "detect_step_factor" in st:
        console.print(f"  detected and evicted after {st['detect_share']:.0%} of an episode: step "
                      f"x{st['detect_step_factor']:.3f}, {st['detect_tokens_per_s']:,.0f} tokens/s")


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    def estimate_cmd(
        *,
        ctx: typer.Context,
        scenarios: Annotated[list[str], typer.Argument(help="scenario YAML files (model, cluster, num_gpus, plan)")],
        as_json: Annotated[bool, typer.Option("--json", help="print the JSON document (a result per file under "
                                                                "results, also for one file)")] = False,
        show_model: Annotated[bool, typer.Option("--show-model", help="also list every field the model (catalog "
                                                 "name, YAML or config.json) was parsed into")] = False,
        tokens: TokensOpt = None, prices: PricesOpt = None, reduce_dtype: ReduceDtypeOpt = None,
        powersgd_rank: PowerSgdOpt = 0, onebit: OneBitOpt = False, sync_every: SyncEveryOpt = 1,
        async_staleness: StalenessOpt = 0,
        framework: Annotated[str | None, typer.Option(
            "--framework", help="megatron, nemo, torchtitan, llm-foundry or deepspeed: that framework's defaults "
                                "for the switches a scenario does not state")] = None,
        topology: TopologyOpt = None, fabric: FabricOpt = None, radix: RadixOpt = None, tiers: TiersOpt = None,
        oversubscription: OversubOpt = None,
        compute: ComputeOpt = None, strict: StrictOpt = False,
        straggler_rate: StragglerRateOpt = None, straggler_slowdown: StragglerSlowOpt = 0.25,
        straggler_detect: StragglerDetectOpt = None,
    ) -> None:
        """Estimate one training step for each scenario file."""
        from tierwise.cli._economics import make_levers
        from tierwise.estimate.scenario import load_scenario, safe_estimate
        from tierwise.specs.framework import check_framework

        if framework is not None:
            framework = check_framework(framework, "--framework")
        levers = make_levers(reduce_dtype, powersgd_rank, onebit, sync_every, async_staleness)
        overrides = fabric_overrides(topology, fabric, radix, tiers, oversubscription)
        use_compute_profile(ctx, compute, strict)
        stragglers = (straggler_rate, straggler_slowdown, straggler_detect)
        if straggler_rate is not None:
            check_stragglers(*stragglers)
        if len(scenarios) == 1:
            doc = _estimate_with_economics(load_scenario(scenarios[0], framework), levers, tokens, prices, overrides)
            _add_stragglers(doc, stragglers)
            emit([{"file": scenarios[0], **doc}], as_json, lambda console: _render_all(console, doc, show_model),
                 document="estimate")
            return
        if levers.active or tokens is not None or prices is not None or straggler_rate is not None:
            from tierwise.errors import SpecError

            raise SpecError("--tokens, --prices, --straggler-rate and the lever options take one scenario file; "
                            "give one")
        docs = [safe_estimate(path, framework) for path in scenarios]

        def render(console):
            for doc in docs:
                if "error" not in doc:
                    render_estimate(console, doc, show_model)

        emit(docs, as_json, render, document="estimate")
        failed = [d for d in docs if "error" in d]
        for doc in failed:  # on stderr, one line each, as main() prints an error; stdout keeps the results
            print(f"error: {doc['file']}: {' '.join(str(doc['error']).split())}", file=sys.stderr)
        if failed:
            raise typer.Exit(2)
