"""Issue 30: DualPipe / DualPipeV schedules, Megatron-Core's interleaved micro-batch rule, node-limited routing
through DeepEP's NVLink forwarding, and DeepSeek-V3's published training layout."""

import numpy as np
import pytest

from tierwise.errors import PlanError
from tierwise.estimate import estimate
from tierwise.parallel.pp import dualpipe_bubble
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import PlanBatch, validate_plan_batch
from tierwise.specs.plan_mapping import plan_from_mapping


def _plan(model, n, **plan):
    p = plan_from_mapping(plan, num_gpus=n, num_layers=model.num_layers, moe=model.moe is not None)
    validate_plan_batch(model, [p])
    return p


def test_dualpipe_bubble_is_the_reports_formula():
    """(PP/2 - 1)(F&B + B - 3W), F&B the pair's slot, B = F&B - F: with F = 1, B = 2, W = 1 (a pair of 3) on 16
    ranks, 7 x (3 + 2 - 3) = 14 slots, against 1F1B's (PP - 1)(F + B) = 45; DualPipeV's 2 PP half stages on
    PP ranks: 15 x (1.5 + 1 - 1.5) = 15."""
    pair, fwd, w = np.array([3.0]), np.array([1.0]), np.array([1.0])
    assert float(dualpipe_bubble(16, 1, pair, fwd, w)[0]) == pytest.approx(14.0)
    assert float(dualpipe_bubble(16, 2, pair, fwd, w)[0]) == pytest.approx(15.0)
    assert float(dualpipe_bubble(2, 1, pair, fwd, w)[0]) == 0.0


def test_dualpipe_shrinks_the_bubble_and_doubles_the_parameters():
    m, c = load_model("llama3.1-70b"), load_cluster("dgx-h100")
    base = dict(tp=8, pp=8, global_batch_size=64, seq_length=4096, recompute="selective")
    one, dual, dualv = (estimate(m, c, PlanBatch.from_plans([_plan(m, 64, schedule=s, **base)]))
                        for s in ("1f1b", "dualpipe", "dualpipev"))
    assert float(dual.bubble_s[0]) < 0.5 * float(one.bubble_s[0])
    assert float(dualv.bubble_s[0]) < 0.6 * float(one.bubble_s[0])
    w1, w2, wv = (float(e.memory["weights_bytes"][0]) for e in (one, dual, dualv))
    assert w2 == pytest.approx(2 * w1) and wv == pytest.approx(w1)


@pytest.mark.parametrize("plan, message", [
    (dict(pp=5, schedule="dualpipe", global_batch_size=40), "dualpipe needs an even pp"),
    (dict(pp=4, schedule="dualpipe", global_batch_size=6), r"at least 2 x pp = 8 \(DualPipe"),
    (dict(pp=4, schedule="dualpipev", vpp=2, global_batch_size=16), "vpp=2 must be 1"),
    (dict(pp=4, vpp=2, global_batch_size=3), "needs at least pp=4 micro-batches"),
])
def test_bad_schedules_are_one_line(plan, message):
    m = load_model("llama3.1-70b")
    with pytest.raises(PlanError, match=message):
        _plan(m, plan["pp"], seq_length=4096, **plan)


def test_interleaving_takes_megatron_cores_micro_batch_rule():
    """Megatron-Core needs M >= PP micro-batches (microbatch_group_size_per_vp_stage in [PP, M]), not a multiple
    of PP: DeepSeek-V3's 120 micro-batches on pp 16 pass."""
    m = load_model("deepseek-v3")
    p = _plan(m, 2048, pp=16, ep=64, vpp=2, global_batch_size=15360, seq_length=4096, ep_comm_overlap=True)
    assert p.num_microbatches == 120 and p.schedule == "interleaved"


def _ds_batch(**over):
    m = load_model("deepseek-v3")
    plan = dict(pp=16, ep=64, global_batch_size=15360, seq_length=4096, moe_dispatcher="deepep", **over)
    return m, PlanBatch.from_plans([_plan(m, 2048, **plan)])


def test_node_limited_routing_caps_the_ib_copies_per_token():
    """EP 64 over eight 8-GPU H800 nodes, 256 experts top-8, n_group 8 / topk_group 4 (M = 4 nodes): a token's
    experts are drawn from the 128 of its 4 nodes, so it reaches 4 (1 - C(96, 8) / C(128, 8)) nodes, 7/8 of them
    other nodes, against 8 x 7/8 copies; without the limit (M = 8) it reaches 8 (1 - C(224, 8) / C(256, 8))."""
    from math import comb

    from tierwise.parallel.ep import deepep_node_dedup, node_limit
    from tierwise.pricing.comm import placed_span

    c = load_cluster("hgx-h800")
    m, b = _ds_batch()
    span = placed_span(c, b.ep, b.etp)
    assert int(span.num_domains[0]) == 8 and float(node_limit(m, b, span.num_domains)[0]) == 4.0
    limited = float(deepep_node_dedup(m, b, span)[0])
    assert limited == pytest.approx(4 * (1 - comb(96, 8) / comb(128, 8)) / 8, rel=1e-9)
    _, free = _ds_batch(moe_node_limit=8)
    unlimited = float(deepep_node_dedup(m, free, span)[0])
    assert unlimited == pytest.approx(8 * (1 - comb(224, 8) / comb(256, 8)) / 8, rel=1e-9)
    assert limited < 0.7 * unlimited
    e_lim, e_free = estimate(m, c, b), estimate(m, c, free)
    assert float(e_lim.axis_bytes["ep"][0]) == pytest.approx(float(e_free.axis_bytes["ep"][0]) * limited / unlimited)


