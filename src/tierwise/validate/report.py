"""The HTML validation report: one self-contained page (plotly.js inlined) with a measured-vs-predicted
scatter plot, the summary per source, and the per-row table."""

from __future__ import annotations

import html
import json
from pathlib import Path

from tierwise.atomic import write_atomic
from tierwise.report import figure_div, require_plotly
from tierwise.report import table as _report_table

__all__ = ["html_report", "write_html", "require_plotly"]


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(x, spec=".1f") -> str:
    return "" if x is None else format(x, spec)


def html_report(doc: dict) -> str:
    """The page for one ``tierwise validate --json`` document."""
    require_plotly()
    plot = _scatter([r for r in doc["rows"] if r["error_pct"] is not None])

    s = doc["summary"]
    src_rows = [[html.escape(k), str(v["rows"]), str(v["skipped"]), _fmt(v["median"]), _fmt(v["mean"]), _fmt(v["p90"]),
                 _fmt(v["max"]), _fmt(v["signed_median"], "+.1f")] for k, v in s["per_source"].items()]
    o = s["overall"]
    src_rows.append(["<b>overall</b>", str(o["rows"]), str(len(s["skipped"])), _fmt(o["median"]), _fmt(o["mean"]),
                     _fmt(o["p90"]), _fmt(o["max"]), ""])
    summary = _table(["source", "rows scored", "skipped", "median |err| %", "mean", "p90", "max", "signed median"],
                     src_rows)
    table = _rows_table(doc["rows"])
    cv = ""
    if doc.get("cross_validation"):
        c = doc["cross_validation"]
        cv_rows = [[html.escape(k), str(v["rows"]), _fmt(v["median"]), _fmt(v["p90"]), _fmt(v["max"])]
                   for k, v in c["per_source"].items()]
        cv = ("<h2>Leave-one-source-out cross-validation</h2>"
              + _table(["held-out source", "rows", "median |err| %", "p90", "max"], cv_rows)
              + f"<p>Median of held-out medians: {c['median_of_source_medians']:.1f}%; median over all held-out "
                f"rows: {c['overall_median']:.1f}%.</p>")
    cv = _groups_section(doc.get("cross_validation_groups")) + cv
    worst = ""
    if doc.get("worst_rows"):
        worst = "<h2>Worst rows and the term that dominates them</h2>" + _table(
            ["row", "source", "model", "plan", "error %", "dominant term", "share of step"],
            [[html.escape(w["row_id"]), html.escape(w["source_id"]), html.escape(w["model"]), html.escape(w["plan"]),
              _fmt(w["error_pct"], "+.1f"), html.escape(w["dominant_term"]), _fmt(w["dominant_share"] * 100, ".0f") + "%"]
             for w in doc["worst_rows"]])
    params = html.escape(json.dumps(doc.get("parameters", {}), indent=1))
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tierwise validate</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}th{{background:#eee}}</style></head><body>
<h1>tierwise validate: estimates against published training runs</h1>
<p>Dataset: {html.escape(str(doc.get("dataset", "")))}. Error = (predicted - measured) / measured on tokens/s per GPU,
the measurement derived from each source's own metric by its own FLOP rule. Scored rows: high and medium confidence.
Median of per-source medians: <b>{s["median_of_source_medians"]:.1f}%</b>; overall median {o["median"]:.1f}%,
p90 {o["p90"]:.1f}%, max {o["max"]:.1f}%.</p>
{plot}
<h2>Summary per source</h2>{summary}{worst}{cv}
<h2>Rows</h2>{table}
<h2>Global compute parameters used</h2><pre>{params}</pre>
</body></html>
"""


def _scatter(rows: list[dict]) -> str:
    """Measured vs predicted tokens/s per GPU of the scored ``rows``: one colour per source (y = x and +-15%
    lines), then one per hardware x software-stack group."""
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = go.Figure()
    for src in sorted({r["source_id"] for r in rows}):
        sel = [r for r in rows if r["source_id"] == src]
        fig.add_trace(go.Scatter(
            x=[r["measured_tokens_per_s_per_gpu"] for r in sel], y=[r["predicted_tokens_per_s_per_gpu"] for r in sel],
            mode="markers", name=src,
            text=[f"row {r['row_id']}: {r['model']} on {r['num_gpus']} GPUs, {r['plan']}, error {r['error_pct']:+.1f}%"
                  for r in sel],
            hoverinfo="text"))
    lo = min(min(r["measured_tokens_per_s_per_gpu"], r["predicted_tokens_per_s_per_gpu"]) for r in rows) * 0.8
    hi = max(max(r["measured_tokens_per_s_per_gpu"], r["predicted_tokens_per_s_per_gpu"]) for r in rows) * 1.25
    for f, dash in ((1.0, "solid"), (1.15, "dot"), (1 / 1.15, "dot")):
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo * f, hi * f], mode="lines", showlegend=f == 1.0,
                                 name="y = x (dotted: +-15%)", line={"color": "gray", "dash": dash, "width": 1}))
    fig.update_layout(title="Measured vs predicted tokens/s per GPU",
                      xaxis={"type": "log", "title": "measured (tokens/s per GPU)"},
                      yaxis={"type": "log", "title": "predicted (tokens/s per GPU)"}, height=640, width=900)
    plot = pio.to_html(fig, include_plotlyjs=True, full_html=False, div_id="scatter")
    plot += _group_scatter(rows, lo, hi)
    return plot


def _rows_table(rows: list[dict]) -> str:
    """The per-row table: measured and predicted tokens/s per GPU, error, confidence, filled defaults."""
    table_rows = []
    for r in rows:
        table_rows.append([
            html.escape(r["row_id"]), html.escape(r["source_id"]), html.escape(r["model"]), html.escape(r["hardware"]),
            str(r["num_gpus"]), html.escape(r["plan"]), html.escape(r["flop_rule"]) + ("" if r["flop_rule_pinned"]
                                                                                      else " (unpinned)"),
            _fmt(r["measured_tokens_per_s_per_gpu"], ",.1f"), _fmt(r["predicted_tokens_per_s_per_gpu"], ",.1f"),
            _fmt(r["error_pct"], "+.1f"), html.escape(r["confidence"]),
            html.escape(r["skipped"] or "; ".join(r["filled"])),
        ])
    table = _table(["row", "source", "model", "hardware", "GPUs", "plan", "FLOP rule", "measured (tokens/s per GPU)",
                    "predicted (tokens/s per GPU)", "error (%)", "confidence", "filled defaults / skip reason"],
                   table_rows)
    return table


def _group_scatter(rows: list[dict], lo: float, hi: float) -> str:
    """Measured vs predicted, one colour per hardware x software-stack group (the cross-validation's folds)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for group in sorted({r.get("group") or "?" for r in rows}):
        sel = [r for r in rows if (r.get("group") or "?") == group]
        fig.add_trace(go.Scatter(
            x=[r["measured_tokens_per_s_per_gpu"] for r in sel], y=[r["predicted_tokens_per_s_per_gpu"] for r in sel],
            mode="markers", name=group, hoverinfo="text",
            text=[f"row {r['row_id']} ({r['source_id']}): {r['model']}, {r['plan']}, error {r['error_pct']:+.1f}%"
                  for r in sel]))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x",
                             line={"color": "gray", "width": 1}))
    fig.update_layout(title="Measured vs predicted, by hardware generation x software stack",
                      xaxis={"type": "log", "title": "measured (tokens/s per GPU)"},
                      yaxis={"type": "log", "title": "predicted (tokens/s per GPU)"}, height=640, width=900)
    return figure_div(fig, "scatter-groups", first=False)


def _groups_section(g: dict | None) -> str:
    """The leave-one-(hardware x stack)-out table, when the document has it."""
    if not g:
        return ""
    rows = [[k, ", ".join(v["sources"]), v["rows"], _fmt(v["median"]), _fmt(v["p90"]), _fmt(v["max"]),
             ", ".join(f"{p} ({side})" for p, side in v["params_at_bounds"].items()) or "-"]
            for k, v in g["per_group"].items()]
    return ("<h2>Leave-one-(hardware x software-stack)-out cross-validation (headline)</h2>"
            + _report_table(["held-out group", "sources", "rows", "median |err| %", "p90", "max",
                             "fitted parameters at a bound"], rows)
            + f"<p>Median of held-out group medians: {g['median_of_group_medians']:.1f}%; p90 over all held-out "
              f"rows: {g['p90']:.1f}%; max {g['max']:.1f}%. Groups: {html.escape(g['grouping'])}.</p>")


def write_html(doc: dict, path: str | Path) -> str:
    """Write the report atomically (:func:`tierwise.atomic.write_atomic`); return the path."""

    return write_atomic(path, html_report(doc), "--html")
