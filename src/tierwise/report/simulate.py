"""The ``simulate --html`` page: link-utilisation histogram, slowest links, failure impact, from ``simulate
--json``.

The histogram is the document's ``link_utilization`` (links of the slowest phase by utilisation, idle ones
apart); the slowest links are ``bottleneck_links``; the failure impact is ``healthy_time_s`` against
``time_s`` (the same collective on the fabric with nothing failed) and the parts that failed.
"""

from __future__ import annotations

from typing import Any

from tierwise.report import esc, figure_div, page, require_plotly, table

__all__ = ["simulate_page"]


def _ms(x: float | None) -> str:
    return "" if x is None else f"{x * 1e3:.4g} ms"


def simulate_page(doc: dict[str, Any]) -> str:
    require_plotly()
    import plotly.graph_objects as go

    parts = []
    figs = []
    hist = doc.get("link_utilization") or {}
    if hist.get("counts"):
        edges = hist["edges"]
        fig = go.Figure(go.Bar(x=[(a + b) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)],
                               y=hist["counts"], width=[b - a for a, b in zip(edges[:-1], edges[1:], strict=True)],
                               name="links (count)"))
        fig.update_layout(title=f"Link utilisation in phase {hist['phase']!s} ({hist['links']:,} links, "
                                f"{hist['idle_links']:,} idle, not shown)", height=420,
                          xaxis={"title": "utilisation (% of the link's rate)", "tickformat": ".0%", "range": [0, 1]},
                          yaxis={"title": "links (count)"})
        figs.append(("utilization", fig))
    links = doc.get("bottleneck_links", [])
    if links:
        fig = go.Figure(go.Bar(y=[x["link"] for x in links][::-1], x=[x["utilization"] for x in links][::-1],
                               orientation="h"))
        fig.update_layout(title="Slowest links (most utilised, slowest phase)", height=140 + 36 * len(links),
                          xaxis={"title": "utilisation (% of the link's rate)", "tickformat": ".0%", "range": [0, 1.05]},
                          yaxis={"title": "link"}, margin={"l": 260})
        figs.append(("bottlenecks", fig))
    if "healthy_time_s" in doc:
        fig = go.Figure(go.Bar(x=["healthy fabric", "with failures"],
                               y=[doc["healthy_time_s"] * 1e3, doc["time_s"] * 1e3],
                               marker={"color": ["#66bb6a", "#ef5350"]}))
        fig.update_layout(title=f"Failure impact: x{doc.get('degradation') or 0:.3f}", height=380,
                          xaxis={"title": "fabric"}, yaxis={"title": "completion time (ms)"})
        figs.append(("failures", fig))
    for n, (div_id, fig) in enumerate(figs):
        parts.append(figure_div(fig, div_id, first=n == 0))
    rows = [["time", _ms(doc["time_s"])], ["analytic (alpha-beta, same fabric)", _ms(doc["analytic_time_s"])],
            ["algbw / busbw (GB/s)", f"{doc['algbw_bytes_per_s'] / 1e9:.4g} / {doc['busbw_bytes_per_s'] / 1e9:.4g}"],
            ["ranks simulated", f"{doc['num_ranks_simulated']:,} of {doc['num_ranks']:,}"],
            ["unreachable ranks", len(doc.get("unreachable_ranks", []))]]
    if "healthy_time_s" in doc:
        rows.append(["healthy fabric", f"{_ms(doc['healthy_time_s'])} (x{doc.get('degradation') or 0:.3f})"])
    for kind, names in doc.get("failures", {}).get("failed_parts", {}).items():
        if names:
            rows.append([f"failed {kind} ({len(names)})", ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")])
    parts.append(table(["metric", "value"], rows))
    parts.append(table(["link", "utilisation (% of the link's rate)", "phase"],
                       [[x["link"], f"{x['utilization']:.1%}", x["phase"]] for x in links]))
    for note in doc.get("notes", []):
        parts.append(f"<p>note: {esc(note)}</p>")
    title = (f"tierwise simulate: {doc['pattern']} ({doc['algorithm']}, {doc['routing']}) on {doc['topology']}, "
             f"{doc['num_ranks_simulated']} ranks, {doc['size_bytes'] / 1e6:,.0f} MB")
    return page(title, "\n".join(parts))
