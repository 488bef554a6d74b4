"""The per-accelerator compute roofline: exp2 rate, attention max vs sum, grouped-GEMM quantization, MoE host
launch floor, and the sources of catalog/compute.yaml (issue 14 parts 2-4)."""

import dataclasses

import numpy as np
import pytest

from tierwise.estimate import estimate
from tierwise.specs.accelerator import load_accelerator
from tierwise.specs.cluster import load_cluster
from tierwise.specs.compute import (
    attention_kernel_overlap,
    clock_factor,
    compute_catalog,
    compute_profile,
    grouped_gemm_efficiency,
    moe_expert_launches,
    unmeasured,
)
from tierwise.specs.model import load_model
from tierwise.specs.plan import PlanBatch, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping


def test_exp2_rate_h100_matches_fa3_and_b300_doubles():
    h100 = compute_profile(load_accelerator("h100-sxm"))
    assert h100.exp2_per_s == pytest.approx(132 * 1.83e9 * 16)
    assert h100.exp2_per_s == pytest.approx(3.9e12, rel=0.02)  # FA3 paper sec. 3
    b300, b200 = compute_profile(load_accelerator("b300")), compute_profile(load_accelerator("b200"))
    assert b300.exp2_per_clock_per_sm == 2 * b200.exp2_per_clock_per_sm == 32


def test_sustained_clock_factor_under_a_power_cap():
    assert clock_factor(700, 700) == 1.0 and clock_factor(None, 700) == 1.0
    assert clock_factor(500, 700) == pytest.approx((5 / 7) ** (1 / 3))
    assert clock_factor(800, 700) == 1.0


def test_attention_max_vs_sum_by_family():
    assert attention_kernel_overlap("cudnn", "hopper") == 1.0
    assert attention_kernel_overlap("flash2", "hopper") == 0.0
    assert attention_kernel_overlap("sdpa", "blackwell") == 0.0
    assert attention_kernel_overlap("cudnn", "ampere") == 0.0  # no async warpgroup MMA on Ampere
    from tierwise.pricing.kernels import overlapped
    assert overlapped(3.0, 1.0, 1.0) == 4.0 - 1.0 and overlapped(3.0, 1.0, 0.0) == 4.0


def _step(model, cluster, n, **plan):
    m = load_model(model)
    p = plan_from_mapping(plan, num_gpus=n)
    validate_plan_batch(m, [p])
    return estimate(m, load_cluster(cluster), PlanBatch.from_plans([p]))


def test_attention_exponentials_cost_more_without_overlap(monkeypatch):
    """The same plan's attention takes longer when the kernel runs softmax after the GEMMs (sum) than when
    it overlaps them (max); the difference is at most the exponential time."""
    import tierwise.pricing.kernels as st

    plan = dict(tp=1, pp=1, micro_batch_size=1, global_batch_size=8, seq_length=8192)
    overlap = _step("llama3.1-8b", "dgx-h100", 8, **plan)
    monkeypatch.setattr(st, "attention_kernel_overlap", lambda k, g="": 0.0)
    summed = _step("llama3.1-8b", "dgx-h100", 8, **plan)
    assert float(summed.attention_s[0]) > float(overlap.attention_s[0])


def test_grouped_gemm_efficiency_falls_with_few_rows_and_narrow_experts():
    rows = np.array([8, 32, 64, 128, 256, 1024, 8192], dtype=float)
    e = grouped_gemm_efficiency(rows, 2048, 4096, 8, 132)
    assert np.all(np.diff(e) > 0) and np.all((e > 0) & (e <= 1))
    widths = np.array([256, 512, 768, 2048, 8192], dtype=float)
    w = grouped_gemm_efficiency(512, widths, 4096, 1, 132)
    assert np.all(np.diff(w) > 0) and np.all((w > 0) & (w <= 1))
    # an expert FFN of 768 is not a 4096-wide GEMM
    assert grouped_gemm_efficiency(256, 768, 4096, 2, 132) < 0.5 * grouped_gemm_efficiency(256, 4096 * 8, 4096, 2, 132)


def test_moe_layer_costs_the_host_launch_time_at_tiny_micro_batches():
    """With one short sequence the MoE block's GPU time is below its kernels x launch cost, so the step grows
    by the host excess; at a large micro-batch the GPU time dominates and the excess vanishes."""
    tiny = _step("mixtral-8x7b", "dgx-h100", 8, tp=1, ep=8, pp=1, micro_batch_size=1, global_batch_size=8,
                 seq_length=128)
    from tierwise.estimate.compute import compute_params
    from tierwise.specs.compute import moe_kernels_per_layer

    kf, kb = moe_kernels_per_layer()
    ef, eb = moe_expert_launches()
    op = compute_params()["torch_op_overhead"]
    layers = load_model("mixtral-8x7b").num_moe_layers
    # the compute of a micro-batch is at least the host floor of its MoE layers (ep = 8: one local expert)
    floor = layers * (kf + kb + ef + eb) * op
    assert float(tiny.compute_s[0]) >= floor * float(tiny.num_microbatches[0]) * 0.999
    big = _step("mixtral-8x7b", "dgx-h100", 8, tp=1, ep=8, pp=1, micro_batch_size=8, global_batch_size=64,
                seq_length=4096)
    per_mb = float(big.compute_s[0] / big.num_microbatches[0])
    assert per_mb > 3 * floor


