"""Fitting the shared-host cost model of gloo collectives (all ranks on one host, TCP loopback).

The model (copy work and algorithm steps per op, and why on one host it replaces nccl-tests' bus factors)
and its prediction live in :mod:`tierwise.collectives.fitted`, the one prediction rule every reader of a
calibrated tier uses; this module fits its two parameters per size regime on an all-reduce sweep
(:func:`fit_host_copy`) and re-exports the work counts for the measure rung::

    t(op, S, n) = step_latency_s x latency_steps(op, n) + copy_s_per_byte x ring_work_bytes(op, S, n)
                  + memory_s_per_byte x outside_copy_bytes(op, S, n)

Why this form and not others that were tried (measurement history): docs/measure.md, "gloo calibration on
this machine".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tierwise.collectives.fitted import (
    EMULATED_OPS,
    HOST_COPY,
    HOST_COPY_OPS,
    copy_work_bytes,
    host_copy_time,
    latency_steps,
    outside_copy_bytes,
    predict_fitted,
    ring_work_bytes,
)
from tierwise.collectives.volumes import normalize_kind
from tierwise.errors import MeasureError

__all__ = ["MODEL", "HOST_COPY_OPS", "EMULATED_OPS", "ring_work_bytes", "outside_copy_bytes", "copy_work_bytes",
           "latency_steps", "host_copy_time", "fit_host_copy", "HostCopyFit"]

MODEL = HOST_COPY
"""Value of the ``model:`` key of a fitted tier that predicts with the shared-host model."""


@dataclass(frozen=True, kw_only=True)
class HostCopyFit:
    """The two host-copy parameters of one size regime, fitted on all-reduce rows in it."""

    step_latency_s: float
    copy_s_per_byte: float


def fit_host_copy(sizes_bytes, times_s, num_ranks: int, ranges: Sequence[tuple[float, float | None]],
                  op: str = "all-reduce") -> tuple[HostCopyFit, ...]:
    """Per size range ``(min_bytes, max_bytes or None)``: the non-negative least squares of the relative
    error ``sum_i ((a steps_i + c work_i - t_i) / t_i)^2`` over the rows in the range (the same criterion
    as :func:`tierwise.measure.fit.fit_regimes`, with ``steps`` in place of 1 and ``work`` in place of the
    bus bytes). The step count does not depend on ``S``, so this is the regime's own line re-expressed:
    ``a = latency_s / steps`` and ``c = slope / (work per byte)``.

    Raises :class:`MeasureError` when a range holds no row or the sweep is not an all-reduce.
    """
    from scipy.optimize import nnls

    kind = normalize_kind(op)
    if kind != "all-reduce":
        raise MeasureError(f"the host-copy model is fitted on all-reduce rows only, not {kind}")
    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_s, dtype=float)
    out = []
    for lo, hi in ranges:
        top = math.inf if hi is None else float(hi)
        keep = (sizes >= float(lo or 0.0)) & (sizes <= top)
        if not np.any(keep):
            raise MeasureError(f"no all-reduce row between {lo} and {hi} bytes to fit the host-copy model on")
        s, t = sizes[keep], times[keep]
        design = np.column_stack([np.full_like(t, latency_steps(kind, num_ranks)) / t,
                                  np.atleast_1d(copy_work_bytes(kind, s, num_ranks)) / t])
        (a, c), _ = nnls(design, np.ones_like(t))
        out.append(HostCopyFit(step_latency_s=float(a), copy_s_per_byte=float(c)))
    return tuple(out)


def predict_host_copy(regimes: Sequence, op: str, size_bytes, num_ranks, get=None) -> np.ndarray:
    """:func:`tierwise.collectives.fitted.predict_fitted` of a ``host-copy`` tier (kept for callers of the
    measure rung; ``get`` is ignored: regimes are read as objects or mappings alike)."""
    return predict_fitted(regimes, op, size_bytes, num_ranks, model=MODEL)
