"""Max-min fair rates (Bertsekas & Gallager, *Data Networks*, 2nd ed., section 6.5.2).

Every unit (a flow, or a whole pipelined ring that must move in lock step) crosses resources (links or
adaptive-routing link groups) with a multiplicity ``A[r, u]`` (a ring crossing a leaf's uplinks twice
counts 2). Progressive filling raises all unfrozen rates together until some resource saturates, freezes
the units crossing it, and repeats. We run it bottleneck level by bottleneck level: the next resources
to saturate are those with the smallest fair share ``residual_r / sum_{unfrozen u} A[r,u]``; their
unfrozen units freeze at exactly that share, and only the entries of those units update the residuals
of the other resources. Each unit is frozen once, so the sparse work is O(nnz(A)) overall plus O(#resources)
per level -- fast enough for a million flows.

The result is the unique max-min fair allocation: no unit's rate can rise without lowering the rate of a
unit that is no faster (Bertsekas & Gallager, section 6.5.2).
"""

from __future__ import annotations

import numpy as np

__all__ = ["incidence", "max_min_rates"]


def incidence(unit: np.ndarray, resource: np.ndarray, num_units: int, num_resources: int, weight=None):
    """Sparse ``A`` (resources x units) from (unit, resource) pairs; repeated pairs add up.

    ``weight`` (per pair, default 1) is the bytes a flow moves per byte of its unit's progress (a tree
    edge carries half of a double-binary-tree channel's buffer)."""
    from scipy import sparse

    keep = resource >= 0
    data = np.ones(int(keep.sum())) if weight is None else np.asarray(weight, dtype=float)[keep]
    A = sparse.coo_matrix((data, (resource[keep], unit[keep])), shape=(num_resources, num_units))
    return A.tocsr()


def _gather(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions in a CSR's data/indices arrays of all entries of ``rows``."""
    starts, ends = indptr[rows], indptr[rows + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.cumsum(np.r_[0, lengths[:-1]]), lengths)
    return offsets + np.arange(total)


def max_min_rates(A, capacity: np.ndarray, active: np.ndarray | None = None, rel_tol: float = 1e-9,
                  AT=None) -> np.ndarray:
    """Max-min fair rate of each unit (column of ``A``); a unit that crosses no resource gets ``inf``.

    A resource of capacity 0 crossed by a unit gives it rate 0 (callers report it unreachable). Units
    with ``active`` False are ignored (rate 0). Resources whose shares lie within ``rel_tol`` of the
    smallest saturate in the same round (each unit then gets the smallest share among the batch's
    resources it crosses, which never over-fills a resource). ``AT`` is ``A.T`` as CSR when the caller
    already has it (the event-driven loop solves the same ``A`` many times).
    """
    num_res, num_units = A.shape
    A = A.tocsr()
    if AT is None:
        AT = A.T.tocsr()
    stamp = np.empty(num_units, dtype=np.int64)  # duplicate removal by last-writer-wins, O(k) not a sort
    if active is None:
        active = np.ones(num_units, dtype=bool)
    frozen = ~active
    rate = np.zeros(num_units)
    residual = np.asarray(capacity, dtype=float).copy()
    load = np.asarray(A @ active.astype(float)).ravel()
    crosses = np.diff(AT.indptr) > 0
    rate[active & ~crosses] = np.inf
    frozen = frozen | ~crosses
    done = load <= 0
    share = np.full(num_res, np.inf)
    unit_rate = np.full(num_units, np.inf)
    while True:
        live = ~done
        if not live.any():
            break
        share[live] = np.maximum(residual[live], 0.0) / load[live]
        m = share[live].min()
        batch = np.nonzero(live & (share <= m * (1 + rel_tol)))[0]
        done[batch] = True
        pos = _gather(A.indptr, batch)
        units = A.indices[pos]
        shares = np.repeat(share[batch], np.diff(A.indptr)[batch])
        keep = ~frozen[units]
        units, shares = units[keep], shares[keep]
        if units.size == 0:
            continue
        np.minimum.at(unit_rate, units, shares)
        pos_k = np.arange(units.size)
        stamp[units] = pos_k
        units = units[stamp[units] == pos_k]
        rate[units] = unit_rate[units]
        frozen[units] = True
        where = _gather(AT.indptr, units)
        res = AT.indices[where]
        mult = AT.data[where]
        per_entry_rate = np.repeat(rate[units], np.diff(AT.indptr)[units])
        residual -= np.bincount(res, weights=per_entry_rate * mult, minlength=num_res)
        load -= np.bincount(res, weights=mult, minlength=num_res)
        done |= load <= 1e-9
    return rate
