"""Search the plan space with the core estimator: memory screen, then branch and bound, coarse to fine.

Every plan is timed by :func:`tierwise.estimate.estimate` (the one vectorized model); the search only
decides which plans to hand it. The space has three levels (:mod:`tierwise.planner.space`): structures,
switches, refinements. A *unit* is a structure with its switches; its time is the best over its
refinements, and units are what the planner ranks.

**The bound.** The estimator composes a step as (module docstring of ``estimate/step.py``)::

    step = (m + (pp - 1) / v) x t_mb + exposed DP + optimizer,    t_mb >= 3 fwd + recompute  (slowest stage)

so any plan's step is at least ``LB = (compute_s + recompute_s + EP + i TP) x (1 + (pp - 1) / (v m)) +
optimizer_s``, the pipeline's compute with all communication hidden except the expert all-to-all ``EP``
(its group, ``ep`` ranks at stride ``etp``, does not depend on the placement order; where EP overlap is
eligible only its ``overlap_interference`` share ``i`` counts, which even hidden traffic costs) and the
share ``i`` of the TP traffic (TP at stride 1, the default refinement, is its fastest placement).
Refinements (placement order, TP and EP overlap, HSDP shard size) change only the other communication and,
for HSDP, make the optimizer shard smaller (slower), so the LB of a unit with its default refinement bounds
all its refinements (the slowest stage of a refined plan is at least as slow as the stage the LB was taken
from). Switches change compute: the structure's bound is the unit LB at the fastest switches (no
recompute, sequence parallelism on where valid, which also shrinks the all-to-all, ZeRO >= 1 for the
sharded optimizer, each allowed precision).

**The memory screen.** A structure whose lightest switches (the most recompute allowed, sequence
parallelism on, bf16, every allowed ZeRO stage) do not fit fits with none; refinements other than HSDP
do not touch memory, and HSDP only adds. Where the space searches activation offload
(:mod:`tierwise.planner.offload`), the most recompute is not the lightest setting: offloading ``k`` layers
takes their activations out of HBM, where full recompute keeps every layer's input. So pp-1 structures are
also tried without recompute at the same lightest other switches, which the evaluator resolves to the fewest
offloaded layers that fit (it fits exactly when ``L - 1`` offloaded layers, the lightest offload, fit), and a
structure passes when either fits. Offload adds only its exposed copies (``>= 0``) to the step, so the bound
below holds for offloaded plans unchanged.

**The search.**

1. level 1: per structure, the light variants (memory screen) and the fast variants (the bound); feasible
   ones are real plans and seed the upper bound ``UB`` = the k-th best unit score found;
2. level 2: structures in increasing bound, in chunks, get every switch combination; stop when the next
   structure's bound exceeds ``UB``;
3. level 3: units whose bound is within ``UB``, in increasing bound, get every refinement; stop likewise.

Nothing pruned can enter the top k: its bound exceeds a score k distinct units already reach. The
objective is step time (tokens/s ranks the same at a fixed batch and GPU count) or MFU (step x peak of the
plan's precision, so fp8 plans are charged against the fp8 peak).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tierwise.errors import PlanError
from tierwise.estimate import estimate
from tierwise.estimate.compute import compute_params
from tierwise.files import short_repr
from tierwise.planner.offload import COLUMN as OFFLOAD
from tierwise.planner.offload import fewest_offload
from tierwise.planner.space import (
    Constraints,
    Space,
    Table,
    _take,
    build_space,
    expand_refinements,
    expand_switches,
    space_size,
    to_batch,
)
from tierwise.specs.parameters import Parameters, load_parameters
from tierwise.specs.plan import RECOMPUTE, ep_overlap_allowed, is_dualpipe

__all__ = ["search", "SearchResult", "OBJECTIVES", "light_variants", "Evaluator", "brute_force"]

OBJECTIVES = ("step_time", "tokens_per_s", "mfu")
_CHUNK = 200_000
_LEVEL2_CHUNK_PLANS = 30_000


@dataclass
class SearchResult:
    """The ranked units (best refinement of each), best first, with the search's counts."""

    model: object
    cluster: object
    space: Space
    objective: str
    plans: Table
    """Top plans (one row each, with ``_score``), best first."""
    num_evaluated: int
    num_feasible: int
    space_size: int
    infeasible: Table
    """Nearest misses: one light plan per structure that does not fit, least memory first (``_memory``)."""
    notes: list[str] = field(default_factory=list)

    def batch(self):
        return to_batch(self.plans, self.space.global_batch_size, self.space.seq_length)


