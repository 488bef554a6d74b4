"""Any GPU count (issue 28): when no layout uses every GPU asked, the planner runs on the most GPUs a layout can
use and leaves the rest idle (hot spares), and says so.

A layout uses ``tp x pp x cp x dp`` GPUs, and each degree has its rule: ``tp`` divides the attention and KV heads,
``cp`` splits the sequence into chunks of at least 1,024 tokens (``2 cp`` divides it), ``pp <= num_layers``,
and ``dp`` (times the micro-batch) divides the global batch (:func:`tierwise.specs.plan.valid_plan_mask`, the
estimator's own rules). 98,280 GPUs (1,365 NVL72 racks) with a batch of 2,048 sequences: ``dp`` is a power of
two and so are ``tp`` and ``cp``, so a layout uses ``2^a x pp`` GPUs and none uses 98,280 (= 2^3 x 12,285).

The rule here: use every GPU when a layout does (the space is unchanged); otherwise the
:data:`CANDIDATES` largest GPU counts a layout can use, no more than :data:`MAX_IDLE_FRACTION` of the GPUs (or
one scale-up domain, whichever is more) below the count asked, are each searched and the plan with the best
objective is kept. Its document lists ``gpus`` (asked, used, idle, the racks or servers used, and a ``note`` saying why). When none of
those counts has a layout, the error names the rule that failed with its numbers (:func:`why_no_layout`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from tierwise.documents.training import gpus_document, plan_document
from tierwise.planner.answer import answer_plans
from tierwise.planner.results import GpuUse, PlanAnswer
from tierwise.planner.space import Constraints, NoLayoutError
from tierwise.specs.parameters import Parameters
from tierwise.specs.plan import PlanBatch, valid_plan_mask

__all__ = ["MAX_IDLE_FRACTION", "CANDIDATES", "usable_counts", "answer_any_gpus", "plan_any_gpus", "gpu_use", "why_no_layout", "max_idle_gpus",
           "gpus_block"]

MAX_IDLE_FRACTION = 0.02
"""GPUs left idle at most, as a fraction of those asked (a planning choice: 2% of a 100K-GPU cluster is about
the spare pool large operators hold for failures, e.g. Llama 3's 16K-GPU run saw ~8 interruptions a day,
arXiv:2407.21783 section 3.3.4; stated under ``assumed``)."""
CANDIDATES = 3
"""GPU counts searched when no layout uses all the GPUs (the largest usable ones)."""


def _divisors(n: int) -> np.ndarray:
    d = np.arange(1, int(n**0.5) + 1)
    d = d[n % d == 0]
    return np.unique(np.concatenate([d, n // d]))


def _degree_table(model, global_batch_size: int, seq_length: int, c: Constraints) -> dict[str, np.ndarray]:
    """Every (tp, pp, cp, dp) the model's and the batch's rules allow, ignoring the GPU count."""
    heads = model.num_attention_heads
    tps = np.array([c.tp]) if c.tp else _divisors(heads)
    if c.max_tp:
        tps = tps[tps <= c.max_tp]
    pps = np.array([c.pp]) if c.pp else np.arange(1, min(model.num_layers, c.max_pp or model.num_layers) + 1)
    cps = np.array([c.cp]) if c.cp else _divisors(seq_length)
    if not c.cp:
        cps = cps[(seq_length // cps >= c.min_cp_tokens) | (cps == 1)]
        if c.max_cp:
            cps = cps[cps <= c.max_cp]
    dps = np.array([c.dp]) if c.dp else _divisors(global_batch_size)
    grid = np.meshgrid(tps, pps, cps, dps, indexing="ij")
    tp, pp, cp, dp = (g.ravel().astype(np.int64) for g in grid)
    batch = PlanBatch.from_arrays(global_batch_size=global_batch_size, seq_length=seq_length, tp=tp, pp=pp, cp=cp,
                                  dp=dp, dp_shard=dp, etp=tp, micro_batch_size=np.ones_like(tp))
    ok = valid_plan_mask(model, batch) & (global_batch_size % dp == 0)
    return {"tp": tp[ok], "pp": pp[ok], "cp": cp[ok], "dp": dp[ok]}


def usable_counts(model, num_gpus: int, global_batch_size: int, seq_length: int, c: Constraints,
                  max_idle: int) -> list[int]:
    """GPU counts below ``num_gpus`` (by at most ``max_idle``) that some layout uses exactly, largest first."""
    t = _degree_table(model, global_batch_size, seq_length, c)
    n = t["tp"] * t["pp"] * t["cp"] * t["dp"]
    keep = (n < num_gpus) & (n >= num_gpus - max_idle)
    return [int(x) for x in np.unique(n[keep])[::-1]]


def why_no_layout(model, num_gpus: int, global_batch_size: int, seq_length: int, c: Constraints,
                  max_idle: int) -> str:
    """One line naming the rule that leaves no layout on ``num_gpus`` GPUs (or up to ``max_idle`` fewer), with
    its numbers, and the nearest GPU counts that do have one."""
    t = _degree_table(model, global_batch_size, seq_length, c)
    n = t["tp"] * t["pp"] * t["cp"] * t["dp"]
    below = n[n <= num_gpus]
    above = n[n > num_gpus]
    near = []
    if below.size:
        near.append(f"{int(below.max()):,} (leaving {num_gpus - int(below.max()):,} idle)")
    if above.size:
        near.append(f"{int(above.min()):,}")
    tps = sorted({int(x) for x in t["tp"]})
    cps = sorted({int(x) for x in t["cp"]})
    rules = (f"tp in {{{', '.join(map(str, tps))}}} (divides the {model.num_attention_heads} heads), cp in "
             f"{{{', '.join(map(str, cps))}}} (splits the {seq_length}-token sequence), pp <= "
             f"{int(t['pp'].max()) if t['pp'].size else model.num_layers} (layers), dp dividing the global batch "
             f"{global_batch_size}")
    if not n.size:
        return f"no layout satisfies the model's rules with global batch {global_batch_size}: {rules}; change " \
               "the fixed degrees or --global-batch"
    fix = ("use --gpus " + " or ".join(near) if near else "change --gpus") + \
        f", or a --global-batch with more divisors (e.g. a multiple of {_batch_hint(num_gpus, t)})"
    return (f"no layout uses {num_gpus:,} GPUs, nor between {num_gpus - max_idle:,} and {num_gpus:,} "
            f"(at most {max_idle:,} idle): a layout uses tp x pp x cp x dp GPUs with {rules}; {fix}")


def _batch_hint(num_gpus: int, t: dict[str, np.ndarray]) -> int:
    """A data-parallel degree that with the allowed tp x pp x cp uses all ``num_gpus`` (the batch must be its
    multiple), else the largest allowed dp."""
    mp = np.unique(t["tp"] * t["pp"] * t["cp"])
    exact = mp[num_gpus % mp == 0]
    if exact.size:
        return int(num_gpus // exact.max())
    return int(t["dp"].max())


def _better(a: PlanAnswer, b: PlanAnswer, objective: str) -> bool:
    """Whether answer ``a``'s best plan beats ``b``'s (step time and tokens/s at the same batch; MFU)."""
    if not a.plans:
        return False
    if not b.plans:
        return True
    ea, eb = a.plans[0].estimate, b.plans[0].estimate
    if objective == "mfu":
        return ea["mfu"] > eb["mfu"]
    return ea["tokens_per_s"] > eb["tokens_per_s"]


def max_idle_gpus(cluster, num_gpus: int) -> int:
    """GPUs a plan may leave idle: :data:`MAX_IDLE_FRACTION` of them, or one scale-up domain, whichever is more."""
    return max(int(num_gpus * MAX_IDLE_FRACTION), cluster.scale_up_domain, cluster.gpus_per_node)


def gpu_use(cluster, asked: int, used: int, note: str | None = None) -> GpuUse:
    """GPUs asked and used, and the racks (scale-up domains wider than a server) or servers used."""
    unit = max(cluster.scale_up_domain, cluster.gpus_per_node)
    what = "racks" if cluster.scale_up_domain > cluster.gpus_per_node else "servers"
    return GpuUse(asked=asked, used=used, unit=what, units_used=-(-used // unit), gpus_per_unit=unit, note=note)


def gpus_block(cluster, asked: int, used: int) -> dict[str, Any]:
    """The document's ``gpus``: asked, used, idle, and the racks or servers used (:func:`gpu_use`)."""
    return gpus_document(gpu_use(cluster, asked, used))


