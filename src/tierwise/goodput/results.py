"""The goodput model's results as typed records (issue 27: results as records, the JSON document finished in
:mod:`tierwise.documents.training`).

* :class:`FailureModel` - the parts a job depends on, their counts and rates, and the job's MTTI;
* :class:`CheckpointCosts` - a checkpoint's size and times (arrays over plans, or one plan's floats);
* :class:`GoodputEvaluation` - :func:`tierwise.goodput.model.evaluate`'s arrays over a batch of plans;
* :class:`GoodputEstimate` - one plan's goodput, what ``goodput --json`` prints
  (:func:`tierwise.documents.training.goodput_document`);
* :class:`GoodputRanking` and :class:`GoodputScaling` - the blocks ``plan --goodput`` and ``scale --goodput``
  add to the planner's documents (:mod:`tierwise.goodput.ranking`; added by
  :func:`tierwise.documents.training.with_goodput_ranking` and ``with_goodput_scaling``).

Formulas and sources are with the code that computes the figures (:mod:`tierwise.goodput.model`,
:mod:`.checkpoint`, :mod:`.interval`, :mod:`.domain`); docs/goodput.md has them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tierwise.goodput.rates import RateCatalog
from tierwise.goodput.simulate import SimulatedEttr

__all__ = ["ComponentRate", "FailureModel", "CheckpointCosts", "LostTime", "GoodputEvaluation", "GoodputEstimate",
           "PlanGoodput", "GoodputRanking", "ScaleGoodput", "GoodputScaling"]

DAY_S = 86400.0


@dataclass(frozen=True)
class ComponentRate:
    """One kind of part: how many the job holds and how often they interrupt it (per day)."""

    component: str
    per: str
    """What one part is (:data:`tierwise.goodput.rates.PER`): its count comes from the inventory."""
    kind: str
    """hardware, network, software or maintenance."""
    count: int
    rate_per_part_per_day: float
    rate_per_day: float
    """``count x rate_per_part_per_day``: this component's interruptions of the job per day."""
    source: str
    share: float = 0.0
    """This component's part of the job's interruptions."""


@dataclass(frozen=True)
class FailureModel:
    """The job as a series system: it stops when any part stops, so ``Lambda = sum_i n_i lambda_i`` (independent
    exponential lifetimes) and ``MTTI = 1 / Lambda`` (:func:`tierwise.goodput.model.failure_model`)."""

    components: tuple[ComponentRate, ...]
    interruptions_per_day: float
    mtti_s: float
    """Mean time to interruption, seconds; ``inf`` when no failure is counted."""
    counts: Mapping[str, int]
    """Parts by :data:`tierwise.goodput.rates.PER` (``gpu``, ``host``, ``leaf_switch``, ...)."""
    counted: Any
    """How the parts were counted (text for the document)."""
    assumed: tuple[str, ...]
    rates: RateCatalog
    """The rate catalog used (:func:`tierwise.goodput.rates.load_rates`): repair, restart, storage defaults."""

    @classmethod
    def of(cls, components: Sequence[ComponentRate], *, counts: Mapping[str, int], counted: Any,
           assumed: Sequence[str], rates: RateCatalog) -> FailureModel:
        """The model of ``components`` (their ``share`` filled in): total rate, MTTI."""
        total = sum(c.rate_per_day for c in components)
        rows = tuple(replace(c, share=c.rate_per_day / total if total > 0 else 0.0) for c in components)
        return cls(rows, total, DAY_S / total if total > 0 else math.inf, counts, counted, tuple(assumed), rates)

    def with_count(self, per: str, count: int) -> FailureModel:
        """The same model with ``count`` parts of kind ``per`` (e.g. the scale-up switches of a domain size)."""
        rows = [replace(c, count=count, rate_per_day=count * c.rate_per_part_per_day) if c.per == per else c
                for c in self.components]
        return FailureModel.of(rows, counts={**self.counts, per: count}, counted=self.counted,
                               assumed=self.assumed, rates=self.rates)


@dataclass(frozen=True)
class CheckpointCosts:
    """A checkpoint's size and times (:func:`tierwise.goodput.checkpoint.checkpoint_costs`): arrays over the
    plans, except ``state_bytes`` and ``storage_bytes_per_s`` (the job's); :meth:`at` gives one plan's floats."""

    bytes_per_gpu: Any
    """Weights + optimizer state one GPU holds (bytes)."""
    state_bytes: float
    """The job's distinct state written per checkpoint (bytes)."""
    storage_bytes_per_s: float
    """Aggregate storage bandwidth (write and read)."""
    write_s: Any
    blocking_s: Any
    """``delta``: seconds training stops per checkpoint."""
    drain_s: Any
    """Background write after the blocking copy (asynchronous checkpoints); 0 for a synchronous one."""
    restore_s: Any
    restart_s: Any
    """Failure to resumed progress: detection + restore + one step, or the user's."""

    def at(self, i: int) -> CheckpointCosts:
        """Plan ``i``'s figures as floats."""
        return replace(self, **{k: float(getattr(self, k)[i]) for k in _PER_PLAN_CHECKPOINT})


