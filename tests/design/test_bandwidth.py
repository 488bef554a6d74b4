"""``tierwise bandwidth`` and :mod:`tierwise.design.bandwidth` (issue 33, part 1): the inverse question."""

import math

import pytest

from tierwise.design.bandwidth import inverse_bandwidth, job_plan, scale_tier, window_bandwidth
from tierwise.estimate.step import estimate
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import PlanBatch

from ._cli import cli_json as _json


@pytest.fixture(scope="module")
def doc405():
    return _json(["bandwidth", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "16384",
                  "--window", "100ms", "--json"])


def test_405b_16k_every_axis_has_a_tier_and_a_rate(doc405):
    assert doc405["plan_source"].startswith("planner")
    axes = {a["axis"]: a for a in doc405["axes"]}
    p = doc405["plan"]
    # every axis with a degree above one is answered, on the tier its group crosses
    assert set(axes) == {k for k in ("tp", "cp", "ep", "pp", "dp") if p[k] > 1}
    assert axes["tp"]["tier"] == "scale_up" and axes["dp"]["tier"] == "scale_out"
    for a in axes.values():
        hidden, five, twenty = (a["bandwidth"][k] for k in ("hidden", "5%", "20%"))
        assert hidden["status"] == "ok" and five["status"] in ("ok", "at_min")
        # less exposure needs more bandwidth
        assert hidden["gbytes_per_s_per_gpu"] > five["gbytes_per_s_per_gpu"] >= twenty["gbytes_per_s_per_gpu"]
        # the group aggregate is the per-GPU rate times the group size
        assert hidden["group_aggregate_tbytes_per_s"] == pytest.approx(
            hidden["gbytes_per_s_per_gpu"] * a["degree"] / 1e3)
    # H100's 400G NICs (50 GB/s per GPU) leave DP at 5-10% of the step: hiding it takes ~3x the NIC rate
    dp = axes["dp"]
    assert 0.03 < dp["share_of_step"] < 0.10
    assert 100 < dp["bandwidth"]["hidden"]["gbytes_per_s_per_gpu"] < 250
    assert 40 < dp["bandwidth"]["5%"]["gbytes_per_s_per_gpu"] < 80


def test_solution_meets_its_share_when_re_estimated():
    """The rate found for DP at 5% gives DP 5% of the step when the tier is scaled to it (bisection check)."""
    m, c = load_model("llama3.1-405b"), load_cluster("dgx-h100")
    plan, _ = job_plan(m, c, 16384, 2048, 8192)
    doc = inverse_bandwidth(m, c, plan)
    dp = next(a for a in doc["axes"] if a["axis"] == "dp")
    k = dp["bandwidth"]["5%"]["factor"]
    b = PlanBatch.from_plans([plan])
    e1, ek = estimate(m, c, b), estimate(m, scale_tier(c, "scale_out", bandwidth=k), b)
    x, x1, s1 = ek.axis_exposed_s["dp"][0], e1.axis_exposed_s["dp"][0], e1.step_time_s[0]
    assert x / (s1 - x1 + x) == pytest.approx(0.05, rel=1e-3)


def test_seed_arithmetic_70b_1000_gpus_100ms():
    """Seed 000: 70B in FP16 over 1,000 GPUs, 2B(N-1)/N = 280 GB per step; in 100 ms that is 2.8 TB/s."""
    d = _json(["bandwidth", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "1000",
               "--global-batch", "1000", "--tp", "1", "--pp", "1", "--dp", "1000", "--zero", "0",
               "--reduce-dtype", "bf16", "--window", "100ms", "--json"])
    w = d["window"]
    assert d["plan_source"] == "given"
    assert w["tbytes_per_s_per_gpu"] == pytest.approx(2.8, rel=0.10)
    assert w["bytes_per_gpu"] / 1e9 == pytest.approx(280, rel=0.10)
    assert w["group_aggregate_tbytes_per_s"] == pytest.approx(1000 * w["tbytes_per_s_per_gpu"])


def test_window_formula():
    w = window_bandwidth(280e9, 0.1, 1000)
    assert w["tbytes_per_s_per_gpu"] == pytest.approx(2.8)
    assert w["gbits_per_s_per_gpu"] == pytest.approx(22400)


def test_scale_tier_scales_one_tier_only():
    c = load_cluster("dgx-h100")
    s = scale_tier(c, "scale_out", bandwidth=2.0, latency=3.0)
    assert s.scale_out_bytes_per_s == pytest.approx(2 * c.scale_out_bytes_per_s)
    assert s.scale_out_latency_s == pytest.approx(3 * c.scale_out_latency_s)
    assert s.scale_up_bytes_per_s == c.scale_up_bytes_per_s
    u = scale_tier(c, "scale_up", bandwidth=0.5)
    assert u.scale_up_p2p_bytes_per_s == pytest.approx(0.5 * c.scale_up_p2p_bytes_per_s)


def test_target_step_and_compute_bound(cli_error):
    base = ["bandwidth", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "16384"]
    d = _json(base + ["--target-step", "5s", "--json"])
    t = d["target_step"]
    assert t["factor"] > 1 and math.isfinite(t["scale_out_gbytes_per_s_per_gpu"])
    assert "compute-bound" in cli_error(base + ["--target-step", "1s"])


@pytest.mark.parametrize("extra, word", [(["--window", "0ms"], "--window"), (["--zero", "5"], "--zero"),
                                         (["--reduce-dtype", "fp4"], "--reduce-dtype")])
def test_bad_input_one_line(cli_error, extra, word):
    assert word in cli_error(["bandwidth", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "64"] + extra)


def test_trend_names_the_generation_that_turns_interconnect_bound():
    """405B on 8,192 GPUs (docs/design.md trend table): A100 5.7% exposed comm, B200 13.5%: at a 10% bound the
    job is compute-bound on A100 and interconnect-bound on B200."""
    from tierwise.design.bandwidth import interconnect_bound_generation

    d = interconnect_bound_generation(load_model("llama3.1-405b"), 8192, clusters=("dgx-a100", "dgx-b200"),
                                      bound_share=0.10)
    shares = {r["cluster"]: r["comm_share"] for r in d["generations"]}
    assert shares["dgx-a100"] < 0.10 < shares["dgx-b200"]
    assert d["first_interconnect_bound"] == "dgx-b200"
