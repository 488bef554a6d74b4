"""What the planner's search and a brute force are compared on: the best time of each unit (the plan less its
refinements), units differing only in ZeRO stage with the same time counted once (the planner keeps the
lighter one)."""

from __future__ import annotations

import numpy as np

UNIT = ("tp", "pp", "cp", "dp", "ep", "etp", "vpp", "micro_batch_size", "recompute", "zero_stage",
        "sequence_parallel", "precision")


def top_units(table, score, fits, k: int) -> np.ndarray:
    """The ``k`` best distinct unit times of ``table`` (plans that do not fit count as infinitely slow)."""
    score = np.where(fits, score, np.inf)
    key = np.stack([np.asarray(table[c]).astype(np.int64) for c in UNIT], axis=1)
    units, inverse = np.unique(key, axis=0, return_inverse=True)
    best = np.full(len(units), np.inf)
    np.minimum.at(best, inverse.ravel(), score)
    twins = np.delete(units, UNIT.index("zero_stage"), axis=1)
    distinct = {(tuple(t), round(float(b), 9)): b for t, b in zip(twins, best, strict=True) if np.isfinite(b)}
    return np.sort(list(distinct.values()))[:k]
