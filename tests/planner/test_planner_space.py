"""The plan space: rules shared with the estimate path, stage splits, counting, and one-line errors."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tierwise.errors import PlanError
from tierwise.planner.branch_and_bound import brute_force
from tierwise.planner.space import Constraints, build_space, space_size, stage_split, to_batch
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import Plan, PlanBatch, stage_layout, valid_plan_mask, validate_plan_batch


@pytest.fixture(scope="module")
def h100():
    return load_cluster("dgx-h100")


def test_valid_plan_mask_agrees_with_the_one_plan_checks():
    """The vectorized mask and the one-plan messages are the same rules (written once in specs/plan.py)."""
    rng = random.Random(7)
    models = [load_model(n) for n in ("llama3.1-70b", "qwen3-235b-a22b", "mixtral-8x7b", "deepseek-v3")]
    for _ in range(400):
        model = rng.choice(models)
        dp = rng.choice([1, 2, 4, 6, 8])
        plan = Plan.of(tp=rng.choice([1, 2, 3, 8, 16]), pp=rng.choice([1, 2, 3, 4, 7, 200]), cp=rng.choice([1, 2, 3]),
                    dp=dp, ep=rng.choice([1, 2, 3, 8]), etp=rng.choice([1, 2]), vpp=rng.choice([1, 2]),
                    micro_batch_size=rng.choice([1, 2, 3]), global_batch_size=rng.choice([8, 12, 48]),
                    seq_length=rng.choice([4096, 100]), sequence_parallel=rng.random() < 0.5,
                    zero_stage=rng.choice([0, 1]), dp_shard=rng.choice([dp, 2]),
                    first_stage_layers=rng.choice([0, 5]), last_stage_layers=rng.choice([0, 5]))
        try:
            validate_plan_batch(model, [plan])
            ok = True
        except PlanError:
            ok = False
        assert bool(valid_plan_mask(model, PlanBatch.from_plans([plan]))[0]) == ok


def test_stage_split_gives_meta_layout_for_405b():
    assert stage_split(126, 16) == (7, 7)  # Llama 3 paper section 3.3.2: one layer fewer on first and last
    assert stage_split(95, 2) == (48, 47)
    assert stage_split(80, 8) == (0, 0)
    first, last = stage_split(94, 8)
    assert first + last + 6 * ((94 - first - last) // 6) == 94 and first <= (94 - first - last) // 6


def test_every_structure_is_valid_and_uses_every_gpu(h100):
    model = load_model("llama3.1-405b")
    space = build_space(model, h100, 16384, 2048, 8192)
    s = space.structure
    assert np.all(s["tp"] * s["pp"] * s["cp"] * s["dp"] == 16384)
    assert valid_plan_mask(model, to_batch(s, 2048, 8192)).all()
    meta = (s["tp"] == 8) & (s["pp"] == 16) & (s["cp"] == 1) & (s["micro_batch_size"] == 1)
    # the planner leaves the layout to stage_layout: Meta's 7 / 8 / 7 (Megatron-Core's embedding/loss accounting)
    first, last, mid, _ = stage_layout(model.num_layers, to_batch(s, 2048, 8192).select(meta))
    assert meta.any() and set(first) == {7} and set(last) == {7} and set(mid) == {8}


def test_space_size_counts_the_enumeration(h100):
    model = load_model("llama3.1-8b")
    space = build_space(model, h100, 16, 32, 4096, Constraints(max_micro_batch_size=2, max_vpp=2))
    table = brute_force(model, h100, space)
    assert space_size(space, model) == len(table["tp"])
    assert valid_plan_mask(model, to_batch(table, 32, 4096)).all()


def test_fixed_tp_that_does_not_divide_heads_is_one_line(h100):
    with pytest.raises(PlanError, match=r"^tp=3 does not divide num_attention_heads=64; try tp in \{1, 2, 4, 8"):
        build_space(load_model("llama3.1-70b"), h100, 64, 64, 4096, Constraints(tp=3))


def test_zero_gpus_is_one_line(h100):
    with pytest.raises(PlanError, match="num_gpus=0"):
        build_space(load_model("llama3.1-8b"), h100, 0, 64, 4096)


def test_batch_too_small_for_the_gpu_count_is_one_line(h100):
    with pytest.raises(PlanError, match=r"global_batch_size=1 is too small for 16384 GPUs") as err:
        build_space(load_model("llama3.1-8b"), h100, 16384, 1, 8192)
    assert "\n" not in str(err.value)


def test_fixed_degrees_must_divide_the_gpu_count(h100):
    with pytest.raises(PlanError, match="does not divide num_gpus=24"):
        build_space(load_model("llama3.1-8b"), h100, 24, 48, 4096, Constraints(tp=16))


def test_interleaved_schedule_follows_vpp():
    table = {k: np.array([1, 1]) for k in ("tp", "cp", "micro_batch_size")}
    table.update(pp=np.array([4, 4]), dp=np.array([2, 2]), vpp=np.array([1, 2]))
    batch = to_batch(table, 64, 4096)
    assert [batch.plan(i).schedule for i in range(2)] == ["1f1b", "interleaved"]


def test_framework_switches_fill_the_space(h100):
    """Constraints.framework: the switches the search does not choose take the framework's defaults, per
    precision where the framework makes them depend on it (NeMo reduces FP8 runs' gradients in bf16), and
    only the overlaps the framework runs are searched."""
    from tierwise.planner.space import expand_switches
    from tierwise.specs.framework import ATTENTION_KERNELS, GRAD_REDUCE_DTYPES, ZERO2_SYNC
    from tierwise.specs.plan import PRECISION

    model = load_model("qwen3-30b-a3b")
    nemo = build_space(model, h100, 16, 64, 4096, Constraints(framework="nemo", max_micro_batch_size=1, max_vpp=1,
                                                                  precision=("bf16", "fp8")))
    assert nemo.framework == "nemo" and nemo.ep_comm_overlap == (False, True)
    assert np.all(nemo.structure["attention_kernel"] == ATTENTION_KERNELS.index("cudnn"))
    assert np.all(nemo.structure["moe_force_balance"])
    rows = expand_switches(nemo, model, nemo.structure)
    fp8 = rows["precision"] == PRECISION.index("fp8")
    assert fp8.any() and (~fp8).any()
    assert np.all(rows["grad_reduce_dtype"][fp8] == GRAD_REDUCE_DTYPES.index("bf16"))
    assert np.all(rows["grad_reduce_dtype"][~fp8] == GRAD_REDUCE_DTYPES.index("fp32"))
    foundry = build_space(model, h100, 16, 64, 4096, Constraints(framework="llm-foundry", max_micro_batch_size=1))
    assert foundry.tp_comm_overlap == (False,) and foundry.ep_comm_overlap == (False,)
    assert np.all(foundry.structure["zero2_sync"] == ZERO2_SYNC.index("fsdp-per-microbatch"))
    assert not foundry.structure["fused_elementwise"].any()
    assert any(a.startswith("tp_comm_overlap not searched") for a in foundry.assumed)
    plain = build_space(model, h100, 16, 64, 4096, Constraints(max_micro_batch_size=1))
    assert plain.framework == "" and plain.assumed == () and "attention_kernel" not in plain.structure
    with pytest.raises(Exception, match="framework='jax'"):
        build_space(model, h100, 16, 64, 4096, Constraints(framework="jax"))
