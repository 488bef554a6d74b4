"""Issue 14 parts 1, 5, 6, 8: every pipeline layout the frameworks accept, the framework field, inferred
settings, fits:false as a warning, and the leave-one-(hardware x stack)-out grouping."""

from __future__ import annotations

import numpy as np
import pytest

from tierwise.errors import PlanError, SpecError
from tierwise.estimate.scenario import estimate_scenario, scenario_from_mapping
from tierwise.estimate.step import estimate
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import LAYOUT_RULES, PlanBatch, stage_layout, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping


def _layout(num_layers, **arrays):
    first, last, mid, rule = stage_layout(num_layers, PlanBatch.from_arrays(**arrays))
    return int(first[0]), int(last[0]), int(mid[0]), LAYOUT_RULES[int(rule[0])]


def test_96_layers_on_7_stages_uses_megatron_embedding_loss_accounting():
    # (96 + 2) / 7 = 14 per stage; the first builds 13 besides the embedding, the last 13 besides the loss
    assert _layout(96, pp=7) == (13, 13, 14, "embedding/loss")


def test_62_layers_on_4_x_4_virtual_stages():
    # 64 / 16 = 4 per virtual stage, 16 per rank; first and last one fewer
    assert _layout(62, pp=4, vpp=4) == (15, 15, 16, "embedding/loss")


def test_most_even_split_when_neither_divides():
    first, last, mid, rule = _layout(62, pp=7)  # 62 = 8 x 7 + 6: six stages of 9
    assert rule == "most-even" and mid == 9 and first + last + 5 * 9 >= 62 and max(first, last) <= mid
    assert _layout(95, pp=2)[:2] == (48, 47)


def test_even_split_and_single_stage():
    assert _layout(80, pp=8) == (10, 10, 10, "even")
    assert _layout(80, pp=1)[:2] == (80, 80)


def test_first_last_stage_counts_take_precedence():
    # Megatron decoder_first/last_pipeline_num_layers: the other stages share the rest (most evenly)
    assert _layout(96, pp=7, first_stage_layers=12, last_stage_layers=10) == (12, 10, 15, "first/last")
    plan = plan_from_mapping({"pp": 4, "global_batch_size": 64, "seq_length": 2048,
                              "decoder_first_pipeline_num_layers": 6, "decoder_last_pipeline_num_layers": 6},
                             num_gpus=4, num_layers=32)
    assert (plan.first_stage_layers, plan.last_stage_layers) == (6, 6)
    assert any(a.startswith("pipeline stages 6/10/6") for a in plan.assumed)


def test_stated_embedding_loss_accounting():
    plan = plan_from_mapping({"pp": 4, "global_batch_size": 64, "seq_length": 2048,
                              "account_for_embedding_in_pipeline_split": True}, num_gpus=4, num_layers=31)
    first, last, mid, rule = stage_layout(31, PlanBatch.from_plans([plan]))
    assert (int(first[0]), int(last[0]), int(mid[0]), LAYOUT_RULES[int(rule[0])]) == (7, 8, 8, "embedding/loss")


def test_explicit_layout_maps_virtual_stages_to_ranks():
    # Megatron-Core: virtual stage i on rank i mod pp; rank 0 holds 3 + 5, rank 1 holds 4 + 6
    plan = plan_from_mapping({"pp": 2, "vpp": 2, "global_batch_size": 64, "seq_length": 2048,
                              "pipeline_model_parallel_layout": [3, 4, 5, 6]}, num_gpus=2, num_layers=18)
    assert plan.layout_explicit and (plan.first_stage_layers, plan.last_stage_layers) == (8, 10)
    assert _layout(18, **{k: [getattr(plan, k)] for k in ("pp", "vpp", "first_stage_layers", "last_stage_layers",
                                                          "middle_stage_layers", "layout_explicit")})[3] == "explicit"


@pytest.mark.parametrize("layout, needle", [([8, 8, 8, 9], "sums to 33"), ([9, -1, 12, 12], "pipeline_layout[1]"),
                                            ([16, 16, 0], "3 entries"), ("Et|tt", "2 entries"),
                                            ({"t": 8}, "list of layer counts"), ("Et*8|(t*8|)*2t*7", "sums to 31"),
                                            ("Et*8|t*8|t*8m|t*8L", "MTP layer"), ("Et*8|t*8L|t*8|t*8", "puts loss"),
                                            ("(t*8|*4", "parentheses"), ("t*8|x*8|t*8|t*8", "holds 'x'")])
