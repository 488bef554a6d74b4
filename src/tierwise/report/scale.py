"""The ``scale --html`` page: tokens/s and efficiency vs GPUs, the knee marked, from ``scale --json``.

``efficiency_vs_linear`` is throughput per GPU against the smallest count with a plan (planner/answer.py);
the knee is the document's ``knee_num_gpus`` (planner/answer.py ``_knee``: the first step up in GPUs whose
tokens/s gain is below half of the added GPUs' linear share); the page draws what the document says and
computes nothing of its own.
"""

from __future__ import annotations

import math
from typing import Any

from tierwise.report import esc, figure_div, page, require_plotly, table
from tierwise.report.plan import plan_label

__all__ = ["scale_page"]


def scale_page(doc: dict[str, Any]) -> str:
    require_plotly()
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    pts = [p for p in doc["points"] if p.get("plan") is not None]
    knee = doc.get("knee_num_gpus")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Throughput", "Efficiency"))
    xs = [p["num_gpus"] for p in pts]
    fig.add_trace(go.Scatter(x=xs, y=[p["tokens_per_s"] for p in pts], mode="lines+markers",
                             name="throughput (tokens/s)"),
                  row=1, col=1)
    if pts:
        base = pts[0]["tokens_per_s"] / pts[0]["num_gpus"]
        fig.add_trace(go.Scatter(x=xs, y=[base * x for x in xs], mode="lines", name="linear from the first point (tokens/s)",
                                 line={"dash": "dot", "color": "gray"}), row=1, col=1)
    fig.add_trace(go.Scatter(x=xs, y=[p["efficiency_vs_linear"] for p in pts], mode="lines+markers",
                             name="throughput per GPU vs linear (%)"), row=1, col=2)
    fig.add_trace(go.Scatter(x=xs, y=[p["scaling_efficiency"] for p in pts], mode="lines+markers",
                             name="compute share of the step (%)"), row=1, col=2)
    if knee is not None:
        for col in (1, 2):
            fig.add_vline(x=knee, line={"color": "red", "dash": "dash"}, row=1, col=col)
        # on a log axis an annotation's x is log10 of the value (shapes take the value itself)
        fig.add_annotation(x=math.log10(knee), yref="paper", text=f"knee: {knee} GPUs", showarrow=False,
                           font={"color": "red"}, xref="x", xanchor="right", y=0.97, yanchor="top")
    fig.update_xaxes(type="log", title="GPUs (count)")
    fig.update_yaxes(type="log", title="throughput (tokens/s)", row=1, col=1)
    fig.update_yaxes(title="efficiency (% of linear, % of step)", tickformat=".0%", row=1, col=2)
    fig.update_layout(height=480)
    rows = [[f"{p['num_gpus']:,}", "" if p.get("plan") is None else _plan(p["plan"]),
             p.get("reason", "") if p.get("plan") is None else "",
             "" if p.get("tokens_per_s") is None else f"{p['tokens_per_s']:,.0f}",
             "" if p.get("efficiency_vs_linear") is None else f"{p['efficiency_vs_linear']:.0%}",
             "" if p.get("scaling_efficiency") is None else f"{p['scaling_efficiency']:.0%}"] for p in doc["points"]]
    title = (f"tierwise scale: {doc['model']} on {doc['cluster']} (global batch {doc['global_batch_size']} x "
             f"{doc['seq_length']})")
    body = [figure_div(fig, "scale", first=True),
            f"<p>knee: {esc(knee) if knee is not None else 'none in this range'}</p>",
            table(["GPUs", "plan", "no plan because", "throughput (tokens/s)", "vs linear", "compute share"],
                  rows),
            f"<pre>{esc(doc['explanation'])}</pre>"]
    return page(title, "\n".join(body))


def _plan(plan: dict[str, Any]) -> str:
    """The point's plan as the plan page writes it, with its precision and recompute."""
    return f"{plan_label(plan)}, {plan.get('precision', '?')}, recompute {plan.get('recompute', '?')}"