def test_moe_host_floor_grows_with_the_local_experts():
    """TE GroupedLinear issues one GEMM per local expert (compute.yaml moe_expert_launches). Qwen3-30B-A3B has 128
    small experts: with all of them on one rank (ep = 1) a 512-token micro-batch's MoE layers are host-bound, each
    costing at least its (dispatcher + 128 x (2 + 8)) launches; with 16 per rank (ep = 8) the floor is 8x lower
    and the micro-batch several times cheaper."""
    from tierwise.estimate.compute import compute_params
    from tierwise.specs.compute import moe_kernels_per_layer

    kf, kb = moe_kernels_per_layer()
    ef, eb = moe_expert_launches()
    assert (ef, eb) == (2, 8)
    op = compute_params()["torch_op_overhead"]
    m = load_model("qwen3-30b-a3b")
    kw = dict(tp=1, pp=1, micro_batch_size=1, global_batch_size=8, seq_length=512)
    one = _step("qwen3-30b-a3b", "dgx-h100", 8, ep=1, **kw)
    eight = _step("qwen3-30b-a3b", "dgx-h100", 8, ep=8, **kw)
    per_mb_one = float(one.compute_s[0] / one.num_microbatches[0])
    per_mb_eight = float(eight.compute_s[0] / eight.num_microbatches[0])
    floor_one = m.num_moe_layers * (kf + kb + 128 * (ef + eb)) * op
    assert per_mb_one >= floor_one * 0.999
    assert per_mb_eight < per_mb_one / 3


def test_catalog_entries_have_sources_and_unmeasured_are_listed():
    cat = compute_catalog()
    for name, entry in cat["accelerators"].items():
        assert entry.get("source"), name
        if "gemm_bf16_fraction" in entry:
            assert entry.get("gemm_source"), name
        else:
            assert entry.get("gemm_like"), name
        if "hbm_fraction" in entry:
            assert entry.get("hbm_source"), name
        else:
            assert entry.get("hbm_like"), name
    for kernel in cat["attention_kernels"].values():
        assert kernel["source"]
    listed = {u["accelerator"] for u in unmeasured()}
    assert "b300" in listed and "h100-sxm" not in listed and "tpu-v4" in listed



def test_blackwell_streaming_hbm_is_its_own_measurement():
    # B200's device-to-device copy (> 6.0 of 8.0 TB/s) replaces the H100 fraction it borrowed; the other
    # Blackwell parts borrow B200's, not Hopper's
    b200 = compute_profile(load_accelerator("b200"))
    assert b200.hbm_from == "measured" and b200.hbm_fraction == pytest.approx(0.75)
    assert b200.hbm_fraction < compute_profile(load_accelerator("h100-sxm")).hbm_fraction
    for name in ("gb200", "gb300", "b300"):
        prof = compute_profile(load_accelerator(name))
        assert prof.hbm_fraction == b200.hbm_fraction and prof.hbm_from == "as b200", name


def test_torchtitan_500w_h100_sustains_a_lower_clock():
    from tierwise.specs.cluster import cluster_from_mapping
    from tierwise.validate.mapping import GRAND_TETON_H100_96GB

    c = cluster_from_mapping(GRAND_TETON_H100_96GB, origin="test")
    p = compute_profile(c.accelerator)
    assert p.gemm_from == "as h100-sxm" and p.clock_factor == pytest.approx((500 / 700) ** (1 / 3))
    assert dataclasses.replace(p, clock_factor=1.0).exp2_per_s > p.exp2_per_s


def test_unmasked_scores_per_token_are_heads_times_half_the_context_under_a_causal_mask():
    from tierwise.workload.flops import attention_scores_per_token, model_shape

    m = load_model("llama3.1-8b")
    s = np.array([2048.0, 8192.0])
    assert np.allclose(attention_scores_per_token(m, model_shape(m), s), m.num_attention_heads * s / 2)
    assert np.allclose(attention_scores_per_token(m, model_shape(m), s, causal_halving=False),
                       m.num_attention_heads * s)


def test_one_grouped_kernel_per_gemm_keeps_the_host_floor_flat():
    """moe_grouped_gemm = single (torchtitan's torch._grouped_mm, a CUTLASS grouped kernel) launches one kernel
    per GEMM whatever the local experts: with all 128 Qwen3-30B-A3B experts on one rank a 512-token micro-batch
    is several times cheaper than with Megatron-Core's per-expert launches, which make it host-bound. The
    framework field sets it and says so under ``assumed``."""
    from tierwise.specs.framework import framework_defaults

    kw = dict(tp=1, pp=1, ep=1, micro_batch_size=1, global_batch_size=8, seq_length=512)
    per_expert = _step("qwen3-30b-a3b", "dgx-h100", 8, moe_grouped_gemm="per-expert", **kw)
    single = _step("qwen3-30b-a3b", "dgx-h100", 8, moe_grouped_gemm="single", **kw)
    assert float(single.compute_s[0]) < float(per_expert.compute_s[0]) / 3
    assert framework_defaults("torchtitan", moe=True)["moe_grouped_gemm"][0] == "single"
    assert framework_defaults("megatron", moe=True)["moe_grouped_gemm"][0] == "per-expert"
    plan = plan_from_mapping({"ep": 8, "global_batch_size": 8, "seq_length": 4096}, num_gpus=8,
                             framework="torchtitan", moe=True)
    assert plan.moe_grouped_gemm == "single"
    assert any(a.startswith("moe_grouped_gemm=single (torchtitan") for a in plan.assumed)
    dense = plan_from_mapping({"global_batch_size": 8, "seq_length": 4096}, num_gpus=8)
    assert not any(a.startswith("moe_grouped_gemm") for a in dense.assumed)


def test_an_unknown_grouped_gemm_is_a_one_line_error():
    from tierwise.errors import TierwiseError

    with pytest.raises(TierwiseError, match=r"moe_grouped_gemm.*'cutlas'.*per-expert"):
        plan_from_mapping({"ep": 8, "global_batch_size": 8, "seq_length": 4096, "moe_grouped_gemm": "cutlas"},
                          num_gpus=8, moe=True)