class Evaluator:
    """Runs the estimator on tables in chunks, counting plans; returns score, bound, fit and memory."""

    def __init__(self, model, cluster, space: Space, objective: str, *, parameters: Parameters):

        self._estimate = estimate
        self.model, self.cluster, self.space, self.objective = model, cluster, space, objective
        self.parameters = parameters
        self.num_evaluated = 0
        self.num_feasible = 0
        self.bound_violations = 0

        self._interference = float(compute_params(parameters).get("overlap_interference", 0.0))

    def __call__(self, table: Table) -> dict[str, np.ndarray]:
        """Score, bound, fit and memory share of each row; where the space searches activation offload, each
        ``recompute: none`` row with pp 1 is scored at its fewest offloaded layers that fit and the table's
        ``activation_offload_layers`` column is set to them (:mod:`tierwise.planner.offload`)."""
        n = len(table["tp"])
        parts = [self._run(_take(table, slice(i, i + _CHUNK))) for i in range(0, n, _CHUNK)]
        if not parts:
            return {k: np.zeros(0) for k in ("score", "bound", "fits", "memory", "host")}
        out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        if "offload" in out:
            table[OFFLOAD] = out.pop("offload")
        return out

    def _run(self, table: Table) -> dict[str, np.ndarray]:
        res = self._score(table)
        if self.space.offload:
            res = fewest_offload(self._score, self.model.num_layers, table, res)
        self.bound_violations += int(np.sum(res.pop("raw_bound") > res["score"] * (1 + 1e-9)))
        self.num_evaluated += len(res["score"])
        self.num_feasible += int(res["fits"].sum())
        return res

    def _score(self, table: Table) -> dict[str, np.ndarray]:
        s = self.space
        batch = to_batch(table, s.global_batch_size, s.seq_length)
        r = self._estimate(self.model, self.cluster, batch, parameters=self.parameters)
        weight = r.peak_flops_per_s if self.objective == "mfu" else 1.0
        pp, vpp = table["pp"], table["vpp"]
        # TP traffic at the default refinement has its group at stride 1 (the fastest placement), and even
        # hidden behind GEMMs it costs overlap_interference of its time: a floor for every refinement
        interference = self._interference
        ep_floor = np.where(ep_overlap_allowed(batch) & (True in s.ep_comm_overlap),
                            interference * r.axis_time_s["ep"], r.axis_exposed_s["ep"])
        per_pipeline = r.compute_s + r.recompute_s + ep_floor + interference * r.axis_time_s["tp"]
        # DualPipe's bubble is not a multiple of the 1F1B slot (parallel/pp.dualpipe_bubble): no bubble in its floor
        bubble = np.where(is_dualpipe(batch), 0.0, (pp - 1) / (vpp * r.num_microbatches))
        lower = per_pipeline * (1 + bubble) + r.optimizer_s
        score = r.step_time_s * weight
        bound = lower * weight
        fits = np.asarray(r.memory["fits"], dtype=bool)
        cap = r.memory["host_capacity_bytes"]
        host = np.where(cap > 0, r.memory["host_bytes"] / np.where(cap > 0, cap, 1.0), 0.0)
        return {"score": score, "bound": np.minimum(bound, score), "raw_bound": bound, "fits": fits,
                "memory": r.memory["per_gpu_bytes"] / r.memory["capacity_bytes"], "host": host}


