"""Traffic records (workload/traffic.py) against the published Megatron counts, and the estimator pricing
exactly those records."""

from __future__ import annotations

import numpy as np
import pytest

from tierwise.collectives.volumes import bus_factor
from tierwise.estimate import estimate
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import PlanBatch
from tierwise.specs.plan_mapping import plan_from_mapping
from tierwise.workload.flops import model_shape
from tierwise.workload.traffic import layer_traffic


def _records(model_name, num_gpus, **plan):
    model = load_model(model_name)
    batch = PlanBatch.from_plans([plan_from_mapping({"global_batch_size": 64, "seq_length": 4096, **plan},
                                                    num_gpus=num_gpus)])
    return model, batch, layer_traffic(model, model_shape(model), batch)


def _counts(records, phase):
    return {r.kind: int(r.counts[phase][0]) for r in records if r.counts[phase][0] > 0}


def test_tp_with_sequence_parallelism_is_two_all_gathers_and_two_reduce_scatters_per_layer_forward():
    """Korthikanti et al. 2022 section 4.2.2 (Fig. 5): with sequence parallelism each of a layer's two blocks
    has an all-gather (g) and a reduce-scatter (g-bar) forward, the reverse backward."""
    _, _, t = _records("llama3.1-70b", 8, tp=8, sequence_parallel=True)
    assert _counts(t["tp"], "forward") == {"all-gather": 2, "reduce-scatter": 2}
    assert _counts(t["tp"], "backward") == {"all-gather": 2, "reduce-scatter": 2}
    assert _counts(t["tp"], "recompute") == {}
    assert all(r.per == "layer" for r in t["tp"])


def test_full_recompute_repeats_the_forward_collectives():
    _, _, t = _records("llama3.1-70b", 8, tp=8, sequence_parallel=True, recompute="full")
    assert _counts(t["tp"], "recompute") == {"all-gather": 2, "reduce-scatter": 2}
    _, _, sel = _records("llama3.1-70b", 8, tp=8, sequence_parallel=True, recompute="selective")
    assert _counts(sel["tp"], "recompute") == {}  # selective recompute reruns attention only: no TP collective


def test_tp_without_sequence_parallelism_is_two_all_reduces_each_way():
    """Shoeybi et al. 2019 section 3: 4 all-reduces per layer in forward and backward together."""
    _, _, t = _records("llama3.1-70b", 8, tp=8, sequence_parallel=False)
    assert _counts(t["tp"], "forward") == {"all-reduce": 2}
    assert _counts(t["tp"], "backward") == {"all-reduce": 2}


def test_sequence_parallel_moves_the_same_volume_as_the_all_reduces():
    """Korthikanti: "the same communication volume": an all-gather + a reduce-scatter of S move 2 (n-1)/n S,
    one all-reduce's ring bytes."""
    _, _, sp = _records("llama3.1-70b", 8, tp=8, sequence_parallel=True)
    _, _, ar = _records("llama3.1-70b", 8, tp=8, sequence_parallel=False)

    def volume(records):
        return sum(float(r.calls[0] * r.bytes[0] * bus_factor(r.kind, 8.0)) for r in records)

    assert volume(sp["tp"]) == pytest.approx(volume(ar["tp"]))
    # each call carries the layer's activations: 2 bytes x tokens x h
    assert {float(r.bytes[0]) for r in sp["tp"]} == {2.0 * 4096 * 8192}


def test_ep_cp_and_pp_records():
    model, batch, t = _records("mixtral-8x7b", 64, tp=2, pp=2, cp=2, ep=4, vpp=2, sequence_parallel=True)
    (a2a,) = t["ep"]
    assert (a2a.kind, a2a.per, int(a2a.counts["forward"][0]), int(a2a.counts["backward"][0])) == \
        ("all-to-all", "moe_layer", 2, 2)  # dispatch + combine each way (GShard)
    assert float(a2a.bytes[0]) == 2048 / 2 * model.moe.top_k * model.hidden_size * 2.0  # T / tp tokens with SP
    (ring,) = t["cp"]
    assert (ring.pattern, int(ring.counts["forward"][0]), int(ring.counts["backward"][0])) == ("ring", 1, 2)
    (chain,) = t["pp"]
    assert (chain.pattern, chain.per, int(chain.calls[0])) == ("chain", "microbatch", 4)  # 2 x vpp
    assert int(chain.size[0]) == 2 and int(ring.size[0]) == 2


def test_the_estimator_prices_exactly_the_records():
    """The estimate's bytes per axis are the records' ring-equivalent bytes x layers x micro-batches."""
    model, batch, t = _records("llama3.1-70b", 64, tp=4, pp=2, cp=2, sequence_parallel=True, recompute="full")
    est = estimate(model, load_cluster("dgx-h100"), batch)
    m = float(est.num_microbatches[0])
    layers = model.num_layers / 2
    tp_bytes = sum(float(r.calls[0] * r.bytes[0] * bus_factor(r.kind, 4.0)) for r in t["tp"])
    assert float(est.axis_bytes["tp"][0]) == pytest.approx(tp_bytes * layers * m)
    (ring,) = t["cp"]
    assert float(est.axis_bytes["cp"][0]) == pytest.approx(float(ring.calls[0] * ring.bytes[0]) * layers * m)
    (chain,) = t["pp"]
    assert float(est.axis_bytes["pp"][0]) == pytest.approx(float(chain.calls[0] * chain.bytes[0]) * m)
    assert np.all(np.isfinite(est.step_time_s))


def test_recompute_and_tier_codes_are_named():
    from tierwise.hierarchy import TIER_ORDER, TierCode
    from tierwise.specs.plan import RECOMPUTE, Recompute

    assert [RECOMPUTE[c] for c in Recompute] == ["none", "selective", "full", "deepseek"]
    assert [TIER_ORDER[c] for c in TierCode] == ["local", "scale_up", "host", "scale_out"]
