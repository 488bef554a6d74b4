"""Rows -> scenarios: catalog models where ours, honest clusters, documented defaults marked, skips explained."""

from __future__ import annotations

import numpy as np
import pytest

from tierwise.estimate.step import estimate
from tierwise.specs.plan import PlanBatch
from tierwise.validate import load_cases, load_rows
from tierwise.validate.mapping import case_from_row

CASES = {c.row_id: c for c in load_cases()}


def test_every_row_is_mapped_none_refused():
    assert len(CASES) == 161
    for c in CASES.values():
        assert c.used, c.skip
        assert np.isfinite(c.measured_tokens_per_s_per_gpu) and c.measured_tokens_per_s_per_gpu > 0
        assert c.plan.num_gpus == c.num_gpus


def test_moe_rows_are_moe_models_with_the_rows_expert_parallelism():
    """Issue 14 integration: Mixtral and Qwen3 rows map to the catalog MoE models (not dense ones), Qwen1.5-MoE
    inline with its one gated shared expert of 4 x 1408; ep from the row, etp by the framework's rule unless
    stated, the dispatcher where the row names it."""
    mixtral = CASES["412"]
    assert mixtral.model_source == "catalog mixtral-8x7b" and mixtral.model.moe.num_experts == 8
    assert (mixtral.plan.ep, mixtral.plan.etp, mixtral.plan.moe_dispatcher) == (8, 1, "alltoall")  # NeMo recipes
    qwen3 = CASES["437"]
    assert qwen3.model_source == "catalog qwen3-235b-a22b"
    assert (qwen3.plan.ep, qwen3.plan.etp, qwen3.plan.moe_dispatcher) == (32, 1, "deepep")
    assert CASES["438"].plan.ep_comm_overlap and not qwen3.plan.ep_comm_overlap
    assert CASES["440"].plan.moe_dispatcher == "alltoall"
    qwen15 = CASES["434"].model.moe
    assert (qwen15.num_experts, qwen15.top_k, qwen15.ffn_hidden_size) == (60, 4, 1408)
    assert (qwen15.shared_experts, qwen15.shared_ffn_hidden_size) == (1, 5632) and CASES["434"].model.gated_mlp
    assert CASES["434"].plan.moe_dispatcher == "allgather"  # Megatron-Core's default dispatcher
    # --recompute-modules layernorm moe_act is not core-attention selective recompute
    assert qwen3.plan.recompute == "none" and any("--recompute-modules" in f for f in qwen3.filled)


def test_new_framework_strings_map_to_frameworks_and_kernels():
    assert CASES["407"].plan.framework == "nemo" and CASES["407"].plan.attention_kernel == "cudnn"
    for row in ("427", "428", "434", "435"):  # FlagPerf / Pai-Megatron-Patch / FlagScale name FlashAttention-2
        assert (CASES[row].plan.framework, CASES[row].plan.attention_kernel) == ("megatron", "flash2"), row
    assert (CASES["433"].plan.framework, CASES["433"].plan.attention_kernel) == ("deepspeed", "flash2")
    auto = CASES["425"].plan  # NeMo Automodel: FSDP2 as torchtitan, TE attention and fused kernels
    assert (auto.framework, auto.attention_kernel, auto.fused_elementwise, auto.zero3_gather) == \
        ("torchtitan", "cudnn", True, "per-parameter")


def test_groups_are_hardware_generation_by_stack():
    groups = {c.group for c in CASES.values()}
    assert {"blackwell/nemo-2025", "hopper/automodel-2025", "ampere/megatron-core-2024", "hopper/megatron-core-2024",
            "hopper/megatron-core-moe-2025", "hopper/flagscale-2024"} <= groups
    assert CASES["433"].group == "ampere/megatron-core-2024" and CASES["420"].group == "blackwell/nemo-2025"


def test_rows_without_tp_pp_borrow_them_from_the_weak_scaling_row():
    for row_id in ("42", "43"):
        c = CASES[row_id]
        assert (c.plan.tp, c.plan.pp) == (8, 6) and c.confidence == "low"
        assert any("from row 39" in f for f in c.filled)
    # one row on its own (no sibling to borrow from) is still skipped with its reason
    row = next(r for r in load_rows() if r["row_id"] == "42")
    assert "TP/PP not stated" in case_from_row(row).skip


