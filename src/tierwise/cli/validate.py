"""``tierwise validate [DATASET.csv]``: estimates beside published, measured training runs."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._output import emit, print_table


def _render_cross_validation(console, doc: dict) -> None:
    """The cross-validation tables of a ``validate --cross-validate`` document (leave one group / source out)."""
    from rich.table import Table
    from rich.text import Text

    if "cross_validation_groups" in doc:
        g = doc["cross_validation_groups"]
        gt = Table(title="leave-one-(hardware x software-stack)-out: refit on the other groups, predict the group")
        for col in ("held-out group", "sources", "rows", "median", "p90", "max", "parameters at a bound"):
            gt.add_column(col, overflow="fold")
        for k, v in g["per_group"].items():
            bounds = ", ".join(f"{p} ({side})" for p, side in v["params_at_bounds"].items()) or "-"
            gt.add_row(k, ", ".join(v["sources"]), str(v["rows"]), f"{v['median']:.1f}", f"{v['p90']:.1f}",
                       f"{v['max']:.1f}", bounds)
        print_table(console, gt)
        console.print(Text("held-out median of group medians ") + Text(f"{g['median_of_group_medians']:.1f}%",
                                                                     style="bold")
                      + Text(f", p90 over all held-out rows {g['p90']:.1f}%, max {g['max']:.1f}%"))
    if "cross_validation" in doc:
        c = doc["cross_validation"]
        cv = Table(title="leave-one-source-out (fit on the others, predict the held-out source)")
        for col in ("held-out source", "rows", "median", "p90", "max"):
            cv.add_column(col)
        for k, v in c["per_source"].items():
            cv.add_row(k, str(v["rows"]), f"{v['median']:.1f}", f"{v['p90']:.1f}", f"{v['max']:.1f}")
        print_table(console, cv)
        console.print(f"held-out median of source medians {c['median_of_source_medians']:.1f}%, "
                      f"over all held-out rows {c['overall_median']:.1f}%")


def render_validation(console, doc: dict) -> None:
    """Rich view of a ``validate --json`` document: the rows, the summary, skipped rows, cross-validation."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"tierwise validate: {doc['dataset']}")
    for col in ("row", "source", "model", "hardware", "GPUs", "plan", "FLOP rule", "measured", "predicted",
                "error"):
        table.add_column(col, overflow="fold")
    for r in doc["rows"]:
        if r["skipped"]:
            continue
        rule = r["flop_rule"] + ("" if r["flop_rule_pinned"] else "*")
        mark = "" if r["scored"] else " (not scored)"
        table.add_row(r["row_id"], r["source_id"], r["model"], r["hardware"][:18], str(r["num_gpus"]), r["plan"],
                      rule, f"{r['measured_tokens_per_s_per_gpu']:,.1f}", f"{r['predicted_tokens_per_s_per_gpu']:,.1f}",
                      f"{r['error_pct']:+.1f}%{mark}")
    print_table(console, table)
    s = doc["summary"]
    summ = Table(title="absolute % error, rows of high and medium confidence")
    for col in ("source", "rows", "skipped", "median", "mean", "p90", "max"):
        summ.add_column(col)
    for k, v in s["per_source"].items():
        summ.add_row(k, str(v["rows"]), str(v["skipped"]), *(f"{v[x]:.1f}" for x in ("median", "mean", "p90", "max")))
    o = s["overall"]
    summ.add_row("overall", str(o["rows"]), str(len(s["skipped"])),
                 *(f"{o[x]:.1f}" for x in ("median", "mean", "p90", "max")))
    print_table(console, summ)
    console.print(Text("median of per-source medians: ") + Text(f"{s['median_of_source_medians']:.1f}%", style="bold")
                  + Text(f"; rows used {s['used']} of {s['rows']}, scored {s['scored']}"))
    for sk in s["skipped"]:
        console.print(f"skipped row {sk['row_id']} ({sk['source_id']}): {sk['reason']}", style="dim")
    console.print("* FLOP rule not pinned by the source; filled defaults are listed per row in --json", style="dim")
    _render_cross_validation(console, doc)
    if "fit" in doc:
        f = doc["fit"]
        console.print(f"fitted {len(f['parameters'])} parameters on {f['rows']} rows, written to {f['written_to']}:")
        for k, val in f["parameters"].items():
            console.print(f"  {k}: {f['before'].get(k)} -> {val:.4g}")


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate_cmd(
        *,
        dataset: Annotated[str | None, typer.Argument(help="calibration CSV (default: the shipped training-runs.csv)")]
        = None,
        source: Annotated[str | None, typer.Option("--source", help="only this source_id")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the JSON document")] = False,
        html: Annotated[str | None, typer.Option("--html", help="write a self-contained HTML report here")] = None,
        cross_validate: Annotated[bool, typer.Option("--cross-validate",
                                                     help="leave-one-(hardware x stack)-out and leave-one-"
                                                          "source-out: refit without each group / source, "
                                                          "predict it")] = False,
        fit: Annotated[bool, typer.Option("--fit", help="refit the global compute parameters, write them to "
                                                        "--fit-out and validate with them")] = False,
        fit_out: Annotated[str | None, typer.Option("--fit-out", help="parameters file --fit writes (use it with "
                                                    "TIERWISE_PARAMETERS=FILE; the installed one is never "
                                                    "written)")] = None,
        serving: Annotated[bool, typer.Option("--serving", help="the serving model against the shipped serving "
                                                               "set (inference-runs.csv)")] = False,
        engine: Annotated[str | None, typer.Option("--engine", help="with --serving: every row on this engine "
                                                   "(NAME[@VERSION], or 'default') instead of its software "
                                                   "column's")] = None,
    ) -> None:
        """Estimate every published training run of a dataset and compare with the measurement."""
        if serving:
            from tierwise.cli.serve import validate_serving

            validate_serving(dataset, source, as_json, html, cross_validate or fit or fit_out is not None, engine)
            return
        from tierwise.atomic import check_writable
        from tierwise.errors import OutputError
        from tierwise.validate import validation_document

        if engine is not None:
            raise OutputError(f"--engine {engine[:40]!r} is for serving rows; add --serving or drop it")
        if fit_out is not None and not fit:
            raise OutputError(f"--fit-out {fit_out!r} without --fit: add --fit to refit the parameters")
        if html is not None:  # before the work: the optional plotly, and a place that can be written
            from tierwise.validate.report import require_plotly

            require_plotly()
            check_writable(html, "--html")
        from tierwise.cli._progress import progress

        with progress("estimating the published runs"):
            doc = validation_document(dataset, source=source, cross_validate=cross_validate, fit=fit, fit_out=fit_out)
        if html is not None:
            from tierwise.validate.report import write_html

            doc["html"] = write_html(doc, html)
        emit(doc, as_json, lambda console: render_validation(console, doc), document="validate")
