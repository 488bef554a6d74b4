"""``serve-plan``: search the prefill/decode split, TP and EP per pool and the batch, under the SLOs, for the
most output tokens/s per GPU. Every candidate is one entry of :class:`~tierwise.serve.engine.Deployments`,
evaluated together by :func:`~tierwise.serve.engine.evaluate` (numpy arrays; the batch is searched inside it by
vectorized bisection), so a 72-GPU rack's few thousand candidates cost one pass of the model.

Candidates: aggregated (one pool of ``N`` GPUs in instances of :func:`layouts`: attention ``tp`` a power of two
up to ``max_tp`` dividing ``N``, ``ep`` a power of two dividing ``tp``, or for MoE models wider than ``tp`` with
attention data-parallel: a power of two or the whole pool, up to :data:`MAX_EP` and the routed experts) and
disaggregated (``P`` prefill GPUs in instances of ``(tp_p, ep_p)``, ``D = N - P`` decode GPUs in instances of
``(tp_d, ep_d)``, each instance ``max(tp, ep)`` GPUs); the KV link is chosen from the placement (``--kv-link
auto``) unless given. Candidates whose weights do not fit are dropped. Wide EP wins where the per-GPU weight
read it saves (each rank reads ``ceil(E / ep)`` experts and an attention group's share of the batch's KV) outweighs
the all-to-all it adds, DeepEP's kernels on the tier the group spans (:mod:`tierwise.parallel.deepep`).

Bound: the disaggregated candidates grow as ``N x (number of TP degrees)^2`` (303,092 at 65,536 GPUs, a few
seconds; 4.8 million at 2^20, minutes), so a search with disaggregated modes takes at most
:data:`MAX_DISAGGREGATED_GPUS` GPUs and refuses more with one line; ``--modes aggregated`` (a handful of
candidates) takes any count.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tierwise.errors import ScenarioError
from tierwise.estimate.compute import compute_params
from tierwise.hierarchy import TIER_ORDER, group_span
from tierwise.parallel.eplb import serving_imbalance
from tierwise.serve.engine import Deployments, evaluate
from tierwise.serve.kv import attention_dp, weight_bytes_per_gpu, weight_bytes_read_per_step
from tierwise.serve.params import model_parameters
from tierwise.serve.phases import decode_step_time
from tierwise.serve.records import ServeResults
from tierwise.serve.result import PlanChoice, PlanSearch
from tierwise.serve.transfer import pick_kv_link

__all__ = ["candidates", "serve_plan", "layouts", "ep_tier_name", "explain_ep", "explain_redundant", "MAX_EP",
           "MAX_DISAGGREGATED_GPUS", "REDUNDANT_CHOICES"]


def ep_tier_name(cluster, ep: int) -> str | None:
    """The tier an EP group of ``ep`` consecutive GPUs spans (``scale_up`` inside a scale-up domain such as an
    NVL72 rack, ``scale_out`` across 8-GPU nodes); None without EP."""
    if ep <= 1:
        return None
    return TIER_ORDER[int(group_span(cluster, np.array([ep]), 1).tier[0])]
MAX_DISAGGREGATED_GPUS = 65_536
"""GPUs whose prefill/decode split is searched (module docstring: the bound on the search's time)."""


def _powers(limit: int) -> list[int]:
    out, t = [], 1
    while t <= limit:
        out.append(t)
        t *= 2
    return out


MAX_EP = 320
"""Widest EP searched: DeepSeek-V3's decode deployment (report sec. 3.4.2: "EP320")."""


def layouts(gpus: int, moe: bool, max_tp: int, num_experts: int = 0) -> list[tuple[int, int]]:
    """(attention TP, EP) of the instances a pool of ``gpus`` can be cut into
    (:func:`tierwise.serve.kv.instance_gpus`): EP folded into TP (powers of two dividing ``tp``), and for MoE
    models EP wider than TP with attention data-parallel, ``ep`` a power of two from ``2 tp``, or the whole pool,
    up to :data:`MAX_EP` and the routed experts, dividing the pool."""
    out = []
    for tp in _powers(min(max_tp, gpus)):
        if gpus % tp:
            continue
        out += [(tp, ep) for ep in (_powers(tp) if moe else [1])]
        if moe:
            wide = {e for e in _powers(min(gpus, MAX_EP, num_experts)) if e > tp} | (
                {gpus} if tp < gpus <= min(MAX_EP, num_experts) else set())
            out += [(tp, ep) for ep in sorted(wide) if ep % tp == 0 and gpus % ep == 0]
    return out


def _instance(tp: int, ep: int) -> int:
    return max(tp, ep)


def candidates(num_gpus: int, moe: bool, max_tp: int, kv_link: str, cluster, *, disaggregated: bool = True,
               aggregated: bool = True, num_experts: int = 0) -> Deployments:
    """Every deployment of ``num_gpus`` GPUs (module docstring), as arrays."""

    rows = []
    if aggregated:
        for tp, ep in layouts(num_gpus, moe, max_tp, num_experts):
            rows.append((False, num_gpus, tp, ep, num_gpus, tp, ep))
    if disaggregated:
        inst = [(tp, ep) for tp in _powers(min(max_tp, num_gpus))
                for ep in (_powers(tp) if moe else [1])]
        if moe:
            inst += [(tp, ep) for tp in _powers(min(max_tp, num_gpus)) for ep in _powers(min(num_gpus, MAX_EP,
                                                                                             num_experts))
                     if ep > tp]
        for tpp, epp in inst:
            for tpd, epd in inst:
                ip, idd = _instance(tpp, epp), _instance(tpd, epd)
                for p in range(ip, num_gpus - idd + 1, ip):
                    if (num_gpus - p) % idd == 0:
                        rows.append((True, p, tpp, epp, num_gpus - p, tpd, epd))
    a = np.array(rows, dtype=np.int64) if rows else np.zeros((0, 7), dtype=np.int64)
    disagg = a[:, 0].astype(bool)
    link = (pick_kv_link(cluster, a[:, 1], a[:, 4]).astype(object) if kv_link == "auto"
            else np.full(len(a), kv_link, dtype=object))
    link = np.where(disagg, link, None)
    return Deployments(disagg=disagg, prefill_gpus=a[:, 1], prefill_tp=a[:, 2], prefill_ep=a[:, 3],
                       decode_gpus=a[:, 4], decode_tp=a[:, 5], decode_ep=a[:, 6],
                       batch=np.zeros(len(a), dtype=np.int64), kv_link=link)


REDUNDANT_CHOICES = (0, 32)
"""EPLB redundant experts per MoE layer ``serve-plan`` tries for a MoE model when ``--redundant-experts`` is not
given: none, and the 32 of DeepSeek-V3's prefill deployment (arXiv:2412.19437 sec. 3.4.1, "we set 32 redundant
experts for the prefilling stage")."""


def serve_plan(workload, num_gpus: int, *, max_tp: int = 8, kv_link: str = "auto", top: int = 10,
               modes: str = "both", redundant: tuple[int, ...] | None = None) -> PlanSearch:
    """The best deployments of ``num_gpus`` GPUs for ``workload`` (:class:`~tierwise.serve.engine.Workload`), a
    :class:`~tierwise.serve.result.PlanSearch`; ``redundant``: the EPLB redundant-expert counts to search (each
    choice names its own), default the workload's."""
    model = workload.model
    if modes in ("both", "disaggregated") and num_gpus > MAX_DISAGGREGATED_GPUS:
        raise ScenarioError(f"--gpus {num_gpus:,} with --modes {modes}: the prefill/decode split of more than "
                            f"{MAX_DISAGGREGATED_GPUS:,} GPUs is millions of deployments to search; plan one "
                            f"deployment of at most {MAX_DISAGGREGATED_GPUS:,} GPUs (replicate it), or use "
                            "--modes aggregated")
    d = candidates(num_gpus, model.moe is not None, max_tp, kv_link, workload.cluster,
                   disaggregated=modes in ("both", "disaggregated"), aggregated=modes in ("both", "aggregated"),
                   num_experts=model.moe.num_experts if model.moe is not None else 0)
    choices = tuple(redundant) if redundant and model.moe is not None else (workload.params.redundant_experts,)
    best, feasible, per_choice = [], 0, {}
    for count in choices:
        w = dataclasses.replace(workload, params=dataclasses.replace(workload.params, redundant_experts=count))
        rows, ok = _ranked(w, d, top, count)
        feasible += ok
        per_choice[count] = rows[0] if rows else None
        best += rows
    # stable: fewer redundant experts win ties
    best = sorted(best, key=lambda b: -b.results.output_tokens_per_s_per_gpu)[:top]
    if not best:
        return PlanSearch(candidates=len(d) * len(choices), feasible=feasible, best=(), why_ep=None)
    top_choice = best[0]
    w = dataclasses.replace(workload, params=dataclasses.replace(
        workload.params, redundant_experts=top_choice.redundant_experts))
    return PlanSearch(candidates=len(d) * len(choices), feasible=feasible, best=tuple(best),
                      why_ep=explain_ep(w, top_choice.decode_tp, top_choice.decode_ep, top_choice.results.batch),
                      why_redundant=(explain_redundant(workload, top_choice, per_choice) if len(choices) > 1
                                     else None))


def _ranked(workload, d: Deployments, top: int, redundant: int) -> tuple[list[PlanChoice], int]:
    """The ``top`` feasible deployments of ``d`` for ``workload`` (with ``redundant`` EPLB experts), best first,
    and how many are feasible."""
    r = evaluate(workload, d)
    ok = r.fits & r.meets_slo & (r.output_tokens_per_s > 0)
    score = np.where(ok, r.output_tokens_per_s_per_gpu, -1.0)
    columns = r.columns()
    order = np.argsort(-score, kind="stable")[:top]
    best = []
    for i in order:
        if score[i] < 0:
            break
        dis = bool(d.disagg[i])
        best.append(PlanChoice(
            disaggregated=dis, prefill_gpus=int(d.prefill_gpus[i]) if dis else None,
            prefill_tp=int(d.prefill_tp[i]) if dis else None, prefill_ep=int(d.prefill_ep[i]) if dis else None,
            decode_gpus=int(d.decode_gpus[i]), decode_tp=int(d.decode_tp[i]), decode_ep=int(d.decode_ep[i]),
            decode_attention_dp=int(attention_dp(d.decode_tp[i], d.decode_ep[i])),
            decode_ep_tier=ep_tier_name(workload.cluster, int(d.decode_ep[i])),
            results=ServeResults(**{k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in columns.items()}),
            redundant_experts=redundant))
    return best, int(ok.sum())


def explain_redundant(workload, chosen: PlanChoice, per_choice: dict[int, PlanChoice | None]) -> str:
    """One line on the EPLB choice: the busiest decode EP rank's load over the mean at the chosen layout with and
    without the redundant experts (:func:`tierwise.parallel.eplb.serving_imbalance`), what their copies cost
    each GPU, and the best throughput each count reached."""
    model = workload.model
    ep, tp = chosen.decode_ep, chosen.decode_tp
    rows = chosen.results.batch * workload.beams
    cparams = {**compute_params(model_parameters(workload.params)), **workload.cluster.compute}
    load = {c: float(serving_imbalance(model, cparams, ep, rows, c)) for c in per_choice}
    cost = {c: float(weight_bytes_per_gpu(model, workload.precision, tp, ep, c)
                     - weight_bytes_per_gpu(model, workload.precision, tp, ep, 0)) for c in per_choice}
    best = {c: (b.results.output_tokens_per_s_per_gpu if b else 0.0) for c, b in per_choice.items()}
    pick = chosen.redundant_experts
    parts = [f"{c} redundant: busiest EP rank {load[c]:.2f}x the mean, +{cost[c] / 1e9:.2f} GB weights per GPU, "
             f"best {best[c]:,.1f} tok/s/GPU" for c in sorted(per_choice)]
    router = "auxiliary-loss-free" if model.moe.balance == "aux-free" else "auxiliary-loss"
    return (f"EPLB: {pick} redundant experts chosen at decode EP {ep} ({router} router); " + "; ".join(parts))


def explain_ep(workload, tp: int, ep: int, batch: float) -> str | None:
    """One line in tier terms on the chosen decode layout's EP (MoE models): the weight bytes each GPU reads per
    decode step at this EP against EP folded into the same TP (``ep = min(tp, ...)`` = 1), and the all-to-all's
    share of the step on the tier the group spans."""
    model = workload.model
    if model.moe is None:
        return None

    rows = batch * workload.beams
    redundant = workload.params.redundant_experts
    read = float(weight_bytes_read_per_step(model, workload.precision, tp, ep, rows, redundant))
    base = float(weight_bytes_read_per_step(model, workload.precision, tp, 1, rows, redundant))
    step = decode_step_time(workload.setup, tp, ep, rows, workload.mean_context)
    total, comm = float(step.total_s), float(step.comm_s)
    tier = ep_tier_name(workload.cluster, ep) or "none"
    return (f"decode EP {ep} (tier {tier}): each GPU reads {read / 1e9:.2f} GB of weights per step against "
            f"{base / 1e9:.2f} GB with the experts unsplit at tp {tp}; the communication takes {comm * 1e3:.2f} ms of "
            f"the {total * 1e3:.2f} ms step ({comm / total:.0%})")