def _kth(scores: np.ndarray, k: int, ties: np.ndarray | None = None) -> float:
    """The k-th smallest score, counting a tie only once (see :func:`_distinct`) when ``ties`` is given."""
    if ties is not None and len(scores):
        scores = scores[_distinct(ties, scores)]
    if len(scores) < k:
        return np.inf
    return float(np.partition(scores, k - 1)[k - 1])


def _tie_key(table: Table) -> np.ndarray:
    """Units that differ only in their ZeRO stage: same structure, recompute, sequence parallelism, precision."""
    return np.stack([table[c].astype(np.int64) for c in ("_struct", "recompute", "sequence_parallel", "precision")],
                    axis=1)


def _distinct(ties: np.ndarray, scores: np.ndarray, memory: np.ndarray | None = None) -> np.ndarray:
    """Mask dropping dominated units: same tie key and the same score (to 1e-9) as a unit using less memory.

    Such units differ only in their ZeRO stage and take the same time (ZeRO-1 and ZeRO-2 move the same bytes);
    the ranking keeps the lighter one. The bound stays exact because the k-th best is taken over distinct
    units only (a dropped unit's twin, with the same score, is kept).
    """
    n = len(scores)
    mem = memory if memory is not None else np.zeros(n)
    order = np.lexsort((mem, scores, *ties.T[::-1]))
    g, sc = ties[order], scores[order]
    dup = np.zeros(n, dtype=bool)
    if n > 1:
        same = np.all(g[1:] == g[:-1], axis=1) & (np.abs(sc[1:] - sc[:-1]) <= 1e-9 * np.abs(sc[1:]))
        dup[order[1:]] = same
    return ~dup


def _concat(tables: list[Table]) -> Table:
    tables = [t for t in tables if len(t["tp"])]
    if not tables:
        return {}
    return {k: np.concatenate([t[k] for t in tables]) for k in tables[0]}


def _unit_key(table: Table) -> np.ndarray:
    cols = ("_struct", "recompute", "zero_stage", "sequence_parallel", "precision")
    return np.stack([table[c].astype(np.int64) for c in cols], axis=1)


def light_variants(space: Space, model) -> Table:
    """Per structure, the switches lightest on memory: the most recompute allowed, sequence parallelism on
    where valid, bf16 where allowed (fp8 keeps an extra fp8 copy of the weights), and the two ZeRO stages
    that can be lightest: the highest allowed of 0-2 (each shards one more of optimizer state, gradients)
    and 3 (which shards the weights but holds gathered layers, so it is not always lighter than 2)."""
    below = [z for z in space.zero_stages if z <= 2]
    stages = tuple(sorted({*below[-1:], *(z for z in space.zero_stages if z == 3)}))
    light = expand_switches(space, model, space.structure, recompute=(max(space.recompute),), zero_stages=stages,
                            sequence_parallel="on-if-valid", precision=(min(space.precision),))
    none = RECOMPUTE.index("none")
    pp1 = space.structure["pp"] == 1
    if not space.offload or max(space.recompute) == none or not pp1.any():
        return light
    # offload can be lighter than any recompute (it takes k layers' activations out of HBM, full recompute keeps
    # every layer's input): pp-1 structures also try no recompute, which the evaluator resolves to its fewest
    # offloaded layers that fit, so it fits whenever offloading up to L - 1 layers does (planner/offload.py)
    idx = np.nonzero(pp1)[0]
    offload = expand_switches(space, model, _take(space.structure, idx), recompute=(none,), zero_stages=stages,
                              sequence_parallel="on-if-valid", precision=(min(space.precision),))
    offload["_struct"] = idx[offload["_struct"]]
    return _concat([light, offload])


