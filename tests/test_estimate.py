"""The step estimator: invariants, memory formulas, and the vectorized batch equal to single estimates."""

import numpy as np
import pytest

from tierwise.estimate import estimate
from tierwise.estimate.compute import memory_bound_bytes_per_s
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model, model_from_mapping
from tierwise.specs.plan import PlanBatch, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.workload.flops import model_shape
from tierwise.workload.memory import activation_bytes_per_token_per_layer


def run(model, cluster, num_gpus, **plan):
    m = load_model(model) if isinstance(model, str) else model
    p = plan_from_mapping(plan, num_gpus=num_gpus)
    validate_plan_batch(m, [p])
    return estimate(m, load_cluster(cluster), PlanBatch.from_plans([p]))


BASE = dict(global_batch_size=512, seq_length=4096)


@pytest.mark.parametrize("axis", ["tp", "cp", "pp", "ep", "dp"])
def test_degree_one_means_no_traffic_on_that_axis(axis):
    model = "mixtral-8x7b"
    r = run(model, "dgx-h100", 8, tp=1, pp=1, cp=1, ep=1, dp=8 if axis != "dp" else 1,
            global_batch_size=64, seq_length=4096) if axis != "dp" else run(model, "dgx-h100", 8, tp=8, dp=1,
                                                                              global_batch_size=64, seq_length=4096)
    assert float(r.axis_bytes[axis][0]) == 0
    assert float(r.axis_time_s[axis][0]) == 0
    assert float(r.axis_exposed_s[axis][0]) == 0


def test_each_axis_carries_traffic_when_its_degree_is_above_one():
    r = run("mixtral-8x7b", "dgx-h100", 64, tp=2, pp=2, cp=2, ep=4, global_batch_size=64, seq_length=4096)
    for axis in ("tp", "cp", "pp", "ep", "dp"):
        assert float(r.axis_bytes[axis][0]) > 0, axis


def test_tp_tier_follows_placement():
    inside = run("llama3.1-70b", "dgx-h100", 64, tp=8, **BASE)
    across = run("llama3.1-70b", "dgx-h100", 64, tp=16, **BASE)
    assert int(inside.axis_tier["tp"][0]) == 1  # scale_up
    assert int(across.axis_tier["tp"][0]) == 3  # scale_out
    assert float(across.axis_time_s["tp"][0]) > float(inside.axis_time_s["tp"][0])


def test_memory_falls_with_each_zero_stage_and_recompute():
    mems = [float(run("llama3.1-8b", "dgx-h100", 64, zero_stage=z, **BASE).memory["per_gpu_bytes"][0]) for z in range(4)]
    assert mems == sorted(mems, reverse=True) and mems[0] > mems[3]
    acts = [float(run("llama3.1-8b", "dgx-h100", 64, recompute=r, **BASE).memory["activations_bytes"][0])
            for r in ("none", "selective", "full")]
    assert acts[0] >= acts[1] > acts[2]


def test_activation_bytes_match_korthikanti_without_dropout_masks():
    """Korthikanti et al. 2022 sec. 4.2.2: 34 s b h / t per layer with TP+SP and no s^2 term (flash attention);
    this model stores no dropout masks (2 s b h of the 34), and adds fp32 softmax statistics (4 a per token)."""
    gpt = model_from_mapping({"name": "gpt", "num_layers": 4, "hidden_size": 4096, "ffn_hidden_size": 16384,
                              "num_attention_heads": 32, "vocab_size": 51200, "gated_mlp": False}, origin="test")
    shape = model_shape(gpt)
    for t in (1, 2, 8):
        got = activation_bytes_per_token_per_layer(gpt, shape, np.array([t]), np.array([t]), np.array([True]),
                                                   np.array([0]), moe_layer=False)
        assert float(got[0]) == pytest.approx((34 - 2) * 4096 / t + 4 * 32 / t)


def test_plan_that_does_not_fit_is_not_an_error():
    r = run("llama3.1-405b", "dgx-h100", 8, tp=8, global_batch_size=8, seq_length=8192)
    assert not bool(r.memory["fits"][0])
    assert float(r.memory["per_gpu_bytes"][0]) > float(r.memory["capacity_bytes"][0])
    assert np.isfinite(r.step_time_s[0])