def test_bad_layouts_name_the_value(layout, needle):
    with pytest.raises(SpecError, match=needle.replace("[", r"\[").replace("|", r"\|")):
        plan_from_mapping({"pp": 4, "global_batch_size": 64, "seq_length": 2048, "pipeline_layout": layout},
                          num_gpus=4, num_layers=32)


@pytest.mark.parametrize("layout", ["Et*3|(t*5|t*3|)*2t*4|t*4|t*4L", "E,ttt|(ttttt|ttt|)*2,tttt|tttt|ttttL",
                                    [["embedding", "decoder", "decoder", "decoder"], ["decoder"] * 5,
                                     ["decoder"] * 3, ["decoder"] * 5, ["decoder"] * 3, ["decoder"] * 4,
                                     ["decoder"] * 4, ["decoder"] * 4 + ["loss"]],
                                    [3, 5, 3, 5, 3, 4, 4, 4]])
def test_megatron_layout_string_and_name_lists_match_the_counts(layout):
    # Megatron-Core's --pipeline-model-parallel-layout string (repeats x*N and (pattern)*N, commas cosmetic) and
    # its list of per-stage layer names give the same plan as the counts; rank r holds virtual stages r, r + pp
    plan = plan_from_mapping({"pp": 4, "vpp": 2, "global_batch_size": 64, "seq_length": 2048,
                              "pipeline_model_parallel_layout": layout}, num_gpus=4, num_layers=31)
    assert plan.layout_explicit
    assert (plan.first_stage_layers, plan.middle_stage_layers, plan.last_stage_layers) == (3 + 3, 5 + 4, 5 + 4)


def test_first_last_leaving_negative_rest_is_refused():
    with pytest.raises(PlanError, match="first_stage_layers=20"):
        plan_from_mapping({"pp": 4, "global_batch_size": 64, "seq_length": 2048, "first_stage_layers": 20,
                           "last_stage_layers": 20}, num_gpus=4, num_layers=32)


def test_non_dividing_layers_are_never_refused():
    model = load_model("llama3.1-8b")  # 32 layers
    for pp, vpp in ((3, 1), (5, 1), (7, 1), (3, 2), (6, 5)):
        gbs = 8 * pp
        plan = plan_from_mapping({"pp": pp, "vpp": vpp, "global_batch_size": gbs, "seq_length": 2048},
                                 num_gpus=pp, num_layers=32)
        validate_plan_batch(model, [plan])


def test_the_slowest_stage_is_priced():
    model, cluster = load_model("llama3.1-8b"), load_cluster("dgx-h100")
    base = {"tp": 8, "pp": 4, "global_batch_size": 64, "seq_length": 4096, "recompute": "full"}
    even = plan_from_mapping({**base, "pipeline_layout": [8, 8, 8, 8]}, num_gpus=32, num_layers=32)
    heavy = plan_from_mapping({**base, "pipeline_layout": [4, 12, 8, 8]}, num_gpus=32, num_layers=32)
    heavier = plan_from_mapping({**base, "pipeline_layout": [4, 14, 6, 8]}, num_gpus=32, num_layers=32)
    est = estimate(model, cluster, PlanBatch.from_plans([even, heavy, heavier]))
    # a middle stage of 12 (14) layers sets the pace: the even split's slowest is the last stage, 8 layers plus
    # the LM head and loss (about 2.4 layers of llama3.1-8b's work); 14 against 12 layers is 7/6
    assert est.step_time_s[0] < est.step_time_s[1] < est.step_time_s[2]
    assert 1.14 < est.compute_s[2] / est.compute_s[1] < 1.19
    assert est.memory["per_gpu_bytes"][0] < est.memory["per_gpu_bytes"][1] < est.memory["per_gpu_bytes"][2]


def test_framework_defaults_are_listed_in_assumed():
    data = {"tp": 2, "global_batch_size": 64, "seq_length": 2048}
    titan = plan_from_mapping(data, num_gpus=8, framework="torchtitan", generation="hopper")
    assert titan.attention_kernel == "sdpa" and not titan.fused_elementwise and titan.zero_stage == 3
    assert any(a.startswith("attention_kernel=sdpa (torchtitan") for a in titan.assumed)
    mega = plan_from_mapping(data, num_gpus=8, framework="megatron", generation="hopper")
    assert mega.attention_kernel == "cudnn" and mega.zero2_sync == "per-step" and mega.grad_reduce_dtype == "fp32"
    assert plan_from_mapping(data, num_gpus=8, framework="megatron", generation="ampere").attention_kernel == "flash2"
    assert plan_from_mapping(data, num_gpus=8, framework="llm-foundry").attention_kernel == "flash2"
    # expert TP: Megatron-Core etp = tp when unset, NeMo MoE recipes 1
    assert plan_from_mapping(data, num_gpus=8, framework="megatron", moe=True).etp == 2
    nemo = plan_from_mapping(data, num_gpus=8, framework="nemo", moe=True)
    assert nemo.etp == 1 and any(a.startswith("etp=1 (NeMo") for a in nemo.assumed)
    # a stated value wins over the framework's default
    assert plan_from_mapping({**data, "fused_elementwise": True}, num_gpus=8, framework="torchtitan").fused_elementwise