def _level1(space: Space, model, ev: Evaluator):
    """Memory screen and bound per structure; feasible level-1 units (deduplicated) seed the upper bound."""
    s = space.structure
    n = len(s["tp"])
    light = light_variants(space, model)
    stages = [z for z in space.zero_stages if z >= 1] or [min(space.zero_stages)]
    fast = _concat([expand_switches(space, model, s, recompute=(min(space.recompute),), zero_stages=(stages[0],),
                                    sequence_parallel="on-if-valid", precision=(p,)) for p in space.precision])
    rows = _concat([light, fast])
    res = ev(rows)
    is_light = np.arange(len(rows["tp"])) < len(light["tp"])
    mem_ok = np.zeros(n, dtype=bool)
    np.logical_or.at(mem_ok, rows["_struct"][is_light], res["fits"][is_light])
    lower = np.full(n, np.inf)
    np.minimum.at(lower, rows["_struct"][~is_light], res["bound"][~is_light])
    _, first = np.unique(_unit_key(rows), axis=0, return_index=True)
    seed = np.zeros(len(rows["tp"]), dtype=bool)
    seed[first] = True
    seed &= res["fits"]
    misses = _nearest_misses(light, res["memory"][is_light], res["fits"][is_light])
    return mem_ok, lower, _tie_key(rows)[seed], res["score"][seed], misses


def _nearest_misses(light: Table, memory: np.ndarray, fits: np.ndarray, limit: int = 20) -> Table:
    """The lightest non-fitting plan of each structure that fits with none of its switches."""
    if not len(light["tp"]):
        return {}
    fit_struct = np.zeros(int(light["_struct"].max()) + 1, dtype=bool)
    np.logical_or.at(fit_struct, light["_struct"], fits)
    idx = np.nonzero(~fit_struct[light["_struct"]])[0]
    idx = idx[np.argsort(memory[idx], kind="stable")]
    _, first = np.unique(light["_struct"][idx], return_index=True)
    idx = idx[np.sort(first)][:limit]
    out = _take(light, idx)
    out["_memory"] = memory[idx]
    return out


