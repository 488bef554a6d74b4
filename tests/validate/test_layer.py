"""One transformer layer against Korthikanti et al. 2022 Table 4 (training-runs-notes.md, "Extra per-layer data").

22B model (h 6144, 64 heads, TP 8, sequence 2048, micro-batch 4, A100): per-layer forward + backward times
for no recompute, sequence parallelism, full and selective recompute. The estimator's per-layer time (the
step less the optimizer, over 48 layers; it still carries the logits' share, under 0.5 ms) must be within the
issue's 15% row bound of each, and the full-recompute overhead within 5% of the measured ratio.
"""

from __future__ import annotations

import pytest

from tierwise.estimate.step import estimate
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import PlanBatch
from tierwise.specs.plan_mapping import plan_from_mapping

TABLE4_MS = {("none", False): 19.6, ("none", True): 19.0, ("full", False): 27.2, ("selective", False): 20.9,
             ("selective", True): 20.3}


def per_layer_ms(recompute: str, sp: bool) -> float:
    plan = plan_from_mapping({"tp": 8, "global_batch_size": 4, "micro_batch_size": 4, "seq_length": 2048,
                              "recompute": recompute, "sequence_parallel": sp, "zero_stage": 0,
                              "overlap_grad_reduce": False}, num_gpus=8)
    est = estimate(load_model("gpt-22b"), load_cluster("dgx-a100"), PlanBatch.from_plans([plan]))
    return (float(est.step_time_s[0]) - float(est.optimizer_s[0])) / 48 * 1e3


@pytest.mark.parametrize(("setting", "measured_ms"), list(TABLE4_MS.items()))
def test_layer_time_within_15_percent(setting, measured_ms):
    assert per_layer_ms(*setting) == pytest.approx(measured_ms, rel=0.15)


def test_full_recompute_overhead():
    ratio = per_layer_ms("full", False) / per_layer_ms("none", False)
    assert ratio == pytest.approx(27.2 / 19.6, rel=0.05)
