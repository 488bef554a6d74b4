"""Step-time estimation, vectorized over plans (see :mod:`tierwise.estimate.step`)."""

from tierwise.estimate.step import AXES, TIERS, StepEstimates, estimate

__all__ = ["estimate", "StepEstimates", "AXES", "TIERS"]