def test_mfu_hfu_and_recompute():
    plain = run("gpt3-175b", "dgx-a100", 512, tp=8, pp=8, recompute="none", global_batch_size=512, seq_length=2048)
    full = run("gpt3-175b", "dgx-a100", 512, tp=8, pp=8, recompute="full", global_batch_size=512, seq_length=2048)
    assert float(plain.mfu[0]) == pytest.approx(float(plain.hfu[0]))
    assert float(full.hfu[0]) > float(full.mfu[0])
    assert float(full.step_time_s[0]) > float(plain.step_time_s[0])
    assert 0 < float(plain.mfu[0]) < 1


def test_interleaving_shrinks_the_bubble():
    one = run("gpt3-175b", "dgx-a100", 512, tp=8, pp=8, vpp=1, global_batch_size=512, seq_length=2048)
    six = run("gpt3-175b", "dgx-a100", 512, tp=8, pp=8, vpp=3, global_batch_size=512, seq_length=2048)
    assert float(six.bubble_s[0]) < float(one.bubble_s[0])


def test_grad_reduce_overlap_hides_dp_traffic():
    on = run("llama3.1-8b", "dgx-h100", 256, overlap_grad_reduce=True, **BASE)
    off = run("llama3.1-8b", "dgx-h100", 256, overlap_grad_reduce=False, overlap_param_gather=False, **BASE)
    assert float(on.axis_exposed_s["dp"][0]) < float(off.axis_exposed_s["dp"][0])
    assert float(off.axis_exposed_s["dp"][0]) == pytest.approx(float(off.axis_time_s["dp"][0]))


def test_scaling_efficiency_is_compute_over_step():
    r = run("llama3.1-70b", "dgx-h100", 256, tp=8, pp=4, **BASE)
    assert float(r.scaling_efficiency[0]) == pytest.approx(float(r.compute_s[0] / r.step_time_s[0]))
    assert 0 < float(r.scaling_efficiency[0]) <= 1


def test_a_batch_equals_its_plans_estimated_one_by_one():
    m, c = load_model("llama3.1-70b"), load_cluster("dgx-h100")
    plans = [plan_from_mapping(dict(tp=tp, pp=pp, recompute=rc, zero_stage=z, **BASE), num_gpus=256)
             for tp, pp, rc, z in ((8, 4, "full", 1), (4, 8, "selective", 0), (8, 2, "none", 3), (2, 16, "full", 2))]
    together = estimate(m, c, PlanBatch.from_plans(plans))
    for i, p in enumerate(plans):
        alone = estimate(m, c, PlanBatch.from_plans([p]))
        assert float(alone.step_time_s[0]) == pytest.approx(float(together.step_time_s[i]), rel=1e-12)
        assert float(alone.memory["per_gpu_bytes"][0]) == pytest.approx(float(together.memory["per_gpu_bytes"][i]))


def test_faster_network_never_slows_a_step():
    slow = run("llama3.1-70b", "dgx-a100", 256, tp=8, pp=4, **BASE)
    from tierwise.specs.cluster import cluster_from_mapping

    fast_cluster = cluster_from_mapping({"base": "dgx-a100", "nic_bandwidth": "400 Gb/s"})
    p = plan_from_mapping(dict(tp=8, pp=4, **BASE), num_gpus=256)
    fast = estimate(load_model("llama3.1-70b"), fast_cluster, PlanBatch.from_plans([p]))
    assert float(fast.step_time_s[0]) <= float(slow.step_time_s[0])


