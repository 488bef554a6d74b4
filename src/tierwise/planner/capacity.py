"""The "nothing fits" answer: the fewest GPUs on which some plan fits memory.

A GPU count fits when one of its structures fits with its lightest switches (the memory screen of
:func:`tierwise.planner.branch_and_bound.light_variants`, the same arrays the search uses). Counts are tried
by doubling from the count asked for, then by bisection over multiples of the host size (``gpus_per_node``)
between the last count that failed and the first that fitted. Bisection assumes that more GPUs never need
more memory per GPU, which holds for the sharding the model offers (more ranks only divide further) except
where divisibility breaks it; the answer is then the smallest count found, not a proof of minimality.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.errors import PlanError
from tierwise.planner.branch_and_bound import Evaluator, light_variants
from tierwise.planner.space import Constraints, build_space, to_batch
from tierwise.specs.parameters import Parameters, load_parameters

__all__ = ["MinimumFit", "min_gpus_to_fit"]

_MAX_GPUS = 1 << 21


@dataclass(frozen=True)
class MinimumFit:
    num_gpus: int
    plan: object
    """The lightest fitting plan at that count (a :class:`~tierwise.specs.plan.Plan`)."""
    memory_fraction: float


def _lightest_fit(model, cluster, num_gpus: int, gbs: int, seq: int, c: Constraints, parameters: Parameters):
    try:
        space = build_space(model, cluster, num_gpus, gbs, seq, c)
    except PlanError:
        return None
    light = light_variants(space, model)
    res = Evaluator(model, cluster, space, "step_time", parameters=parameters)(light)
    if not res["fits"].any():
        return None
    i = int(np.argmin(np.where(res["fits"], res["memory"], np.inf)))
    return to_batch(light, gbs, seq).plan(i), float(res["memory"][i])


def min_gpus_to_fit(model, cluster, start: int, global_batch_size: int, seq_length: int,
                    constraints: Constraints | None = None, *,
                    parameters: Parameters | None = None) -> MinimumFit | None:
    """The fewest GPUs above ``start`` with a plan that fits, or None up to 2^21 GPUs (an entry point:
    ``parameters`` None is :func:`load_parameters`)."""
    c = constraints or Constraints()
    parameters = parameters if parameters is not None else load_parameters()
    lo, hi, found = start, max(start, 1) * 2, None
    while hi <= _MAX_GPUS:
        found = _lightest_fit(model, cluster, hi, global_batch_size, seq_length, c, parameters)
        if found:
            break
        lo, hi = hi, hi * 2
    if not found:
        return None
    step = cluster.gpus_per_node if lo >= cluster.gpus_per_node else 1
    candidates = [k * step for k in range(lo // step + 1, hi // step + 1)] + ([hi] if hi % step else [])
    best = (hi, found)
    left, right = 0, len(candidates) - 1  # candidates[right] == hi fits
    while left < right:
        mid = (left + right) // 2
        got = _lightest_fit(model, cluster, candidates[mid], global_batch_size, seq_length, c, parameters)
        if got:
            right, best = mid, (candidates[mid], got)
        else:
            left = mid + 1
    count, (plan, memory) = best
    return MinimumFit(num_gpus=count, plan=plan, memory_fraction=memory)