def test_node_limit_larger_than_the_nodes_spanned_is_one_line():
    from tierwise.estimate.scenario import scenario_from_mapping

    doc = dict(model="deepseek-v3", cluster="hgx-h800", num_gpus=2048,
               plan=dict(pp=16, ep=64, global_batch_size=15360, seq_length=4096, moe_node_limit=9))
    with pytest.raises(PlanError, match=r"moe_node_limit=9 is larger than the 8 scale-up domain\(s\) ep=64 spans"):
        scenario_from_mapping(doc)


def test_deepseek_v3_as_published_is_valid_and_fits_80_gb():
    """examples/deepseek-v3-h800-dualpipe.yaml states only degrees, batch, sequence, precision, ZeRO and schedule:
    DeepEP, node-limited routing and DeepSeek's recompute / FP8 caching come from defaults, and it fits 80 GB;
    DualPipe's bubble is below 1F1B's (interleaving with v = 2 has fewer bubble slots, (pp - 1) / 2 = 7.5 against
    DualPipe's 7 pairs of F&B + B - 3W, but keeps its all-to-all's unpaired chunks exposed)."""
    from pathlib import Path

    from tierwise.estimate.scenario import estimate_scenario, load_scenario

    path = Path(__file__).parents[1] / "examples" / "deepseek-v3-h800-dualpipe.yaml"
    doc = estimate_scenario(load_scenario(path))
    assert doc["plan"]["recompute"] == "deepseek" and doc["plan"]["moe_dispatcher"] == "deepep"
    assert doc["memory"]["fits"] and doc["memory"]["per_gpu_bytes"] < 80e9
    assert doc["num_microbatches"] == 120
    assert doc["tiers"]["ep"] == "scale_out" and doc["tiers"]["pp"] == "scale_out"
    assert any("node-limited routing" in a for a in doc["assumed"])
    m, c = load_model("deepseek-v3"), load_cluster("hgx-h800")
    base = dict(pp=16, ep=64, global_batch_size=15360, seq_length=4096, precision="fp8", moe_dispatcher="deepep",
                recompute="deepseek")
    est = {s: estimate(m, c, PlanBatch.from_plans([_plan(m, 2048, **base, **kw)]))
           for s, kw in (("dualpipe", dict(schedule="dualpipe")), ("1f1b", {}),
                         ("interleaved", dict(vpp=2, ep_comm_overlap=True)))}
    bubble = {s: float(e.bubble_s[0]) for s, e in est.items()}
    step = {s: float(e.step_time_s[0]) for s, e in est.items()}
    assert bubble["dualpipe"] < 0.6 * bubble["1f1b"] and step["dualpipe"] < step["interleaved"] < step["1f1b"]
    assert doc["breakdown"]["bubble_s"] == pytest.approx(bubble["dualpipe"], rel=1e-6)


def test_plan_search_takes_a_stated_schedule():
    from tierwise.planner.space import Constraints, build_space

    m, c = load_model("deepseek-v3"), load_cluster("hgx-h800")
    space = build_space(m, c, 2048, 15360, 4096, Constraints(pp=16, ep=64, schedule="dualpipe", precision=("fp8",)))
    table = space.structure
    assert len(table["tp"]) and np.all(table["vpp"] == 1) and np.all(table["schedule"] == 2)
    from tierwise.specs.framework import MOE_DISPATCHERS

    assert np.all(table["moe_dispatcher"] == MOE_DISPATCHERS.index("deepep"))
    with pytest.raises(PlanError, match="schedule 'zb' is not one of"):
        build_space(m, c, 2048, 15360, 4096, Constraints(pp=16, schedule="zb"))


def test_group_limited_routing_comes_from_the_hf_config():
    import json
    from pathlib import Path

    from tierwise.errors import SpecError
    from tierwise.specs.model import model_from_hf_config

    ds = json.loads((Path(__file__).parent / "data" / "hf" / "DeepSeek-V3.config.json").read_text())
    moe = model_from_hf_config(ds).moe
    assert (moe.n_group, moe.topk_group) == (8, 4) == (load_model("deepseek-v3").moe.n_group, 4)
    with pytest.raises(SpecError, match="topk_group=9 and n_group=8"):
        model_from_hf_config({**ds, "topk_group": 9})
