"""The ``plan --html`` page: the plans ranked, each one's step-time breakdown, and the tier of every axis.

Built from the ``plan --json`` document only (no live objects). The breakdown bars stack what the estimator
adds up into the step (``estimate.breakdown``: compute, recompute, pipeline bubble, exposed communication
per tier, optimizer, shard copy), so a bar's height is the plan's step time up to the overlap the
estimator credits (exposed, not total, communication is stacked).
"""

from __future__ import annotations

from typing import Any

from tierwise.report import esc, figure_div, page, require_plotly, table

__all__ = ["plan_page", "plan_label"]

_AXES = ("tp", "cp", "ep", "pp", "dp")


def plan_label(p: dict[str, Any]) -> str:
    text = f"tp{p['tp']} pp{p['pp']} dp{p['dp']}"
    for axis in ("cp", "ep", "vpp"):
        if p.get(axis, 1) > 1:
            text += f" {axis}{p[axis]}"
    return text + f" mbs{p['micro_batch_size']}"


def plan_page(doc: dict[str, Any]) -> str:
    require_plotly()
    import plotly.graph_objects as go

    plans = doc["plans"]
    title = (f"tierwise plan: {doc['model']} on {doc['num_gpus']} x {doc['cluster']} (global batch "
             f"{doc['global_batch_size']} x {doc['seq_length']}, ranked by {doc['objective']})")
    parts = [f"<pre>{esc(doc['explanation'])}</pre>",
             f"<p>evaluated {doc['num_evaluated']:,} plans of a space of {doc['space_size']:,} "
             f"({doc['num_feasible']:,} fit memory)</p>"]
    if plans:
        labels = [f"#{i} {plan_label(p)}" for i, p in enumerate(plans, 1)]
        tiers = sorted({t for p in plans for t in p["estimate"]["breakdown"]["per_tier"]})
        fig = go.Figure()
        pieces = [("compute", lambda b: b["compute_s"]), ("recompute", lambda b: b["recompute_s"]),
                  ("bubble", lambda b: b["bubble_s"])]
        pieces += [(f"exposed {t}", lambda b, t=t: b["per_tier"].get(t, {}).get("exposed_s", 0.0)) for t in tiers]
        pieces += [("optimizer", lambda b: b["optimizer_s"]), ("shard copy", lambda b: b["shard_copy_s"])]
        for name, get in pieces:
            ys = [get(p["estimate"]["breakdown"]) for p in plans]
            if any(ys):
                fig.add_trace(go.Bar(x=labels, y=ys, name=f"{name} (s)"))
        fig.add_trace(go.Scatter(x=labels, y=[p["estimate"]["step_time_s"] for p in plans], mode="markers",
                                 name="step time (s)", marker={"symbol": "line-ew-open", "size": 28, "color": "black"}))
        fig.update_layout(title="Step-time breakdown per plan (best first)", barmode="stack", height=520,
                          xaxis={"title": "plan (best first)"}, yaxis={"title": "time per step (s)"})
        tfig = go.Figure(go.Heatmap(
            z=[[_tier_code(p["tiers"].get(a)) for a in _AXES] for p in plans], x=list(_AXES), y=labels,
            text=[[p["tiers"].get(a, "") for a in _AXES] for p in plans], texttemplate="%{text}",
            colorscale=[[0, "#e8f5e9"], [0.33, "#a5d6a7"], [0.66, "#90caf9"], [1, "#ef9a9a"]], zmin=0, zmax=3,
            showscale=False))
        tfig.update_layout(title="Interconnect tier of every parallel axis", height=120 + 40 * len(plans),
                           xaxis={"title": "parallel axis"}, yaxis={"autorange": "reversed", "title": "plan"})
        parts += [figure_div(fig, "breakdown", first=True), figure_div(tfig, "tiers", first=False)]
        rows = []
        for i, p in enumerate(plans, 1):
            e = p["estimate"]
            offload = p.get("activation_offload_layers")
            recompute = f"{p['recompute']}, {offload} layers offloaded to host" if offload else p["recompute"]
            rows.append([i, plan_label(p), recompute, p["zero_stage"], p["precision"],
                         f"{e['step_time_s']:.4g}", f"{e['tokens_per_s']:,.0f}", f"{e['mfu']:.1%}",
                         f"{e['mfu_bf16']:.1%}", f"{e['memory']['per_gpu_bytes'] / 2**30:.1f}",
                         ", ".join(f"{a}:{p['tiers'].get(a, '')}" for a in _AXES)])
        parts.append(table(["#", "plan", "recompute", "ZeRO", "precision", "step (s)", "throughput (tokens/s)", "MFU",
                            "MFU vs bf16 peak", "memory/GPU (GiB)", "tiers"], rows))
    for note in doc.get("notes", []):
        parts.append(f"<p>note: {esc(note)}</p>")
    return page(title, "\n".join(parts))


def _tier_code(tier: str | None) -> int:
    return {"local": 0, "hbm": 0, "scale_up": 1, "host": 2, "scale_out": 3}.get(tier or "local", 0)