def test_nemo_fp8_reduces_gradients_in_bf16():
    # NeMo's performance scripts set grad_reduce_in_fp32 = False for FP8 (scripts/performance/helpers.py
    # set_precision_configs); BF16 NeMo runs and Megatron-LM keep fp32, a stated dtype wins
    data = {"tp": 2, "global_batch_size": 64, "seq_length": 2048}
    fp8 = plan_from_mapping({**data, "precision": "fp8"}, num_gpus=8, framework="nemo", generation="blackwell")
    assert fp8.grad_reduce_dtype == "bf16"
    assert any(a.startswith("grad_reduce_dtype=bf16 (NeMo performance scripts") for a in fp8.assumed)
    assert plan_from_mapping(data, num_gpus=8, framework="nemo").grad_reduce_dtype == "fp32"
    assert plan_from_mapping({**data, "precision": "fp8"}, num_gpus=8, framework="megatron").grad_reduce_dtype == "fp32"
    stated = plan_from_mapping({**data, "precision": "fp8", "grad_reduce_dtype": "fp32"}, num_gpus=8, framework="nemo")
    assert stated.grad_reduce_dtype == "fp32"


def test_unknown_framework_is_one_line():
    with pytest.raises(SpecError, match="framework='jax'"):
        plan_from_mapping({"global_batch_size": 8, "seq_length": 2048, "framework": "jax"}, num_gpus=8)


def test_zero2_semantics_by_framework():
    model, cluster = load_model("llama3.1-8b"), load_cluster("dgx-h100")
    base = {"global_batch_size": 256, "seq_length": 4096, "zero_stage": 2, "recompute": "full"}
    plans = [plan_from_mapping({**base, "zero2_sync": mode}, num_gpus=16)
             for mode in ("per-step", "reduce-per-microbatch", "fsdp-per-microbatch")]
    est = estimate(model, cluster, PlanBatch.from_plans(plans))
    dp = est.axis_time_s["dp"]
    m = est.num_microbatches[0]
    assert m == 16 and dp[1] > 8 * dp[0] and dp[2] > dp[1]  # reduce-scatter every micro-batch; FSDP re-gathers too
    assert est.shard_copy_s[2] > 0 and est.shard_copy_s[0] == 0  # FSDP1's flat-buffer passes


def test_bf16_gradient_reduction_halves_the_bytes():
    model, cluster = load_model("llama3.1-8b"), load_cluster("dgx-h100")
    base = {"global_batch_size": 64, "seq_length": 4096, "zero_stage": 0, "recompute": "full"}
    plans = [plan_from_mapping({**base, "grad_reduce_dtype": d}, num_gpus=16) for d in ("fp32", "bf16")]
    est = estimate(model, cluster, PlanBatch.from_plans(plans))
    assert est.axis_bytes["dp"][1] == pytest.approx(est.axis_bytes["dp"][0] / 2, rel=1e-9)


def _scenario(plan: dict, model="llama3.1-70b", num_gpus=64, **extra):
    return scenario_from_mapping({"model": model, "cluster": "dgx-h100", "num_gpus": num_gpus,
                                  "plan": {"global_batch_size": 64, "seq_length": 8192, **plan}, **extra})


def test_unstated_recompute_is_the_cheapest_that_fits():
    doc = estimate_scenario(_scenario({"tp": 8, "pp": 2, "micro_batch_size": 2}))
    note = [a for a in doc["assumed"] if a.startswith("recompute=")]
    assert len(note) == 1 and doc["memory"]["fits"]
    assert doc["plan"]["recompute"] in ("selective", "full") and "cheapest that fits" in note[0]
    small = estimate_scenario(_scenario({"tp": 8, "pp": 1}, model="llama3.1-8b", num_gpus=8))
    assert small["plan"]["recompute"] == "none" and any(a.startswith("micro_batch_size=1") for a in small["assumed"])


