"""FSDP / ZeRO-3's falloff with DP size follows its collective pattern (issue 29 item 5), not a constant.

Each layer's weights are all-gathered (forward, and again in the backward when resharding) and its gradients
reduce-scattered over the dp group, one collective per layer (``parallel/dp.py``), each priced by
``collective_cost`` on the group's tiers. The bytes per rank, ``(n - 1) / n x S``, hardly change with n, while
the ring's ``n - 1`` steps each pay a step latency: as DP grows the per-rank slice ``S / n`` shrinks, the
latency steps take over, and NCCL's protocol choice moves from Simple to LL128 (collectives-notes.md section
4.1: the fastest of algorithm x protocol). At a fixed batch per GPU the step's FSDP time grows with DP and
throughput per GPU falls.
"""

import numpy as np
import pytest

from tierwise.collectives.model import collective_cost
from tierwise.estimate import estimate
from tierwise.hierarchy import group_span
from tierwise.parallel.dp import stage_param_counts
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.parameters import load_parameters
from tierwise.specs.plan import PlanBatch
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.units import parse_time
from tierwise.workload.flops import model_shape

MODEL, CLUSTER = "llama3.1-8b", "dgx-h100"


def _fsdp(dp: int):
    plan = plan_from_mapping(dict(tp=1, dp=dp, zero_stage=3, global_batch_size=dp, micro_batch_size=1,
                                  seq_length=4096), num_gpus=dp, framework="torchtitan")
    return plan, estimate(load_model(MODEL), load_cluster(CLUSTER), PlanBatch.from_plans([plan]))


def _layer_bytes():
    """(weight bytes, gradient bytes) of one FSDP unit: the rank's parameters over the layers (tp = 1)."""
    model = load_model(MODEL)
    shape = model_shape(model)
    one = np.ones(1)
    dense, expert = stage_param_counts(shape, one * model.num_layers, 0 * one, one, one, one, one > 0, one > 0)
    params = float((dense + expert)[0]) / model.num_layers
    cp = load_parameters().compute
    return cp["weight_bytes"] * params, cp["grad_bytes"] * params


def test_all_gather_of_one_layer_by_hand_on_two_nodes():
    """dp = 16 on two 8-GPU H100 nodes: a ring of 16 ranks, 14 steps inside a node and 1 across, Simple protocol
    (31 MB per rank, far above the Simple chunk): ``launch + base + 14 l_in + 1 l_out + (15/16) S / B``."""
    cluster = load_cluster(CLUSTER)
    p = load_parameters().collectives
    w_bytes, _ = _layer_bytes()
    us = parse_time
    b_in = cluster.scale_up_bytes_per_s * p["link_efficiency"]["scale_up"]  # 450 GB/s x 0.82
    b_node = 8 * cluster.scale_out_bytes_per_s * p["link_efficiency"]["scale_out"]  # 8 NICs x 50 GB/s x 0.92
    chunk = 524288 * 8  # Simple: one 512 KiB step per channel, 8 channels
    l_in = cluster.scale_up_latency_s + us("2.8 us") + chunk / b_in
    l_out = cluster.scale_out_latency_at(2) + us("11.3 us") + chunk / b_node
    by_hand = us("15 us") + us("8.4 us") + 14 * l_in + 1 * l_out + 15 / 16 * w_bytes / min(b_in, b_node)
    cost = collective_cost("all-gather", w_bytes, group_span(cluster, np.array([16]), 1), cluster)
    assert cost.protocol[0] == "simple" and cost.algorithm[0] == "ring"
    assert float(cost.time_s[0]) == pytest.approx(by_hand, rel=1e-6)  # the envelope is alpha + beta S


@pytest.mark.parametrize("dp", [16, 256])
def test_estimate_prices_fsdp_per_layer_through_collective_cost(dp):
    """The step's DP time is the layers' gathers (forward and backward: resharding) and reduce-scatters, each
    ``collective_cost`` of one layer's bytes on the dp group: no efficiency constant in between."""
    plan, est = _fsdp(dp)
    cluster = load_cluster(CLUSTER)
    span = group_span(cluster, np.array([dp]), 1)
    w_bytes, g_bytes = _layer_bytes()
    ag = float(collective_cost("all-gather", w_bytes, span, cluster).time_s[0])
    rs = float(collective_cost("reduce-scatter", g_bytes, span, cluster).time_s[0])
    layers = load_model(MODEL).num_layers
    assert plan.reshard_after_forward
    assert float(est.axis_time_s["dp"][0]) == pytest.approx(plan.num_microbatches * layers * (2 * ag + rs), rel=1e-6)


def test_fsdp_time_rises_and_throughput_falls_with_dp_as_the_ring_steps_say():
    """Fixed batch per GPU: from dp 16 to 1024 each layer's bytes per rank stay ~S, the latency steps grow
    with n; so the DP time rises, tokens per GPU fall, and the small per-rank slices switch NCCL to LL128."""
    dps = [16, 64, 256, 1024]
    runs = [_fsdp(dp)[1] for dp in dps]
    dp_time = [float(r.axis_time_s["dp"][0]) for r in runs]
    per_gpu = [float(r.tokens_per_s_per_gpu[0]) for r in runs]
    assert all(b > a for a, b in zip(dp_time, dp_time[1:], strict=False))
    assert all(b < a for a, b in zip(per_gpu, per_gpu[1:], strict=False))
    cluster = load_cluster(CLUSTER)
    w_bytes, _ = _layer_bytes()
    protocols = [collective_cost("all-gather", w_bytes, group_span(cluster, np.array([dp]), 1), cluster).protocol[0]
                 for dp in dps]
    assert protocols[0] == "simple" and protocols[-1] == "ll128"
    # the growth is the latency's, not the bytes': (n-1)/n x S moves by under 7% from 16 to 1024 ranks, the
    # time by far more
    assert dp_time[-1] / dp_time[0] > 1.5 > (1023 / 1024) / (15 / 16)
