"""Issue 30: expert load imbalance (parallel/eplb.py) and the planners' balance choices: the busiest EP rank's
tokens over the mean from the router's skew, the batch's sampling noise and EPLB's redundant experts."""

import dataclasses
import math

import numpy as np
import pytest

from tierwise.errors import SpecError
from tierwise.parallel.eplb import (
    REFERENCE,
    eplb_packed_ratio,
    expected_max_normal,
    expert_load_imbalance,
    router_skew,
    serving_imbalance,
)
from tierwise.specs.model import load_model, model_from_mapping

SKEW = router_skew(2.1)


def test_blom_expected_maximum_of_normals():
    """Blom's Phi^-1((n - 0.375) / (n + 0.25)): 0 for one draw; within 5% of the exact expected maxima of 2 and 8
    standard normals, 1 / sqrt(pi) = 0.5642 and 1.4236 (order-statistic tables)."""
    z = expected_max_normal([1, 2, 8, 64])
    assert z[0] == 0.0 and z[1] == pytest.approx(1 / math.sqrt(math.pi), rel=0.05)
    assert z[2] == pytest.approx(1.4236, rel=0.01) and 2.3 < z[3] < 2.45


def test_the_measurement_comes_back_on_its_own_layout():
    """Solved on the Model Zoo's Qwen3-235B layout (128 experts, top-8, EP 8, 4,096 tokens per rank), the model
    gives back the measured 2.1 there; by hand: c^2 = (1.1 / z8)^2 - 1 / (4096 x 8) (the rank-level reading)."""
    z8 = float(expected_max_normal(8))
    assert pytest.approx(math.sqrt((1.1 / z8) ** 2 - 1 / (4096 * 8)), rel=1e-12) == SKEW
    E, k, ep, t = (REFERENCE[key] for key in ("experts", "top_k", "ep", "tokens_per_rank"))
    assert float(expert_load_imbalance(E, k, ep, ep * t, skew=SKEW)) == pytest.approx(2.1, rel=1e-9)


def test_imbalance_grows_with_ep_and_is_one_when_balanced():
    """More ranks to be the busiest raise it; one rank, or no skew and a batch so large the sampling noise
    vanishes, give 1; the skew is read at the rank level, so Mixtral's 8 experts at EP 8 sit at the measured
    2.1 (not at the cap of every copy landing on the rank's expert, 4)."""
    eps = np.array([1, 2, 8, 32, 64])
    load = expert_load_imbalance(256, 8, eps, eps * 4096, skew=SKEW)
    assert load[0] == 1.0 and np.all(np.diff(load) > 0)
    assert float(expert_load_imbalance(256, 8, 64, 1e15, skew=0.0)) == pytest.approx(1.0, abs=1e-6)
    # aux-loss-free balancing: the multinomial noise alone, 1 + z(64) sqrt(64 / (N k)) at 4,096 tokens per rank
    by_hand = 1 + float(expected_max_normal(64)) * math.sqrt(64 / (64 * 4096 * 8))
    assert float(expert_load_imbalance(256, 8, 64, 64 * 4096, skew=0.0)) == pytest.approx(by_hand, rel=1e-12)
    mixtral = float(expert_load_imbalance(8, 2, 8, 8 * 4096, skew=SKEW))
    assert mixtral == pytest.approx(2.1, rel=1e-3) and mixtral < 8 * 1 / 2


