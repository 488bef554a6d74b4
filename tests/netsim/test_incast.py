"""Leaf incast at flow level (issue 34): the incast is a bandwidth term (N S / C); PFC's port-level pause
spreads it to victim flows sharing its links, DCQCN's fair share does not."""

import json

import pytest

from tierwise.cli import main
from tierwise.errors import TopologyError
from tierwise.netsim.incast import simulate_incast
from tierwise.topology import build_fabric
from tierwise.topology.spec import TopologySpec

FAB = build_fabric(TopologySpec(family="fat-tree", gpus=256, radix=16))
NIC = 50e9  # 400 Gb/s


@pytest.mark.parametrize("fan_in", [2, 4, 8])
def test_incast_takes_n_s_over_the_receiver_link(fan_in):
    d = simulate_incast(FAB, fan_in, 1e9)
    assert d["incast_time_s"] == pytest.approx(fan_in * 1e9 / NIC, rel=0.01)
    assert d["incast_time_s"] == pytest.approx(d["incast_analytic_time_s"], rel=1e-6)
    assert d["incast_flow_rate_bytes_per_s"] == pytest.approx(NIC / fan_in, rel=1e-6)


def test_pfc_victims_slow_down_with_fan_in_and_dcqcn_protects_them():
    slow = {n: simulate_incast(FAB, n, 1e9) for n in (2, 4, 8)}
    for n, d in slow.items():
        fair, pfc = d["victims"]["max-min"], d["victims"]["pfc"]
        assert d["victims"]["dcqcn"] == fair  # converged DCQCN: the fair share, no pause
        # a victim sharing a paused NIC link drains at the incast's C / N; max-min gives it the rest, C (N-1) / N
        assert pfc["rate_bytes_per_s"] == pytest.approx(NIC / n, rel=0.01)
        assert fair["rate_bytes_per_s"] == pytest.approx(NIC * (n - 1) / n, rel=0.01)
        assert d["victim_slowdown_pfc"] == pytest.approx(n - 1, rel=0.02)
    assert slow[2]["victim_slowdown_pfc"] < slow[4]["victim_slowdown_pfc"] < slow[8]["victim_slowdown_pfc"]


def test_fan_in_the_fabric_cannot_hold_is_refused():
    small = build_fabric(TopologySpec(family="fat-tree", gpus=32, radix=16))
    with pytest.raises(TopologyError, match="--fan-in 8 needs 10 servers"):
        simulate_incast(small, 8, 1e9)


def test_simulate_incast_cli(capsys):
    assert main(["simulate", "incast", "--gpus", "256", "--radix", "16", "--fan-in", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["pattern"] == "incast" and d["victim_slowdown_pfc"] > 2
    assert main(["simulate", "incast", "--gpus", "32", "--radix", "16", "--fan-in", "8"]) == 2
    assert "needs 10 servers" in capsys.readouterr().err
