"""A leaf incast in ``estimate`` (issue 34, Done-when): where a plan's traffic converges on one NIC.

The many-to-one traffic ``estimate`` prices is the MoE dispatch / combine under expert imbalance: the busiest
EP rank receives (and returns) ``I`` times the mean tokens, so its NIC link takes ``I`` times the balanced
all-to-all -- the incast's ``N S / C`` with ``N S`` the bytes converging on it (``parallel/ep.py:
ep_layer_comm`` multiplies by ``moe_imbalance``). PFC's victim term adds nothing inside that all-to-all: every
sender's other flows are capped at the hot flows' rate ``C / (n - 1)``, which is already their fair share of the
sender's NIC (derivation in docs/topology.md), checked here with ``simulate incast``'s PFC pass."""

import numpy as np
import pytest

from tierwise.netsim.incast import _pfc_caps
from tierwise.netsim.maxmin import incidence, max_min_rates
from tierwise.netsim.routing import route
from tierwise.topology import build_fabric
from tierwise.topology.spec import TopologySpec

_SCENARIO = """model: mixtral-8x7b
cluster: hgx-h100-roce
num_gpus: 64
plan: {{tp: 8, pp: 1, ep: 8, global_batch_size: 256, seq_length: 4096, recompute: selective,
        moe_force_balance: {balance}}}
"""


def test_estimate_prices_the_hot_experts_fan_in_on_the_busiest_nic(tmp_path, capsys):
    """EP 8 across 8 RoCE servers (tp 8 inside each): the router's dropless load puts more tokens on the
    busiest rank's NIC than a forced balance; same bytes in all, the EP all-to-all takes the imbalance times
    longer (measured 1.971 s vs 0.938 s, x2.10) and the step with it."""
    import json

    from tierwise.cli import main

    paths = []
    for balance in ("false", "true"):
        p = tmp_path / f"moe-{balance}.yaml"
        p.write_text(_SCENARIO.format(balance=balance))
        paths.append(str(p))
    assert main(["estimate", *paths, "--json"]) == 0
    hot, flat = json.loads(capsys.readouterr().out)["results"]
    ep_hot, ep_flat = hot["breakdown"]["per_axis"]["ep"], flat["breakdown"]["per_axis"]["ep"]
    assert ep_hot["tier"] == ep_flat["tier"] == "scale_out"
    assert ep_hot["bytes"] == ep_flat["bytes"]  # the mean rank's bytes; the busiest NIC receives I times them
    assert 1.5 < ep_hot["time_s"] / ep_flat["time_s"] < 4
    assert hot["step_time_s"] - flat["step_time_s"] >= 0.99 * (ep_hot["exposed_s"] - ep_flat["exposed_s"])


@pytest.mark.parametrize("imbalance", [1.0, 2.0, 4.0])
def test_pfc_adds_no_victim_term_inside_an_imbalanced_all_to_all(imbalance):
    """n = 8 ranks on 8 servers, the busiest receiving ``I`` times the others: with PFC's one-pass victim cap
    (netsim/incast.py) every flow keeps its max-min rate ``C / (n - 1)``, so the all-to-all ends at ``I`` times
    the balanced time, the busiest NIC's fan-in, and not later."""
    fab = build_fabric(TopologySpec(family="fat-tree", gpus=256, radix=16))
    n, S = 8, 1e8
    ranks = np.arange(n) * fab.gpus_per_node
    src, dst = np.repeat(ranks, n), np.tile(ranks, n)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    hot = dst == ranks[0]
    paths, ok = route(fab, src, dst)
    assert ok.all()
    res = np.where(paths >= 0, fab.link_group.astype(np.int32)[np.maximum(paths, 0)], np.int32(-1))
    cap = fab.group_capacity(fab.link_cap)
    A = incidence(np.repeat(np.arange(src.size), res.shape[1]), res.ravel(), src.size, cap.size)
    rate = max_min_rates(A, cap)
    pfc = np.where(hot, rate, np.minimum(rate, _pfc_caps(res, rate, hot)))
    C = float(fab.link_cap[paths[0][paths[0] >= 0][0]])
    assert rate == pytest.approx(np.full(src.size, C / (n - 1)), rel=1e-6)
    assert pfc == pytest.approx(rate, rel=1e-9)
    done = np.where(hot, imbalance * S, S) / pfc
    assert done.max() == pytest.approx(imbalance * (n - 1) * S / C, rel=1e-6)