_PER_PLAN_CHECKPOINT = ("bytes_per_gpu", "write_s", "blocking_s", "drain_s", "restore_s", "restart_s")


@dataclass(frozen=True)
class LostTime:
    """Seconds per day of wall time lost to each cause; they sum to ``total_s = (1 - ETTR) x 86,400``."""

    checkpoint_stalls_s: float
    rework_s: float
    restart_s: float
    total_s: float


@dataclass(frozen=True)
class GoodputEvaluation:
    """:func:`tierwise.goodput.model.evaluate`: arrays over a batch of plans (one model, cluster, GPU count)."""

    checkpoint: CheckpointCosts
    checkpoint_interval_s: np.ndarray
    """Compute seconds between checkpoints (Daly's optimum, or the user's)."""
    young_interval_s: np.ndarray
    """Young's first-order interval, for comparison (``inf`` without failures)."""
    ettr: np.ndarray
    """Effective training time ratio (Daly's expected wall time)."""
    ettr_first_order: np.ndarray
    goodput_tokens_per_s: np.ndarray
    """tokens/s x ETTR."""
    assumed: tuple[str, ...]
    failure_model: FailureModel
    fault_domain: list[dict]
    """Per plan: the fault domain block of the document (:func:`tierwise.goodput.domain.fault_domain` with the
    spare pool at p99)."""
    spare_gpus_p99: np.ndarray

    def __len__(self) -> int:
        return len(self.ettr)


@dataclass(frozen=True)
class GoodputEstimate:
    """One plan's goodput: failures, checkpoints, ETTR, fault domain and spares (:func:`tierwise.goodput.goodput`);
    :func:`tierwise.documents.training.goodput_document` is its ``goodput --json`` document."""

    model: str
    cluster: str
    num_gpus: int
    plan: Any
    """The :class:`~tierwise.specs.plan.Plan` priced."""
    plan_source: str
    step_time_s: float
    tokens_per_s: float
    failure_model: FailureModel
    checkpoint: CheckpointCosts
    """This plan's checkpoint figures (floats)."""
    checkpoint_mode: str
    """sync, async or given (the blocking seconds were given)."""
    checkpoint_interval_s: float
    young_interval_s: float
    interval_source: str
    """daly or given."""
    ettr: float
    ettr_first_order: float
    goodput_tokens_per_s: float
    fault_domain: dict
    goodput_tokens_per_s_per_provisioned_gpu: float
    """Goodput over the job's GPUs plus the spares held at p99."""
    lost_time_per_day: LostTime
    days: float
    time_to_train: dict | None
    """With ``tokens``: seconds and days to train them at the goodput, and failure-free days."""
    ettr_simulated: SimulatedEttr | None
    """With ``runs``: the seeded Monte Carlo (:mod:`tierwise.goodput.simulate`)."""
    assumed: tuple[str, ...]
    explanation: tuple[str, ...]

    @property
    def mtti_s(self) -> float:
        """Mean time to interruption, seconds (``inf`` without failures)."""
        return self.failure_model.mtti_s

    @property
    def interruptions_per_day(self) -> float:
        return self.failure_model.interruptions_per_day


@dataclass(frozen=True)
class PlanGoodput:
    """One of the planner's plans under ``plan --goodput`` (field order = the JSON block's key order)."""

    ettr: float
    goodput_tokens_per_s: float
    adjusted_tokens_per_s: float
    """tokens/s x ETTR x N / (N + spare GPUs at p99)."""
    fault_unit: str
    gpus_unavailable_per_failure: int
    spare_gpus_p99: int
    """The spare GPUs the plan's fault unit needs at p99 (whole units, as the fault domain gives them)."""
    checkpoint_interval_s: float
    checkpoint_bytes_per_gpu: float
    step_rank: int
    """The plan's rank by step time (1 = the planner's best)."""


@dataclass(frozen=True)
class GoodputRanking:
    """``plan --goodput``: the planner's plans re-ranked by goodput-adjusted throughput
    (:func:`tierwise.goodput.ranking.goodput_ranking`)."""

    plans: tuple[PlanGoodput, ...]
    """In the planner's order (by step time)."""
    order: tuple[int, ...]
    """Indices into ``plans``, best adjusted throughput first (stable: ties keep the step-time order)."""
    mtti_s: float
    interruptions_per_day: float
    assumed: tuple[str, ...]


@dataclass(frozen=True)
class ScaleGoodput:
    """One ``scale --goodput`` point (field order = the JSON block's key order)."""

    ettr: float
    goodput_tokens_per_s: float
    adjusted_tokens_per_s: float
    """Goodput x GPUs used / max(GPUs asked, GPUs used + spares at p99): idle and spare GPUs are held too."""
    mtti_s: float
    spare_gpus_p99: float


@dataclass(frozen=True)
class GoodputScaling:
    """``scale --goodput``: a block per point that has a plan (by index into the points), and the knee."""

    points: Mapping[int, ScaleGoodput]
    knee_num_gpus: int | None
    """The first GPU count whose doubling grows the adjusted goodput less than 1.5x; ``None`` if none does."""
