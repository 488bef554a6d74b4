"""Issue 30: DeepSeek-V3's multi-token-prediction module priced in training (arXiv:2412.19437 sec. 2.2, 3.2.3;
README_WEIGHTS.md of the official repository), the figures derived here by hand from the report's dimensions."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from tierwise.errors import SpecError
from tierwise.estimate import estimate
from tierwise.estimate.scenario import estimate_scenario, load_scenario
from tierwise.parallel.dp import stage_param_counts
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model, model_from_hf_config, model_from_mapping
from tierwise.specs.parameters import load_parameters
from tierwise.specs.plan import PlanBatch, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.workload.flops import model_shape
from tierwise.workload.memory import activation_bytes_per_token_per_layer

H, V, E, F = 7168, 129280, 256, 2048  # DeepSeek-V3: hidden, vocabulary, routed experts, expert width
ATTENTION = H * 1536 + 1536 * 128 * 192 + H * 576 + 512 * 128 * 256 + 128 * 128 * H  # MLA's five projections
EXPERT = 3 * H * F  # one SwiGLU expert
OTHER = EXPERT + E * H  # the shared expert and the router
NORMS = 2 * H
PROJ = 2 * H * H + 2 * H  # M_k (2h -> h) with enorm and hnorm
EXAMPLE = Path(__file__).parents[1] / "examples" / "deepseek-v3-h800-dualpipe.yaml"


def _plan(model, n, **plan):
    p = plan_from_mapping(plan, num_gpus=n, num_layers=model.num_layers, moe=model.moe is not None)
    validate_plan_batch(model, [p])
    return p


def test_mtp_depth_comes_from_the_catalog_and_the_hf_config():
    ds = json.loads((Path(__file__).parent / "data" / "hf" / "DeepSeek-V3.config.json").read_text())
    assert model_from_hf_config(ds).mtp_layers == 1 == load_model("deepseek-v3").mtp_layers
    assert model_from_hf_config({**ds, "num_nextn_predict_layers": 0}).mtp_layers == 0
    assert load_model("llama3.1-70b").mtp_layers == 0
    with pytest.raises(SpecError, match="mtp_layers=-1 must be an integer >= 0"):
        model_from_mapping({"num_layers": 2, "hidden_size": 64, "ffn_hidden_size": 256, "num_attention_heads": 4,
                            "vocab_size": 100, "gated_mlp": True, "mtp_layers": -1}, origin="t")


def test_mtp_module_holds_the_readmes_11_5b_unique_parameters():
    """README_WEIGHTS.md: "11.5B unique parameters (excluding the shared 0.9B Embedding and 0.9B output Head)";
    by hand from the config: MLA + 256 routed experts + the shared expert and router + norms + M_k."""
    by_hand = ATTENTION + E * EXPERT + OTHER + NORMS + PROJ
    assert by_hand == pytest.approx(11.5e9, rel=0.015)
    m = load_model("deepseek-v3")
    one = np.ones(1)
    with_mtp = stage_param_counts(model_shape(m), one, one * 0, one, one, one, np.zeros(1, bool), np.ones(1, bool))
    without = stage_param_counts(model_shape(dataclasses.replace(m, mtp_layers=0)), one * 0, one * 0, one, one, one,
                                 np.zeros(1, bool), np.ones(1, bool))
    # the last stage adds M_k and its norms to whatever layers it holds (the block is one of its layers)
    shape = model_shape(m)
    module = shape.attention_params + shape.norm_params + shape.moe_other_params + E * shape.expert_params \
        + shape.mtp_other_params
    assert module == by_hand
    assert float(with_mtp[0][0] - without[0][0]) == pytest.approx(
        shape.attention_params + shape.norm_params + shape.dense_mlp_params + PROJ)


def test_mtp_bytes_on_dualpipes_rank_0_by_hand():
    """The published layout (PP 16, EP 64, ZeRO-1 over DP 128, FP8): the module sits with the output head on
    rank 0 (sec. 3.2.3), one copy: dense parameters whole (tp 1), 256 / 64 = 4 experts; weights 2 + 1 (FP8 copy)
    bytes, gradients 4, Adam states 12 sharded over the 128 DP ranks (dense) or the 2048 / 64 / 16 = 2 expert-DP
    ranks; one chunk of activations (the last stage of its direction): the MoE block's, M_k's inputs (8 h bytes
    per token) and one more set of fp32 logits (10 bytes per logit)."""
    doc = estimate_scenario(load_scenario(EXAMPLE))
    cp = load_parameters().compute
    dense, experts = ATTENTION + NORMS + OTHER + PROJ, 4 * EXPERT
    state = (dense + experts) * (cp["weight_bytes"] + 1 + cp["grad_bytes"]) \
        + cp["optimizer_state_bytes"] * (dense / 128 + experts / 2)
    m = load_model("deepseek-v3")
    act = activation_bytes_per_token_per_layer(m, model_shape(m), np.ones(1), np.ones(1), np.zeros(1, bool),
                                               np.array([3]), moe_layer=True, cache_bytes=1.0)[0]
    tokens = 4096
    by_hand = state + tokens * (act + 8 * H + V * 10)
    mtp = doc["breakdown"]["mtp"]
    assert mtp["modules"] == 1 and mtp["stage_bytes"] == pytest.approx(by_hand, rel=1e-6)
    assert 8e9 < mtp["stage_bytes"] < 14e9
    # placed with the shallowest layers on rank 0 the layout still fits 80 GB
    assert doc["memory"]["fits"] and doc["memory"]["per_gpu_bytes"] < 80e9
    assert any(a.startswith("MTP: 1 module(s)") for a in doc["assumed"])


def test_mtp_compute_by_hand_and_dualpipe_placement_hides_it():
    """Model FLOPs grow by 3 x the module's forward per token (its MoE block with 8 routed + 1 shared expert, the
    attention core at s = 4096 causal, M_k and the output head once more) x the step's tokens. Under 1F1B the
    last stage, now 3 layers + the MTP block + two head passes, becomes the slowest and the step grows by more
    than a quarter; DualPipe's rank 0 runs the first and the last stage half the micro-batches each (sec. 3.2.1,
    3.2.3), so the module costs it a small fraction of that: the balance DeepSeek's placement buys."""
    m, c = load_model("deepseek-v3"), load_cluster("hgx-h800")
    bare = dataclasses.replace(m, mtp_layers=0)
    base = dict(pp=16, ep=64, global_batch_size=15360, seq_length=4096, precision="fp8", moe_dispatcher="deepep",
                recompute="deepseek")
    core = 2 * 128 * (192 + 128) * 4096 / 2
    fwd = 2 * (ATTENTION + 8 * EXPERT + OTHER) + core + 2 * 2 * H * H + 2 * H * V
    grew, steps = {}, {}
    for sched in ("dualpipe", "1f1b"):
        b = PlanBatch.from_plans([_plan(m, 2048, schedule=sched, **base)])
        with_mtp, without = estimate(m, c, b), estimate(bare, c, b)
        extra = float(with_mtp.model_flops_per_step[0] - without.model_flops_per_step[0])
        assert extra == pytest.approx(3 * fwd * 15360 * 4096, rel=1e-6)
        grew[sched] = float(with_mtp.step_time_s[0] - without.step_time_s[0])
        steps[sched] = float(without.step_time_s[0])
    assert grew["1f1b"] > 0.25 * steps["1f1b"]
    assert 0.0 <= grew["dualpipe"] < 0.25 * grew["1f1b"] and grew["dualpipe"] < 0.08 * steps["dualpipe"]