def test_a_stated_plan_that_does_not_fit_is_estimated_with_a_warning():
    doc = estimate_scenario(_scenario({"tp": 1, "pp": 1, "recompute": "none", "zero_stage": 0}))
    assert doc["memory"]["fits"] is False and doc["step_time_s"] > 0
    assert len(doc["warnings"]) == 1 and "fits: false" in doc["warnings"][0]


def test_scenario_framework_field_and_flag():
    doc = estimate_scenario(_scenario({"tp": 8, "recompute": "full"}, framework="torchtitan"))
    assert doc["plan"]["framework"] == "torchtitan" and doc["plan"]["attention_kernel"] == "sdpa"
    with pytest.raises(SpecError, match="disagree"):
        scenario_from_mapping({"model": "llama3.1-8b", "cluster": "dgx-h100", "num_gpus": 8, "framework": "nemo",
                               "plan": {"global_batch_size": 8, "seq_length": 2048}}, framework="megatron")


def test_every_calibration_row_is_in_exactly_one_group_and_folds_do_not_leak():
    from tierwise.validate.fit import group_folds
    from tierwise.validate.run import load_cases

    cases = load_cases()
    assert all(c.used for c in cases)  # every row predicted, none refused
    groups = {c.group for c in cases}
    assert all(c.group.count("/") == 1 and not c.group.startswith("unmapped") for c in cases)
    folds = group_folds(cases)
    assert {g for g, _, _ in folds} <= groups and len(folds) >= 6
    held = [i for _, _, test in folds for i in test]
    assert len(held) == len(set(held))  # a scored row is held out once
    for g, train, test in folds:
        assert not set(train) & set(test) and all(cases[i].group != g for i in train)
        assert all(cases[i].group == g for i in test)


def test_stack_names():
    from tierwise.validate.mapping import stack_for_row

    row = {"framework": "Megatron-LM (2021)", "zero_fsdp": "none", "source": "", "source_id": "x"}
    assert stack_for_row(row) == "megatron-lm-2021"
    assert stack_for_row({**row, "framework": "NeMo 24.07 (Megatron-Core)"}) == "nemo-24.07"
    assert stack_for_row({**row, "framework": "Megatron-Core r0.8.0"}) == "megatron-core-r0.8"
    assert stack_for_row({**row, "zero_fsdp": "ZeRO-3 (DeepSpeed)"}) == "deepspeed-2021"
    assert stack_for_row({**row, "framework": "torchtitan: FSDP", "source_id": "torchtitan_2412"}) == "torchtitan-2024"


def test_params_at_bounds():
    from tierwise.validate.fit import FITTED, params_at_bounds

    name = next(iter(FITTED))
    lo, hi = FITTED[name]
    assert params_at_bounds({name: lo}) == {name: "lower"}
    assert params_at_bounds({name: hi}) == {name: "upper"}
    assert params_at_bounds({name: (lo + hi) / 2}) == {}
    assert np.isfinite(lo) and np.isfinite(hi)


def test_attention_kernel_auto_resolves_by_framework_then_generation():
    """Issue 14 integration: no framework and no generation -> ``auto`` (priced as the accelerator's default);
    a generation gives its default (A100 FlashAttention-2, Hopper cuDNN); a framework gives its own."""
    from tierwise.estimate.scenario import estimate_scenario, scenario_from_mapping
    from tierwise.pricing.kernels import resolved_attention_kernel

    data = {"global_batch_size": 8, "seq_length": 4096}
    assert plan_from_mapping(data, num_gpus=8).attention_kernel == "auto"
    assert plan_from_mapping(data, num_gpus=8, generation="ampere").attention_kernel == "flash2"
    assert plan_from_mapping(data, num_gpus=8, generation="hopper").attention_kernel == "cudnn"
    assert plan_from_mapping(data, num_gpus=8, framework="torchtitan", generation="hopper").attention_kernel == "sdpa"
    assert plan_from_mapping(data, num_gpus=8, framework="megatron").attention_kernel == "auto"
    assert resolved_attention_kernel("auto", "ampere") == "flash2"
    assert resolved_attention_kernel("flash3", "hopper") == "cudnn"
    assert resolved_attention_kernel("triton", "hopper") == "flash2"
    sc = scenario_from_mapping({"model": "mixtral-8x7b", "cluster": "dgx-h100", "num_gpus": 8,
                                "plan": {"ep": 8, "attention_kernel": "flash3", **data}})
    doc = estimate_scenario(sc)
    assert any(a.startswith("attention kernel priced as cudnn") for a in doc["assumed"])
    assert any(a.startswith("moe_dispatcher=alltoall") for a in doc["assumed"])
