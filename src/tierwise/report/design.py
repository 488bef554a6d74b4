"""HTML pages of ``tierwise design`` and ``tierwise trend``, built from their ``--json`` documents."""

from __future__ import annotations

from tierwise.report import esc, figure_div, page, table
from tierwise.units import format_number

__all__ = ["design_page", "trend_page", "domain_page", "power_page", "bandwidth_page"]

_NEED = {"hidden": "rate that hides the axis (GB/s)", "5%": "rate at which it costs 5% of the step (GB/s)",
         "20%": "rate at which it costs 20% of the step (GB/s)"}
"""Legend labels of the bandwidth page's three rates (``bandwidth --json`` ``axes[].bandwidth`` keys)."""


def design_page(doc: dict) -> str:
    """Throughput against cost per token (the Pareto front marked), the designs' table and the bandwidth sweep."""
    import plotly.graph_objects as go

    rows = [r for r in doc["designs"] if r.get("fits")]
    fig = go.Figure()
    for front in (True, False):
        sel = [r for r in rows if r["pareto"] == front]
        fig.add_trace(go.Scatter(x=[r["usd_per_million_tokens"] for r in sel], y=[r["tokens_per_s"] for r in sel],
                                 text=[r["name"] for r in sel], mode="markers+text", textposition="top center",
                                 name="Pareto front" if front else "other designs",
                                 marker={"size": 12 if front else 8}))
    fig.update_layout(xaxis_title="cost (USD per million tokens)", yaxis_title="throughput (tokens/s)",
                      title=f"{doc['model']} on {doc['num_gpus']} GPUs: throughput vs cost per token")
    sweep = doc["right_size"]["sweep"]
    fig2 = go.Figure(go.Scatter(x=[s["nic_gbps"] for s in sweep], y=[s["step_time_s"] for s in sweep],
                                mode="lines+markers"))
    fig2.update_layout(xaxis_title="NIC rate (Gb/s, one way)", yaxis_title="step time (s)", xaxis_type="log",
                       title=f"right size of the scale-out network ({doc['right_size']['cluster']})")
    head = ["design", "plan", "throughput (tokens/s)", "capex (M USD)", "network share of capex",
            "facility power (MW)", "cost (USD per M tokens)", "tokens per J", "switches", "Pareto"]
    body = []
    for r in doc["designs"]:
        if not r.get("fits"):
            body.append([r["name"], "no plan fits", "", "", "", "", "", "", r["num_switches"], ""])
            continue
        p = r["plan"]
        body.append([r["name"], f"tp{p['tp']} pp{p['pp']} cp{p['cp']} dp{p['dp']}", f"{r['tokens_per_s']:,.0f}",
                     f"{r['capex_usd'] / 1e6:,.1f}", f"{r['network_share_of_capex']:.1%}", f"{r['power_w'] / 1e6:.2f}",
                     f"{r['usd_per_million_tokens']:.3f}", f"{r['tokens_per_joule']:.3f}", r["num_switches"],
                     "yes" if r["pareto"] else ""])
    rs = doc["right_size"]
    notes = "".join(f"<li>{esc(n)}</li>" for n in doc["notes"])
    body_html = (figure_div(fig, "design", first=True) + table(head, body)
                 + f"<p>Pareto front (tokens/s and tokens per $): {esc(', '.join(doc['pareto_front']))}</p>"
                 + figure_div(fig2, "rightsize", first=False)
                 + f"<p>slowest NIC speed within {100 * (rs.get('tolerance') or 0):.0f}% of the best step: "
                   f"{esc(rs.get('slowest_gbps_within'))} Gb/s</p><ul>{notes}</ul>")
    return page(f"tierwise design: {doc['model']} on {doc['num_gpus']} GPUs", body_html)