def _level2(space: Space, model, ev: Evaluator, k: int, mem_ok, lower, seed_ties, seed_score):
    """Every switch combination of the structures whose bound is within the k-th best unit score."""
    s = space.structure
    order = np.nonzero(mem_ok)[0]
    order = order[np.argsort(lower[order], kind="stable")]
    expanded = np.zeros(len(s["tp"]), dtype=bool)
    units: list[Table] = []
    per_struct = max(1, len(space.recompute) * len(space.zero_stages) * len(space.precision) * 2)
    step = max(1, _LEVEL2_CHUNK_PLANS // per_struct)
    scores, ties = np.zeros(0), np.zeros((0, 4), dtype=np.int64)
    pos = 0
    while pos < len(order):
        pending = ~expanded[seed_ties[:, 0]]
        ub = _kth(np.concatenate([scores, seed_score[pending]]), k, np.concatenate([ties, seed_ties[pending]]))
        chunk = order[pos:pos + step]
        chunk = chunk[lower[chunk] <= ub]
        if not len(chunk):
            break
        pos += step
        table = expand_switches(space, model, _take(s, chunk))
        table["_struct"] = chunk[table["_struct"]]
        res = ev(table)
        expanded[chunk] = True
        keep = res["fits"]
        table = _take(table, keep)
        table["_score"], table["_bound"] = res["score"][keep], res["bound"][keep]
        units.append(table)
        scores = np.concatenate([scores, table["_score"]])
        ties = np.concatenate([ties, _tie_key(table)])
    return _concat(units)


def _level3(space: Space, ev: Evaluator, k: int, units: Table) -> Table:
    """Every refinement of the units whose bound is within the k-th best; the best refinement per unit."""
    if not units:
        return {}
    n = len(units["tp"])
    order = np.argsort(units["_bound"], kind="stable")
    best_score = units["_score"].copy()
    ties = _tie_key(units)
    best_rows: list[Table] = []
    step = 2000
    pos = 0
    while pos < n:
        ub = _kth(best_score, k, ties)
        chunk = order[pos:pos + step]
        chunk = chunk[units["_bound"][chunk] <= ub]
        if not len(chunk):
            break
        pos += step
        base = {key: v for key, v in _take(units, chunk).items() if key not in ("_score", "_bound")}
        table = expand_refinements(space, base)
        res = ev(table)
        score = np.where(res["fits"], res["score"], np.inf)
        pick = _argmin_per_group(table["_unit"], score)
        rows = _take(table, pick)
        rows["_score"], rows["_memory"] = score[pick], res["memory"][pick]
        rows["_unit"] = chunk[rows["_unit"]]
        best_score[rows["_unit"]] = rows["_score"]
        best_rows.append(rows)
    out = _concat(best_rows)
    if not out:
        return {}
    out = _take(out, np.isfinite(out["_score"]))
    out = _take(out, _distinct(_tie_key(out), out["_score"], out["_memory"]))
    ranked = np.lexsort((out["_unit"], out["_score"]))
    return _take(out, ranked[:k])


def _argmin_per_group(group: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Index of the smallest score in each group (first on ties), groups in increasing order."""
    idx = np.lexsort((np.arange(len(score)), score, group))
    first = np.ones(len(idx), dtype=bool)
    first[1:] = group[idx][1:] != group[idx][:-1]
    return idx[first]


def search(model, cluster, num_gpus: int, global_batch_size: int, seq_length: int, *,
           constraints: Constraints | None = None, objective: str = "step_time", top: int = 10,
           parameters: Parameters | None = None) -> SearchResult:
    """The best ``top`` units for ``model`` on ``num_gpus`` GPUs of ``cluster``, best first (see module doc),
    every plan priced under ``parameters`` (None, this being a public entry point: :func:`load_parameters`).

    Raises :class:`~tierwise.errors.PlanError` when the input admits no plan at all; when plans exist but
    none fits memory the result has no plans and the nearest misses in ``infeasible``.
    """
    if objective not in OBJECTIVES:

        raise PlanError(f"--objective {short_repr(objective, 40)} is unknown; choose one of {', '.join(OBJECTIVES)}")
    if top < 1:

        raise PlanError(f"top={top}: ask for at least one plan (--top >= 1)")
    space = build_space(model, cluster, num_gpus, global_batch_size, seq_length, constraints)
    k = top
    ev = Evaluator(model, cluster, space, objective,
                   parameters=parameters if parameters is not None else load_parameters())
    mem_ok, lower, seed_struct, seed_score, misses = _level1(space, model, ev)
    units = _level2(space, model, ev, k, mem_ok, lower, seed_struct, seed_score) if mem_ok.any() else {}
    best = _level3(space, ev, k, units)
    notes = []
    if ev.bound_violations:
        notes.append(f"{ev.bound_violations} plans had a step time below their compute bound; the estimator's "
                     "composition changed and the pruning may not be exact")
    return SearchResult(model=model, cluster=cluster, space=space, objective=objective,
                        plans=best or {k2: v[:0] for k2, v in space.structure.items()},
                        num_evaluated=ev.num_evaluated, num_feasible=ev.num_feasible,
                        space_size=space_size(space, model), infeasible=misses, notes=notes)


def brute_force(model, cluster, space: Space, objective: str = "step_time", *, parameters: Parameters | None = None):
    """Every plan of ``space`` through the estimator: (table with ``_score``, ``_fits``), for tests and docs
    (an entry point: ``parameters`` None is :func:`load_parameters`)."""
    units = expand_switches(space, model, space.structure)
    units.pop("_struct")
    table = expand_refinements(space, units)
    res = Evaluator(model, cluster, space, objective,
                    parameters=parameters if parameters is not None else load_parameters())(table)
    table["_score"], table["_fits"] = res["score"], res["fits"]
    return table