def test_redundant_experts_even_out_the_load():
    """EPLB's replicate-then-pack on the popularity's order statistics: with redundant slots the busiest rank falls
    far below the default placement's; at EP 128 (two experts a rank) every slot count beats the default, and
    among slot counts that fill every rank evenly (128, 256: 3 and 4 slots a rank) more slots help."""
    default = float(expert_load_imbalance(256, 8, 64, 64 * 4096, skew=SKEW))
    eplb = float(expert_load_imbalance(256, 8, 64, 64 * 4096, skew=SKEW, redundant=32))
    assert default > 2.5 and eplb < 1.2
    wide = [eplb_packed_ratio(256, 8, r, 128, round(SKEW, 9)) for r in (8, 32, 64, 128, 256)]
    plain = float(expert_load_imbalance(256, 8, 128, 1e15, skew=SKEW))
    assert max(wide) < plain and wide[4] < wide[3] < wide[0] and wide[4] < 1.15
    # no skew: nothing to balance; uneven slots (288 on 72 ranks, 4 each) cost a little
    assert eplb_packed_ratio(256, 8, 0, 64, 0.0) == pytest.approx(1.0)
    assert eplb_packed_ratio(256, 8, 32, 72, 0.0) == pytest.approx(4 / (256 / 72))


def test_router_balance_comes_from_the_model():
    ds, qwen = load_model("deepseek-v3"), load_model("qwen3-235b-a22b")
    assert ds.moe.balance == "aux-free" and qwen.moe.balance == "aux-loss"
    cp = {"moe_load_imbalance": 2.1}
    assert float(serving_imbalance(ds, cp, 64, 64 * 4096)) < 1.02
    assert float(serving_imbalance(qwen, cp, 8, 8 * 4096)) == pytest.approx(2.1, rel=1e-9)
    with pytest.raises(SpecError, match="balance='even' is not one of aux-loss, aux-free"):
        model_from_mapping({"num_layers": 2, "hidden_size": 64, "ffn_hidden_size": 256, "num_attention_heads": 4,
                            "vocab_size": 100, "gated_mlp": True,
                            "moe": {"num_experts": 8, "top_k": 2, "ffn_hidden_size": 64, "balance": "even"}},
                           origin="t")


def test_serve_plan_picks_eplb_for_an_aux_loss_router_and_explains_it():
    """Qwen3-235B (auxiliary-loss router) on one NVL72 rack: the search tries 0 and 32 redundant experts and picks
    32 (the busiest rank from about 2x to about 1x for a few GB of copies); DeepSeek-V3 (auxiliary-loss-free) keeps 0
    (nothing to balance, and uneven slots would cost)."""
    from tierwise.serve.api import ServeConfig, serve_plan_document

    base = dict(cluster="gb200-nvl72", num_gpus=72, precision="fp8", input_len=2000, output_len=100)
    doc = serve_plan_document(ServeConfig(model="qwen3-235b-a22b", **base), modes="aggregated", top=3)
    best = doc["best"][0]
    assert best["redundant_experts"] == 32 and best["decode_ep"] > 1
    assert doc["why_redundant"].startswith("EPLB: 32 redundant experts chosen") and "auxiliary-loss" in \
        doc["why_redundant"]
    ds = serve_plan_document(ServeConfig(model="deepseek-v3", **base), modes="aggregated", top=3)
    assert ds["best"][0]["redundant_experts"] == 0 and "auxiliary-loss-free" in ds["why_redundant"]
    given = serve_plan_document(ServeConfig(model="qwen3-235b-a22b", redundant_experts=0, **base),
                                modes="aggregated", top=3)
    assert {b["redundant_experts"] for b in given["best"]} == {0} and "why_redundant" not in given


def test_plan_states_the_balance_trade():
    from tierwise.planner.answer import plan_document
    from tierwise.planner.space import Constraints
    from tierwise.specs.cluster import load_cluster

    m, c = load_model("qwen3-235b-a22b"), load_cluster("dgx-h100")
    doc = plan_document(m, c, 256, 1024, 4096, constraints=Constraints(ep=8, pp=4, tp=1), top=1)
    line = next(x for x in doc["explanation"].splitlines() if x.startswith("expert balance"))
    assert "auxiliary-loss router" in line and "auxiliary-loss-free balancing would bring it to 1.0" in line
    free = dataclasses.replace(m, moe=dataclasses.replace(m.moe, balance="aux-free"))
    doc = plan_document(free, c, 256, 1024, 4096, constraints=Constraints(ep=8, pp=4, tp=1), top=1)
    assert "expert balance: auxiliary-loss-free router" in doc["explanation"]