def trend_page(doc: dict) -> str:
    """Compute and exposed communication per generation, the communication share and FLOPS per byte."""
    import plotly.graph_objects as go

    rows = [r for r in doc["generations"] if r.get("fits")]
    names = [r["cluster"] for r in rows]
    fig = go.Figure([go.Bar(name="compute (s)", x=names, y=[r["compute_s"] for r in rows]),
                     go.Bar(name="exposed communication (s)", x=names, y=[r["exposed_comm_s"] for r in rows])])
    fig.update_layout(barmode="stack", xaxis_title="cluster", yaxis_title="time per step (s)",
                      title=f"{doc['model']} on {doc['num_gpus']} GPUs across generations")
    fig2 = go.Figure([go.Scatter(name="communication share, own domain (% of step)", x=names,
                                 y=[r["comm_share"] for r in rows], mode="lines+markers"),
                      go.Scatter(name="communication share, other domain size (% of step)", x=names,
                                 y=[r["other_domain"].get("comm_share") for r in rows], mode="lines+markers")])
    fig2.update_layout(xaxis_title="cluster", yaxis_title="exposed communication (% of step)",
                       yaxis_tickformat=".0%")
    head = ["cluster", "scale-up domain (GPUs)", "bf16 dense (TFLOP/s)", "scale-out (GB/s per GPU, one way)",
            "FLOPs per scale-out byte", "step (s)", "communication share", "other domain (GPUs)",
            "its communication share"]
    body = [[r["cluster"], r["scale_up_domain"], f"{r['peak_bf16_tflops']:,.0f}", f"{r['scale_out_gbytes_per_s']:g}",
             f"{r['flops_per_scale_out_byte']:,.0f}", f"{r['step_time_s']:.2f}", f"{r['comm_share']:.1%}",
             r["other_domain"]["scale_up_domain"],
             "" if r["other_domain"].get("comm_share") is None else f"{r['other_domain']['comm_share']:.1%}"]
            for r in rows]
    body_html = (figure_div(fig, "trend", first=True) + figure_div(fig2, "share", first=False) + table(head, body)
                 + f"<p>{esc(doc['summary'].get('sentence', ''))}</p>")
    return page(f"tierwise trend: {doc['model']} on {doc['num_gpus']} GPUs", body_html)


