"""The same training job across accelerator generations: compute time, exposed communication and its share of
the step, the ratio of FLOPS to scale-out bandwidth, and what a larger scale-up domain buys back.

Per generation the job (model, GPUs, global batch, sequence, bf16: the one precision every generation has) gets
its best plan from the planner (the restricted space of :mod:`tierwise.design.designs`). The FLOPS to
scale-out bandwidth ratio is ``peak dense bf16 FLOP/s / one-way scale-out bytes/s`` per GPU (FLOPs a GPU can
do per byte it can send off its server): when it grows, a fixed job's communication grows relative to its
compute unless the plan keeps more traffic inside the scale-up domain. "What the scale-up domain buys back":
the same generation's accelerator and NICs in the other domain size (one server <-> a 72-GPU NVL72 rack),
its best plan and exposed-communication share.
"""

from __future__ import annotations

from typing import Any

from tierwise.design.designs import RESTRICTED_SPACE, best_plan
from tierwise.specs.cluster import load_cluster, with_scale_up_domain
from tierwise.specs.parameters import Parameters, load_parameters

__all__ = ["GENERATIONS", "generation_trend"]

GENERATIONS = ("dgx-a100", "dgx-h100", "dgx-b200", "gb200-nvl72", "gb300-nvl72")
"""A100 -> H100 -> B200 -> GB200 -> GB300, each in its reference system (catalog clusters)."""


def _row(model, cluster, num_gpus, global_batch, seq, parameters: Parameters) -> dict[str, Any]:
    entry = best_plan(model, cluster, num_gpus, global_batch, seq, "bf16", parameters=parameters)
    flops = cluster.accelerator.peak_flops_per_s("bf16")
    bw = cluster.scale_out_bytes_per_s
    row: dict[str, Any] = {"cluster": cluster.name, "accelerator": cluster.accelerator.name,
                           "scale_up_domain": cluster.scale_up_domain,
                           "peak_bf16_tflops": flops / 1e12, "scale_out_gbytes_per_s": bw / 1e9,
                           "flops_per_scale_out_byte": flops / bw if bw else None}
    if entry is None:
        row["fits"] = False
        return row
    e = entry["estimate"]
    bd = e["breakdown"]
    plan = {k: entry[k] for k in ("tp", "pp", "cp", "dp", "vpp", "micro_batch_size", "recompute", "zero_stage")}
    if entry.get("activation_offload_layers"):  # only where the winner offloads activations (planner/offload.py)
        plan["activation_offload_layers"] = entry["activation_offload_layers"]
    row.update(fits=True, plan=plan,
               step_time_s=e["step_time_s"], compute_s=bd["compute_s"], exposed_comm_s=bd["exposed_comm_s"],
               comm_share=bd["exposed_comm_s"] / e["step_time_s"], tokens_per_s=e["tokens_per_s"], mfu=e["mfu"])
    return row


def generation_trend(model, num_gpus: int, *, global_batch: int = 2048, seq: int = 8192, clusters=None,
                     extra=(), parameters: Parameters | None = None) -> dict:
    """The ``trend --json`` document. ``clusters``: catalog names or loaded clusters (default
    :data:`GENERATIONS`); ``extra``: user-given future parts (loaded clusters), appended last. ``parameters``:
    the model's parameters (None, this being ``trend``'s entry point: :func:`load_parameters`)."""
    parameters = parameters if parameters is not None else load_parameters()
    loaded = [c if not isinstance(c, str) else load_cluster(c, parameters=parameters) for c in (clusters or GENERATIONS)] + list(extra)
    rows = []
    for cl in loaded:
        row = _row(model, cl, num_gpus, global_batch, seq, parameters)
        other = 72 if cl.scale_up_domain <= 8 else 8
        alt = with_scale_up_domain(cl, other, name=f"{cl.name} with {other}-GPU scale-up domains")
        alt_row = _row(model, alt, num_gpus, global_batch, seq, parameters)
        row["other_domain"] = {"scale_up_domain": other, **{k: alt_row.get(k) for k in
                                                           ("fits", "step_time_s", "exposed_comm_s", "comm_share",
                                                            "tokens_per_s", "plan")}}
        if row.get("fits") and alt_row.get("fits"):
            big, small = (alt_row, row) if other > cl.scale_up_domain else (row, alt_row)
            row["larger_domain_buys_back"] = {
                "exposed_comm_s": small["exposed_comm_s"] - big["exposed_comm_s"],
                "comm_share_points": small["comm_share"] - big["comm_share"],
                "speedup": small["step_time_s"] / big["step_time_s"]}
        rows.append(row)
    fit = [r for r in rows if r.get("fits")]
    summary: dict[str, Any] = {}
    if len(fit) >= 2:
        summary = _summary(fit)
    return {"model": model.name, "num_gpus": num_gpus, "global_batch_size": global_batch, "seq_length": seq,
            "precision": "bf16", "generations": rows, "summary": summary,
            "notes": [f"each generation gets its own best plan in design's restricted space ({RESTRICTED_SPACE}); "
                      "the comm share is exposed communication / step time",
                      "other_domain: the same accelerator and NICs with 8-GPU scale-up domains <-> 72-GPU NVL72 "
                      "racks; the summary's fixed-domain series holds the domain at 8 GPUs for every generation"]}


def _share8(r: dict) -> float | None:
    """The exposed-communication share with 8-GPU scale-up domains (own or other domain)."""
    if r["scale_up_domain"] == 8:
        return r["comm_share"]
    o = r["other_domain"]
    return o.get("comm_share") if o.get("scale_up_domain") == 8 else None


def _summary(fit: list[dict]) -> dict[str, Any]:
    """How much the comm share grows: with the scale-up domain held at 8 GPUs (the network falling behind
    compute), and with each generation's own domain (what NVL72 buys back)."""
    first, last = fit[0], fit[-1]
    fixed = [(r["cluster"], _share8(r)) for r in fit if _share8(r) is not None]
    peak = max(fixed, key=lambda x: x[1]) if fixed else None
    out: dict[str, Any] = {
        "from": first["cluster"], "to": last["cluster"],
        "comm_share_from": first["comm_share"], "comm_share_to": last["comm_share"],
        "comm_share_ratio": last["comm_share"] / first["comm_share"] if first["comm_share"] else None,
        "flops_per_byte_ratio": (max(r["flops_per_scale_out_byte"] for r in fit) / first["flops_per_scale_out_byte"]
                                 if first["flops_per_scale_out_byte"] else None),
        "fixed_domain_8_shares": dict(fixed),
    }
    if fixed and peak and fixed[0][1]:
        out["fixed_domain_growth"] = peak[1] / fixed[0][1]
        grows = peak[1] > fixed[0][1]
        out["sentence"] = (
            f"with 8-GPU scale-up domains the exposed communication share "
            f"{'grows' if grows else 'does not grow'} from {100 * fixed[0][1]:.1f}% ({fixed[0][0]}) to "
            f"{100 * peak[1]:.1f}% ({peak[0]}), x{out['fixed_domain_growth']:.2f}, as FLOPS per scale-out byte grow "
            f"x{out['flops_per_byte_ratio']:.2f}; with each generation's own domain it is "
            f"{100 * first['comm_share']:.1f}% on {first['cluster']} and {100 * last['comm_share']:.1f}% on "
            f"{last['cluster']}")
    return out
