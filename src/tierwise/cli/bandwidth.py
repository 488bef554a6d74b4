"""``tierwise bandwidth``: the inverse question. Per axis of a plan, the tier it crosses and the per-GPU one-way
bandwidth at which its traffic is hidden or costs 5% / 20% of the step (:mod:`tierwise.design.bandwidth`);
``--window`` turns the DP reduction's bytes into the rate that moves them in that time (the seeds' 2.8 TB/s);
``--target-step`` the bandwidth that reaches a step time; ``--trend`` the generation at which the job becomes
interconnect-bound."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli._output import emit, print_table

__all__ = ["register"]

Fixed = Annotated[int | None, typer.Option(help="fix this degree (--tp, --pp and --dp together: a given plan)")]


def register(app: typer.Typer) -> None:
    @app.command("bandwidth")
    def bandwidth_cmd(
        *,
        model: Annotated[str, typer.Option("--model", help="catalog name, YAML file or config.json")],
        cluster: Annotated[str, typer.Option("--cluster", help="catalog name or YAML file")],
        gpus: Annotated[int, typer.Option("--gpus", help="GPUs the job runs on")],
        global_batch: Annotated[int, typer.Option("--global-batch", help="global batch in sequences")] = 2048,
        seq: Annotated[int, typer.Option("--seq", help="sequence length")] = 8192,
        tp: Fixed = None, pp: Fixed = None, cp: Fixed = None, ep: Fixed = None, dp: Fixed = None,
        vpp: Fixed = None,
        mbs: Annotated[int | None, typer.Option("--mbs", help="micro-batch size")] = None,
        zero: Annotated[int | None, typer.Option("--zero", help="ZeRO stage (0: plain all-reduce)")] = None,
        precision: Annotated[str, typer.Option("--precision", help="bf16 | fp8")] = "bf16",
        reduce_dtype: Annotated[str | None, typer.Option("--reduce-dtype", help="gradient reduce dtype: fp32 | bf16")]
        = None,
        window: Annotated[str | None, typer.Option("--window", help="time the DP reduction must fit in, e.g. 100ms")]
        = None,
        target_step: Annotated[str | None, typer.Option("--target-step", help="step time to reach by scaling every "
                                                        "tier's bandwidth, e.g. 4s")] = None,
        trend: Annotated[bool, typer.Option("--trend", help="also: the generation at which this job becomes "
                                            "interconnect-bound (A100 .. GB300)")] = False,
        bound_share: Annotated[float, typer.Option("--bound-share", help="with --trend: exposed comm share that "
                                                   "counts as interconnect-bound, percent")] = 10.0,
        as_json: Annotated[bool, typer.Option("--json", help="print the JSON document")] = False,
        html: Annotated[str | None, typer.Option("--html", help="write an HTML page with a plot to FILE")] = None,
    ) -> None:
        """What bandwidth does this job need? Per axis: the tier and the rate that hides it / costs 5% / 20%."""
        from tierwise.design.bandwidth import interconnect_bound_generation, inverse_bandwidth, job_plan
        from tierwise.errors import PlanError
        from tierwise.limits import check_float
        from tierwise.specs.cluster import load_cluster
        from tierwise.specs.model import load_model
        from tierwise.units import parse_time

        _check(gpus, global_batch, seq, zero, precision, reduce_dtype, tp=tp, pp=pp, cp=cp, ep=ep, dp=dp, vpp=vpp,
               mbs=mbs)
        win = parse_time(window, what="--window", allow_zero=False) if window is not None else None
        tgt = parse_time(target_step, what="--target-step", allow_zero=False) if target_step is not None else None
        share = check_float(bound_share, "--bound-share", minimum=0.01, maximum=100.0, error=PlanError,
                            hint=" (percent)") / 100
        if html is not None:
            from tierwise.report import check_html

            check_html(html)
        m, cl = load_model(model), load_cluster(cluster)
        plan, origin = job_plan(m, cl, gpus, global_batch, seq, precision=precision.lower(), zero=zero,
                                grad_reduce_dtype=reduce_dtype.lower() if reduce_dtype else None, tp=tp, pp=pp,
                                cp=cp, ep=ep, dp=dp, vpp=vpp, micro_batch_size=mbs)
        doc = inverse_bandwidth(m, cl, plan, window_s=win, target_step_s=tgt)
        doc["plan_source"] = origin
        if trend:
            doc["trend"] = interconnect_bound_generation(m, gpus, global_batch=global_batch, seq=seq,
                                                         bound_share=share)
        if html is not None:
            from tierwise.report import write_page
            from tierwise.report.design import bandwidth_page

            doc["html"] = write_page(html, bandwidth_page(doc))
        emit(doc, as_json, lambda con: _render(con, doc), document="bandwidth")


def _check(gpus, global_batch, seq, zero, precision, reduce_dtype, **degrees) -> None:
    """Every number and name a user gave, one line naming the option when it is out of range."""
    from tierwise.errors import PlanError
    from tierwise.limits import MAX_BATCH, MAX_GPUS, MAX_SEQ, check_int

    check_int(gpus, "--gpus", maximum=MAX_GPUS, error=PlanError)
    check_int(global_batch, "--global-batch", maximum=MAX_BATCH, error=PlanError)
    check_int(seq, "--seq", maximum=MAX_SEQ, error=PlanError)
    for name, v in degrees.items():
        if v is not None:
            check_int(v, f"--{name}", maximum=MAX_GPUS, error=PlanError)
    if zero is not None and zero not in (0, 1, 2, 3):
        raise PlanError(f"--zero {zero}: choose 0, 1, 2 or 3")
    if precision.lower() not in ("bf16", "fp8"):
        raise PlanError(f"--precision {precision!r}; choose bf16 or fp8")
    if reduce_dtype is not None and reduce_dtype.lower() not in ("fp32", "bf16"):
        raise PlanError(f"--reduce-dtype {reduce_dtype!r}; choose fp32 or bf16")


def _rate(n: dict, floor: float) -> str:
    if n["status"] == "never":
        return f"never (floor {floor:.1%})"
    text = f"{n['gbytes_per_s_per_gpu']:,.1f} GB/s ({n['gbits_per_s_per_gpu']:,.0f} Gb/s) | " \
           f"{n['group_aggregate_tbytes_per_s']:,.2f} TB/s group"
    return ("<= " if n["status"] == "at_min" else "") + text


def _render(con, doc: dict) -> None:
    from rich.table import Table

    p = doc["plan"]
    t = Table(title=f"{doc['model']} on {doc['num_gpus']:,} x {doc['cluster']}: tp{p['tp']} pp{p['pp']} cp{p['cp']} "
                    f"dp{p['dp']} ep{p['ep']} ({doc['plan_source']}); step {doc['step_time_s']:.3f} s, "
                    f"exposed comm {doc['exposed_comm_s']:.3f} s")
    for col in ("axis", "tier (now, per GPU one way)", "exposed now", "hidden (<=1%)", "costs 5%", "costs 20%",
                "latency for 5% / 20%"):
        t.add_column(col)
    for a in doc["axes"]:
        lat = a["latency"]

        def _lat(x):
            return {"never": "never", "at_min": "bw alone"}.get(x["status"]) or f"{x['latency_us']:,.0f} us"

        t.add_row(f"{a['axis']} x{a['degree']}", f"{a['tier']} ({a['tier_gbytes_per_s_per_gpu']:,.0f} GB/s)",
                  f"{a['exposed_s']:.3f} s ({a['share_of_step']:.1%})",
                  *(_rate(a["bandwidth"][k], a["floor_share_at_unlimited_bandwidth"]) for k in ("hidden", "5%", "20%")),
                  f"{_lat(lat['5%'])} / {_lat(lat['20%'])} (now {lat['tier_latency_us']:g} us)")
    print_table(con, t)
    if "window" in doc:
        w = doc["window"]
        con.print(f"window {w['window_s'] * 1e3:g} ms: the DP reduction sends {w['bytes_per_gpu'] / 1e9:,.1f} GB per "
                  f"GPU per step -> {w['tbytes_per_s_per_gpu']:,.3f} TB/s per GPU one way "
                  f"({w['gbits_per_s_per_gpu']:,.0f} Gb/s; nccl-tests bus bandwidth), "
                  f"{w['group_aggregate_tbytes_per_s']:,.1f} TB/s over the {w['dp']}-GPU group")
    if "target_step" in doc:
        s = doc["target_step"]
        con.print(f"step {s['target_step_s']:g} s: every tier x{s['factor']:.3g} (scale-up "
                  f"{s['scale_up_gbytes_per_s_per_gpu']:,.0f} GB/s, scale-out {s['scale_out_gbytes_per_s_per_gpu']:,.1f}"
                  f" GB/s per GPU; {s['scale_out_gbits_per_s_per_nic']:,.0f} Gb/s NICs)")
    if "trend" in doc:
        tr = doc["trend"]
        rows = ", ".join(f"{r['cluster']} {r['comm_share']:.1%} (8-GPU domain "
                         f"{r['comm_share_8gpu_domain']:.1%})" if r["fits"] and r["comm_share_8gpu_domain"] is not None
                         else f"{r['cluster']} -" for r in tr["generations"])
        con.print(f"trend ({tr['definition']}): {rows}")
        con.print(f"first interconnect-bound: {tr['first_interconnect_bound'] or 'none'} with its own domain; "
                  f"{tr['first_interconnect_bound_8gpu_domain'] or 'none'} with 8-GPU domains")
    for n in doc["notes"]:
        con.print(f"note: {n}", style="dim")