def answer_any_gpus(model, cluster, num_gpus: int, global_batch_size: int, seq_length: int, *,
                    constraints: Constraints | None = None, objective: str = "step_time", top: int = 10,
                    show_infeasible: bool = False, parameters: Parameters | None = None) -> PlanAnswer:
    """:func:`tierwise.planner.answer.answer_plans` on ``num_gpus`` GPUs, or, when no layout uses them all, on
    the best of the :data:`CANDIDATES` largest usable counts (module docstring); its ``gpus`` says which.
    Raises :class:`~tierwise.planner.space.NoLayoutError` naming the failing rule when none has a layout.
    ``parameters`` go to every :func:`answer_plans` (None: each loads the run's)."""
    c = constraints or Constraints()
    kw = dict(constraints=c, objective=objective, top=top, show_infeasible=show_infeasible, parameters=parameters)
    try:
        answer = answer_plans(model, cluster, num_gpus, global_batch_size, seq_length, **kw)
        return replace(answer, gpus=gpu_use(cluster, num_gpus, num_gpus))
    except NoLayoutError as exc:
        first = str(exc)
    max_idle = max_idle_gpus(cluster, num_gpus)
    best, tried = None, []
    for n in usable_counts(model, num_gpus, global_batch_size, seq_length, c, max_idle):
        try:
            answer = answer_plans(model, cluster, n, global_batch_size, seq_length, **kw)
        except NoLayoutError:
            continue
        tried.append(n)
        if best is None or _better(answer, best, objective):
            best = answer
        if len(tried) == CANDIDATES:
            break
    if best is None:  # the space's own reason when it names a rule (the batch, the bounds), else the rules here
        generic = first.startswith("no layout satisfies the model's rules")
        raise NoLayoutError(why_no_layout(model, num_gpus, global_batch_size, seq_length, c, max_idle) if generic
                            else f"{first} (and no layout uses {num_gpus - max_idle:,}-{num_gpus:,} GPUs)")
    use = gpu_use(cluster, num_gpus, best.num_gpus)
    note = (f"no layout uses all {num_gpus:,} GPUs (tp x pp x cp x dp with dp dividing the batch of "
            f"{global_batch_size}): searched {', '.join(f'{x:,}' for x in tried)} GPUs (at most {max_idle:,} idle) "
            f"and kept the best, which {use.summary} (idle GPUs serve as hot spares)")
    return replace(best, gpus=replace(use, note=note))


def plan_any_gpus(model, cluster, num_gpus: int, global_batch_size: int, seq_length: int,
                  **kw) -> dict[str, Any]:
    """The ``plan --json`` document of :func:`answer_any_gpus` (the same keywords)."""
    return plan_document(answer_any_gpus(model, cluster, num_gpus, global_batch_size, seq_length, **kw))