def test_framework_defaults_are_filled_and_marked():
    assert CASES["1"].plan.micro_batch_size == 1
    assert any("micro_batch=1" in f for f in CASES["1"].filled)
    assert any("ffn=4h" in f for f in CASES["33"].filled)
    # Korthikanti rows state everything but the framework's own defaults (specs/framework.py), listed
    assert "fused_cross_entropy=false" in [f.split(" ")[0] for f in CASES["23"].filled]
    assert all(f.split("=")[0] in ("fused_elementwise", "fused_cross_entropy", "tp_comm_overlap",
                                    "grad_reduce_dtype", "zero2_sync", "attention_kernel", "etp", "zero3_gather",
                                    "pp_scatter_gather")
               for f in CASES["23"].filled)
    # Megatron-LM 2021-22: the unfused attention core and the pipeline scatter/gather of that era's code
    assert CASES["23"].plan.attention_kernel == "unfused" and CASES["27"].plan.pp_scatter_gather
    assert CASES["33"].plan.attention_kernel != "unfused" and not CASES["33"].plan.pp_scatter_gather


def test_catalog_models_where_ours_inline_otherwise():
    assert CASES["190"].model_source == "catalog mpt-70b"
    assert CASES["77"].model_source == "catalog llama2-7b"
    assert CASES["10"].model_source == "catalog gpt-1t"
    # 177B with a 131072 vocabulary is not our gpt3-175b; Nemotron-8B is not MPT-7B despite equal dimensions
    assert CASES["39"].model_source == "inline from row" and CASES["39"].model.vocab_size == 131072
    assert CASES["80"].model_source == "inline from row" and CASES["80"].model.vocab_size == 256000


def test_clusters_selene_dgx_h100_and_torchtitan_variant():
    assert CASES["1"].cluster.name == "dgx-a100"
    assert CASES["1"].cluster.nic_bytes_per_s == pytest.approx(25e9)  # 200 Gb/s HDR
    assert CASES["73"].cluster.name == "dgx-h100"
    assert CASES["73"].cluster.nic_bytes_per_s == pytest.approx(50e9)  # 400 Gb/s NDR
    tt = CASES["388"].cluster
    assert tt.name == "grand-teton-h100-96gb"
    assert tt.accelerator.hbm_capacity_bytes == pytest.approx(96 * 2**30)
    assert tt.accelerator.hbm_bytes_per_s < 3.35e12  # HBM2e, not the SXM's HBM3


def test_plans_follow_the_rows():
    p = CASES["405"].plan
    assert (p.tp, p.pp, p.cp, p.dp, p.zero_stage, p.precision, p.recompute) == (8, 8, 8, 1, 3, "fp8", "full")
    assert CASES["31"].plan.overlap_grad_reduce is False  # "we do not use any overlapping of gradient all-reduces"
    assert CASES["399"].plan.tp_comm_overlap is True  # AsyncTP
    assert CASES["398"].plan.tp_comm_overlap is False
    # ZeRO-3 implementation: FSDP1 (llm-foundry) flat, FSDP2 (torchtitan) per-parameter, DeepSpeed 2021 lists
    assert CASES["204"].plan.zero3_gather == "flat"
    assert CASES["388"].plan.zero3_gather == "per-parameter"
    assert CASES["13"].plan.zero3_gather == "tensor-list"


def test_batched_prediction_equals_one_by_one():
    """Rows sharing a model and cluster are estimated as one PlanBatch; each row alone gives the same."""
    group = [c for c in CASES.values() if c.used and c.model.name == "mpt-1b"]
    batch = estimate(group[0].model, group[0].cluster, PlanBatch.from_plans([c.plan for c in group]))
    for i, c in enumerate(group):
        one = estimate(c.model, c.cluster, PlanBatch.from_plans([c.plan]))
        assert one.tokens_per_s_per_gpu[0] == pytest.approx(batch.tokens_per_s_per_gpu[i], rel=1e-12)


def test_a_users_csv_with_an_unknown_model_maps_inline(tmp_path):
    row = dict(load_rows()[0], model_name="MyNet 2B", num_layers="20", hidden_size="2560", ffn_hidden_size="",
               num_attention_heads="20", num_kv_heads="", vocab_size="32000")
    case = case_from_row(row)
    assert case.used and case.model_source == "inline from row"
    assert case.model.ffn_hidden_size == 4 * 2560


def test_an_unstated_expert_tp_that_cannot_lay_out_falls_back_to_1():
    """Megatron-Core's default etp = tp: with tp 2, dp 2 and ep 4 the expert grid (2 x 4) does not divide the 4
    ranks, yet a published run trained that way, so its expert TP was 1; said in `filled`. Stated, it is kept."""
    row = next(r for r in load_rows() if r["row_id"] == "434")
    layout = dict(row, tp="2", dp="2", ep="4", pp="1", cp="1", num_gpus="4")
    case = case_from_row(layout)
    assert case.used, case.skip
    assert (case.plan.etp, case.plan.ep) == (1, 4)
    assert any(f.startswith("etp=1 (not stated") for f in case.filled)
    fitting = case_from_row(dict(layout, dp="4", num_gpus="8"))  # 2 x 4 divides 8: the framework's etp = tp stays
    assert fitting.used and fitting.plan.etp == 2
    assert not any(f.startswith("etp=1 (not stated") for f in fitting.filled)