def test_dp_group_is_placed_outside_tp():
    """With tp 8 innermost, a DP group of 16 sits at stride 8: one rank per node, one NIC each. Put dp
    innermost instead (order dp-tp-cp-pp) and 8 DP ranks share a node's 8 NICs in one ring: same bytes, faster."""
    kw = dict(tp=8, zero_stage=1, overlap_grad_reduce=False, global_batch_size=256, seq_length=4096)
    outer = run("llama3.1-8b", "dgx-h100", 128, **kw)
    inner = run("llama3.1-8b", "dgx-h100", 128, order="dp-tp-cp-pp", **kw)
    assert int(outer.axis_tier["dp"][0]) == 3 and int(outer.axis_tier["tp"][0]) == 1
    assert int(inner.axis_tier["tp"][0]) == 3  # tp now at stride 16 crosses nodes
    assert float(inner.axis_bytes["dp"][0]) == pytest.approx(float(outer.axis_bytes["dp"][0]))
    assert float(inner.axis_time_s["dp"][0]) < float(outer.axis_time_s["dp"][0])


def test_chunked_batches_equal_one_batch(monkeypatch):
    """Large batches are estimated in chunks; the result is the same as in one go."""
    import tierwise.estimate.step as step

    m, c = load_model("mixtral-8x7b"), load_cluster("dgx-h100")
    plans = [plan_from_mapping(dict(tp=tp, ep=ep, recompute=rc, **BASE), num_gpus=64)
             for tp in (1, 2, 4) for ep in (1, 2, 8) for rc in ("none", "full")]
    whole = estimate(m, c, PlanBatch.from_plans(plans))
    monkeypatch.setattr(step, "CHUNK", 5)
    chunked = estimate(m, c, PlanBatch.from_plans(plans))
    assert np.array_equal(whole.step_time_s, chunked.step_time_s)
    assert np.array_equal(whole.memory["per_gpu_bytes"], chunked.memory["per_gpu_bytes"])
    assert np.array_equal(whole.axis_tier["ep"], chunked.axis_tier["ep"])


EP_PLAN = dict(tp=1, pp=1, ep=8, etp=1, micro_batch_size=1, global_batch_size=64, seq_length=4096, zero_stage=1)


def test_expert_overlap_hides_the_all_to_all_but_one_micro_batch():
    """Combined 1F1B: the same traffic, less of it exposed; never less than the interference share of the
    hidden part plus one unpaired micro-batch's all-to-all, never more than without overlap."""
    from tierwise.estimate.compute import compute_params

    off = run("mixtral-8x7b", "dgx-h100", 8, **EP_PLAN)
    on = run("mixtral-8x7b", "dgx-h100", 8, ep_comm_overlap=True, **EP_PLAN)
    total = float(off.axis_time_s["ep"][0])
    assert float(on.axis_time_s["ep"][0]) == pytest.approx(total)
    assert float(off.axis_exposed_s["ep"][0]) == pytest.approx(total)
    exposed = float(on.axis_exposed_s["ep"][0])
    m = int(on.num_microbatches[0])
    interference = compute_params()["overlap_interference"]
    assert total / m <= exposed < total
    assert exposed >= total / m + interference * total * (m - 1) / m * (1 - 1e-9)
    assert float(on.step_time_s[0]) < float(off.step_time_s[0])


def test_expert_overlap_holds_one_more_micro_batch_of_activations():
    off = run("mixtral-8x7b", "dgx-h100", 8, **EP_PLAN)
    on = run("mixtral-8x7b", "dgx-h100", 8, ep_comm_overlap=True, **EP_PLAN)
    # pp = 1: one micro-batch of layer activations plus the last stage's fp32 logits (write, softmax, grad)
    logits = 4096 * load_model("mixtral-8x7b").vocab_size * (4 + 4 + 2)
    one_mb = float(off.memory["activations_bytes"][0]) - logits
    assert float(on.memory["activations_bytes"][0]) == pytest.approx(2 * one_mb + logits)


@pytest.mark.parametrize("change, needle", [
    (dict(ep=1), "needs ep > 1"),
    (dict(recompute="full"), "full recompute"),
    (dict(tp=1, pp=2, dp=4, ep=4), "interleaved schedule"),
    (dict(global_batch_size=8), "adjacent micro-batches"),
])
def test_expert_overlap_rules_are_one_line_each(change, needle):
    from tierwise.errors import PlanError

    plan = {**EP_PLAN, "ep_comm_overlap": True, **change}
    with pytest.raises(PlanError, match=needle):
        run("mixtral-8x7b", "dgx-h100", 8, **plan)


