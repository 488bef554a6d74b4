"""HTML pages of ``serve --html`` and ``validate --serving --html``, built from their ``--json`` documents."""

from __future__ import annotations

from tierwise.report import esc, figure_div, human_key, page, require_plotly, table, write_page
from tierwise.units import format_bytes, format_number, format_time

__all__ = ["serve_html", "serve_page", "validation_html", "validation_page"]

_METRICS = (("output_tokens_per_s", "output (tokens/s)"), ("output_tokens_per_s_per_gpu", "output per GPU (tokens/s)"),
            ("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("ttft_p99_s", "TTFT p99"), ("tpot_p99_s", "TPOT p99"),
            ("batch", "batch (sequences)"), ("kv_bytes_per_token", "KV cache per token"),
            ("kv_cache_bytes_per_gpu", "KV cache per GPU"), ("max_concurrency", "most sequences in flight"),
            ("prefill_bound", "prefill bound by"), ("decode_bound", "decode bound by"),
            ("kv_transfer_s", "KV transfer"), ("kv_transfer_tier", "KV transfer tier"), ("fits", "fits in memory"),
            ("meets_slo", "meets the SLO"))
"""The ``serve --json`` keys the page's table shows, each with its label (the unit is in the value)."""

_SIM_METRICS = (("requests", "requests"), ("served", "served"), ("output_tokens_per_s", "output (tokens/s)"),
                ("goodput_requests_per_s", "goodput (requests/s)"), ("slo_attainment", "SLO attainment"),
                ("preemptions", "preemptions"), ("token_budget", "token budget per iteration (tokens)"),
                ("preemption", "preemption"), ("prefix_hit_rate", "prefix-cache hit rate"))


_SERVING_METRICS = {"TPOT_mean_ms": "mean TPOT (ms)", "TPOT_ms": "TPOT (ms)", "TPOT_p50_ms": "median TPOT (ms)",
                    "TTFT_mean_ms": "mean TTFT (ms)", "prefill_time_ms": "prefill time (ms)",
                    "kv_transfer_bandwidth": "KV transfer bandwidth (GB/s)",
                    "rdma_vs_tcp_bandwidth_ratio": "RDMA over TCP bandwidth (ratio)",
                    "output_tokens_per_s_total": "output, all GPUs (tokens/s)", "samples_per_s": "samples (per s)",
                    "TTFT_improvement_kv_routing": "TTFT gain of KV-aware routing (ratio)",
                    "throughput_per_gpu_gain_disagg": "throughput per GPU gain of disaggregation (ratio)"}
"""Labels of the serving dataset's metrics (inference-runs.csv ``metric``); another shows as its words."""


def _human(value, key: str) -> str:
    """One value of the document as a reader writes it: times in s/ms, bytes in GB, counts with separators."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if key.endswith("_bytes") or "_bytes_" in key:
        return format_bytes(value)
    if key.endswith("_s") and "_per_" not in key:
        return format_time(value)
    if key in ("slo_attainment", "prefix_hit_rate"):
        return f"{value:.1%}"
    return format_number(value) if isinstance(value, float) else f"{value:,}"


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
    fig.update_layout(title="phase times", xaxis={"title": "phase"}, yaxis={"title": "time (ms)"}, height=420,
                      width=800)
    body = table(["metric", "value"], [[label, _human(doc[k], k)] for k, label in _METRICS])
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
    fig = go.Figure(go.Scatter(x=q["time_s"], y=q["waiting"], mode="lines", name="requests waiting (count)"))
    fig.update_layout(title=f"requests waiting for admission ({sim['arrivals']})",
                      xaxis={"title": "simulated time (s)"}, yaxis={"title": "requests waiting (count)"}, height=380,
                      width=800)
    pct = go.Figure()
    for name, label in (("ttft_s", "TTFT (ms)"), ("tpot_s", "TPOT (ms)"), ("e2e_s", "end to end (ms)")):
        v = sim[name]
        if v["p50"] is not None:
            pct.add_trace(go.Bar(x=["p50", "p90", "p99"], y=[v[k] * 1e3 for k in ("p50", "p90", "p99")], name=label))
    pct.update_layout(title="latency percentiles", barmode="group", xaxis={"title": "percentile"},
                      yaxis={"type": "log", "title": "latency (ms)"}, height=380, width=800)
    rows = [[label, _human(sim[k], k)] for k, label in _SIM_METRICS]
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
                                 name=human_key(metric, _SERVING_METRICS),
                                 text=[f"row {r['row_id']} {r['model']}: {r['error_pct']:+.1f}%" for r in sel],
                                 hoverinfo="text"))
    fig.update_layout(title="measured vs predicted", xaxis={"type": "log", "title": "measured (the metric's unit)"},
                      yaxis={"type": "log", "title": "predicted (the metric's unit)"}, height=600, width=850)
    s = doc["summary"]
    summ = table(["rows", "count", "median |err| %", "mean", "p90", "max"],
                 [[k, s[k]["rows"], *(None if s[k][x] is None else f"{s[k][x]:.1f}" for x in ("median", "mean", "p90",
                                                                                               "max"))]
                  for k in ("throughput", "latency")])
    body = figure_div(fig, "scatter", first=True) + "<h2>Summary</h2>" + summ
    body += "<h2>Rows</h2>" + table(
        ["row", "source", "model", "hardware", "GPUs", "plan", "metric", "measured", "predicted", "error %", "filled / skip"],
        [[r["row_id"], r["source_id"], r["model"], r["hardware"], r["num_gpus"], r.get("plan", ""),
          human_key(r["metric"], _SERVING_METRICS), format_number(r["measured"], 4),
          None if r["predicted"] is None else format_number(r["predicted"], 4),
          None if r["error_pct"] is None else f"{r['error_pct']:+.1f}", r["skipped"] or "; ".join(r["filled"])]
         for r in doc["rows"]])
    return page("tierwise validate --serving", body)


def validation_page(doc: dict, path) -> str:
    return write_page(path, validation_html(doc))
