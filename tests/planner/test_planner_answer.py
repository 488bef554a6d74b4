"""The "nothing fits" answer and the scale knee."""

from __future__ import annotations

import pytest

from tierwise.errors import PlanError
from tierwise.planner.answer import _knee, parse_gpu_range
from tierwise.planner.capacity import _lightest_fit, min_gpus_to_fit
from tierwise.planner.results import RankedPlan, ScalePoint
from tierwise.planner.space import Constraints
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.parameters import load_parameters
from tierwise.specs.plan import Plan


def test_min_gpus_is_the_first_count_that_fits():
    model, cluster = load_model("llama3.1-70b"), load_cluster("dgx-h100")
    c = Constraints()
    fit = min_gpus_to_fit(model, cluster, 2, 64, 4096, c)
    assert fit is not None and fit.memory_fraction <= 1.0
    assert fit.plan.num_gpus == fit.num_gpus
    below = fit.num_gpus - (cluster.gpus_per_node if fit.num_gpus > cluster.gpus_per_node else 1)
    assert _lightest_fit(model, cluster, below, 64, 4096, c, load_parameters()) is None


def test_parse_gpu_range():
    assert parse_gpu_range("8:64") == [8, 16, 32, 64]
    assert parse_gpu_range("8,24,72") == [8, 24, 72]
    with pytest.raises(PlanError):
        parse_gpu_range("0:8")


def _point(n, tps, bubble):
    plan = Plan.of(tp=1, pp=1, dp=n, global_batch_size=64, seq_length=4096)
    breakdown = {"recompute_s": 0.0, "bubble_s": bubble, "optimizer_s": 0.0, "shard_copy_s": 0.0, "per_axis": {}}
    best = RankedPlan(plan=plan, tiers={}, estimate={"tokens_per_s": tps, "scaling_efficiency": 0.9,
                                                     "step_time_s": 1.0, "breakdown": breakdown})
    return ScalePoint(num_gpus=n, best=best, efficiency_vs_linear=tps / n / 100.0)


def test_knee_is_the_first_doubling_below_one_and_a_half():
    pts = [_point(8, 800.0, 0.1), _point(16, 1500.0, 0.12), _point(32, 2000.0, 0.4), _point(64, 2100.0, 0.6)]
    knee, lines = _knee(pts)
    assert knee == 32
    assert "stops paying at 32" in lines[-1] and "bubble grew from 12% to 40%" in lines[-1]
    assert "tp 1 x pp 1 x dp 8" in lines[0]