def test_zero3_tensor_list_adds_one_copy_per_rank_per_tensor_and_collective():
    """DeepSpeed-2021 ZeRO-3: each parameter tensor's list-form gather (forward, backward) and reduce-scatter
    costs one eager copy per rank; the CPU time adds to the step and grows with the group."""
    from tierwise.estimate.compute import compute_params

    model = load_model("gpt3-175b")
    assert model.bias  # GPT-3: 4 weights + 2 norms, each with a bias -> 12 tensors per layer
    plan = dict(tp=1, pp=1, zero_stage=3, micro_batch_size=1, seq_length=2048, recompute="full")
    overhead = compute_params()["torch_op_overhead"]
    for n in (384, 768):
        flat = run(model, "dgx-a100", n, global_batch_size=n, **plan)
        listed = run(model, "dgx-a100", n, global_batch_size=n, zero3_gather="tensor-list", **plan)
        # the list form's copies are launch time; the flat form's buffer passes are its own term
        assert float(listed.shard_copy_s[0]) == 0.0 and float(flat.shard_copy_s[0]) > 0
        extra = float(listed.step_time_s[0] - flat.step_time_s[0] + flat.shard_copy_s[0])
        assert extra == pytest.approx(96 * 12 * 3 * n * overhead, rel=1e-9)
        assert float(listed.axis_exposed_s["dp"][0] - flat.axis_exposed_s["dp"][0]) == pytest.approx(extra)


def test_deepspeed_2021_prefetch_is_gated_by_max_live_parameters():
    """DeepSpeed 2021 prefetches the next weight only while the live one is under stage3_max_live_parameters
    (1e9 elements): GPT-3 175B's matrices (<= 604M) never block, GPT 530B's QKV (1.26B) and MLP (1.68B) block the
    gather behind them (output projection, MLP out, next QKV: 2/3 of the layer's weights); tp 8 unblocks."""
    from tierwise.estimate.compute import compute_params
    from tierwise.parallel.dp import deepspeed_blocked_gather_fraction, param_tensors_per_layer
    from tierwise.workload.flops import model_shape

    s175, s530 = model_shape(load_model("gpt3-175b")), model_shape(load_model("gpt-530b"))
    assert float(deepspeed_blocked_gather_fraction(s175, np.array([1.0]))[0]) == 0.0
    h = 20480
    assert float(deepspeed_blocked_gather_fraction(s530, np.array([1.0]))[0]) == pytest.approx(
        (h * h + 4 * h * h + 3 * h * h) / (12 * h * h))
    assert float(deepspeed_blocked_gather_fraction(s530, np.array([8.0]))[0]) == 0.0
    plan = dict(tp=1, pp=1, zero_stage=3, micro_batch_size=1, seq_length=2048, recompute="full",
                zero3_gather="tensor-list")
    model = load_model("gpt-530b")
    listed = run(model, "dgx-a100", 640, global_batch_size=640, **plan)
    flat = run(model, "dgx-a100", 640, global_batch_size=640, **{**plan, "zero3_gather": "flat"})
    launch = model.num_layers * param_tensors_per_layer(model, s530, False) * 3 * 640 * compute_params()[
        "torch_op_overhead"]
    # beyond the per-rank copies' launch time, the blocked gathers are exposed
    assert float(listed.axis_exposed_s["dp"][0] - flat.axis_exposed_s["dp"][0]) > launch * 1.01


@pytest.mark.parametrize("mode", ["tensor-list", "per-parameter"])
def test_zero3_gather_modes_need_zero_3(mode):
    from tierwise.errors import PlanError

    with pytest.raises(PlanError, match="zero_stage: 3"):
        run("gpt3-175b", "dgx-a100", 64, global_batch_size=64, seq_length=2048, zero_stage=1, zero3_gather=mode)


