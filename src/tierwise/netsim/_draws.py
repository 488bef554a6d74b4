"""Counting helpers shared by the path-class modules (:mod:`.classes`, :mod:`.dragonfly_classes`).

A hashed choice of one of ``c`` equal next hops is uniform over them (splitmix64 is a mixing hash: Steele
et al., OOPSLA 2014), so the number of ``n`` independent flows taking each is Multinomial(n, 1/c): the law
the path classes draw from above ``HASH_FLOWS_MAX`` flows (the :mod:`.classes` docstring)."""

from __future__ import annotations

import numpy as np

__all__ = ["multinomial_rows", "uniform_counts", "counts_over_mask", "check_counts", "pairs_within"]


def multinomial_rows(rng, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Row i: Multinomial(n[i], p) (numpy's vectorised multinomial; one probability vector for all rows)."""
    n = np.asarray(n, dtype=np.int64)
    return rng.multinomial(n, p) if n.size else np.zeros((0, p.size), dtype=np.int64)


def uniform_counts(rng, n: np.ndarray, count: np.ndarray, width: int) -> np.ndarray:
    """Row i: Multinomial(n[i], uniform over its first ``count[i]`` of ``width`` choices (count 0 as 1))."""
    n = np.asarray(n, dtype=np.int64)
    count = np.broadcast_to(np.maximum(np.asarray(count), 1), n.shape)
    out = np.zeros((n.size, width), dtype=np.int64)
    for c in np.unique(count):
        rows = np.nonzero(count == c)[0]
        out[rows, :c] = rng.multinomial(n[rows], np.full(int(c), 1.0 / c))
    return out


def counts_over_mask(rng, n: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row i: Multinomial(n[i], uniform over the True columns of ``mask[i]``) (a row without one keeps 0)."""
    mask = np.asarray(mask, dtype=bool)
    n = np.where(mask.any(axis=1), np.asarray(n, dtype=np.int64), 0)
    order = np.argsort(~mask, axis=1, kind="stable")  # the True columns first, in order
    drawn = uniform_counts(rng, n, mask.sum(axis=1), mask.shape[1])
    out = np.zeros_like(drawn)
    np.put_along_axis(out, order, drawn, axis=1)
    return out


def check_counts(counts: np.ndarray, totals: np.ndarray) -> None:
    """Hashed or drawn, a row's choices hold exactly the row's flows."""
    if not np.array_equal(counts.sum(axis=1), np.asarray(totals).astype(np.int64)):
        raise AssertionError("path classes' hop choices do not add up to the flows they split")


def pairs_within(labels_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All ordered index pairs (i, j), i == j included, of positions sharing a label (labels sorted)."""
    if labels_sorted.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.r_[0, np.nonzero(np.diff(labels_sorted))[0] + 1]
    k = np.diff(np.r_[starts, labels_sorted.size])
    sq = k * k
    g = np.repeat(np.arange(k.size), sq)
    r = np.arange(int(sq.sum())) - np.repeat(np.cumsum(sq) - sq, sq)
    return starts[g] + r // k[g], starts[g] + r % k[g]
