"""FLOP-rule conversions reproduce each source's published figures from its own measurements."""

from __future__ import annotations

import pytest

from tierwise.validate import load_rows, rules
from tierwise.validate.mapping import case_from_row

ROWS = {r["row_id"]: r for r in load_rows()}


def test_narayanan_eq3_reproduces_the_papers_training_time():
    """Row 11 (175B, ZeRO-3, 384 GPUs, 144 TFLOP/s): the paper's 'est. training time for 300B tokens: 90 days'
    follows from the tokens/s that Eq. 3 gives (its Eq. 4 is the same count with the small terms dropped)."""
    row = ROWS["11"]
    assert "90 days" in row["other_metric"]
    f = rules.narayanan_eq3_flops_per_token(96, 12288, 2048, 51200)
    tokens_per_gpu = rules.tokens_per_gpu_from_tflops(144.0, f)
    days = 300e9 / (tokens_per_gpu * 384) / 86400
    assert days == pytest.approx(90, rel=0.02)
    # and the mapped case carries exactly this figure
    assert case_from_row(row).measured_tokens_per_s_per_gpu == pytest.approx(tokens_per_gpu)


def test_narayanan_eq3_round_trips_its_tflops():
    """Eq. 3 tokens/s back through Eq. 3 gives the table's TFLOP/s (row 1: 137)."""
    case = case_from_row(ROWS["1"])
    f = rules.narayanan_eq3_flops_per_token(24, 2304, 2048, 51200)
    assert case.measured_tokens_per_s_per_gpu * f / 1e12 == pytest.approx(137.0)
    assert case.rule.includes_recompute


def test_korthikanti_appendix_a_reproduces_mfu_and_hfu_from_step_time():
    """Row 24 (22B, TP8, selective recompute, 1.1 s per step of 4 x 2048 tokens on 8 GPUs): MFU 41.5%, HFU 43.7%."""
    row = ROWS["24"]

    def pct(step_s, rule):
        return 4 * 2048 / step_s / 8 * rule(48, 6144, 2048, 51200) / 312e12 * 100

    # the step time is published to 0.01 s, so the MFU it implies is known to that precision
    for rule, published in ((rules.palm_model_flops_per_token, row["mfu_pct"]),
                            (rules.palm_selective_hw_flops_per_token, row["hfu_pct"])):
        assert pct(1.105, rule) <= float(published) <= pct(1.095, rule)
    assert case_from_row(row).measured_tokens_per_s_per_gpu == pytest.approx(4 * 2048 / 1.1 / 8)


def test_llmfoundry_rule_reproduces_published_mfu_from_tokens():
    """llm-foundry rows: (6N + 12 L h s) x tokens/s/GPU / 989 TFLOP/s = the published MFU, on every row."""
    for row in ROWS.values():
        if row["source_id"] != "llmfoundry_h100_bf16":
            continue
        f = rules.llmfoundry_flops_per_token(float(row["params_b"]) * 1e9, int(row["num_layers"]),
                                             int(row["hidden_size"]), int(row["seq_length"]))
        mfu = float(row["tokens_per_s_per_gpu"]) * f / 989e12 * 100
        assert mfu == pytest.approx(float(row["mfu_pct"]), abs=0.05), row["row_id"]


def test_megatron_core_r08_rule_is_model_flops_with_full_attention():
    """For a standard GPT (MHA, 4h GeLU MLP) the r0.8 count equals Korthikanti's model FLOPs
    72 L h^2 (1 + s/6h + V/12Lh): both count the full (not causally halved) s^2 attention."""
    L, h, s, V = 30, 4096, 4096, 131072
    mc = rules.megatron_core_r08_flops_per_token(L, h, s, V, a=32, g=32, f=4 * h)
    assert mc == pytest.approx(rules.palm_model_flops_per_token(L, h, s, V))
    # GQA and SwiGLU change it the way the r0.8 code does: fewer K/V projections, 3/2 x the MLP
    gqa = rules.megatron_core_r08_flops_per_token(L, h, s, V, a=32, g=8, f=14336, gated=True)
    assert gqa == pytest.approx(12 * L * h * h * ((1 + 8 / 32 + s / h) + 14336 / h * 1.5 + V / (2 * L * h)))


def test_rule_recognition_and_pinning():
    assert rules.rule_for(ROWS["1"]["flops_counting"]).key == "narayanan-eq3"
    assert rules.rule_for(ROWS["23"]["flops_counting"]).key == "palm-mfu"
    assert rules.rule_for(ROWS["33"]["flops_counting"]).key == "mcore-r0.8"
    assert rules.rule_for(ROWS["190"]["flops_counting"]).key == "llmfoundry"
    assert rules.rule_for(ROWS["388"]["flops_counting"]).key == "measured"
    nemo = rules.rule_for(ROWS["73"]["flops_counting"])
    assert nemo.key == "nemo" and not nemo.pinned
    assert not rules.rule_for("some in-house counter").pinned


def test_unpinned_tflops_only_row_is_skipped():
    row = dict(ROWS["73"], tokens_per_s_per_gpu="", tokens_per_s="")
    case = case_from_row(row)
    assert case.skip and "not pinned" in case.skip
