"""Activation offload as a planner choice: a ``recompute: none`` plan without pipeline parallelism that does not
fit memory takes the fewest offloaded layers that make it fit (Megatron-Core ``cpu_offloading_num_layers``;
plan ``activation_offload_layers``, priced by :mod:`tierwise.parallel.offload`).

**Why the fewest layers, and only those.** For one plan (everything but ``k`` fixed) the estimator's step is

    step(k) = step(0) + m k [max(0, x - f) + max(0, x - b)]

(``estimate/step.py`` ``_offload``; :func:`tierwise.parallel.offload.activation_offload`): ``x`` one
layer's copy over the host link, ``f`` / ``b`` one layer's forward / backward, none of which depends on ``k``,
and no other term of the step reads ``k``. So ``step(k)`` is non-decreasing in ``k``: a larger ``k`` is never
faster, and it is strictly slower as soon as one layer's copy outlasts its forward or its backward (every
PCIe 5 part with large activations). Memory on the one stage (``pp = 1``) is

    mem(k) = mem(0) - k a,      a = held micro-batches x one layer's saved activations (``footprint.py``)

decreasing and linear in ``k`` (``1 <= k <= L - 1``, Megatron-Core keeps the last layer). The plan's best
offload is therefore the smallest ``k`` with ``mem(k) <= capacity``, ``k* = ceil((mem(0) - capacity) / a)``,
and no ``k`` at all when ``mem(L - 1)`` exceeds the capacity; when ``mem(0)`` fits, ``k = 0`` (no offload)
is at least as fast. The offloaded bytes, ``host(k) = k a``, must also fit the host DRAM per GPU
(``cluster.host_memory_bytes``, ``estimate/footprint.py``); they grow with ``k``, so ``k*`` uses the least host
memory of any ``k`` that fits HBM and the plan fits when ``host(k*)`` does: HBM alone decides ``k*``, the host
check comes after. With copies fully hidden (``x <= f`` and ``x <= b``) every fitting ``k`` ties and the
smallest moves the least host traffic. The planner therefore does not add ``k`` as an axis: ``recompute:
none`` on ``pp = 1`` means "none, with the fewest offloaded layers that fit", resolved per plan.

**Resolving ``k*`` from the estimator.** Both ends of the line come from the estimator itself: ``(step,
mem)(k0)`` (the plan as given, ``k0`` 0 or a floor, below) and ``(step, mem)(L - 1)``; ``a = (mem(k0) -
mem(L - 1)) / (L - 1 - k0)``. A plan where ``mem(L - 1)`` does not fit keeps ``k0`` (and does not fit); the
others take ``k*`` with their step and memory read off the same two points (both are linear in ``k``, above:
exact to rounding, ~1e-15 relative), which costs one more estimate per plan instead of two. A plan whose
interpolated memory lands within 1e-9 of the capacity is estimated at ``k*`` outright (and at ``k* + 1`` if
rounding left it a hair above), so no fit is decided by rounding. The planner's documents re-estimate the plans
they print, so every printed figure is the estimator's own.

A given ``k0 > 0`` is a floor: level 3 of the search refines units whose ``k*`` was resolved at the default
refinement, and the refinements only add memory (HSDP, EP overlap; :mod:`tierwise.planner.branch_and_bound`),
so ``k0 - 1`` cannot fit a refinement either, and the refinement's own ``k*`` is ``k0`` or more.
"""

from __future__ import annotations

import numpy as np

from tierwise.specs.framework import OFFLOAD_FRAMEWORKS
from tierwise.specs.plan import RECOMPUTE

__all__ = ["fewest_offload", "offload_searched"]

COLUMN = "activation_offload_layers"
_NONE = RECOMPUTE.index("none")


