"""Seeded Monte Carlo of a training run under random interruptions (vectorized over runs).

Each part fails as a Poisson process (exponential inter-arrival times) with its rate times its count; the
job sees the superposition, a Poisson process of rate ``Lambda = sum(lambda_i)`` whose every event is part
``i`` with probability ``lambda_i / Lambda`` (the minimum of independent exponentials). A run alternates:

* **compute**: segments of ``tau`` work plus ``delta`` checkpoint stall; a checkpoint is durable ``drain``
  after its stall ends (asynchronous writes; 0 for synchronous). An interruption after ``X`` loses
  everything after the last durable checkpoint;
* **wait**: when the failed part's unit must be replaced and ``spares`` is given, the restart waits for a
  spare; the failed unit returns to the pool ``repair_s`` after it failed (without ``spares`` a spare is
  always there);
* **restart**: ``R`` seconds, itself interruptible (as in Daly's model).

At the end of the span, the work done since the last checkpoint counts (the run is not interrupted there).
ETTR of a run = useful work / span.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["simulate", "SimulatedEttr", "MAX_EVENTS", "MAX_EVENTS_PER_RUN"]

MAX_EVENTS = 10_000_000
"""Interruptions x runs the simulation draws at most (a few seconds of numpy)."""
MAX_EVENTS_PER_RUN = 50_000
"""Interruptions one run draws at most: the loop steps once per event (vectorized over runs)."""


@dataclass(frozen=True)
class SimulatedEttr:
    """The Monte Carlo's ETTR over its runs (field order = the ``ettr_simulated`` block's key order)."""

    mean: float
    p5: float
    p95: float
    runs: int
    interruptions_mean: float
    """Interruptions per run."""
    spare_wait_s_mean: float
    """Seconds per run spent waiting for a spare (0 without ``spares``)."""
    seed: int | None = None
    """The generator's seed (the same seed draws the same runs)."""
    spares: int | None = None
    """Spare units as the user gave them (``goodput --spares``; ``None``: a spare is always there), where the
    caller records them (:func:`simulate` takes them as replacement slots)."""


def simulate(*, rate_per_s: np.ndarray, needs_unit: np.ndarray, tau: float, delta: float, drain: float,
             restart: float, span_s: float, runs: int, seed: int, spares: int | None = None,
             repair_s: float = 0.0) -> SimulatedEttr:
    """ETTR of ``runs`` independent runs of ``span_s`` seconds; mean, 5th and 95th percentiles, and counts.

    ``rate_per_s``: failures per second of each component (rate x count); ``needs_unit``: whether a failure
    of that component excludes a unit that a spare must replace.
    """
    rng = np.random.default_rng(seed)
    total = float(np.sum(rate_per_s))
    seg = tau + delta
    ettr = np.empty(runs)
    if total <= 0:
        ettr[:] = (span_s // seg * tau + min(span_s % seg, tau)) / span_s
        return _summary(ettr, np.zeros(runs), np.zeros(runs), runs, seed)
    p = np.asarray(rate_per_s, float) / total
    unit_p = float(np.sum(p[np.asarray(needs_unit, bool)]))
    t = np.zeros(runs)
    useful = np.zeros(runs)
    waited = np.zeros(runs)
    count = np.zeros(runs)
    restarting = np.ones(runs, bool) & False
    pool = None if spares is None else np.zeros((runs, max(spares, 1)))
    if pool is not None and spares == 0:
        pool[:] = np.inf  # no spare: wait for the failed unit itself
    active = np.ones(runs, bool)
    while active.any():
        idx = np.nonzero(active)[0]
        x = rng.exponential(1.0 / total, idx.size)
        rs = restarting[idx]
        # restart phase: done if no failure within R
        done_r = rs & (x >= restart)
        t[idx[done_r]] += restart
        restarting[idx[done_r]] = False
        fail_r = rs & (x < restart)
        # compute phase
        cs = ~rs
        end = cs & (t[idx] + x >= span_s)
        left = span_s - t[idx[end]]
        useful[idx[end]] += np.floor(left / seg) * tau + np.minimum(np.mod(left, seg), tau)
        t[idx[end]] = span_s
        active[idx[end]] = False
        fail_c = cs & ~end
        xc = x[fail_c]
        durable = np.floor(np.maximum(xc - drain, 0.0) / seg)
        useful[idx[fail_c]] += durable * tau
        failed = fail_r | fail_c
        fi = idx[failed]
        t[fi] += x[failed]
        count[fi] += 1
        restarting[fi] = True
        if pool is not None and fi.size:
            _wait_for_spares(rng, fi, t=t, pool=pool, waited=waited, unit_p=unit_p, spares=spares,
                             repair_s=repair_s)
        over = active & (t >= span_s)
        active[over] = False
    return _summary(np.minimum(useful, span_s) / span_s, count, waited, runs, seed)


def _wait_for_spares(rng: np.random.Generator, fi: np.ndarray, *, t: np.ndarray, pool: np.ndarray,
                     waited: np.ndarray, unit_p: float, spares: int, repair_s: float) -> None:
    """Runs ``fi`` just failed: those whose failure excludes a unit (probability ``unit_p``) wait for a spare.

    The earliest-free slot of each run's ``pool`` serves it; with ``spares == 0`` the run waits ``repair_s``
    for its own unit. Updates ``t``, ``waited`` and ``pool`` in place.
    """
    hit = rng.random(fi.size) < unit_p
    hi = fi[hit]
    if hi.size:
        slot = np.argmin(pool[hi], axis=1)
        avail = pool[hi, slot]
        wait = np.where(np.isinf(avail), repair_s, np.maximum(avail - t[hi], 0.0))
        waited[hi] += wait
        if spares:
            pool[hi, slot] = t[hi] + repair_s
        t[hi] += wait


def _summary(ettr: np.ndarray, count: np.ndarray, waited: np.ndarray, runs: int, seed: int) -> SimulatedEttr:
    return SimulatedEttr(mean=float(ettr.mean()), p5=float(np.percentile(ettr, 5)),
                         p95=float(np.percentile(ettr, 95)), runs=runs, interruptions_mean=float(count.mean()),
                         spare_wait_s_mean=float(waited.mean()), seed=seed)
