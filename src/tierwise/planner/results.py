"""The planner's answers as typed records (issue 27: results as records, the JSON documents finished in
:mod:`tierwise.documents.training`).

* :class:`RankedPlan` - one ranked plan: the :class:`~tierwise.specs.plan.Plan` record, the tier each axis's
  group spans, and the estimator's figures for it (``estimate``, the same block ``estimate --json`` prints);
* :class:`NearMiss` - a plan that does not fit memory (``plan --show-infeasible``);
* :class:`GpuUse` - the GPUs a plan uses of those asked (:mod:`tierwise.planner.gpus`);
* :class:`PlanAnswer` - what ``tierwise plan`` answers (:func:`tierwise.planner.answer.answer_plans`);
* :class:`ScalePoint` and :class:`ScaleAnswer` - what ``tierwise scale`` answers
  (:func:`tierwise.planner.answer.answer_scale`).

Library callers that need plans (``plan --goodput``'s ranking, ``goodput``'s best plan) read the ``Plan``
records here; nothing rebuilds a plan from a document. The figures are computed where the planner computes
them (:mod:`tierwise.planner.answer`, :mod:`tierwise.planner.explain`); these records only hold them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierwise.specs.plan import Plan

__all__ = ["RankedPlan", "NearMiss", "GpuUse", "PlanAnswer", "ScalePoint", "ScaleAnswer"]


@dataclass(frozen=True)
class RankedPlan:
    """One plan of the ranking: the plan, the tier of each axis (``tp``...``dp`` -> ``scale_up``...), the
    estimator's result block for it (:func:`tierwise.estimate.scenario.result_dict`), and for the winner why its
    recompute / offload choice (:func:`tierwise.planner.why.memory_choice`)."""

    plan: Plan
    tiers: Mapping[str, str]
    estimate: Mapping[str, Any]
    recompute_why: str | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.estimate["tokens_per_s"]


@dataclass(frozen=True)
class NearMiss:
    """The lightest plan of a structure that does not fit memory, with its one-line label."""

    plan: Plan
    label: str
    memory_per_gpu_bytes: float
    capacity_bytes: float


@dataclass(frozen=True)
class GpuUse:
    """GPUs asked and used (the rest idle: hot spares), and the racks or servers used; ``note`` says why a plan
    leaves GPUs idle (None when it uses them all)."""

    asked: int
    used: int
    unit: str
    units_used: int
    gpus_per_unit: int
    note: str | None = None

    @property
    def idle(self) -> int:
        return self.asked - self.used

    @property
    def summary(self) -> str:
        return f"uses {self.used:,} GPUs, {self.units_used:,} {self.unit}; {self.idle:,} idle"


@dataclass(frozen=True)
class PlanAnswer:
    """The planner's ranked plans, best first, with the explanation (its lines), the search's counts, the
    framework's assumptions and notes; ``infeasible`` only when asked for, ``gpus`` when the count was chosen
    by :func:`tierwise.planner.gpus.answer_any_gpus`."""

    model: str
    cluster: str
    num_gpus: int
    global_batch_size: int
    seq_length: int
    objective: str
    plans: tuple[RankedPlan, ...]
    explanation: tuple[str, ...]
    num_evaluated: int
    num_feasible: int
    space_size: int
    notes: tuple[str, ...] = ()
    framework: str | None = None
    assumed: tuple[str, ...] = ()
    infeasible: tuple[NearMiss, ...] | None = None
    gpus: GpuUse | None = None

    @property
    def gpus_used(self) -> int:
        """GPUs the plans run on (those asked when no idle count was chosen)."""
        return self.gpus.used if self.gpus is not None else self.num_gpus


@dataclass(frozen=True)
class ScalePoint:
    """One GPU count of ``scale``: its best plan (None with the ``reason`` when none), the GPUs it uses, and its
    tokens/s per GPU against the first point with a plan."""

    num_gpus: int
    best: RankedPlan | None
    efficiency_vs_linear: float | None = None
    gpus: GpuUse | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ScaleAnswer:
    """Best plan per GPU count at a fixed global batch, the knee (None when every doubling pays) and the
    explanation's lines; ``precision`` is the one the curve keeps."""

    model: str
    cluster: str
    global_batch_size: int
    seq_length: int
    objective: str
    precision: str | None
    points: tuple[ScalePoint, ...]
    knee_num_gpus: int | None
    explanation: tuple[str, ...]