def offload_searched(model, cluster, recompute: tuple[str, ...], wanted: bool,
                     framework: str) -> tuple[bool, str]:
    """Whether a space searches activation offload, and the ``assumed`` line when it is asked for but cannot be
    (empty when searched or not asked): it needs ``recompute: none`` allowed, at least two layers, a host-link
    figure to price the copies, and a framework that runs Megatron-Core's CPU offloading (any, when none is
    named: tierwise's plan defaults are Megatron-Core's)."""
    if not wanted:
        return False, ""
    if framework and framework not in OFFLOAD_FRAMEWORKS:
        return False, (f"activation offload not searched ({framework} has no Megatron-Core cpu_offloading; "
                       f"it is {', '.join(OFFLOAD_FRAMEWORKS)}'s)")
    if cluster.host_bytes_per_s <= 0:
        return False, (f"activation offload not searched (cluster {cluster.name} gives no host-link bandwidth "
                       "to price the copies; set host_bandwidth)")
    if "none" not in recompute or model.num_layers < 2:
        return False, ""
    return True, ""


def fewest_offload(score, num_layers: int, table: dict, res: dict) -> dict:
    """``res`` (the evaluation of ``table``: ``score``, ``bound``, ``raw_bound``, ``fits``, ``memory`` as a share
    of the capacity) with each eligible plan that does not fit moved to its fewest offloaded layers that fit
    (module docstring); ``res["offload"]`` holds every row's layers. ``score(table)`` evaluates a table."""
    k0 = np.asarray(table.get(COLUMN, np.zeros(len(table["tp"]), dtype=np.int64)), dtype=np.int64)
    out = {**{key: np.array(v) for key, v in res.items()}, "offload": k0.copy()}
    top = num_layers - 1
    idx = np.nonzero((table["recompute"] == _NONE) & (table["pp"] == 1) & ~res["fits"] & (k0 < top))[0]
    if not len(idx):
        return out
    sub = {key: v[idx] for key, v in table.items()}
    sub[COLUMN] = np.full(len(idx), top, dtype=np.int64)
    heaviest = score(sub)
    can = heaviest["memory"] <= 1.0  # HBM alone: host memory is checked at k* below (it grows with k)
    idx, sub, base = idx[can], {key: v[can] for key, v in sub.items()}, k0[idx][can]
    if not len(idx):
        return out
    end = {key: v[can] for key, v in heaviest.items()}
    mem0 = res["memory"][idx]
    per_layer = (mem0 - end["memory"]) / np.maximum(top - base, 1)
    k = base + np.ceil((mem0 - 1.0) / np.maximum(per_layer, 1e-300) - 1e-9).astype(np.int64)
    k = np.clip(k, base + 1, top)
    share = (k - base) / np.maximum(top - base, 1)  # where k* lies between the two estimated ends
    for key in ("score", "raw_bound", "memory", "host"):
        out[key][idx] = res[key][idx] + share * (end[key] - res[key][idx])
    out["bound"][idx] = np.minimum(out["raw_bound"][idx], out["score"][idx])
    out["fits"][idx] = (out["memory"][idx] <= 1.0) & (out["host"][idx] <= 1.0)
    out["offload"][idx] = k
    near = np.abs(out["memory"][idx] - 1.0) <= 1e-9
    if near.any():
        _exact(score, out, idx[near], {key: v[near] for key, v in sub.items()}, k[near], top)
    return out


def _exact(score, out: dict, idx: np.ndarray, sub: dict, k: np.ndarray, top: int) -> None:
    """Estimate rows ``idx`` at ``k`` outright, and at ``k + 1`` where rounding left ``k`` a hair above the
    capacity (module docstring); ``out`` updated in place."""
    for _ in range(2):
        sub[COLUMN] = k
        got = score(sub)
        for key in got:
            out[key][idx] = got[key]
        out["offload"][idx] = k
        left = ~got["fits"] & (k < top)
        if not left.any():
            return
        idx, k, sub = idx[left], k[left] + 1, {key: v[left] for key, v in sub.items()}