def domain_page(doc: dict) -> str:
    """Step time and goodput tokens per $ / per J against the scale-up domain size (the knee marked)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = [r for r in doc["rows"] if r.get("fits")]
    names = [r["domain"] for r in rows]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(name="goodput (tokens per USD)", x=names, y=[r["goodput_tokens_per_usd"] for r in rows]))
    fig.add_trace(go.Scatter(name="step time (s)", x=names, y=[r["step_time_s"] for r in rows], mode="lines+markers"),
                  secondary_y=True)
    fig.update_layout(title=f"{doc['model']} on {doc['num_gpus']:,} GPUs: scale-up domain size (knee {doc['knee']})")
    fig.update_xaxes(title_text="scale-up domain")
    fig.update_yaxes(title_text="goodput (tokens per USD)", secondary_y=False)
    fig.update_yaxes(title_text="step time (s)", secondary_y=True)
    fig2 = go.Figure([go.Bar(name="spare GPUs, p99 (count)", x=names, y=[r["spare_gpus_p99"] for r in rows]),
                      go.Bar(name="GPUs in the fault unit (count)", x=names, y=[r["fault_unit_gpus"] for r in rows])])
    fig2.update_layout(barmode="group", title="blast radius: the fault unit and the spare pool it needs",
                       xaxis_title="scale-up domain", yaxis_title="GPUs (count)")
    head = ["domain", "plan", "step (s)", "ETTR", "fault unit (GPUs)", "spares p99 (GPUs)", "capex (M USD)",
            "facility power (MW)", "goodput (tokens per USD)", "goodput (tokens per J)"]
    body = [[r["domain"], " ".join(f"{k}{v}" for k, v in r["plan"].items()), f"{r['step_time_s']:.3f}",
             f"{r['ettr']:.3f}", f"{r['fault_unit']} ({r['fault_unit_gpus']})", f"{r['spare_gpus_p99']:,.0f}",
             f"{r['capex_usd'] / 1e6:,.0f}", f"{r['facility_w'] / 1e6:.1f}", f"{r['goodput_tokens_per_usd']:,.0f}",
             f"{r['goodput_tokens_per_joule']:.4f}"] for r in rows]
    notes = "".join(f"<li>{esc(n)}</li>" for n in doc["notes"])
    body_html = (figure_div(fig, "domain", first=True) + figure_div(fig2, "blast", first=False) + table(head, body)
                 + f"<p>{esc(doc['explanation'])}</p><ul>{notes}</ul>")
    return page(f"tierwise design --domain-sweep: {doc['model']} on {doc['num_gpus']} GPUs", body_html)


def power_page(doc: dict) -> str:
    """Tokens/s of each design and optics option under the power budget."""
    import plotly.graph_objects as go

    rows = [r for r in doc["rows"] if r.get("fits")]
    fig = go.Figure()
    for optics in dict.fromkeys(r["optics"] for r in rows):
        sel = [r for r in rows if r["optics"] == optics]
        fig.add_trace(go.Bar(name=optics, x=[r["design"] for r in sel], y=[r["tokens_per_s"] for r in sel],
                             text=[f"{r['gpus']:,} GPUs" for r in sel]))
    fig.update_layout(barmode="group", xaxis_title="design", yaxis_title="throughput (tokens/s)",
                      title=f"{doc['model']} under {doc['facility_budget_w'] / 1e6:,.1f} MW (PUE {doc['pue']:g})")
    head = ["design", "optics", "GPUs", "job GPUs", "network power (MW)", "step (s)", "throughput (tokens/s)",
            "capex (M USD)", "tokens per J"]
    body = [[r["design"], r["optics"], f"{r['gpus']:,}", f"{r['job_gpus']:,}", f"{r['network_w'] / 1e6:.2f}",
             f"{r['step_time_s']:.3f}", f"{r['tokens_per_s']:,.0f}", f"{r['capex_usd'] / 1e6:,.0f}",
             f"{r['tokens_per_joule']:.3f}"] for r in rows]
    notes = "".join(f"<li>{esc(n)}</li>" for n in doc["notes"])
    body_html = (figure_div(fig, "power", first=True) + table(head, body) + f"<p>{esc(doc['explanation'])}</p>"
                 + f"<ul>{notes}</ul>")
    return page(f"tierwise design --power: {doc['model']}", body_html)


def bandwidth_page(doc: dict) -> str:
    """Per axis: the per-GPU one-way rate that hides it and at which it costs 5% and 20% of the step."""
    import plotly.graph_objects as go

    axes = doc["axes"]
    fig = go.Figure()
    for label in ("hidden", "5%", "20%"):
        fig.add_trace(go.Bar(name=_NEED[label], x=[f"{a['axis']} ({a['tier']})" for a in axes],
                             y=[a["bandwidth"][label]["gbytes_per_s_per_gpu"] for a in axes]))
    fig.add_trace(go.Scatter(name="the cluster's rate (GB/s)", x=[f"{a['axis']} ({a['tier']})" for a in axes],
                             y=[a["tier_gbytes_per_s_per_gpu"] for a in axes], mode="markers",
                             marker={"size": 14, "symbol": "line-ew-open"}))
    fig.update_layout(barmode="group", yaxis_type="log", xaxis_title="parallel axis (its tier)",
                      yaxis_title="bandwidth (GB/s per GPU, one way)",
                      title=f"{doc['model']} on {doc['num_gpus']:,} x {doc['cluster']}: bandwidth each axis needs")
    head = ["axis", "degree", "tier", "exposed (s)", "share of step", "hides it (GB/s)", "costs 5% (GB/s)",
            "costs 20% (GB/s)", "the cluster's rate (GB/s)"]

    def rate(a: dict, label: str) -> str:
        need = a["bandwidth"][label]
        return format_number(need["gbytes_per_s_per_gpu"]) if need.get("gbytes_per_s_per_gpu") else need["status"]

    rows = [[a["axis"], a["degree"], a["tier"], format_number(a["exposed_s"]), f"{a['share_of_step']:.1%}",
             rate(a, "hidden"), rate(a, "5%"), rate(a, "20%"), format_number(a["tier_gbytes_per_s_per_gpu"])]
            for a in axes]
    body_html = (figure_div(fig, "bandwidth", first=True) + table(head, rows)
                 + "".join(f"<p>{esc(n)}</p>" for n in doc["notes"]))
    return page(f"tierwise bandwidth: {doc['model']}", body_html)
