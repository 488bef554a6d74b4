"""Issue 14 MoE terms: routed-expert work per rank under expert TP, DeepEP's per-rank deduplication, the load
imbalance of dropless vs forced-balanced routing, and Megatron-FSDP's zero-copy buffers (docs/validation.md)."""

import numpy as np
import pytest

from tierwise.estimate import estimate
from tierwise.parallel.dp import shard_copy_bytes
from tierwise.parallel.ep import deepep_node_dedup, expert_tokens_per_rank, moe_imbalance
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import ZERO3_GATHER, PlanBatch, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping


def _batch(model, n, **plan):
    p = plan_from_mapping(plan, num_gpus=n, num_layers=model.num_layers, moe=model.moe is not None)
    validate_plan_batch(model, [p])
    return PlanBatch.from_plans([p])


BASE = dict(pp=1, micro_batch_size=1, global_batch_size=64, seq_length=4096)


def test_expert_tokens_per_rank_follow_the_sequence_parallel_shard():
    """Megatron-Core's MoE layer gets the S/TP shard and all-gathers over the expert-TP ranks: T etp / tp."""
    m = load_model("mixtral-8x7b")
    tokens = np.array([4096.0])
    cases = {(2, 1): 2048.0, (2, 2): 4096.0, (4, 1): 1024.0, (4, 2): 2048.0, (1, 1): 4096.0}
    for (tp, etp), want in cases.items():
        b = _batch(m, 16, tp=tp, etp=etp, ep=8 // etp, **BASE)
        assert float(expert_tokens_per_rank(b, tokens)[0]) == pytest.approx(want)


def test_expert_gemm_work_per_rank_does_not_depend_on_etp():
    """T etp / tp rows on experts f / etp wide: the same FLOPs per rank for etp 1 and etp = tp, so etp 1 under
    tp 2 costs about what etp 2 does (only tile and memory effects differ), not twice as much."""
    m = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100")
    one = estimate(m, c, _batch(m, 16, tp=2, etp=1, ep=8, moe_force_balance=True, **BASE))
    two = estimate(m, c, _batch(m, 16, tp=2, etp=2, ep=4, moe_force_balance=True, **BASE))
    assert float(one.compute_s[0]) == pytest.approx(float(two.compute_s[0]), rel=0.15)


def test_deepep_sends_a_token_once_per_rank_inside_a_domain():
    """128 experts over 8 ranks, top-8: a token reaches 1 - C(112, 8) / C(128, 8) of the other ranks; DeepEP
    moves that fraction of the per-expert copies, the all-to-all dispatcher all of them."""
    from math import comb

    m = load_model("qwen3-30b-a3b")
    c = load_cluster("dgx-h100")
    b = _batch(m, 8, tp=1, ep=8, moe_dispatcher="deepep", **BASE)
    from tierwise.pricing.comm import placed_span

    span = placed_span(c, b.ep, b.etp.astype(np.int64))
    hit = 1 - comb(112, 8) / comb(128, 8)
    want = 7 * hit / (8 * 7 / 8)
    assert float(deepep_node_dedup(m, b, span)[0]) == pytest.approx(want, rel=1e-9)
    a2a = _batch(m, 8, tp=1, ep=8, moe_dispatcher="alltoall", **BASE)
    assert float(deepep_node_dedup(m, a2a, span)[0]) == 1.0


def test_imbalance_applies_to_dropless_routing_over_several_ranks_only():
    """On the layout it was measured on (Qwen3-235B-A22B, TP 4 with sequence parallelism, EP 8, 16k tokens: 4,096
    routed tokens per rank) the busiest rank sits at ``moe_load_imbalance`` exactly; forced balance and one
    rank give 1, and the all-to-all's busiest receiver pays the ratio."""
    m = load_model("qwen3-235b-a22b")
    params = {"moe_load_imbalance": 2.0}
    ref = dict(pp=1, micro_batch_size=1, global_batch_size=64, seq_length=16384, sequence_parallel=True)
    dropless = _batch(m, 32, tp=4, ep=8, etp=1, **ref)
    forced = _batch(m, 32, tp=4, ep=8, etp=1, moe_force_balance=True, **ref)
    single = _batch(m, 32, tp=4, ep=1, etp=1, **ref)
    tokens = np.array([16384.0])
    assert float(moe_imbalance(m, dropless, params, tokens)[0]) == pytest.approx(2.0, rel=1e-9)
    assert float(moe_imbalance(m, forced, params, tokens)[0]) == 1.0
    assert float(moe_imbalance(m, single, params, tokens)[0]) == 1.0
    c = load_cluster("dgx-h100")
    slow = estimate(m, c, dropless, params=params)
    fast = estimate(m, c, forced, params=params)
    assert float(slow.step_time_s[0]) > float(fast.step_time_s[0])
    assert float(slow.axis_time_s["ep"][0]) == pytest.approx(2.0 * float(fast.axis_time_s["ep"][0]))


def test_nemo_moe_recipes_pad_to_capacity_and_say_so():
    m = load_model("mixtral-8x7b")
    p = plan_from_mapping(dict(tp=1, ep=8, **BASE), num_gpus=8, num_layers=m.num_layers, framework="nemo", moe=True)
    assert p.moe_force_balance
    assert any(a.startswith("moe_force_balance=true") and "MegatronTokenDropCallback" in a for a in p.assumed)
    q = plan_from_mapping(dict(tp=1, ep=8, **BASE), num_gpus=8, num_layers=m.num_layers, framework="megatron",
                          moe=True)
    assert not q.moe_force_balance and any(a.startswith("moe_force_balance=false") for a in q.assumed)


def test_megatron_fsdp_moves_no_bytes_outside_its_collectives():
    codes = np.array([ZERO3_GATHER.index(k) for k in ZERO3_GATHER])
    per = dict(zip(ZERO3_GATHER, shard_copy_bytes(codes, 2.0, 4.0, 1.0), strict=True))
    assert per["zero-copy"] == 0.0 and per["flat"] > 0 and per["per-parameter"] > 0


def test_moe_layer_tp_traffic_is_the_attention_pair_plus_the_expert_tp_pair():
    """With sequence parallelism a MoE layer's MLP block gathers and scatters over the expert-TP group, not TP
    (Megatron-Core's dispatcher uses the expert-TP group): at etp 1 a MoE layer has only the attention block's
    all-gather + reduce-scatter, half a dense layer's TP traffic; at etp = tp it has a dense layer's. Mixtral
    8x7B has every layer MoE, so the step's TP bytes halve from etp = tp to etp = 1."""
    from tierwise.workload.flops import model_shape
    from tierwise.workload.traffic import layer_traffic

    m = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100")
    one_b = _batch(m, 16, tp=4, etp=1, ep=8, sequence_parallel=True, **BASE)
    tp_b = _batch(m, 16, tp=4, etp=4, ep=2, sequence_parallel=True, **BASE)
    assert all(float(r.calls[0]) == 0.0 for r in layer_traffic(m, model_shape(m), one_b)["tp_moe"])
    moe_records = layer_traffic(m, model_shape(m), tp_b)["tp_moe"]
    assert [(r.kind, float(r.counts["forward"][0]), float(r.counts["backward"][0])) for r in moe_records] == [
        ("all-gather", 1.0, 1.0), ("reduce-scatter", 1.0, 1.0)]
    one, full = estimate(m, c, one_b), estimate(m, c, tp_b)
    assert float(one.axis_bytes["tp"][0]) == pytest.approx(0.5 * float(full.axis_bytes["tp"][0]), rel=1e-9)
    assert float(one.axis_time_s["tp"][0]) < 0.55 * float(full.axis_time_s["tp"][0])
