"""HTML pages of ``serve --html`` and ``validate --serving --html``, built from their ``--json`` documents."""

from __future__ import annotations

from tierwise.report import esc, figure_div, page, require_plotly, table, write_page

__all__ = ["serve_html", "serve_page", "validation_html", "validation_page"]


def serve_html(doc: dict) -> str:
    """One ``serve --json`` document as a page: the headline figures, the phase times as a bar chart, the
    attention comparison when present."""
    require_plotly()
    import plotly.graph_objects as go

    ph = doc["phases"]
    names = ["prefill", "decode: memory", "decode: compute", "decode: comm", "decode: overhead", "KV transfer"]
    vals = [ph["prefill_s"], ph["decode_memory_s"], ph["decode_compute_s"], ph["decode_comm_s"],
            ph["decode_overhead_s"], doc["kv_transfer_s"]]
    fig = go.Figure(go.Bar(x=names, y=[v * 1e3 for v in vals]))
    fig.update_layout(title="phase times (ms)", yaxis={"title": "ms"}, height=420, width=800)
    keys = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "ttft_s", "tpot_s", "ttft_p99_s", "tpot_p99_s",
            "batch", "kv_bytes_per_token", "kv_cache_bytes_per_gpu", "max_concurrency", "prefill_bound",
            "decode_bound", "kv_transfer_s", "kv_transfer_tier", "fits", "meets_slo")
    body = table(["metric", "value"], [[k, doc[k]] for k in keys])
    body += figure_div(fig, "phases", first=True)
    if doc.get("simulation"):
        body += _simulation_html(doc["simulation"], go)
    if doc.get("compare_attention"):
        rows = doc["compare_attention"]
        body += "<h2>Attention variants</h2>" + table(list(rows[0]), [list(r.values()) for r in rows])
    body += "<h2>Assumed</h2><ul>" + "".join(f"<li>{esc(a)}</li>" for a in doc["assumed"]) + "</ul>"
    return page(f"tierwise serve: {doc['model']} on {doc['num_gpus']} x {doc['cluster']} ({doc['mode']})", body)


def _simulation_html(sim: dict, go) -> str:
    """``serve --simulate``: requests waiting over time and the latency percentiles."""
    q = sim["queue"]
    fig = go.Figure(go.Scatter(x=q["time_s"], y=q["waiting"], mode="lines", name="waiting"))
    fig.update_layout(title=f"requests waiting for admission ({sim['arrivals']})", xaxis={"title": "s"},
                      yaxis={"title": "requests"}, height=380, width=800)
    pct = go.Figure()
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        v = sim[name]
        if v["p50"] is not None:
            pct.add_trace(go.Bar(x=["p50", "p90", "p99"], y=[v[k] * 1e3 for k in ("p50", "p90", "p99")], name=name))
    pct.update_layout(title="latency percentiles (ms)", barmode="group", yaxis={"type": "log", "title": "ms"},
                      height=380, width=800)
    rows = [[k, sim[k]] for k in ("requests", "served", "output_tokens_per_s", "goodput_requests_per_s",
                                  "slo_attainment", "preemptions", "token_budget", "preemption", "prefix_hit_rate")]
    return ("<h2>Simulation</h2>" + table(["metric", "value"], rows) + figure_div(fig, "queue", first=False)
            + figure_div(pct, "percentiles", first=False))


def serve_page(doc: dict, path) -> str:
    return write_page(path, serve_html(doc))


def validation_html(doc: dict) -> str:
    """``validate --serving --json`` as a page: measured vs predicted per metric, the summary, the rows."""
    require_plotly()
    import plotly.graph_objects as go

    rows = [r for r in doc["rows"] if r["error_pct"] is not None]
    fig = go.Figure()
    for metric in sorted({r["metric"] for r in rows}):
        sel = [r for r in rows if r["metric"] == metric]
        fig.add_trace(go.Scatter(x=[r["measured"] for r in sel], y=[r["predicted"] for r in sel], mode="markers",
                                 name=metric, text=[f"row {r['row_id']} {r['model']}: {r['error_pct']:+.1f}%"
                                                    for r in sel], hoverinfo="text"))
    fig.update_layout(title="measured vs predicted", xaxis={"type": "log", "title": "measured"},
                      yaxis={"type": "log", "title": "predicted"}, height=600, width=850)
    s = doc["summary"]
    summ = table(["rows", "count", "median |err| %", "mean", "p90", "max"],
                 [[k, s[k]["rows"], *(None if s[k][x] is None else f"{s[k][x]:.1f}" for x in ("median", "mean", "p90",
                                                                                               "max"))]
                  for k in ("throughput", "latency")])
    body = figure_div(fig, "scatter", first=True) + "<h2>Summary</h2>" + summ
    body += "<h2>Rows</h2>" + table(
        ["row", "source", "model", "hardware", "GPUs", "plan", "metric", "measured", "predicted", "error %", "filled / skip"],
        [[r["row_id"], r["source_id"], r["model"], r["hardware"], r["num_gpus"], r.get("plan", ""), r["metric"],
          r["measured"], None if r["predicted"] is None else f"{r['predicted']:.1f}",
          None if r["error_pct"] is None else f"{r['error_pct']:+.1f}", r["skipped"] or "; ".join(r["filled"])]
         for r in doc["rows"]])
    return page("tierwise validate --serving", body)


def validation_page(doc: dict, path) -> str:
    return write_page(path, validation_html(doc))
