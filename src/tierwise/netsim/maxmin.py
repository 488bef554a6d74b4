"""Max-min fair rates by progressive filling (Bertsekas & Gallager, *Data Networks*, 2nd ed., section 6.5.2).

Every unit (a flow, or a whole pipelined ring that must move in lock step) crosses resources (links or
adaptive-routing link groups) with a multiplicity ``A[r, u]`` (a ring crossing a leaf's uplinks twice
counts 2). Start all rates at 0 and raise the rates of all unfrozen units together; a resource saturates
when ``sum_u A[r,u] x rate_u = capacity_r``; units crossing a saturated resource freeze. Each round is two
sparse matrix-vector products, and there are as many rounds as distinct bottleneck levels, which is
few for the symmetric traffic of collectives.

The result is the unique max-min fair allocation: no unit's rate can rise without lowering the rate of a
unit that is no faster (Bertsekas & Gallager, proposition of section 6.5.2).
"""

from __future__ import annotations

import numpy as np

__all__ = ["incidence", "max_min_rates"]


def incidence(unit: np.ndarray, resource: np.ndarray, num_units: int, num_resources: int):
    """Sparse ``A`` (resources x units) from (unit, resource) pairs; repeated pairs add up."""
    from scipy import sparse

    keep = resource >= 0
    data = np.ones(int(keep.sum()))
    A = sparse.coo_matrix((data, (resource[keep], unit[keep])), shape=(num_resources, num_units))
    return A.tocsr()


def max_min_rates(A, capacity: np.ndarray, max_rounds: int = 100_000) -> np.ndarray:
    """Max-min fair rate of each unit (column of ``A``); a unit that crosses no resource gets ``inf``.

    A resource of capacity 0 crossed by a unit gives that unit rate 0 (callers report it unreachable).
    """
    num_res, num_units = A.shape
    AT = A.T.tocsr()
    rate = np.zeros(num_units)
    crosses = np.asarray(AT.sum(axis=1)).ravel() > 0
    rate[~crosses] = np.inf
    active = crosses.copy()
    residual = np.asarray(capacity, dtype=float).copy()
    dead = residual <= 0
    if dead.any():
        frozen = (AT @ dead.astype(float)) > 0
        active &= ~frozen
    for _ in range(max_rounds):
        if not active.any():
            break
        load = A @ active.astype(float)
        used = load > 0
        share = np.full(num_res, np.inf)
        share[used] = residual[used] / load[used]
        delta = share.min()
        rate[active] += delta
        residual[used] -= delta * load[used]
        saturated = used & (share <= delta * (1 + 1e-9))
        frozen = (AT @ saturated.astype(float)) > 0
        active &= ~frozen
    return rate
