"""``tierwise estimate SCENARIO.yaml [...]``: one training step of one parallel plan per scenario."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._output import emit


def render_estimate(console, doc: dict) -> None:
    """Rich view of one ``estimate --json`` document (also used by other commands)."""
    from rich.table import Table

    from tierwise.units import format_bytes, format_time

    plan = doc["plan"]
    title = (f"{doc.get('model', '')} on {doc.get('num_gpus', '')} x {doc.get('cluster', '')}: "
             f"tp {plan['tp']} pp {plan['pp']} cp {plan['cp']} dp {plan['dp']} ep {plan['ep']} vpp {plan['vpp']} "
             f"mbs {plan['micro_batch_size']} gbs {plan['global_batch_size']} seq {plan['seq_length']} "
             f"{plan['recompute']} recompute, ZeRO {plan['zero_stage']}, {plan['precision']}")
    table = Table(title=title, show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value")
    table.add_row("step time", format_time(doc["step_time_s"]))
    table.add_row("tokens/s (per GPU)", f"{doc['tokens_per_s']:,.0f} ({doc['tokens_per_s_per_gpu']:,.0f})")
    table.add_row("model TFLOP/s per GPU (MFU)", f"{doc['model_tflops_per_gpu']:.0f} ({doc['mfu']:.1%})")
    table.add_row("hardware TFLOP/s per GPU (HFU)", f"{doc['hardware_tflops_per_gpu']:.0f} ({doc['hfu']:.1%})")
    table.add_row("scaling efficiency (compute / step)", f"{doc['scaling_efficiency']:.1%}")
    bd = doc["breakdown"]
    for key, label in (("compute_s", "compute"), ("recompute_s", "recompute"), ("bubble_s", "bubble"),
                       ("exposed_comm_s", "exposed comm"), ("optimizer_s", "optimizer"),
                       ("shard_copy_s", "ZeRO-3 buffer copies")):
        if key != "shard_copy_s" or bd[key] > 0:
            table.add_row(label, format_time(bd[key]))
    mem = doc["memory"]
    table.add_row("memory per GPU", f"{format_bytes(mem['per_gpu_bytes'])} of {format_bytes(mem['capacity_bytes'])} "
                  + ("(fits)" if mem["fits"] else "[red](does NOT fit)[/red]"))
    table.add_row("  weights / grads / optimizer / activations",
                  " / ".join(format_bytes(mem[k]) for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes",
                                                           "activations_bytes")))
    console.print(table)
    axes = Table(title="communication per step, per GPU")
    for col in ("axis", "tier", "bytes", "time", "exposed"):
        axes.add_column(col)
    for axis, row in bd["per_axis"].items():
        if row["bytes"] > 0:
            axes.add_row(axis, row["tier"], format_bytes(row["bytes"]), format_time(row["time_s"]),
                         format_time(row["exposed_s"]))
    console.print(axes)
    console.print(f"[dim]{doc['flops_note']}[/dim]")
    if doc.get("cluster_compute"):
        measured = ", ".join(f"{k} {v:.4g}" for k, v in doc["cluster_compute"].items())
        console.print(f"[dim]from the cluster file (measured), in place of the global fit: {measured}[/dim]")
    if doc["assumed"]:
        console.print(f"[dim]assumed: {', '.join(doc['assumed'])}[/dim]")


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    def estimate_cmd(
        scenarios: Annotated[list[str], typer.Argument(help="scenario YAML files (model, cluster, num_gpus, plan)")],
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (a list when several files are given)")] = False,
    ) -> None:
        """Estimate one training step for each scenario file."""
        from tierwise.estimate.scenario import estimate_scenario, load_scenario, safe_estimate

        if len(scenarios) == 1:
            doc = estimate_scenario(load_scenario(scenarios[0]))
            emit(doc, as_json, lambda console: render_estimate(console, doc))
            return
        docs = [safe_estimate(path) for path in scenarios]

        def render(console):
            for doc in docs:
                if "error" in doc:
                    console.print(f"[red]{doc['file']}: {doc['error']}[/red]")
                else:
                    render_estimate(console, doc)

        emit(docs, as_json, render)
        failed = [d for d in docs if "error" in d]
        if failed:
            import sys

            for doc in failed:  # the contract's line on stderr, per file that failed; the others' results stand
                print(f"error: {doc['file']}: {' '.join(doc['error'].split())}", file=sys.stderr)
            raise typer.Exit(2)
