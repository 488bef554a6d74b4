"""Issue 30: DualPipe / DualPipeV schedules, Megatron-Core's interleaved micro-batch rule, node-limited routing
through DeepEP's NVLink forwarding, and DeepSeek-V3's published training layout."""

import numpy as np
import pytest

from tierwise.errors import PlanError
from tierwise.estimate import estimate
from tierwise.parallel.pp import dualpipe_bubble
from tierwise.specs.cluster import load_cluster
from tierwise.specs.model import load_model
from tierwise.specs.plan import PlanBatch, plan_from_mapping, validate_plan_batch


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
