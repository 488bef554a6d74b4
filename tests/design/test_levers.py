"""Each communication lever changes DP bytes or exposed DP time by what its method states (issue 17 part 4)."""

import numpy as np
import pytest

from tierwise.errors import SpecError
from tierwise.estimate.levers import Levers, powersgd_factor, with_levers
from tierwise.estimate.step import estimate
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import Plan, PlanBatch
from tierwise.workload.flops import model_shape

MODEL = load_model("llama3.1-8b")
CLUSTER = load_cluster("dgx-h100")
PLAN = Plan.of(tp=8, pp=1, dp=16, global_batch_size=128, seq_length=4096, sequence_parallel=True, zero_stage=0,
            dp_shard=16)


def _est(levers=None, plan=PLAN):
    return estimate(MODEL, with_levers(CLUSTER, levers), PlanBatch.from_plans([plan]))


def test_reduce_dtype_scales_dp_bytes_by_element_size():
    base = _est(Levers(reduce_dtype="fp32")).axis_bytes["dp"][0]
    for dtype, size in (("bf16", 2), ("fp8", 1)):
        assert _est(Levers(reduce_dtype=dtype)).axis_bytes["dp"][0] == pytest.approx(base * size / 4, rel=1e-9)


def test_reduce_dtype_lever_replaces_the_plans_dtype():
    # a plan reducing in bf16 (llm-foundry's and DeepSpeed's default) is still a what-if for fp32 and fp8

    bf16_plan = PLAN.replace(grad_reduce_dtype="bf16")
    fp32 = _est(Levers(reduce_dtype="fp32")).axis_bytes["dp"][0]
    assert _est(plan=bf16_plan).axis_bytes["dp"][0] == pytest.approx(fp32 / 2, rel=1e-9)
    for dtype, size in (("fp32", 4), ("bf16", 2), ("fp8", 1)):
        got = _est(Levers(reduce_dtype=dtype), plan=bf16_plan).axis_bytes["dp"][0]
        assert got == pytest.approx(fp32 * size / 4, rel=1e-9)


def test_powersgd_sends_rank_r_factors():
    shape = model_shape(MODEL)
    gemms = shape.attention_gemms + shape.dense_mlp_gemms
    # by hand: per GEMM shard a x b -> r (a + b)
    r, tp = 4, 8
    sent = total = 0.0
    for g in gemms:
        a = g.out_features / (tp if g.split == "out" else 1)
        b = g.in_features / (tp if g.split == "in" else 1)
        sent += r * (a + b)
        total += a * b
    f = powersgd_factor(gemms, r, np.array([tp]))[0]
    assert f == pytest.approx(sent / total)
    base = _est(Levers(reduce_dtype="fp32"))
    comp = _est(Levers(reduce_dtype="fp32", powersgd_rank=r))
    assert comp.axis_bytes["dp"][0] == pytest.approx(base.axis_bytes["dp"][0] * f, rel=1e-9)
    assert comp.axis_bytes["dp"][0] < base.axis_bytes["dp"][0] / 50
    # it costs compute: the DP time is more than the compressed traffic's alone
    assert comp.axis_time_s["dp"][0] > base.axis_time_s["dp"][0] * f


def test_onebit_sends_one_bit_per_element():
    base = _est(Levers(reduce_dtype="fp32")).axis_bytes["dp"][0]
    assert _est(Levers(reduce_dtype="fp32", onebit=True)).axis_bytes["dp"][0] == pytest.approx(base / 32, rel=1e-9)


def test_local_sgd_divides_dp_traffic_by_h():
    base = _est()
    h = _est(Levers(sync_every=8))
    assert h.axis_bytes["dp"][0] == pytest.approx(base.axis_bytes["dp"][0] / 8, rel=1e-9)
    assert h.axis_time_s["dp"][0] == pytest.approx(base.axis_time_s["dp"][0] / 8, rel=1e-9)
    assert h.axis_exposed_s["dp"][0] == pytest.approx(h.axis_time_s["dp"][0], rel=1e-9)


def test_async_staleness_hides_dp_behind_later_steps():
    plan = Plan.of(tp=8, pp=1, dp=16, global_batch_size=128, seq_length=4096, sequence_parallel=True, zero_stage=0,
                dp_shard=16, overlap_grad_reduce=False)
    base = _est(None, plan)
    stale = _est(Levers(async_staleness=1), plan)
    assert stale.axis_bytes["dp"][0] == base.axis_bytes["dp"][0]
    assert base.axis_exposed_s["dp"][0] > 0
    compute = base.step_time_s[0] - base.axis_exposed_s["dp"][0] - base.optimizer_s[0]
    expected = max(base.axis_exposed_s["dp"][0] - compute, 0.0)
    assert stale.axis_exposed_s["dp"][0] == pytest.approx(expected, abs=1e-9)
    assert stale.step_time_s[0] < base.step_time_s[0]


def test_bad_levers_are_one_line_errors():
    with pytest.raises(SpecError, match="fp16"):
        Levers(reduce_dtype="fp16")
    with pytest.raises(SpecError, match="choose one"):
        Levers(powersgd_rank=2, onebit=True)
    assert "not modelled" in Levers(onebit=True).describe()["convergence"]
