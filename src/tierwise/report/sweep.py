"""The ``sweep show --html`` page: from its ``--json`` document (summary, the query, and the fixed ``views``)."""

from __future__ import annotations

from typing import Any

from tierwise.report import esc, figure_div, human_key, page, require_plotly, table
from tierwise.units import format_number

__all__ = ["sweep_page"]


def _records(q: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(q["columns"], row, strict=True)) for row in q["rows"]]


def _cell(v: Any) -> str:
    return "" if v is None else (format_number(v, 6) if isinstance(v, float) else str(v))


def _figures(views: dict[str, Any]) -> list[tuple[str, Any]]:
    """The page's plots, each with its div id: points per kind and status, tokens/s vs GPUs, simulated times,
    wall time per point (each only when its view has rows)."""
    import plotly.graph_objects as go

    figs = []
    status = _records(views["status"]) if "status" in views else []
    if status:
        fig = go.Figure()
        for st in sorted({r["status"] for r in status}):
            sel = [r for r in status if r["status"] == st]
            fig.add_trace(go.Bar(x=[r["kind"] for r in sel], y=[r["points"] for r in sel], name=st))
        fig.update_layout(title="Points per kind and status", barmode="stack", height=360,
                          xaxis={"title": "kind"}, yaxis={"title": "points (count)"})
        figs.append(("status", fig))
    train = _records(views["training"]) if "training" in views else []
    if train:
        fig = go.Figure()
        for key in sorted({(r["kind"], r["model"], r["cluster"]) for r in train}):
            sel = sorted((r for r in train if (r["kind"], r["model"], r["cluster"]) == key),
                         key=lambda r: r["num_gpus"])
            fig.add_trace(go.Scatter(x=[r["num_gpus"] for r in sel], y=[r["tokens_per_s"] for r in sel],
                                     mode="lines+markers", name=f"{key[1]} on {key[2]} ({key[0]})"))
        fig.update_layout(title="Tokens/s vs GPUs (best of the points at each count)", height=480,
                          xaxis={"type": "log", "title": "GPUs (count)"},
                          yaxis={"type": "log", "title": "throughput (tokens/s)"})
        figs.append(("training", fig))
    sim = _records(views["simulate"]) if "simulate" in views else []
    if sim:
        fig = go.Figure()
        for pattern in sorted({r["pattern"] for r in sim}):
            sel = [r for r in sim if r["pattern"] == pattern]
            fig.add_trace(go.Bar(x=[f"{r['topology']} {r['routing']} fail {r['fail_links']}" for r in sel],
                                 y=[r["time_s"] * 1e3 for r in sel], name=pattern))
        fig.update_layout(title="Simulated completion time", barmode="group", height=480,
                          xaxis={"title": "topology, routing, failed links"},
                          yaxis={"title": "completion time (ms)"})
        figs.append(("simulate", fig))
    wall = _records(views["wall"]) if "wall" in views else []
    if wall:
        fig = go.Figure()
        for kind in sorted({r["kind"] for r in wall}):
            fig.add_trace(go.Histogram(x=[r["wall_s"] for r in wall if r["kind"] == kind], name=kind, opacity=0.7))
        fig.update_layout(title="Wall time per point", barmode="overlay", height=360,
                          xaxis={"title": "wall time per point (s)"}, yaxis={"title": "points (count)"})
        figs.append(("wall", fig))
    return figs


def sweep_page(doc: dict[str, Any]) -> str:
    """Summary, points per status, best tokens/s vs GPUs per model x cluster, simulated times, per-point
    wall time, and the query's rows."""
    require_plotly()
    s = doc["summary"]
    parts = [table(["rows", "distinct points", "duplicate rows", "part files", "status"],
                   [[s["rows"], s["points"], s["duplicate_rows"], s["part_files"],
                     ", ".join(f"{k} {v}" for k, v in s["status_counts"].items())]])]
    if "grid_points" in s:
        parts.append(f"<p>last grid run here ({esc(s.get('grid'))}): {s['grid_points']:,} points, "
                     f"{s['grid_points_missing']:,} not yet done</p>")
    figs = _figures(doc.get("views", {}))
    for n, (div_id, fig) in enumerate(figs):
        parts.append(figure_div(fig, div_id, first=n == 0))
    q = doc["query"]
    parts.append(f"<h2>Query</h2><pre>{esc(q['query'])}</pre>")
    parts.append(table([human_key(c) for c in q["columns"]], [[_cell(v) for v in row] for row in q["rows"][:2000]]))
    if q["truncated"] or len(q["rows"]) > 2000:
        parts.append("<p>first 2,000 rows shown</p>")
    return page(f"tierwise sweep: {s['out']}", "\n".join(parts))
