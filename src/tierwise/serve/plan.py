"""``serve-plan``: search the prefill/decode split, TP and EP per pool and the batch, under the SLOs, for the
most output tokens/s per GPU. Every candidate is one entry of :class:`~tierwise.serve.engine.Deployments`,
evaluated together by :func:`~tierwise.serve.engine.evaluate` (numpy arrays; the batch is searched inside it by
vectorized bisection), so a 72-GPU rack's few thousand candidates cost one pass of the model.

Candidates: aggregated (one pool of ``N`` GPUs, ``tp`` a power of two dividing ``N``, ``ep`` a power of two
dividing ``tp`` for MoE models) and disaggregated (``P`` prefill GPUs in instances of ``tp_p``, ``D = N - P``
decode GPUs in instances of ``tp_d`` with ``ep_d``; TP degrees powers of two up to ``max_tp``); the KV link is
chosen from the placement (``--kv-link auto``) unless given. Candidates whose weights do not fit are dropped.

Bound: the disaggregated candidates grow as ``N x (number of TP degrees)^2`` (303,092 at 65,536 GPUs, a few
seconds; 4.8 million at 2^20, minutes), so a search with disaggregated modes takes at most
:data:`MAX_DISAGGREGATED_GPUS` GPUs and refuses more with one line; ``--modes aggregated`` (a handful of
candidates) takes any count.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tierwise.errors import ScenarioError
from tierwise.serve.engine import Deployments, evaluate

__all__ = ["candidates", "serve_plan", "MAX_DISAGGREGATED_GPUS"]

MAX_DISAGGREGATED_GPUS = 65_536
"""GPUs whose prefill/decode split is searched (module docstring: the bound on the search's time)."""


def _powers(limit: int) -> list[int]:
    out, t = [], 1
    while t <= limit:
        out.append(t)
        t *= 2
    return out


def candidates(num_gpus: int, moe: bool, max_tp: int, kv_link: str, cluster, *, disaggregated: bool = True,
               aggregated: bool = True) -> Deployments:
    """Every deployment of ``num_gpus`` GPUs (module docstring), as arrays."""
    from tierwise.serve.transfer import pick_kv_link

    rows = []
    tps = [t for t in _powers(min(max_tp, num_gpus))]
    if aggregated:
        for tp in tps:
            if num_gpus % tp:
                continue
            for ep in (_powers(tp) if moe else [1]):
                rows.append((False, num_gpus, tp, num_gpus, tp, ep))
    if disaggregated:
        for tpp in tps:
            for tpd in tps:
                for ep in (_powers(tpd) if moe else [1]):
                    for p in range(tpp, num_gpus - tpd + 1, tpp):
                        if (num_gpus - p) % tpd == 0:
                            rows.append((True, p, tpp, num_gpus - p, tpd, ep))
    a = np.array(rows, dtype=np.int64) if rows else np.zeros((0, 6), dtype=np.int64)
    disagg = a[:, 0].astype(bool)
    link = (pick_kv_link(cluster, a[:, 1], a[:, 3]).astype(object) if kv_link == "auto"
            else np.full(len(a), kv_link, dtype=object))
    link = np.where(disagg, link, None)
    return Deployments(disagg=disagg, prefill_gpus=a[:, 1], prefill_tp=a[:, 2], decode_gpus=a[:, 3],
                       decode_tp=a[:, 4], decode_ep=a[:, 5], batch=np.zeros(len(a), dtype=np.int64), kv_link=link)


def serve_plan(workload, num_gpus: int, *, max_tp: int = 8, kv_link: str = "auto", top: int = 10,
               modes: str = "both") -> dict:
    """The best deployments of ``num_gpus`` GPUs for ``workload`` (:class:`~tierwise.serve.engine.Workload`)."""
    model = workload.model
    if modes in ("both", "disaggregated") and num_gpus > MAX_DISAGGREGATED_GPUS:
        raise ScenarioError(f"--gpus {num_gpus:,} with --modes {modes}: the prefill/decode split of more than "
                            f"{MAX_DISAGGREGATED_GPUS:,} GPUs is millions of deployments to search; plan one "
                            f"deployment of at most {MAX_DISAGGREGATED_GPUS:,} GPUs (replicate it), or use "
                            "--modes aggregated")
    d = candidates(num_gpus, model.moe is not None, max_tp, kv_link, workload.cluster,
                   disaggregated=modes in ("both", "disaggregated"), aggregated=modes in ("both", "aggregated"))
    if model.moe is not None:
        keep = model.moe.num_experts % d.decode_ep == 0
        d = Deployments(**{f.name: getattr(d, f.name)[keep] for f in dataclasses.fields(d)})
    r = evaluate(workload, d)
    ok = r["fits"] & r["meets_slo"] & (r["output_tokens_per_s"] > 0)
    score = np.where(ok, r["output_tokens_per_s_per_gpu"], -1.0)
    order = np.argsort(-score, kind="stable")[:top]
    best = []
    for i in order:
        if score[i] < 0:
            break
        dis = bool(d.disagg[i])
        best.append({
            "mode": "disaggregated" if dis else "aggregated",
            "prefill_gpus": int(d.prefill_gpus[i]) if dis else None, "prefill_tp": int(d.prefill_tp[i]) if dis else None,
            "decode_gpus": int(d.decode_gpus[i]), "decode_tp": int(d.decode_tp[i]), "decode_ep": int(d.decode_ep[i]),
            **{k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in r.items()},
        })
    return {"candidates": len(d), "feasible": int(ok.sum()), "best": best}
