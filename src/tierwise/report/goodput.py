"""The ``goodput --html`` page, built from the ``goodput --json`` document."""

from __future__ import annotations

from tierwise.report import esc, figure_div, page, require_plotly, table, write_page

__all__ = ["goodput_page"]


def goodput_page(doc: dict, path: str) -> str:
    """Summary table, interruptions by component (bar), lost time per day (bar), fault domain and assumptions."""
    require_plotly()
    import plotly.graph_objects as go

    rows = sorted(doc["by_component"], key=lambda r: -r["rate_per_day"])
    fig = go.Figure(go.Bar(x=[r["component"] for r in rows], y=[r["rate_per_day"] for r in rows]))
    fig.update_layout(title="interruptions per day by component", yaxis_title="per day", height=380)
    lost = doc["lost_time_per_day"]
    keys = [k for k in lost if k != "total_s"]
    fig2 = go.Figure(go.Bar(x=keys, y=[lost[k] / 60 for k in keys]))
    fig2.update_layout(title="wall-clock minutes lost per day", yaxis_title="min/day", height=380)
    mtti = doc["mtti_s"]
    summary = [["plan", doc["plan_source"]], ["MTTI (h)", f"{mtti / 3600:.3g}" if mtti else "-"],
               ["interruptions per day", f"{doc['interruptions_per_day']:.3g}"],
               ["checkpoint bytes per GPU", f"{doc['checkpoint_bytes_per_gpu']:.4g}"],
               ["checkpoint write (s)", f"{doc['checkpoint_write_s']:.3g}"],
               ["checkpoint interval (min)", f"{doc['checkpoint_interval_s'] / 60:.3g}"],
               ["restart (s)", f"{doc['restart_s']:.3g}"], ["ETTR", f"{doc['ettr']:.4f}"],
               ["goodput tokens/s", f"{doc['goodput_tokens_per_s']:,.0f}"]]
    if doc.get("ettr_simulated"):
        s = doc["ettr_simulated"]
        summary.append(["ETTR Monte Carlo", f"{s['mean']:.4f} (p5 {s['p5']:.4f}, p95 {s['p95']:.4f}, {s['runs']} runs)"])
    comp = table(["component", "parts", "per part per day", "per day", "share", "source"],
                 [[r["component"], r["count"], f"{r['rate_per_part_per_day']:.3g}", f"{r['rate_per_day']:.3g}",
                   f"{r['share']:.0%}", r["source"]] for r in rows])
    body = (table(["", ""], summary) + figure_div(fig, "components", first=True) + comp
            + figure_div(fig2, "lost", first=False) + "<h2>fault domain</h2><ul>"
            + "".join(f"<li>{esc(w)}</li>" for w in doc["fault_domain"]["why"]) + "</ul><h2>assumed</h2><ul>"
            + "".join(f"<li>{esc(a)}</li>" for a in doc["assumed"]) + "</ul>")
    return write_page(path, page(f"goodput: {doc['model']} on {doc['num_gpus']} x {doc['cluster']}", body))