def test_unfused_cross_entropy_moves_36_more_bytes_per_logit_element():
    """fused_cross_entropy false (Megatron-Core's default): the fp32 copy and separate passes over the logits
    cost 48 B per element against the fused kernel's 12, on the last stage, split over tp like the logits."""
    from tierwise.estimate.compute import compute_params

    cp_ = compute_params()
    assert cp_["cross_entropy_unfused_extra_bytes"] == 36
    hbm = memory_bound_bytes_per_s(load_cluster("dgx-h100").accelerator)
    model = load_model("llama3.1-8b")
    for tp in (1, 2):
        base = dict(tp=tp, pp=1, micro_batch_size=1, global_batch_size=8 // tp * 2, seq_length=4096)
        unfused = run(model, "dgx-h100", 8, **base)
        fused = run(model, "dgx-h100", 8, fused_cross_entropy=True, **base)
        m = float(unfused.num_microbatches[0])
        extra = m * 4096 * model.vocab_size / tp * 36 / hbm
        assert float(unfused.step_time_s[0] - fused.step_time_s[0]) == pytest.approx(extra, rel=1e-6)
        assert float(unfused.memory_bound_s[0] - fused.memory_bound_s[0]) == pytest.approx(extra, rel=1e-6)


def test_zero3_buffer_passes_counted_per_micro_batch_over_the_unsharded_parameters():
    """FSDP1 (flat): concatenate the views' gradients (2 x 2 B), cast bf16 -> fp32 (2 + 4 B), pre-divide in
    place (2 x 4 B) = 18 B per parameter per micro-batch; FSDP2 (per-parameter): copy out of each all-gather
    (2 x 2 B, forward and backward re-gather) and copy-cast into the reduce-scatter input (2 + 4 B) = 14 B,
    10 B without the re-gather. At the memory-bound rate, added to the step, never on ZeRO 1 or one rank."""
    hbm = memory_bound_bytes_per_s(load_cluster("dgx-h100").accelerator)
    model = load_model("llama3.1-8b")
    shape = model_shape(model)
    params = (model.num_layers * (shape.attention_params + shape.norm_params + shape.dense_mlp_params)
              + shape.embedding_params + shape.lm_head_params)  # unsharded, per rank (tp 1, pp 1)
    base = dict(tp=1, pp=1, zero_stage=3, micro_batch_size=2, seq_length=2048, recompute="none")
    flat = run("llama3.1-8b", "dgx-h100", 8, global_batch_size=64, **base)  # 4 micro-batches
    assert float(flat.shard_copy_s[0]) == pytest.approx(4 * params * 18 / hbm, rel=1e-6)
    fsdp2 = run("llama3.1-8b", "dgx-h100", 8, global_batch_size=64, zero3_gather="per-parameter", **base)
    assert float(fsdp2.shard_copy_s[0]) == pytest.approx(4 * params * 14 / hbm, rel=1e-6)
    keep = run("llama3.1-8b", "dgx-h100", 8, global_batch_size=64, zero3_gather="per-parameter",
               reshard_after_forward=False, **base)
    assert float(keep.shard_copy_s[0]) == pytest.approx(4 * params * 10 / hbm, rel=1e-6)
    for est in (flat, fsdp2):  # the passes are part of the step, outside compute and communication
        other = est.step_time_s[0] - est.shard_copy_s[0]
        parts = est.compute_s[0] + est.recompute_s[0] + est.bubble_s[0] + est.exposed_comm_s[0] + est.optimizer_s[0]
        assert float(other) == pytest.approx(float(parts), rel=1e-9)
    zero1 = run("llama3.1-8b", "dgx-h100", 8, global_batch_size=64, **{**base, "zero_stage": 1})
    single = run("llama3.1-8b", "dgx-h100", 1, global_batch_size=8, **base)
    assert float(zero1.shard_copy_s[0]) == 0.0 and float(single.shard_copy_s[0]) == 0.0


def test_eager_pytorch_moves_more_elementwise_bytes_only_where_the_ops_differ():
    """fused_elementwise false (eager PyTorch): RMSNorm, SwiGLU and rotary embedding cost extra HBM passes;
    a LayerNorm/GELU model without rotary embedding (MPT, GPT) runs the same native kernels either way."""
    from tierwise.estimate.compute import compute_params

    llama, mpt = load_model("llama3.1-8b"), load_model("mpt-7b")
    assert (llama.norm, llama.rotary, mpt.norm, mpt.rotary) == ("rmsnorm", True, "layernorm", False)
    plan = dict(micro_batch_size=1, global_batch_size=8, seq_length=4096, zero_stage=3)
    fused = run(llama, "dgx-h100", 8, **plan)
    eager = run(llama, "dgx-h100", 8, fused_elementwise=False, **plan)
    c = compute_params()
    per_token_layer = (c["eager_rmsnorm_extra_bytes"] * 2 * llama.hidden_size
                       + c["eager_swiglu_extra_bytes"] * llama.ffn_hidden_size
                       + c["eager_rope_extra_bytes"] * (llama.q_channels + llama.kv_channels))
    hbm = memory_bound_bytes_per_s(load_cluster("dgx-h100").accelerator)
    expected = 3 * per_token_layer * 4096 * llama.num_layers / hbm  # forward + backward (2x) per micro-batch
    assert float(eager.memory_bound_s[0] - fused.memory_bound_s[0]) == pytest.approx(expected, rel=1e-9)
    assert float(eager.step_time_s[0]) > float(fused.step_time_s[0])
    same = run(mpt, "dgx-h100", 8, **plan), run(mpt, "dgx-h100", 8, fused_elementwise=False, **plan)
    assert float(same[0].step_time_s[0]) == float(same[1].step_time_s[0])


def test_attention_efficiency_falls_on_short_sequence_chunks():
    """Attention time per token grows like s + s_half, not like s (flash attention's measured efficiency
    against sequence length, catalog parameter attention_half_seq_tokens)."""
    from tierwise.estimate.compute import compute_params

    s_half = compute_params()["attention_half_seq_tokens"]
    short = run("llama3.1-8b", "dgx-h100", 8, global_batch_size=64, seq_length=1024)
    long = run("llama3.1-8b", "dgx-h100", 8, global_batch_size=8, seq_length=8192)  # same tokens per step
    ratio = float(long.attention_s[0]) / float(short.attention_s[0])
    assert ratio == pytest.approx((8192 + s_half) / (1024 + s_half), rel=1e-9)


# --- placement by hop (issue 13) -------------------------------------------------------------------------

def _send_recv(cluster, size_bytes, tier):
    """One transfer of ``size_bytes`` between two ranks joined by a hop of hop class ``tier`` (index)."""
    from tierwise.collectives.model import collective_cost
    from tierwise.hierarchy import pair_span

    return float(collective_cost("send-recv", size_bytes, pair_span(cluster, tier), cluster).time_s)


def test_pipeline_that_leaves_the_node_is_priced_on_scale_out():
    """Issue 13's scenario: tp 2 x pp 8 at tp-pp-cp-dp on 64 DGX H100 puts stages 0-3 in node 0 and 4-7 in
    node 1. Boundary 3|4 crosses InfiniBand; the slowest stages (3 and 4) pay it and one NVLink boundary
    per micro-batch, and the fill and drain pay all seven boundaries (six NVLink, one IB) twice."""
    plan = dict(tp=2, pp=8, global_batch_size=64, seq_length=4096, order="tp-pp-cp-dp", recompute="full")
    r = run("llama3.1-70b", "dgx-h100", 64, **plan)
    assert int(r.axis_tier["pp"][0]) == 3  # scale_out
    c = load_cluster("dgx-h100")
    msg = 2.0 * 4096 * 8192 / 2  # bf16 activations of one micro-batch, scattered over tp 2 (SP)
    nvlink, ib = _send_recv(c, msg, 0), _send_recv(c, msg, 1)
    assert ib > 5 * nvlink
    m = float(r.num_microbatches[0])
    assert float(r.axis_time_s["pp"][0]) == pytest.approx(m * (ib + nvlink), rel=1e-9)
    # at tp-cp-dp-pp (dp 4 inside pp: stride 8) every boundary crosses nodes: the slowest stage pays two IB hops
    outer = run("llama3.1-70b", "dgx-h100", 64, **{**plan, "order": "tp-cp-dp-pp"})
    assert float(outer.axis_time_s["pp"][0]) == pytest.approx(m * 2 * ib, rel=1e-9)


def test_bubble_pays_each_boundary_on_its_own_tier():
    """bubble = (pp - 1) / v x (t_mb - steady-state p2p) + 2 x sum over boundaries; a uniform pipeline is
    the former (pp - 1) / v x t_mb."""
    plan = dict(tp=2, pp=8, global_batch_size=64, seq_length=4096, recompute="full", sequence_parallel=True)
    c = load_cluster("dgx-h100")
    msg = 2.0 * 4096 * 8192 / 2
    nvlink, ib = _send_recv(c, msg, 0), _send_recv(c, msg, 1)
    mixed = run("llama3.1-70b", "dgx-h100", 64, **plan, order="tp-pp-cp-dp")
    m = float(mixed.num_microbatches[0])
    t_mb = (float(mixed.step_time_s[0]) - float(mixed.bubble_s[0]) - float(mixed.optimizer_s[0])
            - float(mixed.axis_exposed_s["dp"][0])) / m
    want = 7 * (t_mb - (ib + nvlink)) + 2 * (6 * nvlink + ib)
    assert float(mixed.bubble_s[0]) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("order", ["tp-cp-dp-pp", "tp-cp-pp-dp", "tp-dp-cp-pp", "cp-tp-dp-pp", "tp-pp-cp-dp",
                                   "dp-tp-cp-pp"])
def test_every_axis_label_is_the_tier_of_its_slowest_hop_and_the_json_agrees(order):
    """For every order: each axis's tier is the tier of its whole group (its slowest hop), and the estimate
    JSON's ``breakdown.per_axis.<axis>.tier`` equals ``tiers.<axis>``."""
    from tierwise.estimate.scenario import estimate_scenario, scenario_from_mapping
    from tierwise.hierarchy import TIER_ORDER, group_span
    from tierwise.workload.traffic import axis_strides

    plan = dict(tp=2, pp=4, cp=2, global_batch_size=64, seq_length=8192, order=order)
    r = run("llama3.1-70b", "dgx-h100", 64, **plan)
    p = plan_from_mapping(plan, num_gpus=64)
    batch = PlanBatch.from_plans([p])
    strides = {a: int(v[0]) for a, v in axis_strides(batch).items()}
    c = load_cluster("dgx-h100")
    for axis in ("tp", "cp", "pp"):
        want = int(group_span(c, getattr(p, axis), strides[axis]).tier)
        assert int(r.axis_tier[axis][0]) == want, axis
    doc = estimate_scenario(scenario_from_mapping({"model": "llama3.1-70b", "cluster": "dgx-h100", "num_gpus": 64,
                                                   "plan": plan}, origin="test"))
    for axis, row in doc["breakdown"]["per_axis"].items():
        assert row["tier"] == doc["tiers"][axis] == TIER_ORDER[int(r.axis_tier[axis][0])]


def test_cp_ring_across_nodes_costs_at_least_4x_the_ring_inside_one():
    """tp 2 x cp 8: at tp-cp-dp-pp the ring (stride 2) spans two nodes and runs every pass at the pace of its
    two InfiniBand hops; at cp-tp-dp-pp it stays on one node's NVLink. Issue 13: >= 4x on DGX H100."""
    plan = dict(tp=2, cp=8, global_batch_size=64, seq_length=32768, recompute="full")
    across = run("llama3.1-70b", "dgx-h100", 64, **plan, order="tp-cp-dp-pp")
    inside = run("llama3.1-70b", "dgx-h100", 64, **plan, order="cp-tp-dp-pp")
    assert int(across.axis_tier["cp"][0]) == 3 and int(inside.axis_tier["cp"][0]) == 1
    ratio = float(across.axis_time_s["cp"][0]) / float(inside.axis_time_s["cp"][0])
    assert ratio >= 4.0
    c = load_cluster("dgx-h100")
    # the ratio is the ratio of one pass over IB to one over NVLink (same chunk, same number of passes)
    shape = model_shape(load_model("llama3.1-70b"))
    chunk = 2.0 * 32768 / 8 * shape.kv_bytes_channels / 2
    assert ratio == pytest.approx(_send_recv(c, chunk, 1) / _send_recv(c, chunk, 0), rel=1e-9)
