"""Activation offload to the host (issue 29 item 3): plan ``activation_offload_layers`` (Megatron-Core
``cpu_offloading_num_layers``), its memory, its time on the host tier, and the NeMo recompute inference."""


import numpy as np
import pytest

from tierwise.errors import TierwiseError
from tierwise.estimate import estimate
from tierwise.estimate.scenario import infer_settings
from tierwise.parallel.offload import host_copy_rate
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.parameters import load_parameters
from tierwise.specs.plan import PlanBatch, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.workload.flops import model_shape
from tierwise.workload.memory import activation_bytes_per_token_per_layer

MODEL = "llama3.1-70b"
PLAN = dict(tp=8, dp=8, zero_stage=3, global_batch_size=64, micro_batch_size=1, seq_length=8192)


def _run(cluster, k, **extra):
    model = load_model(MODEL)
    plan = plan_from_mapping({**PLAN, **extra, "activation_offload_layers": k}, num_gpus=64)
    validate_plan_batch(model, [plan])
    return estimate(model, load_cluster(cluster), PlanBatch.from_plans([plan]))


def test_memory_drops_by_the_offloaded_layers_activations():
    model = load_model(MODEL)
    per_token = float(activation_bytes_per_token_per_layer(model, model_shape(model), np.array([8.0]), np.array([8.0]),
                                                           np.array([True]), np.array([0]), moe_layer=False)[0])
    tokens = 8192  # one micro-batch of one sequence, cp = 1
    base = _run("dgx-h100", 0)
    for k in (20, 79):
        off = _run("dgx-h100", k)
        dropped = float(base.memory["activations_bytes"][0] - off.memory["activations_bytes"][0])
        assert dropped == pytest.approx(k * per_token * tokens, rel=1e-9)
        assert float(base.memory["per_gpu_bytes"][0] - off.memory["per_gpu_bytes"][0]) == pytest.approx(dropped)
    # at most all layers but one leave HBM (Megatron-Core keeps the last)
    assert float(_run("dgx-h100", 79).memory["activations_bytes"][0]) >= per_token * tokens


def test_exposed_copy_time_zero_on_c2c_positive_on_pcie():
    """GB200's NVLink-C2C (900 GB/s bidirectional, 450 one way) carries a layer's activations faster than the
    layer computes; H100's PCIe 5.0 x16 (63 GB/s one way) does not, at this shape."""
    assert host_copy_rate(load_cluster("gb200-nvl72"), load_parameters()) == pytest.approx(450e9 * 0.88)
    assert host_copy_rate(load_cluster("dgx-h100"), load_parameters()) == pytest.approx(63e9 * 0.88)
    fast0, fast = _run("gb200-nvl72", 0), _run("gb200-nvl72", 40)
    assert float(fast.offload_exposed_s[0]) == 0.0
    assert float(fast.step_time_s[0]) == float(fast0.step_time_s[0])
    slow0, slow = _run("dgx-h100", 0), _run("dgx-h100", 40)
    exposed = float(slow.offload_exposed_s[0])
    assert exposed > 0
    assert float(slow.step_time_s[0] - slow0.step_time_s[0]) == pytest.approx(exposed, rel=1e-9)


def test_exposed_time_by_hand_on_pcie():
    """k layers x (copy - forward of one layer) + (copy - backward of one layer), each copy at the host rate."""
    model = load_model(MODEL)
    cluster = load_cluster("dgx-h100")
    per_token = float(activation_bytes_per_token_per_layer(model, model_shape(model), np.array([8.0]), np.array([8.0]),
                                                           np.array([True]), np.array([0]), moe_layer=False)[0])
    x = cluster.host_latency_s + per_token * 8192 / (63e9 * 0.88)
    est = _run("dgx-h100", 10)
    fwd = float(est.forward_layers_s[0]) / model.num_layers
    bwd_floor = 2 * fwd  # the backward is at least twice the forward
    exposed = float(est.offload_exposed_s[0])
    # 64 / (1 x 8) = 8 micro-batches per step; per micro-batch the backward's copy hides behind at least 2 f
    per_mb = exposed / 8
    assert 10 * max(x - fwd, 0.0) <= per_mb <= 10 * (max(x - fwd, 0.0) + max(x - bwd_floor, 0.0)) + 1e-12
    assert per_mb > 0


def test_nemo_inference_offloads_before_recompute_where_it_fits():
    model = load_model(MODEL)
    cluster = load_cluster("dgx-h100")
    stated = dict(tp=4, dp=16, zero_stage=3, global_batch_size=128, micro_batch_size=2, seq_length=8192)
    nemo = plan_from_mapping(stated, num_gpus=64, framework="nemo")
    chosen, note = infer_settings(model, cluster, nemo)
    assert chosen.recompute == "none" and chosen.activation_offload_layers > 0
    assert "activation_offload_layers" in note
    # the fewest layers that fit: one fewer does not fit
    fits = estimate(model, cluster, PlanBatch.from_plans([chosen])).memory["fits"][0]
    fewer = chosen.replace(activation_offload_layers=chosen.activation_offload_layers - 1)
    assert fits and not estimate(model, cluster, PlanBatch.from_plans([fewer])).memory["fits"][0]
    # Megatron-LM's own recipes recompute; and with pp > 1 Megatron-Core cannot offload
    megatron, _ = infer_settings(model, cluster, plan_from_mapping(stated, num_gpus=64, framework="megatron"))
    assert megatron.recompute != "none" and megatron.activation_offload_layers == 0
    piped = plan_from_mapping({**stated, "pp": 2, "dp": 8}, num_gpus=64, framework="nemo")
    assert infer_settings(model, cluster, piped)[0].activation_offload_layers == 0


def test_megatron_name_and_rules():
    model = load_model(MODEL)
    plan = plan_from_mapping({**PLAN, "cpu_offloading_num_layers": 30}, num_gpus=64)
    assert plan.activation_offload_layers == 30
    assert plan.as_dict()["activation_offload_layers"] == 30
    assert "activation_offload_layers" not in plan_from_mapping(PLAN, num_gpus=64).as_dict()
    for extra, word in (({"activation_offload_layers": 80}, "below num_layers=80"),
                        ({"activation_offload_layers": 4, "pp": 2, "dp": 4}, "pipeline parallelism"),
                        ({"activation_offload_layers": 4, "recompute": "full"}, "recompute")):
        bad = plan_from_mapping({**PLAN, **extra}, num_gpus=64)
        with pytest.raises(TierwiseError, match=word):
            validate_plan_batch(model, [bad])
