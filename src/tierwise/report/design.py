"""HTML pages of ``tierwise design`` and ``tierwise trend``, built from their ``--json`` documents."""

from __future__ import annotations

from tierwise.report import esc, figure_div, page, table

__all__ = ["design_page", "trend_page", "domain_page", "power_page", "bandwidth_page"]


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
    fig.update_layout(xaxis_title="USD per million tokens", yaxis_title="tokens/s",
                      title=f"{doc['model']} on {doc['num_gpus']} GPUs: throughput vs cost per token")
    sweep = doc["right_size"]["sweep"]
    fig2 = go.Figure(go.Scatter(x=[s["nic_gbps"] for s in sweep], y=[s["step_time_s"] for s in sweep],
                                mode="lines+markers"))
    fig2.update_layout(xaxis_title="NIC Gb/s (one-way)", yaxis_title="step time (s)", xaxis_type="log",
                       title=f"right size of the scale-out network ({doc['right_size']['cluster']})")
    head = ["design", "plan", "tokens/s", "capex $M", "network share", "facility MW", "$ per M tokens",
            "tokens per J", "switches", "Pareto"]
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
    fig = go.Figure([go.Bar(name="compute", x=names, y=[r["compute_s"] for r in rows]),
                     go.Bar(name="exposed communication", x=names, y=[r["exposed_comm_s"] for r in rows])])
    fig.update_layout(barmode="stack", yaxis_title="seconds per step",
                      title=f"{doc['model']} on {doc['num_gpus']} GPUs across generations")
    fig2 = go.Figure([go.Scatter(name="comm share (own domain)", x=names, y=[r["comm_share"] for r in rows],
                                 mode="lines+markers"),
                      go.Scatter(name="comm share (other domain size)", x=names,
                                 y=[r["other_domain"].get("comm_share") for r in rows], mode="lines+markers")])
    fig2.update_layout(yaxis_title="exposed communication / step", yaxis_tickformat=".0%")
    head = ["cluster", "domain", "bf16 TFLOP/s", "scale-out GB/s", "FLOPs per byte", "step s", "comm share",
            "other domain", "its comm share"]
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
    fig.add_trace(go.Bar(name="goodput tokens per $", x=names, y=[r["goodput_tokens_per_usd"] for r in rows]))
    fig.add_trace(go.Scatter(name="step time (s)", x=names, y=[r["step_time_s"] for r in rows], mode="lines+markers"),
                  secondary_y=True)
    fig.update_layout(title=f"{doc['model']} on {doc['num_gpus']:,} GPUs: scale-up domain size (knee {doc['knee']})")
    fig.update_yaxes(title_text="goodput tokens per $", secondary_y=False)
    fig.update_yaxes(title_text="step time (s)", secondary_y=True)
    fig2 = go.Figure([go.Bar(name="spare GPUs (p99)", x=names, y=[r["spare_gpus_p99"] for r in rows]),
                      go.Bar(name="fault unit GPUs", x=names, y=[r["fault_unit_gpus"] for r in rows])])
    fig2.update_layout(barmode="group", title="blast radius: the fault unit and the spare pool it needs")
    head = ["domain", "plan", "step s", "ETTR", "fault unit", "spares p99", "capex $M", "facility MW",
            "goodput tok/$", "goodput tok/J"]
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
    fig.update_layout(barmode="group", yaxis_title="tokens/s",
                      title=f"{doc['model']} under {doc['facility_budget_w'] / 1e6:,.1f} MW (PUE {doc['pue']:g})")
    head = ["design", "optics", "GPUs", "job GPUs", "network MW", "step s", "tokens/s", "capex $M", "tokens per J"]
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
        fig.add_trace(go.Bar(name=label, x=[f"{a['axis']} ({a['tier']})" for a in axes],
                             y=[a["bandwidth"][label]["gbytes_per_s_per_gpu"] for a in axes]))
    fig.add_trace(go.Scatter(name="the cluster's rate", x=[f"{a['axis']} ({a['tier']})" for a in axes],
                             y=[a["tier_gbytes_per_s_per_gpu"] for a in axes], mode="markers",
                             marker={"size": 14, "symbol": "line-ew-open"}))
    fig.update_layout(barmode="group", yaxis_type="log", yaxis_title="GB/s per GPU, one way",
                      title=f"{doc['model']} on {doc['num_gpus']:,} x {doc['cluster']}: bandwidth each axis needs")
    body_html = figure_div(fig, "bandwidth", first=True) + "".join(f"<p>{esc(n)}</p>" for n in doc["notes"])
    return page(f"tierwise bandwidth: {doc['model']}", body_html)
