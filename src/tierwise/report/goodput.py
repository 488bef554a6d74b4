"""The ``goodput --html`` page, built from the ``goodput --json`` document."""

from __future__ import annotations

from tierwise.report import esc, figure_div, page, require_plotly, table, write_page
from tierwise.units import format_bytes, format_duration, format_number

__all__ = ["goodput_page"]

_LOST = {"checkpoint_stalls_s": "checkpoint stalls", "rework_s": "work redone", "restart_s": "restarts"}
"""Labels of the ``lost_time_per_day`` keys (a key not listed shows as its words)."""


def _component(name: str) -> str:
    """A component key as words (``gpu_sram_processor`` -> ``GPU SRAM processor``)."""
    return " ".join(w.upper() if w in _ACRONYMS else w for w in name.split("_"))


_ACRONYMS = {"gpu", "cpu", "hbm", "sram", "nic", "psu", "pcie", "nvlink", "ib", "ecc", "xid", "os", "tor"}


def goodput_page(doc: dict, path: str) -> str:
    """Summary table, interruptions by component (bar), lost time per day (bar), fault domain and assumptions."""
    require_plotly()
    import plotly.graph_objects as go

    rows = sorted(doc["by_component"], key=lambda r: -r["rate_per_day"])
    fig = go.Figure(go.Bar(x=[_component(r["component"]) for r in rows], y=[r["rate_per_day"] for r in rows]))
    fig.update_layout(title="interruptions per day by component", xaxis_title="component",
                      yaxis_title="interruptions (per day)", height=380)
    lost = doc["lost_time_per_day"]
    keys = [k for k in lost if k != "total_s"]
    fig2 = go.Figure(go.Bar(x=[_LOST.get(k, k.removesuffix("_s").replace("_", " ")) for k in keys],
                            y=[lost[k] / 60 for k in keys]))
    fig2.update_layout(title="wall-clock time lost per day", xaxis_title="cause",
                       yaxis_title="time lost (min per day)", height=380)
    mtti = doc["mtti_s"]
    summary = [["plan", doc["plan_source"]], ["MTTI", format_duration(mtti) if mtti else "-"],
               ["interruptions per day", format_number(doc["interruptions_per_day"])],
               ["checkpoint size per GPU", format_bytes(doc["checkpoint_bytes_per_gpu"])],
               ["checkpoint write", format_duration(doc["checkpoint_write_s"])],
               ["checkpoint interval", format_duration(doc["checkpoint_interval_s"])],
               ["restart", format_duration(doc["restart_s"])], ["ETTR", f"{doc['ettr']:.4f}"],
               ["goodput (tokens/s)", f"{doc['goodput_tokens_per_s']:,.0f}"]]
    if doc.get("ettr_simulated"):
        s = doc["ettr_simulated"]
        summary.append(["ETTR Monte Carlo", f"{s['mean']:.4f} (p5 {s['p5']:.4f}, p95 {s['p95']:.4f}, {s['runs']} runs)"])
    comp = table(["component", "parts", "interruptions per part (per day)", "interruptions (per day)", "share",
                  "source"],
                 [[_component(r["component"]), f"{r['count']:,}", format_number(r["rate_per_part_per_day"]),
                   format_number(r["rate_per_day"]),
                   f"{r['share']:.0%}", r["source"]] for r in rows])
    body = (table(["", ""], summary) + figure_div(fig, "components", first=True) + comp
            + figure_div(fig2, "lost", first=False) + "<h2>fault domain</h2><ul>"
            + "".join(f"<li>{esc(w)}</li>" for w in doc["fault_domain"]["why"]) + "</ul><h2>assumed</h2><ul>"
            + "".join(f"<li>{esc(a)}</li>" for a in doc["assumed"]) + "</ul>")
    return write_page(path, page(f"goodput: {doc['model']} on {doc['num_gpus']} x {doc['cluster']}", body))
